/// @file qkv.cpp
/// Milestone 2: RMSNorm and the three projections that feed attention.
///
/// Each step sits in a named NVTX range (harness/profiling/nvtx.h) outside the part you write, so
/// an `nsys` timeline shows "attn_norm", "q_proj", "k_proj" and "v_proj" whatever your code does.
#include "kernels/steps.h"

#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"

namespace clockwork {

void qkv_projection(const ModelConfig& c, const QkvWeights& w, const float* x, float* x_norm, float* q, float* k,
                    float* v, int s, cudaStream_t stream) {
  const int d = static_cast<int>(c.hidden_size);
  const int q_width = static_cast<int>(c.num_heads * c.head_dim);
  const int kv_width = static_cast<int>(c.num_kv_heads * c.head_dim);
  {
    const nvtx::Range range("attn_norm");
    // BEGIN SOLUTION(m2): Normalise x with the layer's input_layernorm weight into x_norm
    // (kernels::rmsnorm over s rows of d, eps from the config).
    kernels::rmsnorm(x, w.input_layernorm, x_norm, s, d, static_cast<float>(c.rms_norm_eps), stream);
    // STUB: (void)w; (void)x; (void)x_norm; (void)s; (void)stream; (void)d;
    // END SOLUTION
  }
  {
    const nvtx::Range range("q_proj");
    // BEGIN SOLUTION(m2): Q = x_norm·W_Qᵀ with kernels::matmul: h·h_d output columns (q_width).
    kernels::matmul(x_norm, w.q_proj, q, s, q_width, d, stream);
    // STUB: (void)q; (void)q_width;
    // END SOLUTION
  }
  {
    const nvtx::Range range("k_proj");
    // BEGIN SOLUTION(m2): K = x_norm·W_Kᵀ. Mind the width: K has only h_k·h_d columns
    // (kv_width), a quarter of Q's for Llama-3-8B (grouped-query attention).
    kernels::matmul(x_norm, w.k_proj, k, s, kv_width, d, stream);
    // STUB: (void)k; (void)kv_width;
    // END SOLUTION
  }
  {
    const nvtx::Range range("v_proj");
    // BEGIN SOLUTION(m2): V = x_norm·W_Vᵀ, h_k·h_d columns like K.
    kernels::matmul(x_norm, w.v_proj, v, s, kv_width, d, stream);
    // STUB: (void)v;
    // END SOLUTION
  }
}

}  // namespace clockwork
