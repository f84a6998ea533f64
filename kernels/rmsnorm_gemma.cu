/// @file rmsnorm_gemma.cu
/// Milestone 6 (Gemma 3): Gemma's RMSNorm, y = x / sqrt(mean(x²) + eps) ⊙ (1 + w), and QK-norm,
/// the same norm applied to every head of Q and K separately.
///
/// Gemma's checkpoints store w, the offset of the scale from 1 (a fresh norm has w = 0), so the
/// kernel multiplies by 1 + w where milestone 2's multiplies by gamma. The structure is milestone
/// 2's: one block per row, a shared-memory tree reduction of the squares, one scale per row.
/// QK-norm needs no kernel of its own: head j of row p of a flat [s, n·h_d] activation is the
/// contiguous slice j·h_d .. (j+1)·h_d, so the activation is s·n rows of h_d, all sharing the one
/// weight of h_d values.
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kThreads = 256;  // a power of two: the tree reduction halves it each step

// x [rows, d] fp32, w [d] bf16, y [rows, d] fp32 (y may be x). Block kThreads, grid rows.
__global__ void rmsnorm_gemma_kernel(const float* x, const __nv_bfloat16* w, float* y, int d,
                                     float eps) {
  // BEGIN SOLUTION(m6): Milestone 2's RMSNorm with one change: scale by (1 + w[j]), not w[j]
  // (form 1 + w in fp32 after widening w). One block per row; sum the squares of a strided slice
  // per thread, tree-reduce in shared memory, thread 0 computes rsqrtf(sum / d + eps), broadcast
  // it, then write x·scale·(1 + w). y may be the same buffer as x (QK-norm runs in place): read
  // the whole row for the sum before anyone writes.
  __shared__ float partial[kThreads];
  __shared__ float scale;
  const float* xr = x + static_cast<size_t>(blockIdx.x) * d;
  float* yr = y + static_cast<size_t>(blockIdx.x) * d;
  float sum = 0.f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) sum += xr[j] * xr[j];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) scale = rsqrtf(partial[0] / d + eps);
  __syncthreads();
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    yr[j] = xr[j] * scale * (1.f + __bfloat162float(w[j]));
  }
  // STUB: (void)x; (void)w; (void)y; (void)d; (void)eps;
  // END SOLUTION
}

}  // namespace

void rmsnorm_gemma(const float* x, const __nv_bfloat16* w, float* y, int rows, int d, float eps,
                   cudaStream_t stream) {
  if (rows < 0 || d <= 0 || !(eps > 0.f)) {
    throw std::invalid_argument("rmsnorm_gemma: need rows >= 0, d > 0, eps > 0 (got rows=" +
                                std::to_string(rows) + ", d=" + std::to_string(d) +
                                ", eps=" + std::to_string(eps) + ")");
  }
  if (rows == 0) return;
  if (!x || !w || !y) throw std::invalid_argument("rmsnorm_gemma: x, w and y must be device pointers");
  rmsnorm_gemma_kernel<<<rows, kThreads, 0, stream>>>(x, w, y, d, eps);
  CUDA_CHECK(cudaGetLastError());
}

void qk_norm(float* x, const __nv_bfloat16* w, int s, int n_heads, int head_dim, float eps,
             cudaStream_t stream) {
  if (s < 0 || n_heads <= 0 || head_dim <= 0) {
    throw std::invalid_argument("qk_norm: need s >= 0, n_heads > 0, head_dim > 0 (got s=" +
                                std::to_string(s) + ", n_heads=" + std::to_string(n_heads) +
                                ", head_dim=" + std::to_string(head_dim) + ")");
  }
  rmsnorm_gemma(x, w, x, s * n_heads, head_dim, eps, stream);
}

}  // namespace clockwork::kernels
