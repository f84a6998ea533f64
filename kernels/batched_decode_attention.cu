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
/// Decode attention reads each cached K and V row once and does a few flops per byte, so the
/// kernel is written to stream memory, the way FlashInfer's decode kernel does:
///   * A K or V row of h_d floats is read by kLanes lanes of a warp (h_d/8 rounded up to a power
///     of two, from 2 to 32; a template parameter, so that the shuffles unroll), each lane two
///     16-byte float4 pieces: for each piece the lanes of a row read consecutive 16 bytes, so
///     every load instruction is fully coalesced. A warp covers 32/kLanes rows (positions) at
///     once: one for h_d = 256, two for 128, four for 64.
///   * The block's 4 warps walk the item's positions together, kUnroll row steps at a time: all
///     K and V loads of a step are issued before the first is used, so each warp keeps
///     kUnroll·32·2·16 bytes (2 KB) of K and as much of V in flight.
///   * q (times 1/sqrt(h_d)) sits in shared memory, a row per query head of the group, and each
///     lane reads its pieces of it at every step: the group's heads share each K and V load
///     (GQA). Registers go to the K and V rows in flight instead: with q in registers the kernel
///     spilled on sm_90, and a batch of 64 × 1024 positions took 0.151 ms on an H200 and
///     0.198 ms on an H100, against 0.142 and 0.195 ms now. A score is the lane's partial dot
///     product summed over the row's lanes with log2(kLanes) __shfl_xor_sync steps.
///   * Every row slot (warp, row) keeps its own online-softmax state per head: m (running max),
///     l (running sum of exp(score − m)) and acc (running weighted sum of V, the lane's pieces),
///     rescaled by exp(m_old − m_new) when the max grows. No barrier while streaming.
///   * At the end the rows of a warp merge their states with shuffles, the warps write theirs to
///     shared memory, and after a __syncthreads() the threads merge the 4 warps' states:
///     O = acc / l, LSE = m + log l. Shared memory: q's rows, heads × 8·kLanes floats, then
///     4 warps × heads × (h_d + 2) floats.
/// Positions are contiguous only within a page, so every row's slot is looked up through the
/// request's page table; h_d need not be a multiple of 4 (the pieces are then read as scalars).
/// A block serves at most 8 query heads of a group; larger groups are spread over several blocks
/// per KV head (each reads the KV head's rows).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kWarps = 4;              // warps of a block
constexpr int kThreads = kWarps * 32;  // threads of a block
constexpr int kUnroll = 2;             // row steps whose loads are in flight before the first use
constexpr int kMaxGroup = 8;           // query heads one block serves (more: several blocks)
constexpr int kPieces = 2;             // float4 pieces of a row per lane
constexpr int kMaxHeadDim = 256;       // 32 lanes of kPieces pieces
constexpr int kMergeWarps = 8;         // warps of a merge block
constexpr size_t kMaxSharedBytes = 48 * 1024;
static_assert(kUnroll >= 1 && kMaxHeadDim == 32 * 4 * kPieces, "32 lanes cover the longest row");

// Lanes that read one row of h_d floats: one per 8 floats (kPieces float4 pieces each), a power
// of two from 2 to 32. Fewer lanes per row means fewer shuffle steps per score and each shuffle
// serving several rows; two pieces per lane keep q and acc small enough in registers.
int lanes_per_row(int head_dim) {
  int lanes = 2;
  while (lanes < 32 && lanes * 4 * kPieces < head_dim) lanes *= 2;
  return lanes;
}

// The query heads one block serves: the whole group up to kMaxGroup, else an even share of it.
__host__ __device__ inline int heads_per_block(int group) {
  const int slices = (group + kMaxGroup - 1) / kMaxGroup;
  return (group + slices - 1) / slices;
}

// Floats of one head's row of q in shared memory: what the row's lanes read, zeros past h_d.
__host__ __device__ constexpr int q_row_floats(int lanes) { return lanes * 4 * kPieces; }

// q's rows, then each warp's merged state: acc, m and l.
size_t shared_floats(int heads, int head_dim) {
  return static_cast<size_t>(heads) * q_row_floats(lanes_per_row(head_dim)) +
         static_cast<size_t>(kWarps) * heads * (head_dim + 2);
}

// Four floats at p (16-byte aligned) in one 16-byte load, as a GPU's vector load. On the CPU
// backend the host compiler would split `*reinterpret_cast<const float4*>(p)` into four 4-byte
// loads once the fields are used one by one, and counting mode would report them so; a copy of
// the 16 bytes stays one access there.
[[maybe_unused]] __device__ inline float4 load_float4(const float* p) {
#ifdef __CUDASIM__
  float4 t;
  std::memcpy(&t, __builtin_assume_aligned(p, 16), sizeof t);
  return t;
#else
  return *reinterpret_cast<const float4*>(p);
#endif
}

// BEGIN SOLUTION(m5): Helpers. The slot of position p of request b: its own table row,
// page_tables[b·table_stride + p / page_size]·page_size + p % page_size. The lane's pieces of a
// row (load_float4 when h_d is a multiple of 4, else scalars; zeros past h_d), the sum over the
// lanes of a row and the warp-wide max and sum with __shfl_xor_sync, and exp(m_old − m_new)
// that is 0 for an empty state.
__device__ size_t batched_slot(const BatchedKvView& c, int b, int pos) {
  return static_cast<size_t>(c.page_tables[static_cast<size_t>(b) * c.table_stride +
                                           pos / c.page_size]) *
             c.page_size +
         pos % c.page_size;
}

// Lane `sub` of a row read by kLanes lanes holds floats 4·(sub + j·kLanes) .. + 3, j < kPieces.
// A piece past head_dim is read from the row's start instead (every lane loads, no branch that
// depends on the lane): q's pieces there are zero, so they add nothing to a score, and acc's are
// never written out.
template <int kLanes>
__device__ void load_row(const float* row, int head_dim, int sub, bool vec4,
                         float (&x)[kPieces][4]) {
#pragma unroll
  for (int j = 0; j < kPieces; ++j) {
    const int e = 4 * (sub + j * kLanes);
    if (vec4) {  // the same for the whole launch
      const float4 t = load_float4(row + (e < head_dim ? e : 0));
      x[j][0] = t.x;
      x[j][1] = t.y;
      x[j][2] = t.z;
      x[j][3] = t.w;
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) x[j][i] = row[e + i < head_dim ? e + i : 0];
    }
  }
}

// Sum over the kLanes lanes of a row (aligned groups of a power of two lanes): log2(kLanes)
// shuffle steps, unrolled.
template <int kLanes>
__device__ float row_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ float warp_sum(float v) { return row_sum<32>(v); }

// The factor that brings a state of max m_old to max m_new: 0 when the state is still empty.
__device__ float rescale(float m_old, float m_new) {
  return m_old == -INFINITY ? 0.f : __expf(m_old - m_new);
}
// END SOLUTION

// q [batch, h·h_d]. Block (x, item): x = g·slices + slice serves KV head g and `heads` query
// heads of its group, from head0 on (slices = 1 and heads = the group unless the group is larger
// than kMaxGroup); kGroup >= heads sizes the registers, kLanes = lanes_per_row(h_d). Without a
// work list (chunk_request == nullptr) the item is request blockIdx.y over positions
// 0 .. lens[b] − 1 and the block writes out[b, its heads]; with one, the item is chunk blockIdx.y
// of the plan and the block writes out[c, its heads] (the partial outputs) and out_lse[c, its
// heads].
template <int kLanes, int kGroup>
__global__ void __launch_bounds__(kThreads, kGroup <= 4 ? 4 : 2)
    batched_decode_attention_kernel(const float* q, BatchedKvView cache,
                                    const int32_t* chunk_request, const int32_t* chunk_begin,
                                    const int32_t* chunk_end, int n_heads, float scale, float* out,
                                    float* out_lse) {
  extern __shared__ __align__(16) float smem[];
  // BEGIN SOLUTION(m5): Find the item first: item = blockIdx.y; without a work list the request
  // is b = item with positions begin = 0 .. end = lens[b]; with one, b = chunk_request[item],
  // begin = chunk_begin[item], end = chunk_end[item]. Every position p in [begin, end) is read
  // through request b's own table row (batched_slot(cache, b, p)); q is request b's row,
  // q + b·h·h_d, copied times `scale` into shared memory (a row of 8·kLanes floats per head,
  // zeros past h_d) before the loop, behind a barrier. Lane `sub` of row `row` of warp `warp`
  // holds pieces 4·(sub + j·kLanes) of a row; the block's rows take positions
  // begin + warp·kRows + row, then every kWarps·kRows further. Per step: load kUnroll
  // positions' K and V rows (their slots through the table, looked up one step ahead; nothing
  // past end), then the scores (q·k summed over the row's lanes), then per head the online
  // softmax over the step (new max, rescale l and acc once, add the exp-weighted V rows). At the
  // end: merge the rows of each warp (shuffles), the warps through shared memory after q's rows
  // (one barrier, reached by every thread), and write
  // out[item, head, e] = acc / l and, with out_lse, out_lse[item, head] = m + log(l); l = 0 (no
  // position) gives O = 0 and LSE = −inf.
  const int h_d = cache.head_dim, width = cache.n_kv_heads * h_d;
  const int group = n_heads / cache.n_kv_heads;
  const int per_block = heads_per_block(group), slices = (group + per_block - 1) / per_block;
  const int g = blockIdx.x / slices;
  const int head0 = g * group + static_cast<int>(blockIdx.x % slices) * per_block;
  const int heads = per_block < (g + 1) * group - head0 ? per_block : (g + 1) * group - head0;
  const int item = blockIdx.y;
  int b = item, begin = 0, end = 0;
  if (chunk_request) {
    b = chunk_request[item];
    begin = chunk_begin[item];
    end = chunk_end[item];
  } else {
    end = cache.lens[b];
  }

  constexpr int kRows = 32 / kLanes;  // rows a warp reads at once
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = lane / kLanes, sub = lane % kLanes;
  constexpr int step = kWarps * kRows;  // positions the block reads at once
  const uintptr_t bases = reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(cache.k) |
                          reinterpret_cast<uintptr_t>(cache.v);
  const bool vec4 = h_d % 4 == 0 && bases % 16 == 0;  // every row then starts on 16 bytes
  const size_t head_offset = static_cast<size_t>(g) * h_d;

  // q (times the scale) in shared memory, one zero-padded row of kWidth floats per head: q is
  // read again every step, but a register copy would cost the registers that keep K and V loads
  // in flight. Pieces past h_d are zero there, so the K values read past a row's end add nothing.
  constexpr int kWidth = q_row_floats(kLanes);
  float* q_s = smem;  // [heads, kWidth]
  const float* q_row = q + static_cast<size_t>(b) * n_heads * h_d;
  for (int idx = threadIdx.x; idx < heads * kWidth; idx += kThreads) {
    const int j = idx / kWidth, e = idx % kWidth;
    q_s[idx] = e < h_d ? q_row[static_cast<size_t>(head0 + j) * h_d + e] * scale : 0.f;
  }
  float acc[kGroup][kPieces][4], m[kGroup], l[kGroup];
#pragma unroll
  for (int j = 0; j < kGroup; ++j) {
#pragma unroll
    for (int c = 0; c < kPieces; ++c) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][c][i] = 0.f;
    }
    m[j] = -INFINITY;
    l[j] = 0.f;
  }
  __syncthreads();

  // Where the rows of a step start (their slots through the table); each step looks up the next
  // step's while its own loads are in flight, so the table's latency is not paid before them.
  // A row past end reads the item's last position again (its score is masked below): every
  // lane loads and shuffles in every step, and no position outside [begin, end) is touched.
  size_t at[kUnroll];
  const int first_row = begin + warp * kRows + row;
  if (begin < end) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = first_row + u * step;
      at[u] = batched_slot(cache, b, p < end ? p : end - 1) * width + head_offset;
    }
  }
  // The loop runs the same number of steps in every warp of the block (a warp whose rows are
  // all past end in the last step reads and masks them): the shuffles see no divergence.
  for (int start = begin; start < end; start += kUnroll * step) {
    const int base = start + warp * kRows;
    float kr[kUnroll][kPieces][4], vr[kUnroll][kPieces][4];
    bool live[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      live[u] = base + u * step + row < end;
      load_row<kLanes>(cache.k + at[u], h_d, sub, vec4, kr[u]);
      load_row<kLanes>(cache.v + at[u], h_d, sub, vec4, vr[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = base + (kUnroll + u) * step + row;
      at[u] = batched_slot(cache, b, p < end ? p : end - 1) * width + head_offset;
    }
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      float qr[kPieces][4];  // the lane's pieces of head j (a row past `heads` repeats the last)
      const float* q_j = q_s + (j < heads ? j : heads - 1) * kWidth;
#pragma unroll
      for (int c = 0; c < kPieces; ++c) {
        const float4 t = load_float4(q_j + 4 * (sub + c * kLanes));
        qr[c][0] = t.x;
        qr[c][1] = t.y;
        qr[c][2] = t.z;
        qr[c][3] = t.w;
      }
      float s[kUnroll];
      float m_new = m[j];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float dot = 0.f;
#pragma unroll
        for (int c = 0; c < kPieces; ++c) {
#pragma unroll
          for (int i = 0; i < 4; ++i) dot += qr[c][i] * kr[u][c][i];
        }
        dot = row_sum<kLanes>(dot);
        s[u] = live[u] ? dot : -INFINITY;
        m_new = fmaxf(m_new, s[u]);
      }
      const float r = rescale(m[j], m_new);  // m_new is −inf only while no position was live
      l[j] *= r;
#pragma unroll
      for (int c = 0; c < kPieces; ++c) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[j][c][i] *= r;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float p = live[u] ? __expf(s[u] - m_new) : 0.f;
        l[j] += p;
#pragma unroll
        for (int c = 0; c < kPieces; ++c) {
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[j][c][i] += p * vr[u][c][i];
        }
      }
      m[j] = m_new;
    }
  }

  // The rows of a warp hold the same pieces of different positions: merge them pairwise.
#pragma unroll
  for (int offset = kLanes; offset < 32; offset *= 2) {
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      const float m_o = __shfl_xor_sync(0xffffffffu, m[j], offset);
      const float l_o = __shfl_xor_sync(0xffffffffu, l[j], offset);
      const float m_new = fmaxf(m[j], m_o);
      const float r = rescale(m[j], m_new), r_o = rescale(m_o, m_new);
      l[j] = l[j] * r + l_o * r_o;
#pragma unroll
      for (int c = 0; c < kPieces; ++c) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float a_o = __shfl_xor_sync(0xffffffffu, acc[j][c][i], offset);
          acc[j][c][i] = acc[j][c][i] * r + a_o * r_o;
        }
      }
      m[j] = m_new;
    }
  }

  float* acc_s = smem + heads * kWidth;       // [kWarps, heads, h_d], after q_s
  float* m_s = acc_s + kWarps * heads * h_d;  // [kWarps, heads]
  float* l_s = m_s + kWarps * heads;          // [kWarps, heads]
  if (row == 0) {
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      if (j >= heads) break;
      float* a = acc_s + static_cast<size_t>(warp * heads + j) * h_d;
#pragma unroll
      for (int c = 0; c < kPieces; ++c) {
        const int e = 4 * (sub + c * kLanes);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (e + i < h_d) a[e + i] = acc[j][c][i];
        }
      }
      if (sub == 0) {
        m_s[warp * heads + j] = m[j];
        l_s[warp * heads + j] = l[j];
      }
    }
  }
  __syncthreads();

  float* out_row = out + static_cast<size_t>(item) * n_heads * h_d;
  for (int idx = threadIdx.x; idx < heads * h_d; idx += kThreads) {
    const int j = idx / h_d, e = idx % h_d;
    float m_all = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, m_s[w * heads + j]);
    float l_all = 0.f, a = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float r = rescale(m_s[w * heads + j], m_all);
      l_all += l_s[w * heads + j] * r;
      a += acc_s[static_cast<size_t>(w * heads + j) * h_d + e] * r;
    }
    out_row[static_cast<size_t>(head0 + j) * h_d + e] = l_all > 0.f ? a / l_all : 0.f;
    if (out_lse && e == 0) {
      out_lse[static_cast<size_t>(item) * n_heads + head0 + j] =
          l_all > 0.f ? m_all + logf(l_all) : -INFINITY;
    }
  }
  // STUB: (void)q; (void)cache; (void)chunk_request; (void)chunk_begin; (void)chunk_end;
  // STUB: (void)n_heads; (void)scale; (void)out; (void)out_lse; (void)smem;
  // END SOLUTION
}

// o [n_chunks, h·h_d], lse [n_chunks, h] -> out [batch, h·h_d]. Block (head, b) merges the
// states first_chunk[b] .. first_chunk[b+1] − 1: its kMergeWarps warps share the chunks, a lane
// holds elements lane, lane + 32, ... of the head's row.
__global__ void __launch_bounds__(kMergeWarps * 32)
    merge_states_batched_kernel(const float* o, const float* lse, const int32_t* first_chunk,
                                float* out, int n_heads, int head_dim) {
  // BEGIN SOLUTION(m5): Milestone 4's merge (merge_states_kernel in decode_attention.cu) over
  // request b's own chunks only: m = the largest of their LSEs, total = Σ e^{LSE_j − m},
  // out[b, head, e] = Σ e^{LSE_j − m}·O_j[head, e] / total, chunks of weight 0 adding nothing;
  // O = 0 when every chunk is empty. Reading another request's chunks (a wrong range from
  // first_chunk) mixes two requests' attention. A request split for a long prompt has many
  // chunks: every warp finds m and total (its lanes stride over the LSEs), then warp w adds the
  // weighted O rows of chunks first + w, first + w + kMergeWarps, ... (several rows' loads in
  // flight), and the warps' sums meet in shared memory.
  __shared__ float part[kMergeWarps][kMaxHeadDim];  // each warp's weighted sum
  const int head = blockIdx.x, b = blockIdx.y;
  const int first = first_chunk[b], last = first_chunk[b + 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float m = -INFINITY;
  for (int j = first + lane; j < last; j += 32)
    m = fmaxf(m, lse[static_cast<size_t>(j) * n_heads + head]);
  m = warp_max(m);
  float total = 0.f;
  if (m != -INFINITY) {
    for (int j = first + lane; j < last; j += 32)
      total += __expf(lse[static_cast<size_t>(j) * n_heads + head] - m);
  }
  total = warp_sum(total);

  constexpr int kPerLane = kMaxHeadDim / 32;
  float acc[kPerLane] = {};
  const size_t row = static_cast<size_t>(n_heads) * head_dim;
  if (m != -INFINITY) {
#pragma unroll 4
    for (int j = first + warp; j < last; j += kMergeWarps) {
      const float w = __expf(lse[static_cast<size_t>(j) * n_heads + head] - m);
      const float* o_j = o + j * row + static_cast<size_t>(head) * head_dim;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        if (e < head_dim) {
          const float x = o_j[e];  // loaded whatever w is, so that the loads need not wait for it
          acc[i] += w > 0.f ? w * x : 0.f;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (lane + 32 * i < head_dim) part[warp][lane + 32 * i] = acc[i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
    float sum = 0.f;
    for (int w = 0; w < kMergeWarps; ++w) sum += part[w][e];
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
  if (cache.head_dim > kMaxHeadDim) {
    throw std::invalid_argument(w + ": head_dim " + std::to_string(cache.head_dim) +
                                " is larger than the " + std::to_string(kMaxHeadDim) +
                                " this kernel holds in registers");
  }
  const size_t bytes =
      shared_floats(heads_per_block(n_heads / cache.n_kv_heads), cache.head_dim) * sizeof(float);
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

// One launch over (KV head and slice of its group, item), compiled for the lanes of a row and
// with registers sized for the heads per block.
template <int kLanes, int kGroup>
void launch_attention(const float* q, const BatchedKvView& cache, const int32_t* chunk_request,
                      const int32_t* chunk_begin, const int32_t* chunk_end, int items, int n_heads,
                      float* out, float* out_lse, size_t smem, cudaStream_t stream) {
  const int group = n_heads / cache.n_kv_heads;
  const int slices = (group + heads_per_block(group) - 1) / heads_per_block(group);
  const dim3 grid(static_cast<unsigned>(cache.n_kv_heads * slices), static_cast<unsigned>(items));
  batched_decode_attention_kernel<kLanes, kGroup><<<grid, kThreads, smem, stream>>>(
      q, cache, chunk_request, chunk_begin, chunk_end, n_heads, scale_of(cache.head_dim), out,
      out_lse);
  CUDA_CHECK(cudaGetLastError());
}

template <int kLanes>
void launch_attention(const float* q, const BatchedKvView& cache, const int32_t* chunk_request,
                      const int32_t* chunk_begin, const int32_t* chunk_end, int items, int n_heads,
                      float* out, float* out_lse, size_t smem, cudaStream_t stream) {
  const int heads = heads_per_block(n_heads / cache.n_kv_heads);
  if (heads <= 1) {
    launch_attention<kLanes, 1>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                out, out_lse, smem, stream);
  } else if (heads <= 2) {
    launch_attention<kLanes, 2>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                out, out_lse, smem, stream);
  } else if (heads <= 4) {
    launch_attention<kLanes, 4>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                out, out_lse, smem, stream);
  } else {
    launch_attention<kLanes, kMaxGroup>(q, cache, chunk_request, chunk_begin, chunk_end, items,
                                        n_heads, out, out_lse, smem, stream);
  }
}

void launch_attention(const float* q, const BatchedKvView& cache, const int32_t* chunk_request,
                      const int32_t* chunk_begin, const int32_t* chunk_end, int items, int n_heads,
                      float* out, float* out_lse, size_t smem, cudaStream_t stream) {
  switch (lanes_per_row(cache.head_dim)) {
    case 2:
      return launch_attention<2>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                 out, out_lse, smem, stream);
    case 4:
      return launch_attention<4>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                 out, out_lse, smem, stream);
    case 8:
      return launch_attention<8>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                 out, out_lse, smem, stream);
    case 16:
      return launch_attention<16>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                  out, out_lse, smem, stream);
    default:
      return launch_attention<32>(q, cache, chunk_request, chunk_begin, chunk_end, items, n_heads,
                                  out, out_lse, smem, stream);
  }
}

}  // namespace

void batched_decode_attention(const float* q, const BatchedKvView& cache, float* out, int n_heads,
                              cudaStream_t stream) {
  const size_t smem = check_batched_args("batched_decode_attention", q, cache, out, n_heads);
  launch_attention(q, cache, nullptr, nullptr, nullptr, cache.batch, n_heads, out, nullptr, smem,
                   stream);
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
  launch_attention(q, cache, work.chunk_request, work.chunk_begin, work.chunk_end, work.n_chunks,
                   n_heads, partial_o, partial_lse, smem, stream);
  merge_attention_states_batched(partial_o, partial_lse, work.first_chunk, cache.batch, out,
                                 n_heads, cache.head_dim, stream);
}

void merge_attention_states_batched(const float* o, const float* lse, const int32_t* first_chunk,
                                    int batch, float* out, int n_heads, int head_dim,
                                    cudaStream_t stream) {
  if (batch < 1 || batch > 65535 || n_heads < 1 || head_dim < 1 || head_dim > kMaxHeadDim) {
    throw std::invalid_argument(
        "merge_attention_states_batched: need batch in [1, 65535], positive n_heads and head_dim "
        "in [1, " + std::to_string(kMaxHeadDim) + "] (got " + std::to_string(batch) + ", " +
        std::to_string(n_heads) + " and " + std::to_string(head_dim) + ")");
  }
  if (!o || !lse || !first_chunk || !out) {
    throw std::invalid_argument(
        "merge_attention_states_batched: o, lse, first_chunk and out must be device pointers");
  }
  if (out == o || out == lse) {
    throw std::invalid_argument("merge_attention_states_batched: out must not alias the states");
  }
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(batch));
  merge_states_batched_kernel<<<grid, kMergeWarps * 32, 0, stream>>>(o, lse, first_chunk, out,
                                                                     n_heads, head_dim);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
