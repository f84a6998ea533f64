/// @file lm_head.cu
/// Milestone 3: the output of the model, logits = x_last·W_lmᵀ for the last position only, and
/// the greedy choice of the next token (argmax).
///
/// lm_head_kernel is a GEMV: one warp per vocabulary row. The 32 lanes walk along row j of W
/// (d contiguous bf16 values) so each step of the warp reads 32 neighbouring values, coalesced;
/// every lane accumulates its strided share of the dot product in fp32, and a shuffle
/// reduction adds the 32 partial sums. Each weight is read exactly once: for Llama-3-8B that is
/// 128256·4096 bf16 = 1 GB per token, which makes this the largest single read of the model.
///
/// argmax_kernel is one block: every thread scans a strided slice keeping its best (value,
/// index), then the block combines the pairs with warp shuffles and shared memory. Ties go to the
/// lower index, as in the reference, so the choice never depends on the thread schedule.
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;     // GEMV: 8 rows per block of 256 threads
constexpr int kArgmaxThreads = 1024;  // argmax: a single block

// x_last [d] fp32, w [vocab, d] bf16, logits [vocab] fp32. Block (32·kWarpsPerBlock).
__global__ void lm_head_kernel(const float* x_last, const __nv_bfloat16* w, float* logits,
                               int vocab, int d) {
  // BEGIN SOLUTION(m3): Warp number blockIdx.x·kWarpsPerBlock + threadIdx.x/32 computes the logit
  // of that vocabulary row j (return when j >= vocab: the whole warp leaves together). Lane l
  // adds x_last[c]·float(w[j, c]) for c = l, l+32, l+64, ... (a size_t row offset: vocab·d ≈
  // 5.3e8 fits in an int, but with no room to spare for larger vocabularies or widths), then the
  // lanes sum their partials with __shfl_xor_sync (or _down_) over
  // offsets 16, 8, 4, 2, 1, and lane 0 writes logits[j].
  const int lane = threadIdx.x % 32;
  const int j = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (j >= vocab) return;
  const __nv_bfloat16* row = w + static_cast<size_t>(j) * d;
  float acc = 0.f;
  for (int c = lane; c < d; c += 32) acc += x_last[c] * __bfloat162float(row[c]);
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) logits[j] = acc;
  // STUB: (void)x_last; (void)w; (void)logits; (void)vocab; (void)d;
  // END SOLUTION
}

// BEGIN SOLUTION(m3): A helper for argmax: whether (v, i) beats (best, best_i) — a larger value,
// or an equal value with a lower index. Comparisons with NaN are false, so NaN never wins.
__device__ bool better(float v, int i, float best, int best_i) {
  return v > best || (v == best && i < best_i);
}
// END SOLUTION

// values [n] fp32, index [1] int32. One block of kArgmaxThreads.
__global__ void argmax_kernel(const float* values, int n, int32_t* index) {
  // BEGIN SOLUTION(m3): Each thread scans values threadIdx.x, +blockDim.x, ... keeping the best
  // (value, index) it has seen; start from (−inf, n) so that any real value, even −inf, wins.
  // Then combine pairs: first inside each warp with __shfl_xor_sync on both the value and the
  // index, then the warps' winners through shared memory, and thread 0 writes the index.
  // "Better" means a larger value, or an equal value with a LOWER index (the reference's rule);
  // comparisons with NaN are false, so NaN is never chosen.
  __shared__ float best_value[32];
  __shared__ int best_index[32];
  float best = -INFINITY;
  int best_i = n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (better(values[i], i, best, best_i)) {
      best = values[i];
      best_i = i;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int vi = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (better(v, vi, best, best_i)) {
      best = v;
      best_i = vi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    best_value[warp] = best;
    best_index[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    best = lane < static_cast<int>(blockDim.x / 32) ? best_value[lane] : -INFINITY;
    best_i = lane < static_cast<int>(blockDim.x / 32) ? best_index[lane] : n;
    for (int offset = 16; offset > 0; offset /= 2) {
      const float v = __shfl_xor_sync(0xffffffffu, best, offset);
      const int vi = __shfl_xor_sync(0xffffffffu, best_i, offset);
      if (better(v, vi, best, best_i)) {
        best = v;
        best_i = vi;
      }
    }
    if (lane == 0) *index = best_i;
  }
  // STUB: (void)values; (void)n; (void)index;
  // END SOLUTION
}

}  // namespace

void lm_head(const float* x_last, const __nv_bfloat16* w, float* logits, int vocab, int d,
             cudaStream_t stream) {
  if (vocab < 0 || d <= 0) {
    throw std::invalid_argument("lm_head: need vocab >= 0 and d > 0 (got vocab=" +
                                std::to_string(vocab) + ", d=" + std::to_string(d) + ")");
  }
  if (vocab == 0) return;
  const int blocks = (vocab + kWarpsPerBlock - 1) / kWarpsPerBlock;
  lm_head_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(x_last, w, logits, vocab, d);
  CUDA_CHECK(cudaGetLastError());
}

void argmax(const float* values, int n, int32_t* index, cudaStream_t stream) {
  if (n <= 0)
    throw std::invalid_argument("argmax: n must be positive (got " + std::to_string(n) + ")");
  if (!index) throw std::invalid_argument("argmax: index must be a device pointer");
  argmax_kernel<<<1, kArgmaxThreads, 0, stream>>>(values, n, index);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
