/// @file batched_decode_attention.cu
/// Milestone 5: decode attention for a whole batch of requests in one launch, over one shared
/// page pool, in one pass per request or split into balanced chunks, and the per-request merge.
///
/// The batch is ragged: request b has lens[b] cached positions and its own page table (row b of
/// BatchedKvView::page_tables). Seen as a matrix, the batch's keys form a block-sparse K: each
/// request's query row touches only its own pages. One launch covers every (KV head, work item):
///   * batched_decode_attention(): item b is request b, all of its positions; the block writes
///     the output row of request b directly.
///   * batched_decode_attention_split(): item c is a chunk (request, begin, end) of a plan; the
///     block writes the chunk's attention state (O, LSE) and merge_states_batched_kernel joins
///     each request's chunks. With chunks of about the same length every block gets about the
///     same number of keys to read, whatever the mix of lengths in the batch: a request of 4000
///     positions no longer keeps one block busy while the blocks of short ones sit idle.
///
/// Inside a block the algorithm is milestone 4's (decode_attention.cu): the group of query heads
/// that share KV head g walk the item's positions in tiles of kTile, keeping per head an online
/// softmax state m (running max), l (running sum of exp(score − m)) and acc (running weighted sum
/// of V), rescaled by exp(m_old − m_new) whenever the max grows; O = acc / l, LSE = m + log l.
/// Shared memory is the same: q and acc (2·group·h_d), the padded tile (kTile·(h_d+1)), the
/// tile's probabilities (group·kTile) and m, l, rescale (3·group) floats.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = 32;      // cached positions per tile: one per lane in the softmax step
constexpr int kThreads = 128;  // threads of a block (4 warps)
constexpr size_t kMaxSharedBytes = 48 * 1024;

size_t shared_floats(int group, int head_dim) {
  return 2 * static_cast<size_t>(group) * head_dim + static_cast<size_t>(kTile) * (head_dim + 1) +
         static_cast<size_t>(group) * kTile + 3 * static_cast<size_t>(group);
}

// BEGIN SOLUTION(m5): Helpers. The slot of position p of request b: its own table row,
// page_tables[b·table_stride + p / page_size]·page_size + p % page_size. Warp-wide max and sum
// with __shfl_xor_sync (as in decode_attention.cu).
__device__ size_t batched_slot(const BatchedKvView& c, int b, int pos) {
  return static_cast<size_t>(c.page_tables[static_cast<size_t>(b) * c.table_stride +
                                           pos / c.page_size]) *
             c.page_size +
         pos % c.page_size;
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

// q [batch, h·h_d]. Block (g, item): without a work list (chunk_request == nullptr) the item is
// request blockIdx.y over positions 0 .. lens[b] − 1 and the block writes out[b, heads of g];
// with one, the item is chunk blockIdx.y of the plan and the block writes out[c, heads of g]
// (the partial outputs) and out_lse[c, heads of g].
__global__ void batched_decode_attention_kernel(const float* q, BatchedKvView cache,
                                                const int32_t* chunk_request,
                                                const int32_t* chunk_begin,
                                                const int32_t* chunk_end, int n_heads, float scale,
                                                float* out, float* out_lse) {
  extern __shared__ __align__(16) float smem[];
  // BEGIN SOLUTION(m5): Find the item first: item = blockIdx.y; without a work list the request
  // is b = item with positions begin = 0 .. end = lens[b]; with one, b = chunk_request[item],
  // begin = chunk_begin[item], end = chunk_end[item]. Every position p in [begin, end) is read
  // through request b's own table row (batched_slot(cache, b, p)); q is request b's row,
  // q + b·h·h_d. Then milestone 4's block: carve smem into q_s (times scale), acc, the padded
  // tile, p_s and m, l, rescale; walk the tiles (load K, scores, the online-softmax update with
  // the rescale, load V, accumulate) and write out[item, head, e] = acc / l and, with out_lse,
  // out_lse[item, head] = m + log(l). Keep every __syncthreads() reachable by all threads.
  const int h_d = cache.head_dim, width = cache.n_kv_heads * h_d;
  const int group = n_heads / cache.n_kv_heads;
  const int g = blockIdx.x, item = blockIdx.y;
  int b = item, begin = 0, end = 0;
  if (chunk_request) {
    b = chunk_request[item];
    begin = chunk_begin[item];
    end = chunk_end[item];
  } else {
    end = cache.lens[b];
  }
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
  const float* q_group = q + (static_cast<size_t>(b) * n_heads + static_cast<size_t>(g) * group) * h_d;
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
      tile[r * stride + e] = cache.k[batched_slot(cache, b, t0 + r) * width + g * h_d + e];
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
      const float p = __expf(s - m_new);
      p_s[j * kTile + lane] = p;
      const float sum = warp_sum(p);
      if (lane == 0) {
        const float rescale = __expf(m_old - m_new);
        r_s[j] = rescale;
        l_s[j] = l_s[j] * rescale + sum;
        m_s[j] = m_new;
      }
    }
    for (int idx = tid; idx < n_t * h_d; idx += threads) {
      const int r = idx / h_d, e = idx % h_d;
      tile[r * stride + e] = cache.v[batched_slot(cache, b, t0 + r) * width + g * h_d + e];
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

  float* out_row = out + static_cast<size_t>(item) * n_heads * h_d;
  for (int idx = tid; idx < group * h_d; idx += threads) {
    const int j = idx / h_d;
    out_row[static_cast<size_t>(g * group + j) * h_d + idx % h_d] =
        l_s[j] > 0.f ? acc[idx] / l_s[j] : 0.f;
  }
  if (out_lse) {
    for (int j = tid; j < group; j += threads)
      out_lse[static_cast<size_t>(item) * n_heads + g * group + j] =
          l_s[j] > 0.f ? m_s[j] + logf(l_s[j]) : -INFINITY;
  }
  // STUB: (void)q; (void)cache; (void)chunk_request; (void)chunk_begin; (void)chunk_end;
  // STUB: (void)n_heads; (void)scale; (void)out; (void)out_lse; (void)smem;
  // END SOLUTION
}

// o [n_chunks, h·h_d], lse [n_chunks, h] -> out [batch, h·h_d]. Block (head, b) merges the
// states first_chunk[b] .. first_chunk[b+1] − 1.
__global__ void merge_states_batched_kernel(const float* o, const float* lse,
                                            const int32_t* first_chunk, float* out, int n_heads,
                                            int head_dim) {
  // BEGIN SOLUTION(m5): Milestone 4's merge (merge_states_kernel in decode_attention.cu) over
  // request b's own chunks only: m = the largest of their LSEs, total = Σ e^{LSE_j − m},
  // out[b, head, e] = Σ e^{LSE_j − m}·O_j[head, e] / total, skipping chunks of weight 0; O = 0
  // when every chunk is empty. Reading another request's chunks (a wrong range from
  // first_chunk) mixes two requests' attention.
  const int head = blockIdx.x, b = blockIdx.y;
  const int first = first_chunk[b], last = first_chunk[b + 1];
  float m = -INFINITY;
  for (int j = first; j < last; ++j) m = fmaxf(m, lse[static_cast<size_t>(j) * n_heads + head]);
  float total = 0.f;
  if (m != -INFINITY) {
    for (int j = first; j < last; ++j) total += __expf(lse[static_cast<size_t>(j) * n_heads + head] - m);
  }
  const size_t row = static_cast<size_t>(n_heads) * head_dim;
  for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
    float sum = 0.f;
    if (m != -INFINITY) {
      for (int j = first; j < last; ++j) {
        const float w = __expf(lse[static_cast<size_t>(j) * n_heads + head] - m);
        if (w > 0.f) sum += w * o[j * row + static_cast<size_t>(head) * head_dim + e];
      }
    }
    out[b * row + static_cast<size_t>(head) * head_dim + e] = total > 0.f ? sum / total : 0.f;
  }
  // STUB: (void)o; (void)lse; (void)first_chunk; (void)out; (void)n_heads; (void)head_dim;
  // END SOLUTION
}

size_t check_batched_args(const char* who, const float* q, const BatchedKvView& cache,
                          const float* out, int n_heads) {
  const std::string w = who;
  check_batched_kv_view(cache, who);
  if (!q || !out) throw std::invalid_argument(w + ": q and out must be device pointers");
  if (out == q) throw std::invalid_argument(w + ": out must not alias q");
  if (n_heads <= 0 || n_heads % cache.n_kv_heads != 0) {
    throw std::invalid_argument(w + ": n_heads (" + std::to_string(n_heads) +
                                ") must be a positive multiple of cache.n_kv_heads (" +
                                std::to_string(cache.n_kv_heads) + ")");
  }
  const size_t bytes = shared_floats(n_heads / cache.n_kv_heads, cache.head_dim) * sizeof(float);
  if (bytes > kMaxSharedBytes) {
    throw std::invalid_argument(w + ": " + std::to_string(n_heads / cache.n_kv_heads) +
                                " query heads per KV head with head_dim " +
                                std::to_string(cache.head_dim) + " need " + std::to_string(bytes) +
                                " bytes of shared memory per block, more than 48 KB");
  }
  return bytes;
}

float scale_of(int head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

}  // namespace

void batched_decode_attention(const float* q, const BatchedKvView& cache, float* out, int n_heads,
                              cudaStream_t stream) {
  const size_t smem = check_batched_args("batched_decode_attention", q, cache, out, n_heads);
  const dim3 grid(static_cast<unsigned>(cache.n_kv_heads), static_cast<unsigned>(cache.batch));
  batched_decode_attention_kernel<<<grid, kThreads, smem, stream>>>(
      q, cache, nullptr, nullptr, nullptr, n_heads, scale_of(cache.head_dim), out, nullptr);
  CUDA_CHECK(cudaGetLastError());
}

void batched_decode_attention_split(const float* q, const BatchedKvView& cache,
                                    const SplitKvWork& work, float* out, int n_heads,
                                    float* partial_o, float* partial_lse, cudaStream_t stream) {
  const size_t smem = check_batched_args("batched_decode_attention_split", q, cache, out, n_heads);
  if (!work.chunk_request || !work.chunk_begin || !work.chunk_end || !work.first_chunk) {
    throw std::invalid_argument(
        "batched_decode_attention_split: work.chunk_request, chunk_begin, chunk_end and "
        "first_chunk must be device pointers");
  }
  if (work.n_chunks < cache.batch || work.n_chunks > 65535) {
    throw std::invalid_argument("batched_decode_attention_split: work.n_chunks = " +
                                std::to_string(work.n_chunks) + " must be in [batch = " +
                                std::to_string(cache.batch) + ", 65535]");
  }
  if (!partial_o || !partial_lse || partial_o == out || partial_o == q ||
      static_cast<const float*>(partial_lse) == out || partial_lse == partial_o) {
    throw std::invalid_argument(
        "batched_decode_attention_split: partial_o, partial_lse and out must be distinct device "
        "buffers");
  }
  const dim3 grid(static_cast<unsigned>(cache.n_kv_heads), static_cast<unsigned>(work.n_chunks));
  batched_decode_attention_kernel<<<grid, kThreads, smem, stream>>>(
      q, cache, work.chunk_request, work.chunk_begin, work.chunk_end, n_heads,
      scale_of(cache.head_dim), partial_o, partial_lse);
  CUDA_CHECK(cudaGetLastError());
  merge_attention_states_batched(partial_o, partial_lse, work.first_chunk, cache.batch, out,
                                 n_heads, cache.head_dim, stream);
}

void merge_attention_states_batched(const float* o, const float* lse, const int32_t* first_chunk,
                                    int batch, float* out, int n_heads, int head_dim,
                                    cudaStream_t stream) {
  if (batch < 1 || batch > 65535 || n_heads < 1 || head_dim < 1) {
    throw std::invalid_argument(
        "merge_attention_states_batched: need batch in [1, 65535] and positive n_heads and "
        "head_dim (got " + std::to_string(batch) + ", " + std::to_string(n_heads) + " and " +
        std::to_string(head_dim) + ")");
  }
  if (!o || !lse || !first_chunk || !out) {
    throw std::invalid_argument(
        "merge_attention_states_batched: o, lse, first_chunk and out must be device pointers");
  }
  if (out == o || out == lse) {
    throw std::invalid_argument("merge_attention_states_batched: out must not alias the states");
  }
  const int threads = std::min(256, (head_dim + 31) / 32 * 32);
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(batch));
  merge_states_batched_kernel<<<grid, threads, 0, stream>>>(o, lse, first_chunk, out, n_heads,
                                                            head_dim);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
