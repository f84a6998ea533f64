/// @file geglu.cu
/// Milestone 6 (Gemma 3): the GeGLU gate of the feed-forward block, out = GELU(gate) ⊙ up, with
/// GELU in its tanh approximation (what Gemma was trained with, transformers' "gelu_pytorch_tanh"):
///   GELU(z) ≈ 0.5·z·(1 + tanh(sqrt(2/π)·(z + 0.044715·z³))).
///
/// Element-wise like milestone 3's SwiGLU, and memory-bound the same way: a grid-stride loop with
/// neighbouring threads on neighbouring elements.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;

// gate, up, out [n] fp32.
__global__ void geglu_kernel(const float* gate, const float* up, float* out, size_t n) {
  // BEGIN SOLUTION(m6): Grid-stride loop over j < n (size_t indices): with g = gate[j],
  // out[j] = 0.5·g·(1 + tanhf(sqrt(2/π)·(g + 0.044715·g³)))·up[j]. Use the tanh form, not the
  // exact GELU 0.5·g·(1 + erf(g/√2)): the two differ by up to ~1e-3 and the test names that
  // mistake. tanhf is accurate and saturates cleanly at ±1 for large |g|.
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += stride) {
    const float g = gate[j];
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[j] = 0.5f * g * (1.f + tanhf(inner)) * up[j];
  }
  // STUB: (void)gate; (void)up; (void)out; (void)n;
  // END SOLUTION
}

}  // namespace

void geglu(const float* gate, const float* up, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (!gate || !up || !out)
    throw std::invalid_argument("geglu: gate, up and out must be device pointers");
  const size_t blocks = std::min(kMaxBlocks, (n + kThreads - 1) / kThreads);
  geglu_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gate, up, out, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
