/// @file sliding_window_decode.cu
/// Milestone 6 (Gemma 3): the decode form of sliding-window attention. One new query row (the
/// token at position pos = len − 1) attends to a layer's KV cache with Gemma's score scale; on a
/// local layer it sees only the last `window` positions, max(0, len − window) .. len − 1.
///
/// A local layer never looks further back than the window, so its cache keeps only the last
/// positions, in a ring: with C = kv_cache_capacity(cache) slots, position p lives in slot
/// p mod C (a ring of C = sliding_window slots is the smallest that works; the decode step writes
/// its k and v into slot pos mod C, over the position pos − C that no query will see again).
/// A global layer's cache holds every position (len ≤ C), where p mod C is simply p: one rule
/// serves both kinds. A paged view maps the ring slot through its page table as usual.
///
/// sliding_window_decode_kernel: one block per KV head; the h/h_k query heads of the group share
/// every K and V tile, as in milestone 4's decode_attention. The block walks the visible
/// positions in tiles of kTile = 32 with an online softmax (per query head: running maximum m,
/// sum l of exp(score − m) and accumulator acc of exp(score − m)·v, rescaled by exp(m_old − m_new)
/// when a tile raises the maximum), then writes acc / l.
///
/// Shared memory per block, in floats: q and acc (2·group·h_d), the tile (kTile·(h_d + 1): one
/// padding float per row so that lanes reading different rows hit different banks), the tile's
/// scores (group·kTile) and m, l and the rescale factor (3·group). Gemma 3 1B (group 4, h_d 256)
/// needs 41 KB.
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = 32;      // positions per tile: one per lane in the softmax step
constexpr int kThreads = 128;  // 4 warps
constexpr size_t kMaxSharedBytes = 48 * 1024;

size_t shared_floats(int group, int head_dim) {
  return 2 * static_cast<size_t>(group) * head_dim + static_cast<size_t>(kTile) * (head_dim + 1) +
         static_cast<size_t>(group) * kTile + 3 * static_cast<size_t>(group);
}

// BEGIN SOLUTION(m6): Helpers. Position p's slot in a ring of `ring` slots: r = p mod ring, then,
// with a page table, page_table[r / page_size]·page_size + r % page_size (as kv_cache.cu maps a
// position). Warp-wide max and sum with __shfl_xor_sync (every lane gets the result).
__device__ size_t ring_slot(const KvCacheView& c, int ring, int pos) {
  const int r = pos % ring;
  if (!c.page_table) return static_cast<size_t>(r);
  return static_cast<size_t>(c.page_table[r / c.page_size]) * c.page_size + r % c.page_size;
}

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
// END SOLUTION

// q [h·h_d] -> out [h·h_d]. Block g serves query heads g·group .. (g+1)·group − 1 over the
// visible positions (window > 0: the last `window` of 0 .. len − 1; 0: all), position p read
// from slot p mod ring. Dynamic shared memory: shared_floats(group, h_d).
__global__ void sliding_window_decode_kernel(const float* q, KvCacheView cache, int len, int window,
                                             int ring, int n_heads, float scale, float* out) {
  extern __shared__ __align__(16) float smem[];
  // BEGIN SOLUTION(m6): The online softmax of milestone 4's decode attention over the visible
  // positions only: first = max(0, len − window) on a local layer (window > 0: `window` keys,
  // the new token's own included; len − window + 1 would drop one, len − window − 1 add one),
  // first = 0 on a global layer (window = 0). Every position p is read from
  // ring_slot(cache, ring, p), never from slot p (past the ring's end once len > ring) nor from
  // slot p − first (the ring does not start at slot 0 once it has wrapped). Scores are
  // q·k·scale with Gemma's scale query_pre_attn_scalar^(−1/2), not 1/sqrt(h_d). Per tile of up
  // to kTile positions from t0: load K rows into the shared tile; scores into p_s (−inf for
  // unused rows); one warp per query head updates m, l and the rescale factor; load V into the
  // tile; acc = acc·rescale + Σ p·v. Finally out = acc / l. Keep every __syncthreads() where all
  // threads reach it.
  const int h_d = cache.head_dim, width = cache.n_kv_heads * h_d;
  const int group = n_heads / cache.n_kv_heads;
  const int g = blockIdx.x;
  const int first = window > 0 && len > window ? len - window : 0;
  const int stride = h_d + 1;

  float* q_s = smem;                   // [group, h_d]
  float* acc = q_s + group * h_d;      // [group, h_d]
  float* tile = acc + group * h_d;     // [kTile, h_d + 1]
  float* p_s = tile + kTile * stride;  // [group, kTile]
  float* m_s = p_s + group * kTile;    // [group]
  float* l_s = m_s + group;            // [group]
  float* r_s = l_s + group;            // [group]

  const int tid = threadIdx.x, threads = blockDim.x;
  const int warp = tid / 32, lane = tid % 32, warps = threads / 32;
  const float* q_group = q + static_cast<size_t>(g) * group * h_d;
  for (int idx = tid; idx < group * h_d; idx += threads) {
    q_s[idx] = q_group[idx] * scale;
    acc[idx] = 0.f;
  }
  for (int j = tid; j < group; j += threads) {
    m_s[j] = -INFINITY;
    l_s[j] = 0.f;
  }
  __syncthreads();

  for (int t0 = first; t0 < len; t0 += kTile) {
    const int n_t = len - t0 < kTile ? len - t0 : kTile;
    for (int idx = tid; idx < n_t * h_d; idx += threads) {
      const int r = idx / h_d, e = idx % h_d;
      tile[r * stride + e] = cache.k[ring_slot(cache, ring, t0 + r) * width + g * h_d + e];
    }
    __syncthreads();

    for (int idx = tid; idx < group * kTile; idx += threads) {
      const int j = idx / kTile, r = idx % kTile;
      float s = -INFINITY;
      if (r < n_t) {
        s = 0.f;
        for (int e = 0; e < h_d; ++e) s += q_s[j * h_d + e] * tile[r * stride + e];
      }
      p_s[idx] = s;
    }
    __syncthreads();

    for (int j = warp; j < group; j += warps) {
      const float s = p_s[j * kTile + lane];
      const float m_old = m_s[j];
      const float m_new = fmaxf(m_old, warp_max(s));
      const float p = lane < n_t ? __expf(s - m_new) : 0.f;
      p_s[j * kTile + lane] = p;
      const float sum = warp_sum(p);
      if (lane == 0) {
        const float rescale = __expf(m_old - m_new);  // 0 for the first tile (m_old = −inf)
        r_s[j] = rescale;
        l_s[j] = l_s[j] * rescale + sum;
        m_s[j] = m_new;
      }
    }
    for (int idx = tid; idx < n_t * h_d; idx += threads) {
      const int r = idx / h_d, e = idx % h_d;
      tile[r * stride + e] = cache.v[ring_slot(cache, ring, t0 + r) * width + g * h_d + e];
    }
    __syncthreads();

    for (int idx = tid; idx < group * h_d; idx += threads) {
      const int j = idx / h_d, e = idx % h_d;
      float a = acc[idx] * r_s[j];
      for (int r = 0; r < n_t; ++r) a += p_s[j * kTile + r] * tile[r * stride + e];
      acc[idx] = a;
    }
    __syncthreads();
  }

  for (int idx = tid; idx < group * h_d; idx += threads) {
    const int j = idx / h_d;
    out[static_cast<size_t>(g * group + j) * h_d + idx % h_d] = acc[idx] / l_s[j];
  }
  // STUB: (void)q; (void)cache; (void)len; (void)window; (void)ring; (void)n_heads; (void)scale;
  // STUB: (void)out; (void)smem;
  // END SOLUTION
}

}  // namespace

int sliding_window_first_position(int len, int window) {
  return window > 0 && len > window ? len - window : 0;
}

void sliding_window_decode_attention(const float* q, const KvCacheView& cache, int len, float* out,
                                     int n_heads, float scale, int window, cudaStream_t stream) {
  const char* who = "sliding_window_decode_attention";
  const std::string w = who;
  check_kv_cache_view(cache, who);
  if (!q || !out) throw std::invalid_argument(w + ": q and out must be device pointers");
  if (out == q) throw std::invalid_argument(w + ": out must not alias q");
  if (n_heads <= 0 || n_heads % cache.n_kv_heads != 0) {
    throw std::invalid_argument(w + ": n_heads (" + std::to_string(n_heads) +
                                ") must be a positive multiple of cache.n_kv_heads (" +
                                std::to_string(cache.n_kv_heads) + ")");
  }
  if (!(scale > 0.f)) {
    throw std::invalid_argument(w + ": scale must be > 0 (got " + std::to_string(scale) + ")");
  }
  if (window < 0) {
    throw std::invalid_argument(w + ": window must be >= 0 (0: a global layer; got " +
                                std::to_string(window) + ")");
  }
  if (len < 1) {
    throw std::invalid_argument(w +
                                ": len must be at least 1 (the new token attends to itself; got " +
                                std::to_string(len) + ")");
  }
  const int ring = kv_cache_capacity(cache);
  const int first = sliding_window_first_position(len, window);
  if (len - first > ring) {
    throw std::out_of_range(
        w + ": the query sees " + std::to_string(len - first) + " positions (" +
        (window > 0 ? "window " + std::to_string(window) : std::string("a global layer")) +
        ", len " + std::to_string(len) + ") but the cache holds only " + std::to_string(ring) +
        ": the oldest of them were overwritten");
  }
  const size_t smem = shared_floats(n_heads / cache.n_kv_heads, cache.head_dim) * sizeof(float);
  if (smem > kMaxSharedBytes) {
    throw std::invalid_argument(w + ": " + std::to_string(n_heads / cache.n_kv_heads) +
                                " query heads per KV head with head_dim " +
                                std::to_string(cache.head_dim) + " need " + std::to_string(smem) +
                                " bytes of shared memory per block, more than 48 KB");
  }
  sliding_window_decode_kernel<<<cache.n_kv_heads, kThreads, smem, stream>>>(
      q, cache, len, window, ring, n_heads, scale, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
