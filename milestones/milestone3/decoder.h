/// @file decoder.h
/// Milestone 3: a decoder layer, the stack of layers, and the output head, chained from the
/// kernels of kernels.h. Model (model.h) loads the weights and calls these.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "milestones/milestone1/config.h"

namespace clockwork {

/// Device pointers to the weights of one decoder layer (bf16, as the checkpoint stores them;
/// projections are (out_features, in_features)).
struct LayerWeights {
  const __nv_bfloat16* input_layernorm = nullptr;           ///< [d] γ of the norm before attention
  const __nv_bfloat16* q_proj = nullptr;                    ///< [h·h_d, d]
  const __nv_bfloat16* k_proj = nullptr;                    ///< [h_k·h_d, d]
  const __nv_bfloat16* v_proj = nullptr;                    ///< [h_k·h_d, d]
  const __nv_bfloat16* o_proj = nullptr;                    ///< [d, h·h_d]
  const __nv_bfloat16* post_attention_layernorm = nullptr;  ///< [d] γ of the norm before the FFN
  const __nv_bfloat16* gate_proj = nullptr;                 ///< [d_ff, d]
  const __nv_bfloat16* up_proj = nullptr;                   ///< [d_ff, d]
  const __nv_bfloat16* down_proj = nullptr;                 ///< [d, d_ff]
};

/// The RoPE tables of positions 0 .. s−1 (or more: only the first s rows are read).
struct RopeTablesView {
  const float* cos = nullptr;  ///< [≥ s, h_d/2]
  const float* sin = nullptr;  ///< [≥ s, h_d/2]
};

/// Device scratch buffers for one layer at sequence length s, fp32. After decoder_layer() they
/// hold that layer's intermediate values (the tests compare them with the reference).
struct LayerBuffers {
  float* attn_norm = nullptr;   ///< [s, d]       RMSNorm(x; input_layernorm)
  float* q = nullptr;           ///< [s, h·h_d]   attn_norm·W_qᵀ, then rotated (RoPE)
  float* k = nullptr;           ///< [s, h_k·h_d] attn_norm·W_kᵀ, then rotated (RoPE)
  float* v = nullptr;           ///< [s, h_k·h_d] attn_norm·W_vᵀ
  float* scores = nullptr;      ///< [s, s]       attention workspace (one head at a time)
  float* attn = nullptr;        ///< [s, h·h_d]   attention output, heads concatenated
  float* attn_out = nullptr;    ///< [s, d]       attn·W_oᵀ
  float* ffn_norm = nullptr;    ///< [s, d]       RMSNorm(x + attn_out; post_attention_layernorm)
  float* gate = nullptr;        ///< [s, d_ff]    ffn_norm·W_gateᵀ
  float* up = nullptr;          ///< [s, d_ff]    ffn_norm·W_upᵀ
  float* ffn_hidden = nullptr;  ///< [s, d_ff]    SiLU(gate) ⊙ up
  float* ffn_out = nullptr;     ///< [s, d]       ffn_hidden·W_downᵀ
};

/// One decoder layer in place on the residual stream x [s, d]:
///   RMSNorm → Q, K, V → RoPE(Q), RoPE(K) → causal GQA attention → O proj → x += ·
///   → RMSNorm(post_attention_layernorm) → gate, up → SwiGLU → down → x += ·
/// @param config  shapes, rms_norm_eps
/// @param w       this layer's weights
/// @param rope    cos/sin tables of positions 0 .. s−1
/// @param x       [s, d] residual stream, updated in place
/// @param b       scratch buffers (see LayerBuffers)
/// @param s       number of tokens
/// @param stream  stream to run on
void decoder_layer(const ModelConfig& config, const LayerWeights& w, const RopeTablesView& rope,
                   float* x, const LayerBuffers& b, int s, cudaStream_t stream = nullptr);

/// Called after each layer with its index (e.g. to copy x for a per-layer diagnosis).
using AfterLayer = std::function<void(int layer)>;

/// Every decoder layer in order, each with its own weights, on the residual stream x [s, d].
/// @param config       shapes, rms_norm_eps
/// @param layers       one entry per layer (config.num_layers of them)
/// @param rope         cos/sin tables of positions 0 .. s−1
/// @param x            [s, d] residual stream, updated in place
/// @param b            scratch buffers (see LayerBuffers)
/// @param s            number of tokens
/// @param stream       stream to run on
/// @param after_layer  called after layer i has updated x (may be empty)
void run_layers(const ModelConfig& config, const std::vector<LayerWeights>& layers,
                const RopeTablesView& rope, float* x, const LayerBuffers& b, int s,
                cudaStream_t stream = nullptr, const AfterLayer& after_layer = {});

/// The output head: x_last_norm = RMSNorm(last row of x; model.norm), logits = x_last_norm·W_lmᵀ
/// (a GEMV over that one row, never all s rows).
/// @param config       shapes, rms_norm_eps, vocab_size
/// @param x            [s, d] residual stream after the last layer
/// @param s            number of tokens (only row s−1 is used)
/// @param norm         [d] `model.norm.weight`
/// @param lm_head      [V, d] `lm_head.weight` (or the embedding table when tied)
/// @param x_last_norm  [d] output: the normalised last row
/// @param logits       [V] output
/// @param stream       stream to run on
void output_logits(const ModelConfig& config, const float* x, int s, const __nv_bfloat16* norm,
                   const __nv_bfloat16* lm_head, float* x_last_norm, float* logits,
                   cudaStream_t stream = nullptr);

}  // namespace clockwork
