/// @file attention.cu
/// Milestone 3: causal grouped-query attention, one head at a time.
///
/// Q is [s, h·h_d] and K, V are [s, h_k·h_d]: head j of row p is the slice j·h_d .. (j+1)·h_d of
/// that row, so one head is a strided [s, h_d] matrix with row stride h·h_d (or h_k·h_d). The
/// per-head view [h, s, h_d] is only a way of thinking about it: nothing is copied.
///
/// For query head i the launcher runs three kernels on an [s, s] score workspace:
/// 1. scores = Q_i·K_gᵀ with the fp32 tiled matmul (matmul.cu) reading both heads in place;
///    KV head g = i / (h/h_k), because groups of h/h_k consecutive query heads share one KV head.
/// 2. causal_softmax_kernel: one block per score row. It scales by 1/sqrt(h_d), hides the
///    future (columns after the row's position get probability 0), subtracts the row maximum,
///    exponentiates and divides by the sum. Both reductions (max, then sum) use warp shuffles
///    inside each warp and shared memory between warps.
/// 3. O_i = P·V_g with the same matmul, written straight into head i's columns of the output.
/// This first version computes the masked upper triangle of the scores too (wasted work that a
/// fused kernel would skip) and keeps one [s, s] matrix, not h of them.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kMaxThreads = 256;  // threads of a softmax block (a multiple of 32)

// BEGIN SOLUTION(m3): Reduction helpers for the softmax. Inside a warp, __shfl_xor_sync with
// offsets 16, 8, 4, 2, 1 leaves the max (or sum) of all 32 lanes in every lane. Across the block,
// lane 0 of each warp stores its warp's result in shared memory, __syncthreads(), and one warp
// (or every warp) reduces those values; a second __syncthreads() before the shared slots are
// written again.
__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Max (or sum) over the block, returned to every thread. `partial` holds one value per warp
// (32 floats in shared memory). blockDim.x must be a multiple of 32.
__device__ float block_reduce(float v, bool take_max, float* partial) {
  v = take_max ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const float identity = take_max ? -INFINITY : 0.f;
  v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : identity;
  v = take_max ? warp_max(v) : warp_sum(v);
  __syncthreads();  // every warp has read `partial` before the next reduction overwrites it
  return v;
}
// END SOLUTION

// scores [rows, cols] in place. Block r handles row r, which sits at position cols − rows + r.
__global__ void causal_softmax_kernel(float* scores, int rows, int cols, float scale) {
  // BEGIN SOLUTION(m3): Block r owns row r of the scores; its position is p = cols − rows + r,
  // so columns 0..p are visible and columns p+1..cols−1 are the future. With a strided loop over
  // the visible columns: (1) find the maximum of scale·score, reduce it over the block (warp
  // shuffles, then one value per warp in shared memory); (2) write e = exp(scale·score − max)
  // back and reduce the sum of the e's the same way; (3) divide the visible entries by the sum
  // and write exactly 0 to the future columns. Subtracting the maximum is not optional: scores
  // above ~88 overflow exp in fp32 and the row turns into inf/inf = NaN.
  __shared__ float partial[32];
  float* row = scores + static_cast<size_t>(blockIdx.x) * cols;
  const int visible = cols - rows + static_cast<int>(blockIdx.x) + 1;  // columns 0 .. position
  float m = -INFINITY;
  for (int j = threadIdx.x; j < visible; j += blockDim.x) m = fmaxf(m, scale * row[j]);
  m = block_reduce(m, true, partial);
  float sum = 0.f;
  for (int j = threadIdx.x; j < visible; j += blockDim.x) {
    const float e = __expf(scale * row[j] - m);
    row[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, false, partial);
  const float inv = 1.f / sum;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) row[j] = j < visible ? row[j] * inv : 0.f;
  // STUB: (void)scores; (void)rows; (void)cols; (void)scale;
  // END SOLUTION
}

}  // namespace

void causal_softmax(float* scores, int rows, int cols, float scale, cudaStream_t stream) {
  if (rows < 0 || cols < rows) {
    throw std::invalid_argument("causal_softmax: need 0 <= rows <= cols (got rows=" +
                                std::to_string(rows) + ", cols=" + std::to_string(cols) + ")");
  }
  if (!(scale > 0.f)) throw std::invalid_argument("causal_softmax: scale must be positive");
  if (rows == 0) return;
  const int threads = std::min(kMaxThreads, (cols + 31) / 32 * 32);
  causal_softmax_kernel<<<rows, threads, 0, stream>>>(scores, rows, cols, scale);
  CUDA_CHECK(cudaGetLastError());
}

void attention(const float* q, const float* k, const float* v, float* out, float* scores, int s,
               int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
  if (s < 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    throw std::invalid_argument(
        "attention: need s >= 0 and positive n_heads, n_kv_heads, head_dim (got s=" +
        std::to_string(s) + ", n_heads=" + std::to_string(n_heads) + ", n_kv_heads=" +
        std::to_string(n_kv_heads) + ", head_dim=" + std::to_string(head_dim) + ")");
  }
  if (n_heads % n_kv_heads != 0) {
    throw std::invalid_argument("attention: n_heads (" + std::to_string(n_heads) +
                                ") must be a multiple of n_kv_heads (" +
                                std::to_string(n_kv_heads) + ")");
  }
  if (out == q || out == k || out == v || scores == out) {
    throw std::invalid_argument(
        "attention: out and scores must not alias the inputs or each other");
  }
  if (s == 0) return;
  // BEGIN SOLUTION(m3): For each query head i (a host loop is fine for a first version):
  // g = i / (h/h_k) — not i % h_k; scores = Q_i·K_gᵀ with matmul_f32 (transpose_b, and row
  // strides h·h_d for Q, h_k·h_d for K, s for the scores; start pointers at column i·h_d and
  // g·h_d); causal_softmax with scale 1/sqrt(h_d); then O_i = P·V_g with matmul_f32 (plain b,
  // ldb = h_k·h_d) into columns i·h_d .. (i+1)·h_d of `out` (ldc = h·h_d), which keeps the flat
  // [s, h·h_d] layout that o_proj reads.
  const int group = n_heads / n_kv_heads;  // query heads per KV head
  const int q_stride = n_heads * head_dim, kv_stride = n_kv_heads * head_dim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  for (int i = 0; i < n_heads; ++i) {
    const int g = i / group;
    matmul_f32(q + i * head_dim, k + g * head_dim, scores, s, s, head_dim, /*transpose_b=*/true,
               stream, q_stride, kv_stride, s);
    causal_softmax(scores, s, s, scale, stream);
    matmul_f32(scores, v + g * head_dim, out + i * head_dim, s, head_dim, s, /*transpose_b=*/false,
               stream, s, kv_stride, q_stride);
  }
  // STUB: (void)q; (void)k; (void)v; (void)out; (void)scores; (void)stream;
  // END SOLUTION
}

}  // namespace clockwork::kernels
