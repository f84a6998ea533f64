/// @file decoder.cpp
/// Milestone 3: the decoder layer, the layer loop and the output head, as calls of the kernels.
#include "milestones/milestone3/decoder.h"

#include <cstddef>

#include "kernels/kernels.h"
#include "milestones/milestone2/qkv.h"

namespace clockwork {

void decoder_layer(const ModelConfig& c, const LayerWeights& w, const RopeTablesView& rope,
                   float* x, const LayerBuffers& b, int s, cudaStream_t stream) {
  const int d = static_cast<int>(c.hidden_size);
  const int h = static_cast<int>(c.num_heads), h_k = static_cast<int>(c.num_kv_heads);
  const int h_d = static_cast<int>(c.head_dim), d_ff = static_cast<int>(c.intermediate_size);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const size_t residual = static_cast<size_t>(s) * d;  // elements of x
  // BEGIN SOLUTION(m3): The layer's operations in order, each output in its LayerBuffers slot:
  // attention block — qkv_projection (milestone 2: RMSNorm with input_layernorm, then Q, K, V);
  // rope_apply on Q (h heads) and on K (h_k heads); attention (scores workspace b.scores);
  // o_proj (kernels::matmul, n = d, k = h·h_d); residual_add into x.
  // FFN block — rmsnorm of the updated x with post_attention_layernorm (not input_layernorm);
  // gate and up projections (n = d_ff); swiglu; down projection (n = d, k = d_ff); residual_add.
  qkv_projection(c, {w.input_layernorm, w.q_proj, w.k_proj, w.v_proj}, x, b.attn_norm, b.q, b.k,
                 b.v, s, stream);
  kernels::rope_apply(b.q, rope.cos, rope.sin, s, h, h_d, stream);
  kernels::rope_apply(b.k, rope.cos, rope.sin, s, h_k, h_d, stream);
  kernels::attention(b.q, b.k, b.v, b.attn, b.scores, s, h, h_k, h_d, stream);
  kernels::matmul(b.attn, w.o_proj, b.attn_out, s, d, h * h_d, stream);
  kernels::residual_add(x, b.attn_out, residual, stream);

  kernels::rmsnorm(x, w.post_attention_layernorm, b.ffn_norm, s, d, eps, stream);
  kernels::matmul(b.ffn_norm, w.gate_proj, b.gate, s, d_ff, d, stream);
  kernels::matmul(b.ffn_norm, w.up_proj, b.up, s, d_ff, d, stream);
  kernels::swiglu(b.gate, b.up, b.ffn_hidden, static_cast<size_t>(s) * d_ff, stream);
  kernels::matmul(b.ffn_hidden, w.down_proj, b.ffn_out, s, d, d_ff, stream);
  kernels::residual_add(x, b.ffn_out, residual, stream);
  // STUB: (void)w; (void)rope; (void)x; (void)b; (void)s; (void)stream;
  // STUB: (void)d; (void)h; (void)h_k; (void)h_d; (void)d_ff; (void)eps; (void)residual;
  // END SOLUTION
}

void run_layers(const ModelConfig& c, const std::vector<LayerWeights>& layers,
                const RopeTablesView& rope, float* x, const LayerBuffers& b, int s,
                cudaStream_t stream, const AfterLayer& after_layer) {
  // BEGIN SOLUTION(m3): Run decoder_layer once per layer, in order, each with its own weights
  // (layers[i]) on the same x, and call after_layer(i) (when it is set) after layer i.
  for (size_t i = 0; i < layers.size(); ++i) {
    decoder_layer(c, layers[i], rope, x, b, s, stream);
    if (after_layer) after_layer(static_cast<int>(i));
  }
  // STUB: (void)c; (void)layers; (void)rope; (void)x; (void)b; (void)s; (void)stream;
  // STUB: (void)after_layer;
  // END SOLUTION
}

void output_logits(const ModelConfig& c, const float* x, int s, const __nv_bfloat16* norm,
                   const __nv_bfloat16* lm_head, float* x_last_norm, float* logits,
                   cudaStream_t stream) {
  const int d = static_cast<int>(c.hidden_size), vocab = static_cast<int>(c.vocab_size);
  // BEGIN SOLUTION(m3): Only the last position predicts the next token: RMSNorm just the last row
  // of x (it starts at x + (s−1)·d; one row) with model.norm into x_last_norm, then
  // kernels::lm_head — a GEMV over that one row. Projecting all s rows would cost s times the
  // largest read of the model for nothing.
  kernels::rmsnorm(x + static_cast<size_t>(s - 1) * d, norm, x_last_norm, 1, d,
                   static_cast<float>(c.rms_norm_eps), stream);
  kernels::lm_head(x_last_norm, lm_head, logits, vocab, d, stream);
  // STUB: (void)x; (void)s; (void)norm; (void)lm_head; (void)x_last_norm; (void)logits;
  // STUB: (void)stream; (void)d; (void)vocab;
  // END SOLUTION
}

}  // namespace clockwork
