/// @file layer.h
/// A decoder layer on the host, for the known-good steps (qkv.cpp, decoder.cpp, decode.cpp): the
/// weights copied from the device once per call, and the layer's parts on rows of activations.
/// Each part returns what the matching LayerBuffers / DecodeBuffers field holds.
#pragma once

#include "harness/known_good/host.h"
#include "kernels/steps.h"

namespace clockwork::known_good {

/// The model's shapes as ints.
struct Shapes {
  int d, h, h_k, h_d, d_ff;
  float eps;
  explicit Shapes(const ModelConfig& c)
      : d(static_cast<int>(c.hidden_size)),
        h(static_cast<int>(c.num_heads)),
        h_k(static_cast<int>(c.num_kv_heads)),
        h_d(static_cast<int>(c.head_dim)),
        d_ff(static_cast<int>(c.intermediate_size)),
        eps(static_cast<float>(c.rms_norm_eps)) {}
};

/// RMSNorm, then the three projections, of `rows` rows of x.
struct Qkv {
  std::vector<float> x_norm, q, k, v;
};

inline Qkv qkv_rows(const Shapes& sh, const QkvWeights& w, const std::vector<float>& x, int rows) {
  Qkv r;
  r.x_norm = rmsnorm_rows(x, download_bf16(w.input_layernorm, static_cast<size_t>(sh.d)), rows, sh.d, sh.eps);
  const size_t q_width = static_cast<size_t>(sh.h) * sh.h_d, kv_width = static_cast<size_t>(sh.h_k) * sh.h_d;
  r.q = matmul_xwt(r.x_norm, download_bf16(w.q_proj, q_width * sh.d), rows, static_cast<int>(q_width), sh.d);
  r.k = matmul_xwt(r.x_norm, download_bf16(w.k_proj, kv_width * sh.d), rows, static_cast<int>(kv_width), sh.d);
  r.v = matmul_xwt(r.x_norm, download_bf16(w.v_proj, kv_width * sh.d), rows, static_cast<int>(kv_width), sh.d);
  return r;
}

/// What follows attention: O projection and residual, RMSNorm, gate and up, SwiGLU, down and
/// residual. `x` is updated in place.
struct AfterAttention {
  std::vector<float> attn_out, ffn_norm, gate, up, ffn_hidden, ffn_out;
};

inline AfterAttention after_attention(const Shapes& sh, const LayerWeights& w, const std::vector<float>& attn,
                                      std::vector<float>& x, int rows) {
  AfterAttention r;
  const size_t d = static_cast<size_t>(sh.d), d_ff = static_cast<size_t>(sh.d_ff);
  r.attn_out = matmul_xwt(attn, download_bf16(w.o_proj, d * sh.h * sh.h_d), rows, sh.d, sh.h * sh.h_d);
  add_in_place(x, r.attn_out);
  r.ffn_norm = rmsnorm_rows(x, download_bf16(w.post_attention_layernorm, d), rows, sh.d, sh.eps);
  r.gate = matmul_xwt(r.ffn_norm, download_bf16(w.gate_proj, d_ff * d), rows, sh.d_ff, sh.d);
  r.up = matmul_xwt(r.ffn_norm, download_bf16(w.up_proj, d_ff * d), rows, sh.d_ff, sh.d);
  r.ffn_hidden = swiglu(r.gate, r.up);
  r.ffn_out = matmul_xwt(r.ffn_hidden, download_bf16(w.down_proj, d * d_ff), rows, sh.d, sh.d_ff);
  add_in_place(x, r.ffn_out);
  return r;
}

/// Copies `host` to `device` when the buffer is given (some buffers are optional).
inline void upload_if(float* device, const std::vector<float>& host) {
  if (device) upload(device, host);
}

/// qkv_rows(), then RoPE on Q and K with the tables' first `rows` rows (cos, sin: [rows, h_d/2]).
inline Qkv rotated_qkv_rows(const Shapes& sh, const LayerWeights& w, const std::vector<float>& x,
                            const std::vector<float>& cos, const std::vector<float>& sin, int rows) {
  Qkv a = qkv_rows(sh, {w.input_layernorm, w.q_proj, w.k_proj, w.v_proj}, x, rows);
  rope_rows(a.q, cos, sin, rows, sh.h, sh.h_d);
  rope_rows(a.k, cos, sin, rows, sh.h_k, sh.h_d);
  return a;
}

/// The layer's results into the buffers the caller gave: x, then every intermediate a
/// LayerBuffers or DecodeBuffers asks for (the two share these field names).
template <typename Buffers>
void upload_layer(float* x, const std::vector<float>& xs, const Buffers& b, const Qkv& a,
                  const std::vector<float>& attn, const AfterAttention& f) {
  upload(x, xs);
  upload_if(b.attn_norm, a.x_norm);
  upload_if(b.q, a.q);
  upload_if(b.k, a.k);
  upload_if(b.v, a.v);
  upload_if(b.attn, attn);
  upload_if(b.attn_out, f.attn_out);
  upload_if(b.ffn_norm, f.ffn_norm);
  upload_if(b.gate, f.gate);
  upload_if(b.up, f.up);
  upload_if(b.ffn_hidden, f.ffn_hidden);
  upload_if(b.ffn_out, f.ffn_out);
}

}  // namespace clockwork::known_good
