/// @file decode_attention.cu
/// Milestone 4: attention of one new token against the KV cache, in one pass or split across
/// blocks (flash-decoding), and the merge of attention states that joins the pieces.
///
/// A decode step has one query row per head and len cached keys. The work is small and the
/// cache is large, so the kernel is about reading K and V once, at memory speed:
///
/// decode_attention_kernel: block (g, c) handles KV head g and chunk c of the positions (one
/// chunk of all len positions for decode_attention()). The h/h_k query heads that share KV head
/// g sit in the same block, so every K and V tile is loaded from global memory once for the whole
/// group (that is the point of GQA at decode time). The block walks its positions in tiles of
/// kTile = 32 and keeps, per query head, an *attention state* that an online softmax updates
/// tile by tile:
///   m = the largest score so far, l = Σ exp(score − m), acc = Σ exp(score − m)·v.
/// A new tile with maximum m_t rescales the old state by exp(m − max(m, m_t)) before adding its
/// own terms, so no score ever needs to be kept beyond its tile. At the end
///   O = acc / l   and   LSE = m + log(l) = log Σ exp(score).
/// Per tile: load K (each position's head slice is h_d contiguous floats: coalesced), compute
/// the group×kTile scores from shared memory, update the states (one warp per query head, one
/// lane per position: two warp reductions), load V into the same shared tile, accumulate.
///
/// merge_states_kernel: one block per query head joins the chunks' states with the associative
/// merge LSE = log Σ_j e^{LSE_j}, O = Σ_j e^{LSE_j − LSE}·O_j (largest LSE subtracted first).
///
/// Shared memory per block, in floats: q and acc (2·group·h_d), the tile (kTile·(h_d+1): one
/// padding float per row so that the 32 lanes reading 32 different rows hit 32 different banks),
/// the tile's scores (group·kTile) and m, l and the rescale factor (3·group). For Llama-3-8B
/// (group 4, h_d 128) that is 21 KB.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = 32;     // cached positions per tile: one per lane in the softmax step
constexpr int kThreads = 128;  // threads of a decode-attention block (4 warps)
constexpr size_t kMaxSharedBytes = 48 * 1024;  // without opting in to more

size_t shared_floats(int group, int head_dim) {
  return 2 * static_cast<size_t>(group) * head_dim + static_cast<size_t>(kTile) * (head_dim + 1) +
         static_cast<size_t>(group) * kTile + 3 * static_cast<size_t>(group);
}

// BEGIN SOLUTION(m4): Helpers. Position p's slot in the cache: p itself without a page table,
// otherwise page_table[p / page_size]·page_size + p % page_size (as in kv_cache.cu). Warp-wide
// max and sum with __shfl_xor_sync over offsets 16, 8, 4, 2, 1 (every lane gets the result).
__device__ size_t slot_of(const KvCacheView& c, int pos) {
  if (!c.page_table) return static_cast<size_t>(pos);
  return static_cast<size_t>(c.page_table[pos / c.page_size]) * c.page_size + pos % c.page_size;
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

// q [h·h_d]; block (g, c) covers positions c·split_size .. min(len, (c+1)·split_size) − 1 for the
// query heads g·group .. (g+1)·group − 1 and writes out[c, head, :] (= out[head, :] for c = 0) and,
// when out_lse is set, out_lse[c, head]. Dynamic shared memory: shared_floats(group, h_d).
__global__ void decode_attention_kernel(const float* q, KvCacheView cache, int len, int split_size,
                                        int n_heads, float scale, float* out, float* out_lse) {
  extern __shared__ __align__(16) float smem[];
  // BEGIN SOLUTION(m4): The attention state of this block's query heads over its positions.
  // group = n_heads / h_k; this block's heads are g·group + j for j < group (contiguous in q);
  // its positions run from begin = blockIdx.y·split_size to end = min(len, begin + split_size).
  // Carve smem into q_s [group, h_d] (the queries times `scale`), acc [group, h_d] (zeros),
  // tile [kTile, h_d + 1], p_s [group, kTile] and m, l, rescale [group] (m = −inf, l = 0), then
  // __syncthreads(). For each tile of up to kTile positions starting at t0:
  //   1. load K: element e of row r is cache.k[slot_of(t0 + r)·h_k·h_d + g·h_d + e];
  //      __syncthreads();
  //   2. scores: p_s[j, r] = q_s[j]·tile[r] for r < n_t, −inf for the unused rows;
  //      __syncthreads();
  //   3. one warp per query head j, lane r: m_new = max(m_j, warp max of the scores);
  //      p = exp(score − m_new); rescale_j = exp(m_j − m_new); l_j = l_j·rescale_j + warp sum of
  //      p; m_j = m_new. Write p back to p_s. Forgetting the rescale is the classic mistake: the
  //      earlier tiles would keep weights relative to an old maximum.
  //   4. load V into the same tile (K is no longer needed); __syncthreads();
  //   5. acc[j, e] = acc[j, e]·rescale_j + Σ_r p_s[j, r]·tile[r, e]; __syncthreads().
  // Finally out[blockIdx.y, head, e] = acc / l and, if out_lse, out_lse[blockIdx.y, head] =
  // m + log(l). Every thread must reach every __syncthreads(): keep the barriers out of
  // conditions that differ between threads.
  const int h_d = cache.head_dim, width = cache.n_kv_heads * h_d;
  const int group = n_heads / cache.n_kv_heads;
  const int g = blockIdx.x, chunk = blockIdx.y;
  const int begin = chunk * split_size;
  const int end = len - begin < split_size ? len : begin + split_size;
  const int stride = h_d + 1;  // padded tile rows: no bank conflicts when lanes read rows

  float* q_s = smem;                   // [group, h_d]
  float* acc = q_s + group * h_d;      // [group, h_d]
  float* tile = acc + group * h_d;     // [kTile, h_d + 1]
  float* p_s = tile + kTile * stride;  // [group, kTile]
  float* m_s = p_s + group * kTile;    // [group]
  float* l_s = m_s + group;            // [group]
  float* r_s = l_s + group;            // [group] rescale of the old state by this tile

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

  for (int t0 = begin; t0 < end; t0 += kTile) {
    const int n_t = end - t0 < kTile ? end - t0 : kTile;
    for (int idx = tid; idx < n_t * h_d; idx += threads) {
      const int r = idx / h_d, e = idx % h_d;
      tile[r * stride + e] = cache.k[slot_of(cache, t0 + r) * width + g * h_d + e];
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
      tile[r * stride + e] = cache.v[slot_of(cache, t0 + r) * width + g * h_d + e];
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

  float* out_chunk = out + static_cast<size_t>(chunk) * n_heads * h_d;
  for (int idx = tid; idx < group * h_d; idx += threads) {
    const int j = idx / h_d;
    out_chunk[static_cast<size_t>(g * group + j) * h_d + idx % h_d] = acc[idx] / l_s[j];
  }
  if (out_lse) {
    for (int j = tid; j < group; j += threads)
      out_lse[static_cast<size_t>(chunk) * n_heads + g * group + j] = m_s[j] + logf(l_s[j]);
  }
  // STUB: (void)q; (void)cache; (void)len; (void)split_size; (void)n_heads; (void)scale;
  // STUB: (void)out; (void)out_lse; (void)smem;
  // END SOLUTION
}

// o [n_states, n_heads·head_dim], lse [n_states, n_heads] -> out [n_heads·head_dim],
// out_lse [n_heads] (optional). One block per head.
__global__ void merge_states_kernel(const float* o, const float* lse, int n_states, float* out,
                                    float* out_lse, int n_heads, int head_dim) {
  // BEGIN SOLUTION(m4): Block `head` merges that head's n_states states. Every thread finds the
  // largest LSE_j (m) and the total weight Σ_j e^{LSE_j − m} — weights relative to the largest
  // are at most 1, so nothing overflows even when the LSEs are in the thousands. Then, with a
  // strided loop over e < head_dim: out[head, e] = Σ_j e^{LSE_j − m}·O_j[head, e] / total. Skip
  // states of weight 0 (an empty state, LSE = −inf, may hold anything). One thread writes
  // out_lse[head] = m + log(total) when out_lse is set. If every state is empty (m = −inf),
  // write O = 0 and LSE = −inf. Plain averaging of the O_j, or weights e^{LSE_j} without the
  // division by the total, are the mistakes the tests name.
  const int head = blockIdx.x;
  float m = -INFINITY;
  for (int j = 0; j < n_states; ++j) m = fmaxf(m, lse[static_cast<size_t>(j) * n_heads + head]);
  float total = 0.f;
  if (m != -INFINITY) {
    for (int j = 0; j < n_states; ++j)
      total += __expf(lse[static_cast<size_t>(j) * n_heads + head] - m);
  }
  const size_t row = static_cast<size_t>(n_heads) * head_dim;
  for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
    float sum = 0.f;
    if (m != -INFINITY) {
      for (int j = 0; j < n_states; ++j) {
        const float w = __expf(lse[static_cast<size_t>(j) * n_heads + head] - m);
        if (w > 0.f) sum += w * o[j * row + static_cast<size_t>(head) * head_dim + e];
      }
    }
    out[static_cast<size_t>(head) * head_dim + e] = total > 0.f ? sum / total : 0.f;
  }
  if (out_lse && threadIdx.x == 0) out_lse[head] = total > 0.f ? m + logf(total) : -INFINITY;
  // STUB: (void)o; (void)lse; (void)n_states; (void)out; (void)out_lse; (void)n_heads;
  // STUB: (void)head_dim;
  // END SOLUTION
}

// The checks both decode-attention launchers make; returns the bytes of shared memory a block
// needs.
size_t check_decode_args(const char* who, const float* q, const KvCacheView& cache, int len,
                         const float* out, int n_heads) {
  const std::string w = who;
  check_kv_cache_view(cache, who);
  if (!q || !out) throw std::invalid_argument(w + ": q and out must be device pointers");
  if (out == q) throw std::invalid_argument(w + ": out must not alias q");
  if (n_heads <= 0 || n_heads % cache.n_kv_heads != 0) {
    throw std::invalid_argument(w + ": n_heads (" + std::to_string(n_heads) +
                                ") must be a positive multiple of cache.n_kv_heads (" +
                                std::to_string(cache.n_kv_heads) + ")");
  }
  if (len < 1) {
    throw std::invalid_argument(w + ": len must be at least 1 (the new token attends to itself; got " +
                                std::to_string(len) + ")");
  }
  if (len > kv_cache_capacity(cache)) {
    throw std::out_of_range(w + ": len = " + std::to_string(len) + " exceeds the cache's " +
                            std::to_string(kv_cache_capacity(cache)) + " positions");
  }
  const size_t bytes = shared_floats(n_heads / cache.n_kv_heads, cache.head_dim) * sizeof(float);
  if (bytes > kMaxSharedBytes) {
    throw std::invalid_argument(
        w + ": " + std::to_string(n_heads / cache.n_kv_heads) + " query heads per KV head with head_dim " +
        std::to_string(cache.head_dim) + " need " + std::to_string(bytes) +
        " bytes of shared memory per block, more than the 48 KB a block gets without opting in");
  }
  return bytes;
}

}  // namespace

void decode_attention(const float* q, const KvCacheView& cache, int len, float* out, int n_heads,
                      cudaStream_t stream) {
  const size_t smem = check_decode_args("decode_attention", q, cache, len, out, n_heads);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cache.head_dim)));
  const dim3 grid(static_cast<unsigned>(cache.n_kv_heads), 1);
  decode_attention_kernel<<<grid, kThreads, smem, stream>>>(q, cache, len, len, n_heads, scale, out,
                                                           nullptr);
  CUDA_CHECK(cudaGetLastError());
}

int decode_attention_splits(int len, int split_size) {
  if (len < 0 || split_size < 1) {
    throw std::invalid_argument("decode_attention_splits: need len >= 0 and split_size >= 1 (got len=" +
                                std::to_string(len) + ", split_size=" + std::to_string(split_size) +
                                ")");
  }
  return static_cast<int>((static_cast<long long>(len) + split_size - 1) / split_size);
}

void decode_attention_split(const float* q, const KvCacheView& cache, int len, float* out,
                            int n_heads, int split_size, float* partial_o, float* partial_lse,
                            cudaStream_t stream) {
  const size_t smem = check_decode_args("decode_attention_split", q, cache, len, out, n_heads);
  if (split_size < 1) {
    throw std::invalid_argument("decode_attention_split: split_size must be at least 1 (got " +
                                std::to_string(split_size) + ")");
  }
  if (!partial_o || !partial_lse) {
    throw std::invalid_argument(
        "decode_attention_split: partial_o and partial_lse must be device workspaces");
  }
  if (partial_o == out || partial_o == q || static_cast<const float*>(partial_lse) == out ||
      partial_lse == partial_o) {
    throw std::invalid_argument(
        "decode_attention_split: partial_o, partial_lse and out must be distinct buffers");
  }
  const int splits = decode_attention_splits(len, split_size);
  if (splits > 65535) {
    throw std::invalid_argument("decode_attention_split: " + std::to_string(splits) +
                                " chunks exceed the grid's 65535 in y; use a split_size of at least " +
                                std::to_string((len + 65534) / 65535));
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cache.head_dim)));
  const dim3 grid(static_cast<unsigned>(cache.n_kv_heads), static_cast<unsigned>(splits));
  decode_attention_kernel<<<grid, kThreads, smem, stream>>>(q, cache, len, split_size, n_heads,
                                                           scale, partial_o, partial_lse);
  CUDA_CHECK(cudaGetLastError());
  merge_attention_states(partial_o, partial_lse, splits, out, nullptr, n_heads, cache.head_dim,
                         stream);
}

void merge_attention_states(const float* o, const float* lse, int n_states, float* out,
                            float* out_lse, int n_heads, int head_dim, cudaStream_t stream) {
  if (n_states < 1 || n_heads < 1 || head_dim < 1) {
    throw std::invalid_argument(
        "merge_attention_states: n_states, n_heads and head_dim must be positive (got " +
        std::to_string(n_states) + ", " + std::to_string(n_heads) + " and " +
        std::to_string(head_dim) + ")");
  }
  if (!o || !lse || !out) {
    throw std::invalid_argument("merge_attention_states: o, lse and out must be device pointers");
  }
  if (out == o || out == lse || (out_lse && (out_lse == o || out_lse == lse || out_lse == out))) {
    throw std::invalid_argument(
        "merge_attention_states: out and out_lse must not alias the states or each other");
  }
  const int threads = std::min(256, (head_dim + 31) / 32 * 32);
  merge_states_kernel<<<n_heads, threads, 0, stream>>>(o, lse, n_states, out, out_lse, n_heads,
                                                       head_dim);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
