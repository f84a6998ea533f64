/// @file gemma_layer.cpp
/// Milestone 6: the Gemma 3 decoder layer as calls of the kernels (milestone 3's matmul, RoPE and
/// residual add, this milestone's norm, QK-norm, attention and GeGLU).
#include <cstddef>

#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"
#include "kernels/steps.h"

namespace clockwork {

void gemma_decoder_layer(const ModelConfig& c, int layer, const GemmaLayerWeights& w,
                         const RopeTablesView& local_rope, const RopeTablesView& global_rope,
                         float* x, const LayerBuffers& b, int s, cudaStream_t stream) {
  const int d = static_cast<int>(c.hidden_size);
  const int h = static_cast<int>(c.num_heads), h_k = static_cast<int>(c.num_kv_heads);
  const int h_d = static_cast<int>(c.head_dim), d_ff = static_cast<int>(c.intermediate_size);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const size_t residual = static_cast<size_t>(s) * d;
  const LayerWeights& p = w.base;
  {
    const nvtx::Range range("qkv");
    // BEGIN SOLUTION(m6): b.attn_norm = Gemma's RMSNorm of x with input_layernorm
    // (kernels::rmsnorm_gemma: it scales by 1 + w), then the three projections into b.q, b.k,
    // b.v with kernels::matmul (Q has h·h_d columns, which need not equal d).
    kernels::rmsnorm_gemma(x, p.input_layernorm, b.attn_norm, s, d, eps, stream);
    kernels::matmul(b.attn_norm, p.q_proj, b.q, s, h * h_d, d, stream);
    kernels::matmul(b.attn_norm, p.k_proj, b.k, s, h_k * h_d, d, stream);
    kernels::matmul(b.attn_norm, p.v_proj, b.v, s, h_k * h_d, d, stream);
    // STUB: (void)c; (void)p; (void)x; (void)b; (void)s; (void)stream; (void)eps;
    // END SOLUTION
  }
  {
    const nvtx::Range range("qk_norm_rope");
    // BEGIN SOLUTION(m6): QK-norm FIRST (kernels::qk_norm on b.q with w.q_norm, h heads, and on
    // b.k with w.k_norm, h_k heads), THEN RoPE (kernels::rope_apply) with the tables of this
    // layer's type: local_rope when c.is_sliding(layer), global_rope otherwise.
    kernels::qk_norm(b.q, w.q_norm, s, h, h_d, eps, stream);
    kernels::qk_norm(b.k, w.k_norm, s, h_k, h_d, eps, stream);
    const RopeTablesView& rope = c.is_sliding(layer) ? local_rope : global_rope;
    kernels::rope_apply(b.q, rope.cos, rope.sin, s, h, h_d, stream);
    kernels::rope_apply(b.k, rope.cos, rope.sin, s, h_k, h_d, stream);
    // STUB: (void)layer; (void)w; (void)local_rope; (void)global_rope; (void)h; (void)h_k;
    // STUB: (void)h_d;
    // END SOLUTION
  }
  {
    const nvtx::Range range("attention");
    // BEGIN SOLUTION(m6): kernels::sliding_window_attention from b.q, b.k, b.v into b.attn with
    // the score scale c.attention_scale() and a window of c.sliding_window keys on a local layer,
    // 0 (no window) on a global one.
    const int window = c.is_sliding(layer) ? static_cast<int>(c.sliding_window) : 0;
    kernels::sliding_window_attention(b.q, b.k, b.v, b.attn, s, h, h_k, h_d,
                                      static_cast<float>(c.attention_scale()), window, stream);
    // END SOLUTION
  }
  {
    const nvtx::Range range("o_proj_norm_residual");
    // BEGIN SOLUTION(m6): attn_out = attn·W_oᵀ (d outputs from h·h_d inputs), then Gemma's
    // RMSNorm of it with post_attention_layernorm, in place in b.attn_out, then x += attn_out.
    kernels::matmul(b.attn, p.o_proj, b.attn_out, s, d, h * h_d, stream);
    kernels::rmsnorm_gemma(b.attn_out, p.post_attention_layernorm, b.attn_out, s, d, eps, stream);
    kernels::residual_add(x, b.attn_out, residual, stream);
    // STUB: (void)d; (void)residual;
    // END SOLUTION
  }
  {
    const nvtx::Range range("ffn");
    // BEGIN SOLUTION(m6): ffn_norm = RMSNorm of x with pre_feedforward_layernorm; gate and up
    // (d_ff outputs from d inputs); ffn_hidden = GeGLU(gate, up) (kernels::geglu); ffn_out =
    // ffn_hidden·W_downᵀ; normalise ffn_out in place with post_feedforward_layernorm; x += ffn_out.
    kernels::rmsnorm_gemma(x, w.pre_feedforward_layernorm, b.ffn_norm, s, d, eps, stream);
    kernels::matmul(b.ffn_norm, p.gate_proj, b.gate, s, d_ff, d, stream);
    kernels::matmul(b.ffn_norm, p.up_proj, b.up, s, d_ff, d, stream);
    kernels::geglu(b.gate, b.up, b.ffn_hidden, static_cast<size_t>(s) * d_ff, stream);
    kernels::matmul(b.ffn_hidden, p.down_proj, b.ffn_out, s, d, d_ff, stream);
    kernels::rmsnorm_gemma(b.ffn_out, w.post_feedforward_layernorm, b.ffn_out, s, d, eps, stream);
    kernels::residual_add(x, b.ffn_out, residual, stream);
    // STUB: (void)d_ff;
    // END SOLUTION
  }
}

}  // namespace clockwork
