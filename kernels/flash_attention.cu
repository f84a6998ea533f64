/// @file flash_attention.cu
/// Milestone 5: causal grouped-query attention over a prompt in ONE kernel, without the [s, s]
/// score matrix (the FlashAttention idea, with FlashInfer's sharing of K/V tiles across a GQA
/// group).
///
/// Same inputs, output and layout as milestone 3's attention(): Q [s, h·h_d], K and V
/// [s, h_k·h_d], O [s, h·h_d], heads side by side in each row. What changes is the schedule.
///
/// Block (t, g) owns query tile t (positions t·kTile .. t·kTile + kTile − 1) of the `group` =
/// h/h_k query heads that read KV head g. Its group·kTile query rows stay in shared memory for
/// the whole kernel. It walks the key positions in tiles of kTile; each K and V tile is loaded
/// from global memory once and serves all the group's query heads (GQA sharing). Per query row
/// it keeps an attention state that an online softmax updates tile by tile:
///   m = the largest score seen, l = Σ exp(score − m), acc = Σ exp(score − m)·v.
/// A tile whose scores reach a larger maximum m' multiplies both l and acc by exp(m − m') before
/// adding its own terms; at the end O = acc / l. Scores live only for the tile being processed.
///
/// Causality at tile granularity: key tile u holds positions u·kTile .. u·kTile + kTile − 1, so
/// for query tile t every key tile u > t is entirely in the future and is never loaded (about
/// half of the work of milestone 3's version disappears); tiles u < t are entirely visible; only
/// the diagonal tile u = t needs the element mask key ≤ query.
///
/// Shared memory per block, in floats: the queries (group·kTile·h_d, already times 1/sqrt(h_d)),
/// one K/V tile (kTile·(h_d + 1): one padding float per row spreads the rows over the banks), the
/// tile's scores (group·kTile·kTile) and m, l and the rescale factor per row (3·group·kTile).
/// For Llama-3-8B (group 4, h_d 128) that is 45 KB. The accumulators are registers: each thread
/// owns a fixed set of (row, dim) elements. Device memory: nothing beyond Q, K, V and O.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = kFlashAttentionTile;  // query rows and key positions per tile
constexpr int kMaxAccPerThread = 64;        // accumulator elements each thread keeps
constexpr int kMaxThreads = 256;
constexpr size_t kDefaultSharedBytes = 48 * 1024;  // without opting in
constexpr size_t kMaxSharedBytes = 99 * 1024;      // opt-in limit of the smallest target (sm_86)

size_t shared_floats(int group, int head_dim) {
  const size_t rows = static_cast<size_t>(group) * kTile;
  return rows * head_dim + static_cast<size_t>(kTile) * (head_dim + 1) + rows * kTile + 3 * rows;
}

// Threads of a block: enough that nobody holds more than kMaxAccPerThread accumulators, about
// 16 each where the tile is small (fewer threads for the tiny shapes of the tests), a multiple
// of 32.
int block_threads(int group, int head_dim) {
  const long elements = static_cast<long>(group) * kTile * head_dim;
  const long want = std::max<long>(64, (elements / 16 + 31) / 32 * 32);
  return static_cast<int>(std::min<long>(kMaxThreads, want));
}

// Grid (ceil(s / kTile), h_k), block_threads() threads, shared_floats() of dynamic shared memory.
__global__ void flash_attention_kernel(const float* q, const float* k, const float* v, float* out,
                                       int s, int n_heads, int n_kv_heads, int head_dim,
                                       float scale) {
  extern __shared__ __align__(16) float smem[];
  // BEGIN SOLUTION(m5): Block (t, g): query positions q0 = t·kTile .. q0 + kTile − 1 of the
  // group = n_heads / n_kv_heads query heads g·group + j (j < group), all reading KV head g.
  // Row `row` = j·kTile + r of the block is query head g·group + j at position q0 + r.
  // Carve smem into q_s [rows, h_d] (Q times `scale`, 0 for positions ≥ s), tile
  // [kTile, h_d + 1], p_s [rows, kTile] and m_s, l_s, r_s [rows] (m = −inf, l = 0); keep the
  // accumulators in registers (float acc[kMaxAccPerThread], element i of a thread is
  // idx = threadIdx.x + i·blockDim.x of [rows, h_d]). Then for each key tile u = 0 .. t — never
  // the tiles after t, they are all in the future:
  //   1. load K rows u·kTile .. (bounded by s), head g's slice; __syncthreads();
  //   2. p_s[row, c] = q_s[row]·tile[c] when key u·kTile + c ≤ query q0 + r (and < s), else
  //      −inf: on the diagonal tile u = t the mask is per element; __syncthreads();
  //   3. per row: m_new = max(m, max_c p_s); p = exp(score − m_new); rescale = exp(m − m_new);
  //      l = l·rescale + Σ p; m = m_new (a row with nothing visible yet keeps p = 0, rescale 1).
  //      Meanwhile load the V tile into `tile`; __syncthreads();
  //   4. acc = acc·rescale + Σ_c p_s[row, c]·tile[c] (both l AND acc must be rescaled when the
  //      maximum grows); __syncthreads() before the next K tile overwrites `tile`.
  // Finally out[q0 + r, (g·group + j)·h_d + e] = acc / l for the positions < s.
  const int h_d = head_dim, group = n_heads / n_kv_heads;
  const int rows = group * kTile, stride = h_d + 1;
  const int t = blockIdx.x, g = blockIdx.y, q0 = t * kTile;
  const size_t q_width = static_cast<size_t>(n_heads) * h_d;
  const size_t kv_width = static_cast<size_t>(n_kv_heads) * h_d;

  float* q_s = smem;                    // [rows, h_d]
  float* tile = q_s + rows * h_d;       // [kTile, h_d + 1]: K, then V
  float* p_s = tile + kTile * stride;   // [rows, kTile]
  float* m_s = p_s + rows * kTile;      // [rows]
  float* l_s = m_s + rows;              // [rows]
  float* r_s = l_s + rows;              // [rows]

  const int tid = threadIdx.x, threads = blockDim.x;
  const int elements = rows * h_d;
  for (int idx = tid; idx < elements; idx += threads) {
    const int row = idx / h_d, e = idx % h_d;
    const int j = row / kTile, p = q0 + row % kTile;
    q_s[idx] = p < s ? q[p * q_width + static_cast<size_t>(g * group + j) * h_d + e] * scale : 0.f;
  }
  for (int row = tid; row < rows; row += threads) {
    m_s[row] = -INFINITY;
    l_s[row] = 0.f;
  }
  float acc[kMaxAccPerThread];
#pragma unroll
  for (int i = 0; i < kMaxAccPerThread; ++i) acc[i] = 0.f;
  __syncthreads();

  for (int u = 0; u <= t; ++u) {
    const int k0 = u * kTile;
    const int n_t = s - k0 < kTile ? s - k0 : kTile;
    for (int idx = tid; idx < n_t * h_d; idx += threads) {
      const int c = idx / h_d, e = idx % h_d;
      tile[c * stride + e] = k[(k0 + c) * kv_width + static_cast<size_t>(g) * h_d + e];
    }
    __syncthreads();

    for (int idx = tid; idx < rows * kTile; idx += threads) {
      const int row = idx / kTile, c = idx % kTile;
      const int p = q0 + row % kTile, key = k0 + c;
      float score = -INFINITY;
      if (c < n_t && key <= p && p < s) {
        score = 0.f;
        const float* qr = q_s + row * h_d;
        const float* kr = tile + c * stride;
        for (int e = 0; e < h_d; ++e) score += qr[e] * kr[e];
      }
      p_s[idx] = score;
    }
    __syncthreads();

    for (int row = tid; row < rows; row += threads) {
      float* pr = p_s + row * kTile;
      float tile_max = -INFINITY;
      for (int c = 0; c < kTile; ++c) tile_max = fmaxf(tile_max, pr[c]);
      const float m_old = m_s[row];
      const float m_new = fmaxf(m_old, tile_max);
      float rescale = 1.f, sum = 0.f;
      if (m_new != -INFINITY) {  // otherwise nothing is visible to this row yet
        rescale = __expf(m_old - m_new);  // 0 on the first visible tile (m_old = −inf)
        for (int c = 0; c < kTile; ++c) {
          const float e = __expf(pr[c] - m_new);  // masked scores give exactly 0
          pr[c] = e;
          sum += e;
        }
      } else {
        for (int c = 0; c < kTile; ++c) pr[c] = 0.f;
      }
      l_s[row] = l_s[row] * rescale + sum;
      m_s[row] = m_new;
      r_s[row] = rescale;
    }
    for (int idx = tid; idx < n_t * h_d; idx += threads) {
      const int c = idx / h_d, e = idx % h_d;
      tile[c * stride + e] = v[(k0 + c) * kv_width + static_cast<size_t>(g) * h_d + e];
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kMaxAccPerThread; ++i) {
      const int idx = tid + i * threads;
      if (idx < elements) {
        const int row = idx / h_d, e = idx % h_d;
        const float* pr = p_s + row * kTile;
        float a = acc[i] * r_s[row];
        for (int c = 0; c < n_t; ++c) a += pr[c] * tile[c * stride + e];
        acc[i] = a;
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kMaxAccPerThread; ++i) {
    const int idx = tid + i * threads;
    if (idx < elements) {
      const int row = idx / h_d, e = idx % h_d;
      const int j = row / kTile, p = q0 + row % kTile;
      if (p < s) out[p * q_width + static_cast<size_t>(g * group + j) * h_d + e] = acc[i] / l_s[row];
    }
  }
  // STUB: (void)q; (void)k; (void)v; (void)out; (void)s; (void)n_heads; (void)n_kv_heads;
  // STUB: (void)head_dim; (void)scale; (void)smem;
  // END SOLUTION
}

}  // namespace

size_t flash_attention_shared_bytes(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_heads % n_kv_heads != 0) return 0;
  return shared_floats(n_heads / n_kv_heads, head_dim) * sizeof(float);
}

void flash_attention(const float* q, const float* k, const float* v, float* out, int s,
                     int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
  if (s < 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    throw std::invalid_argument(
        "flash_attention: need s >= 0 and positive n_heads, n_kv_heads, head_dim (got s=" +
        std::to_string(s) + ", n_heads=" + std::to_string(n_heads) + ", n_kv_heads=" +
        std::to_string(n_kv_heads) + ", head_dim=" + std::to_string(head_dim) + ")");
  }
  if (n_heads % n_kv_heads != 0) {
    throw std::invalid_argument("flash_attention: n_heads (" + std::to_string(n_heads) +
                                ") must be a multiple of n_kv_heads (" +
                                std::to_string(n_kv_heads) + ")");
  }
  if (out == q || out == k || out == v) {
    throw std::invalid_argument("flash_attention: out must not alias q, k or v");
  }
  const int group = n_heads / n_kv_heads;
  const size_t bytes = flash_attention_shared_bytes(n_heads, n_kv_heads, head_dim);
  if (bytes > kMaxSharedBytes ||
      static_cast<long>(group) * kTile * head_dim >
          static_cast<long>(kMaxAccPerThread) * kMaxThreads) {
    throw std::invalid_argument(
        "flash_attention: " + std::to_string(group) + " query heads per KV head with head_dim " +
        std::to_string(head_dim) + " need " + std::to_string(bytes) +
        " bytes of shared memory per block; this kernel supports at most " +
        std::to_string(kMaxSharedBytes) + " bytes and " +
        std::to_string(kMaxAccPerThread * kMaxThreads) + " accumulators (group·" +
        std::to_string(kTile) + "·head_dim)");
  }
  if (s == 0) return;
  // BEGIN SOLUTION(m5): Grid (ceil(s / kTile), n_kv_heads), block_threads(group, head_dim)
  // threads, `bytes` of dynamic shared memory; beyond 48 KB a kernel must opt in first with
  // cudaFuncSetAttribute(flash_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
  // bytes). The scale is 1/sqrt(h_d), computed in double and rounded once.
  if (bytes > kDefaultSharedBytes) {
    CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)));
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const dim3 grid(static_cast<unsigned>((s + kTile - 1) / kTile),
                  static_cast<unsigned>(n_kv_heads));
  flash_attention_kernel<<<grid, block_threads(group, head_dim), bytes, stream>>>(
      q, k, v, out, s, n_heads, n_kv_heads, head_dim, scale);
  CUDA_CHECK(cudaGetLastError());
  // STUB: // Placeholder output (zeros), so that the model runs on and its tests fail cleanly.
  // STUB: CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(s) * n_heads * head_dim *
  // STUB:                                        sizeof(float), stream));
  // STUB: (void)q; (void)k; (void)v; (void)block_threads; (void)kDefaultSharedBytes;
  // STUB: (void)flash_attention_kernel;
  // END SOLUTION
}

}  // namespace clockwork::kernels
