/// @file qkv.h
/// Milestone 2: the first step of a decoder layer, from its input to Q, K and V.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "milestones/milestone1/config.h"

namespace clockwork {

/// Device pointers to the weights of one layer that the step reads (bf16, as stored).
struct QkvWeights {
  const __nv_bfloat16* input_layernorm;  ///< [d] γ of the layer's first RMSNorm
  const __nv_bfloat16* q_proj;           ///< [h·h_d, d]
  const __nv_bfloat16* k_proj;           ///< [h_k·h_d, d]
  const __nv_bfloat16* v_proj;           ///< [h_k·h_d, d]
};

/// x_norm = RMSNorm(x; input_layernorm), then Q = x_norm·W_Qᵀ, K = x_norm·W_Kᵀ, V = x_norm·W_Vᵀ.
/// All activations are fp32 device buffers.
/// @param config  the model's shapes and rms_norm_eps
/// @param w       the layer's weights
/// @param x       [s, d] input of the layer
/// @param x_norm  [s, d] normalised input (kept: the tests look at it)
/// @param q       [s, h·h_d]
/// @param k       [s, h_k·h_d]
/// @param v       [s, h_k·h_d]
/// @param s       number of tokens
/// @param stream  stream to run on
void qkv_projection(const ModelConfig& config, const QkvWeights& w, const float* x, float* x_norm, float* q,
                    float* k, float* v, int s, cudaStream_t stream = nullptr);

}  // namespace clockwork
