/// @file sliding_window_attention.cu
/// Milestone 6 (Gemma 3): causal grouped-query attention with Gemma's score scale and, on local
/// layers, a sliding window: the query at position p sees keys max(0, p − window + 1) .. p, its
/// own included (`window` keys once p ≥ window − 1). window = 0 means every earlier key (Gemma's
/// global layers).
///
/// One block per (query row, query head): the block computes that row's scores over its visible
/// keys into shared memory, reduces their maximum and the sum of exponentials, then each thread
/// forms some of the h_d output values as the probability-weighted sum of V. No [s, s] buffer:
/// a local layer's work per row is bounded by the window, not by s.
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kThreads = 128;  // a power of two: the reductions halve it each step
// The kernel's own __shared__ array (reduce[]). It shares the 48 KB a block gets with the
// scores, so it caps s as much as they do.
constexpr size_t kStaticSharedBytes = kThreads * sizeof(float);
constexpr size_t kBlockSharedBytes = 48 * 1024;

// q [s, h·h_d], k and v [s, h_k·h_d], out [s, h·h_d] fp32. Grid (s, h), block kThreads, dynamic
// shared memory: s floats (the scores of one row).
__global__ void sliding_window_attention_kernel(const float* q, const float* k, const float* v,
                                                float* out, int s, int n_heads, int n_kv_heads,
                                                int head_dim, float scale, int window) {
  // BEGIN SOLUTION(m6): Row p = blockIdx.x, query head i = blockIdx.y, KV head
  // g = i / (h / h_k). Visible keys: first = (window > 0 ? max(0, p − window + 1) : 0) .. p —
  // exactly `window` keys, not window + 1. For each visible key c (strided over the threads):
  // score = scale · Σ_j q[p, i, j]·k[c, g, j] (scale = query_pre_attn_scalar^(−1/2), NOT
  // 1/sqrt(h_d)), kept in shared memory. Reduce the row maximum, exponentiate score − max, reduce
  // the sum, then each thread writes out[p, i, j] = Σ_c e_c·v[c, g, j] / sum for its j.
  extern __shared__ float scores[];
  __shared__ float reduce[kThreads];
  const int p = blockIdx.x;
  const int head = blockIdx.y;
  const int g = head / (n_heads / n_kv_heads);
  const int first = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
  const int n = p - first + 1;
  const float* qr = q + (static_cast<size_t>(p) * n_heads + head) * head_dim;

  float local_max = -INFINITY;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    const float* kr = k + (static_cast<size_t>(first + c) * n_kv_heads + g) * head_dim;
    float dot = 0.f;
    for (int j = 0; j < head_dim; ++j) dot += qr[j] * kr[j];
    scores[c] = dot * scale;
    local_max = fmaxf(local_max, scores[c]);
  }
  reduce[threadIdx.x] = local_max;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      reduce[threadIdx.x] = fmaxf(reduce[threadIdx.x], reduce[threadIdx.x + stride]);
    }
    __syncthreads();
  }
  const float row_max = reduce[0];
  __syncthreads();  // everyone has read the maximum before reduce[] is reused

  float local_sum = 0.f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    scores[c] = __expf(scores[c] - row_max);
    local_sum += scores[c];
  }
  reduce[threadIdx.x] = local_sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) reduce[threadIdx.x] += reduce[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv_sum = 1.f / reduce[0];

  float* orow = out + (static_cast<size_t>(p) * n_heads + head) * head_dim;
  for (int j = threadIdx.x; j < head_dim; j += blockDim.x) {
    float acc = 0.f;
    for (int c = 0; c < n; ++c) {
      acc += scores[c] * v[(static_cast<size_t>(first + c) * n_kv_heads + g) * head_dim + j];
    }
    orow[j] = acc * inv_sum;
  }
  // STUB: (void)q; (void)k; (void)v; (void)out; (void)s; (void)n_heads; (void)n_kv_heads;
  // STUB: (void)head_dim; (void)scale; (void)window;
  // END SOLUTION
}

}  // namespace

size_t sliding_window_attention_shared_bytes(int s) {
  return s > 0 ? static_cast<size_t>(s) * sizeof(float) : 0;
}

void sliding_window_attention(const float* q, const float* k, const float* v, float* out, int s,
                              int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                              cudaStream_t stream) {
  const std::string got = " (got s=" + std::to_string(s) + ", n_heads=" + std::to_string(n_heads) +
                          ", n_kv_heads=" + std::to_string(n_kv_heads) +
                          ", head_dim=" + std::to_string(head_dim) +
                          ", window=" + std::to_string(window) + ")";
  if (s < 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || window < 0 ||
      n_heads % n_kv_heads != 0) {
    throw std::invalid_argument(
        "sliding_window_attention: need s >= 0, window >= 0, head_dim > 0 and n_heads a positive "
        "multiple of n_kv_heads" + got);
  }
  if (!(scale > 0.f)) {
    throw std::invalid_argument("sliding_window_attention: scale must be > 0 (got " +
                                std::to_string(scale) + ")");
  }
  if (s == 0) return;
  if (!q || !k || !v || !out || out == q || out == k || out == v) {
    throw std::invalid_argument(
        "sliding_window_attention: q, k, v and out must be device pointers, out aliasing none");
  }
  const size_t shared = sliding_window_attention_shared_bytes(s);
  if (shared + kStaticSharedBytes > kBlockSharedBytes) {
    throw std::invalid_argument(
        "sliding_window_attention: s = " + std::to_string(s) + " needs " + std::to_string(shared) +
        " bytes of scores per block beside the " + std::to_string(kStaticSharedBytes) +
        "-byte reduction array, more than the 48 KiB a block gets (s may be at most " +
        std::to_string((kBlockSharedBytes - kStaticSharedBytes) / sizeof(float)) + ")");
  }
  const dim3 grid(static_cast<unsigned>(s), static_cast<unsigned>(n_heads));
  sliding_window_attention_kernel<<<grid, kThreads, shared, stream>>>(
      q, k, v, out, s, n_heads, n_kv_heads, head_dim, scale, window);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
