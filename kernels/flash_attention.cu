/// @file flash_attention.cu
/// Milestone 5: causal grouped-query attention over a prompt in ONE kernel, without the [s, s]
/// score matrix (the FlashAttention idea, with FlashInfer's sharing of K/V tiles across a GQA
/// group).
///
/// Same inputs, output and layout as milestone 3's attention(): Q [s, h·h_d], K and V
/// [s, h_k·h_d], O [s, h·h_d], heads side by side in each row. What changes is the schedule.
///
/// Block (t, g) owns query tile t (positions t·T .. t·T + T − 1, T the tile) of the `group` =
/// h/h_k query heads that read KV head g. Its group·T query rows stay in shared memory for the
/// whole kernel. It walks the key positions in tiles of T; each K and V tile is loaded from
/// global memory once and serves all the group's query heads (GQA sharing). Per query row it
/// keeps an attention state that an online softmax updates tile by tile:
///   m = the largest score seen, l = Σ exp(score − m), acc = Σ exp(score − m)·v.
/// A tile whose scores reach a larger maximum m' multiplies both l and acc by exp(m − m') before
/// adding its own terms; at the end O = acc / l. Scores live only for the tile being processed.
///
/// Causality at tile granularity: key tile u holds positions u·T .. u·T + T − 1, so for query
/// tile t every key tile u > t is entirely in the future and is never loaded (about half of the
/// work of milestone 3's version disappears); tiles u < t are entirely visible; only the diagonal
/// tile u = t needs the element mask key ≤ query.
///
/// Register tiling. Both products of a tile are small matrix products, S = Q·Kᵀ ([rows, T] over
/// h_d) and acc += P·V ([rows, h_d] over T), and a product whose every multiply-add reads its two
/// operands from shared memory is limited by shared-memory bandwidth, not by arithmetic. So each
/// thread owns kRowsPerThread = 4 rows of the block and, within them, a few keys of S and a few
/// dims of acc: the `Lanes` threads of a row quad share those 4 rows, lane i taking keys
/// i·T/Lanes .. and dims 4i + 4·Lanes·j (j < Dims/4). One float4 of Qᵀ and the thread's keys of
/// Kᵀ feed 4·T/Lanes multiply-adds; one float4 of Pᵀ and Dims/4 float4 of V feed 4·Dims. The
/// lanes of a row quad sit in one warp, so a row's maximum and sum over the tile are warp
/// shuffles, and m, l and the rescale factor stay in registers: every lane of the quad holds
/// them for its 4 rows, exactly the rows whose acc it rescales.
///
/// Shared memory per block, in floats, with H = Lanes·Dims (h_d rounded up; the extra dims are
/// zeros): Qᵀ [H, rows] (already times 1/sqrt(h_d)), one K/V tile of (T + 4)·H (Kᵀ [H, T] with
/// rows of T + 4 floats for the scores, then V [T, H] over it) and Pᵀ [T, rows]. Transposed so
/// that a thread's 4 rows, or its keys, are consecutive floats: one vector load each. For
/// Llama-3-8B (group 4, h_d 128, T = 32: 256 threads of at most 128 registers) that is 98 KB, two
/// blocks per SM on a 228 KB SM. Where the tile of 32 would not fit the 99 KB that every GPU from
/// sm_80 on allows a block, or would need more than 512 threads (group 8 with h_d 128; h_d 256),
/// the launcher uses a tile of 16. Device memory: nothing beyond Q, K, V and O.
///
/// Against the one-element-per-thread schedule (tile 16, both operands of every multiply-add
/// from shared memory) this does about 6 times fewer shared-memory accesses per FLOP, and half
/// the barriers per key (4 per tile of 32 keys instead of 4 per tile of 16).
///
/// The end of the file holds the same attention on tensor cores, flash_attention_tensor_cores():
/// bf16 operands and fp32 sums through nvcuda::wmma, with the differences its fragments impose
/// (16 rows per warp, rows through shared memory, a lazily moved maximum) explained there; then
/// flash_attention_mma(), the same on mma.sync, whose documented register layout keeps the
/// scores, their softmax and the probabilities in registers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <mma.h>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"
#include "kernels/warp_mma.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = kFlashAttentionTile;  // query rows and key positions per tile
constexpr int kSmallTile = kTile / 2;       // when a tile of kTile does not fit
constexpr int kRowsPerThread = 4;           // rows of S and of acc that one thread owns
constexpr int kPad = 4;                     // floats of padding per row of Kᵀ (see its load)
constexpr int kMaxThreads = 512;            // at most 128 registers each: 64 K per block
constexpr int kMaxHeadDim = 256;
constexpr int kMaxPositions = 65535 * kSmallTile;  // y of the grid counts query tiles
constexpr size_t kDefaultSharedBytes = 48 * 1024;  // without opting in
constexpr size_t kMaxSharedBytes = 99 * 1024;      // opt-in limit of the smallest target (sm_86)

// How a block is cut among its threads: tile T, `lanes` threads per row quad, `dims` output
// dims per thread (lanes·dims = h_d rounded up).
struct Config {
  int tile = 0, lanes = 0, dims = 0;
  int padded_dim() const { return lanes * dims; }
  int threads(int group) const { return group * tile / kRowsPerThread * lanes; }
  size_t shared_floats(int group) const {
    const size_t rows = static_cast<size_t>(group) * tile, h = padded_dim();
    return rows * h + static_cast<size_t>(tile + kPad) * h + rows * tile;
  }
};

// Eight lanes per row quad up to h_d 128 (each thread up to 16 dims, 64 accumulators), sixteen
// beyond; tile 0 for now.
Config layout(int head_dim) {
  Config c;
  c.lanes = head_dim > 128 ? 16 : 8;
  c.dims = head_dim > 128 ? (head_dim + 63) / 64 * 4 : head_dim > 64 ? 16 : head_dim > 32 ? 8 : 4;
  return c;
}

// The tile of kTile where the block fits the limits, else the small tile; tile 0 where neither
// does (the shape is unsupported).
Config choose_config(int group, int head_dim) {
  Config c = layout(head_dim);
  if (head_dim > kMaxHeadDim) return {};
  for (int tile : {kTile, kSmallTile}) {
    c.tile = tile;
    if (c.threads(group) <= kMaxThreads &&
        c.shared_floats(group) * sizeof(float) <= kMaxSharedBytes)
      return c;
  }
  return {};
}

__device__ __forceinline__ float4 load4(const float* row, int e, int h_d, bool vec) {
  if (vec && e + 3 < h_d) return *reinterpret_cast<const float4*>(row + e);
  float4 x;
  x.x = e < h_d ? row[e] : 0.f;
  x.y = e + 1 < h_d ? row[e + 1] : 0.f;
  x.z = e + 2 < h_d ? row[e + 2] : 0.f;
  x.w = e + 3 < h_d ? row[e + 3] : 0.f;
  return x;
}

// The query tile t and KV head g of this block in a grid (h_k, ceil(s / T)), longest blocks first.
// Query tile t reads t + 1 key tiles, and a GPU starts blocks in the order of their linear index
// (x fastest). So x runs over the KV heads and y over the tiles from the last one down: no block
// starts before a longer one, and the short ones fill the gaps at the end (longest-processing-
// time-first scheduling). Taking the tiles of one head after another instead starts head 0's
// shortest tiles before head 7's longest, which then run alone at the end. In a model of the
// dispatch (132 multiprocessors, one block each, T = 32, 8 KV heads) that order takes 56% longer
// than an even share at s = 1024, 23% at s = 2048; this one is within 1% of it.
struct BlockTile {
  int t, g;
};
__device__ __forceinline__ BlockTile longest_first_tile() {
  return {static_cast<int>(gridDim.y - 1 - blockIdx.y), static_cast<int>(blockIdx.x)};
}

// Grid (h_k, ceil(s / Tile)), Config::threads() threads, Config::shared_floats() of dynamic
// shared memory. `vec`: h_d is a multiple of 4 and q, k, v, out are 16-byte aligned, so rows can
// be read and written as float4.
template <int Tile, int Lanes, int Dims>
__global__ void __launch_bounds__(kMaxThreads)
    flash_attention_kernel(const float* q, const float* k, const float* v, float* out, int s,
                           int n_heads, int n_kv_heads, int head_dim, float scale, bool vec) {
  extern __shared__ __align__(16) float smem[];
  // BEGIN SOLUTION(m5): Block (t, g), from longest_first_tile(): query positions q0 = t·Tile ..
  // q0 + Tile − 1 of the group = n_heads / n_kv_heads query heads g·group + j (j < group), all
  // reading KV head g.
  // Row `row` = j·Tile + r of the block is query head g·group + j at position q0 + r. Thread
  // tid owns rows 4·(tid / Lanes) .. + 3 (one head, 4 consecutive positions) and is lane
  // i = tid % Lanes of that row quad: it computes keys i·K .. i·K + K − 1 (K = Tile / Lanes)
  // of the scores and dims 4i + 4·Lanes·j of acc. Carve smem into Qᵀ [H, rows] (H = Lanes·Dims,
  // Q times `scale`, 0 for positions ≥ s and dims ≥ h_d), a tile of (Tile + kPad)·H floats and
  // Pᵀ [Tile, rows]; keep m (−inf), l (0) and acc (0) for the thread's 4 rows in registers.
  // Then for each key tile u = 0 .. t — never the tiles after t, they are all in the future:
  //   1. load the K tile transposed, Kᵀ[e, c] (rows Tile + kPad floats apart, 0 beyond s and
  //      h_d); __syncthreads();
  //   2. the thread's 4×K scores, a sum over e of Qᵀ[e, its rows] × Kᵀ[e, its keys] (one
  //      float4 and K floats per step); on the diagonal tile u = t only, −inf where the key
  //      u·Tile + c is after the query; __syncthreads() (everyone is done with K);
  //   3. load V [c, e] over the tile, and meanwhile the online softmax per row: the row maximum
  //      over the quad's lanes (shuffles), m_new = max(m, that); rescale = exp(m − m_new);
  //      p = exp(score − m_new); l = l·rescale + Σ p (again over the lanes); acc ·= rescale (both
  //      l AND acc must be rescaled when the maximum grows); m = m_new; write p into Pᵀ (the
  //      row quads swizzled against bank conflicts); __syncthreads(). Key 0 is visible to every
  //      row, so m is finite after tile 0;
  //   4. acc += Σ_c Pᵀ[c, its rows] × V[c, its dims]; __syncthreads() before the next K tile
  //      overwrites the tile.
  // Finally out[q0 + r, (g·group + j)·h_d + e] = acc / l for the positions < s and dims < h_d.
  constexpr int kKeys = Tile / Lanes;  // score columns per thread
  constexpr int kR = kRowsPerThread;
  constexpr int H = Lanes * Dims;  // h_d rounded up
  constexpr int kKStride = Tile + kPad;
  const int h_d = head_dim, group = n_heads / n_kv_heads, rows = group * Tile;
  const auto [t, g] = longest_first_tile();
  const int q0 = t * Tile;
  const size_t q_width = static_cast<size_t>(n_heads) * h_d;
  const size_t kv_width = static_cast<size_t>(n_kv_heads) * h_d;

  float* q_s = smem;                 // Qᵀ [H, rows]
  float* tile = q_s + H * rows;      // Kᵀ [H, Tile + kPad], then V [Tile, H]
  float* p_s = tile + H * kKStride;  // Pᵀ [Tile, rows], row quads swizzled

  const int tid = threadIdx.x, threads = blockDim.x;
  const int lane = tid % Lanes, quad = tid / Lanes, row0 = quad * kR;  // its first row
  // Pᵀ's row quads are swizzled by up to 8 (4 where rows / 4 is not a multiple of 8).
  const int swizzle = (rows / kR) % 8 == 0 ? 7 : 3;
  const int r0 = row0 % Tile;     // its position in the query tile
  const int key0 = lane * kKeys;  // its first key in a tile

  // Two lanes per row read its first 32 bytes, the next two lanes the next row...: whole sectors.
  for (int idx = tid; idx < rows * (H / 4); idx += threads) {
    const int row = idx / 2 % rows, e = (idx % 2 + idx / (2 * rows) * 2) * 4;
    const int p = q0 + row % Tile, head = g * group + row / Tile;
    const float4 x = p < s ? load4(q + p * q_width + static_cast<size_t>(head) * h_d, e, h_d, vec)
                           : make_float4(0.f, 0.f, 0.f, 0.f);
    q_s[(e + 0) * rows + row] = x.x * scale;
    q_s[(e + 1) * rows + row] = x.y * scale;
    q_s[(e + 2) * rows + row] = x.z * scale;
    q_s[(e + 3) * rows + row] = x.w * scale;
  }
  float m[kR], l[kR], acc[kR][Dims];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int d = 0; d < Dims; ++d) acc[r][d] = 0.f;
  }

  for (int u = 0; u <= t; ++u) {
    const int k0 = u * Tile;
    // Read as Q above; the rows of Kᵀ are kKStride = Tile + 4 floats apart, so that the two
    // lanes of a key (4 dims apart) write to banks 16 apart: no bank conflicts.
    for (int idx = tid; idx < Tile * (H / 4); idx += threads) {
      const int c = idx / 2 % Tile, e = (idx % 2 + idx / (2 * Tile) * 2) * 4;
      const float4 x = k0 + c < s ? load4(k + (k0 + c) * kv_width + static_cast<size_t>(g) * h_d,
                                          e, h_d, vec)
                                  : make_float4(0.f, 0.f, 0.f, 0.f);
      tile[(e + 0) * kKStride + c] = x.x;
      tile[(e + 1) * kKStride + c] = x.y;
      tile[(e + 2) * kKStride + c] = x.z;
      tile[(e + 3) * kKStride + c] = x.w;
    }
    __syncthreads();

    float score[kR][kKeys];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
#pragma unroll
      for (int c = 0; c < kKeys; ++c) score[r][c] = 0.f;
    }
#pragma unroll 4
    for (int e = 0; e < H; ++e) {
      const float4 qv = *reinterpret_cast<const float4*>(q_s + e * rows + row0);
      const float qr[kR] = {qv.x, qv.y, qv.z, qv.w};
      float kr[kKeys];
      const float* kp = tile + e * kKStride + key0;
      if constexpr (kKeys % 4 == 0) {
#pragma unroll
        for (int c = 0; c < kKeys; c += 4) {
          const float4 x = *reinterpret_cast<const float4*>(kp + c);
          kr[c] = x.x;
          kr[c + 1] = x.y;
          kr[c + 2] = x.z;
          kr[c + 3] = x.w;
        }
      } else if constexpr (kKeys == 2) {
        const float2 x = *reinterpret_cast<const float2*>(kp);
        kr[0] = x.x;
        kr[1] = x.y;
      } else {
#pragma unroll
        for (int c = 0; c < kKeys; ++c) kr[c] = kp[c];
      }
#pragma unroll
      for (int r = 0; r < kR; ++r) {
#pragma unroll
        for (int c = 0; c < kKeys; ++c) score[r][c] += qr[r] * kr[c];
      }
    }
    if (u == t) {  // the diagonal tile: only keys up to the query
#pragma unroll
      for (int r = 0; r < kR; ++r) {
#pragma unroll
        for (int c = 0; c < kKeys; ++c) {
          if (key0 + c > r0 + r) score[r][c] = -INFINITY;
        }
      }
    }
    __syncthreads();

    for (int idx = tid; idx < Tile * (H / 4); idx += threads) {
      const int c = idx / (H / 4), e = idx % (H / 4) * 4;
      const float4 x = k0 + c < s ? load4(v + (k0 + c) * kv_width + static_cast<size_t>(g) * h_d,
                                          e, h_d, vec)
                                  : make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<float4*>(tile + c * H + e) = x;
    }

    float rescale[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      float tile_max = score[r][0];
#pragma unroll
      for (int c = 1; c < kKeys; ++c) tile_max = fmaxf(tile_max, score[r][c]);
#pragma unroll
      for (int off = Lanes / 2; off > 0; off /= 2)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float m_new = fmaxf(m[r], tile_max);
      rescale[r] = __expf(m[r] - m_new);  // 0 on the first tile (m = −inf)
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < kKeys; ++c) {
        score[r][c] = __expf(score[r][c] - m_new);  // masked scores give exactly 0
        sum += score[r][c];
      }
#pragma unroll
      for (int off = Lanes / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[r] = l[r] * rescale[r] + sum;
      m[r] = m_new;
    }
#pragma unroll
    for (int r = 0; r < kR; ++r) {
#pragma unroll
      for (int d = 0; d < Dims; ++d) acc[r][d] *= rescale[r];
    }
    // Pᵀ, one float4 (the 4 rows) per key. The 8 lanes of a quarter warp write keys whose rows of
    // Pᵀ start in the same bank; swizzling the row quad by the key's lane spreads them over all
    // 32 banks (the readers undo it).
#pragma unroll
    for (int c = 0; c < kKeys; ++c) {
      *reinterpret_cast<float4*>(p_s + (key0 + c) * rows + ((quad ^ (lane & swizzle)) * kR)) =
          make_float4(score[0][c], score[1][c], score[2][c], score[3][c]);
    }
    __syncthreads();

#pragma unroll 2
    for (int c = 0; c < Tile; ++c) {
      const int sq = quad ^ ((c / kKeys) & swizzle);
      const float4 pv = *reinterpret_cast<const float4*>(p_s + c * rows + sq * kR);
      const float pr[kR] = {pv.x, pv.y, pv.z, pv.w};
      const float* vr = tile + c * H + 4 * lane;
#pragma unroll
      for (int j = 0; j < Dims / 4; ++j) {
        const float4 x = *reinterpret_cast<const float4*>(vr + 4 * j * Lanes);
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          acc[r][4 * j] += pr[r] * x.x;
          acc[r][4 * j + 1] += pr[r] * x.y;
          acc[r][4 * j + 2] += pr[r] * x.z;
          acc[r][4 * j + 3] += pr[r] * x.w;
        }
      }
    }
    __syncthreads();
  }

  const int head = g * group + row0 / Tile;
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int p = q0 + r0 + r;
    if (p >= s) continue;
    const float inv = 1.f / l[r];
    float* o = out + p * q_width + static_cast<size_t>(head) * h_d;
#pragma unroll
    for (int j = 0; j < Dims / 4; ++j) {
      const int e = 4 * (lane + j * Lanes);
      const float4 x = make_float4(acc[r][4 * j] * inv, acc[r][4 * j + 1] * inv,
                                   acc[r][4 * j + 2] * inv, acc[r][4 * j + 3] * inv);
      if (vec && e + 3 < h_d) {
        *reinterpret_cast<float4*>(o + e) = x;
      } else {
        if (e < h_d) o[e] = x.x;
        if (e + 1 < h_d) o[e + 1] = x.y;
        if (e + 2 < h_d) o[e + 2] = x.z;
        if (e + 3 < h_d) o[e + 3] = x.w;
      }
    }
  }
  // STUB: (void)q; (void)k; (void)v; (void)out; (void)s; (void)n_heads; (void)n_kv_heads;
  // STUB: (void)head_dim; (void)scale; (void)vec; (void)smem; (void)load4;
  // END SOLUTION
}

template <int Tile, int Lanes, int Dims>
void launch(const Config& c, const float* q, const float* k, const float* v, float* out, int s,
            int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
  const int group = n_heads / n_kv_heads;
  const size_t bytes = c.shared_floats(group) * sizeof(float);
  // BEGIN SOLUTION(m5): Grid (n_kv_heads, ceil(s / Tile)), c.threads(group) threads, `bytes`
  // of dynamic shared memory; beyond 48 KB a kernel must opt in first with
  // cudaFuncSetAttribute(flash_attention_kernel<...>, cudaFuncAttributeMaxDynamicSharedMemorySize,
  // bytes). The scale is 1/sqrt(h_d), computed in double and rounded once. Rows may be read as
  // float4 when h_d is a multiple of 4 and every pointer is 16-byte aligned.
  if (bytes > kDefaultSharedBytes) {
    CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<Tile, Lanes, Dims>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)));
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const auto aligned = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool vec = head_dim % 4 == 0 && aligned(q) && aligned(k) && aligned(v) && aligned(out);
  const dim3 grid(static_cast<unsigned>(n_kv_heads), static_cast<unsigned>((s + Tile - 1) / Tile));
  flash_attention_kernel<Tile, Lanes, Dims><<<grid, c.threads(group), bytes, stream>>>(
      q, k, v, out, s, n_heads, n_kv_heads, head_dim, scale, vec);
  CUDA_CHECK(cudaGetLastError());
  // STUB: // Placeholder output (zeros), so that the model runs on and its tests fail cleanly.
  // STUB: CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(s) * n_heads * head_dim *
  // STUB:                                        sizeof(float), stream));
  // STUB: (void)q; (void)k; (void)v; (void)bytes; (void)kDefaultSharedBytes;
  // STUB: (void)flash_attention_kernel<Tile, Lanes, Dims>;
  // END SOLUTION
}

// ---- the tensor-core version: flash_attention_tensor_cores() -----------------------------------
//
// The same schedule with both products on tensor cores (nvcuda::wmma, 16×16×16 tiles of bf16
// with fp32 accumulation). A warp owns 16 query rows of one head; a block owns kTcWarps such row
// groups, the query tile's positions for all `group` heads of one KV head, and walks K/V tiles
// of kTcKeys keys, converted to bf16 as they are loaded into shared memory.
//
// A fragment's elements sit in lanes in an order CUDA does not specify, so whatever works per
// row goes through shared memory: S = Q·Kᵀ is stored there for the online softmax, which writes
// P there in bf16 for P·V. The output accumulators stay in registers; rescaling them also needs
// shared memory, so a row's running maximum moves lazily: only when a score exceeds it by more
// than kTcLazyRescale (natural-log units). Until then the row's terms are exp(score − m) ≤
// e^kTcLazyRescale ≈ 3000, harmless in bf16 and fp32, and O / l is the same whichever m both
// were computed against: the result does not depend on when the rescales happen.
//
// K and V travel one tile ahead in registers: the loads of tile u + 1 are issued before the warps
// compute on tile u and stored to shared memory after it, so their latency hides behind the
// products. That takes registers (Q's fragments, O's accumulators and the next tile's pieces:
// about 230 per thread for h_d = 128), so a multiprocessor holds one block. Measured on an H200,
// Llama-3-8B's heads at s = 4096: 2.41 ms loading each tile when it is needed (64-key tiles, one
// block per multiprocessor), 1.80 ms the same with 32-key tiles and two blocks per
// multiprocessor at 128 registers each, 1.56 ms with the prefetch.
constexpr int kTcRows = 16;           // wmma's M: query rows per warp
constexpr int kTcKeys = 32;           // key positions per tile of flash_attention_tc_kernel
constexpr int kMmaKeys = 64;          // and of flash_attention_mma_kernel (see there)
constexpr int kTcWarps = 8;           // row groups per block, at most
constexpr int kTcMaxHeadDim = 128;    // Q's fragments and O's accumulators live in registers
constexpr int kTcPad = 8;             // bf16 of padding per shared row: 16 bytes, off the banks' period
constexpr int kTcScorePitch = kTcKeys + 4;  // floats per row of a warp's S (a multiple of 4)
constexpr int kTcProbPitch = kTcKeys + kTcPad;  // bf16 per row of a warp's P (a multiple of 8)
// [[maybe_unused]] here and below: a build for sm_75 compiles the tensor-core kernels to nothing.
[[maybe_unused]] constexpr float kTcLazyRescale = 8.f;

// Query positions per block: all 8 row groups filled where the group allows (16·8/group
// positions), else one row group of 16 positions per head.
int tc_tile(int group) { return kTcRows * std::max(1, kTcWarps / group); }

// Warps per block: 16 rows of one head each, over the tile's positions of every head of the group.
int tc_warps(int group) { return group * tc_tile(group) / kTcRows; }

// Bytes at the start of both tensor-core kernels' shared memory: Q (bf16, [warps·16, h_d + pad])
// at first, then K and V (bf16, [keys, h_d + pad] each) over it. All that flash_attention_mma()
// needs.
__host__ __device__ constexpr size_t staging_bytes(int warps, int head_dim, int keys) {
  return static_cast<size_t>(warps * kTcRows > 2 * keys ? warps * kTcRows : 2 * keys) *
         (head_dim + kTcPad) * 2;
}

// Shared memory of one flash_attention_tensor_cores() block, in bytes: the staging bytes, then
// per warp its S (fp32) and P (bf16).
size_t tc_shared_bytes(int group, int head_dim) {
  const int warps = tc_warps(group);
  return staging_bytes(warps, head_dim, kTcKeys) +
         static_cast<size_t>(warps) * (kTcRows * kTcScorePitch * 4 + kTcRows * kTcProbPitch * 2);
}

// Shared memory of one flash_attention_mma_kernel() block, in bytes: the staging bytes alone.
size_t mma_shared_bytes(int group, int head_dim) {
  return staging_bytes(tc_warps(group), head_dim, kMmaKeys);
}

// Four floats as bf16 in shared memory, in one 8-byte store. A warp's lanes write 256 bytes side
// by side: 2 wavefronts, the fewest for 256 bytes. Two 4-byte stores 8 bytes apart would cost 2
// wavefronts each (lanes i and i + 16 share a bank), so twice the time on the same bytes.
__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* dst, float4 x) {
  *reinterpret_cast<uint2*>(dst) =
      make_uint2(warp_mma::pack_bf16x2(x.x, x.y), warp_mma::pack_bf16x2(x.z, x.w));
}

// Four floats of a row (zeros beyond h_d or where the row does not exist) as bf16 in shared memory.
[[maybe_unused]] __device__ __forceinline__ void store4_bf16(__nv_bfloat16* dst, const float* row,
                                                             int e, int h_d, bool vec,
                                                             bool exists) {
  store_bf16x4(dst, exists ? load4(row, e, h_d, vec) : make_float4(0.f, 0.f, 0.f, 0.f));
}

// Pieces (4 floats) of a K or V tile of `Keys` keys, and how many each thread of a full block
// (kTcWarps warps) holds: thread i takes pieces i, i + blockDim, ... A block of fewer warps (a
// group that does not divide 8) loads the pieces beyond kFetch·blockDim when it stores the tile.
template <int D, int Keys>
constexpr int kTcTilePieces = (D / 4) * Keys;
template <int D, int Keys>
constexpr int kTcFetch = (kTcTilePieces<D, Keys> + kTcWarps * 32 - 1) / (kTcWarps * 32);

// This thread's pieces of the K and V tile of keys k0 .. k0 + Keys − 1 into registers (zeros
// beyond s). The loads are only issued here: nothing waits for them until the tile is stored.
template <int D, int Keys>
__device__ __forceinline__ void fetch_kv_tile(const float* k, const float* v, int k0, int s,
                                              size_t kv_width, size_t head_offset, bool vec,
                                              float4 (&k_next)[kTcFetch<D, Keys>],
                                              float4 (&v_next)[kTcFetch<D, Keys>]) {
#pragma unroll
  for (int i = 0; i < kTcFetch<D, Keys>; ++i) {
    const int idx = static_cast<int>(threadIdx.x + i * blockDim.x);
    const int c = idx / (D / 4), e = idx % (D / 4) * 4;
    const bool exists = idx < kTcTilePieces<D, Keys> && k0 + c < s;
    const size_t at = static_cast<size_t>(k0 + c) * kv_width + head_offset;
    k_next[i] = exists ? load4(k + at, e, D, vec) : make_float4(0.f, 0.f, 0.f, 0.f);
    v_next[i] = exists ? load4(v + at, e, D, vec) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// The block's query rows as bf16 [warps·16, D + kTcPad] in shared memory: row 16w + r is query
// head g·group + w / per_head at position q0 + 16·(w % per_head) + r (zeros beyond s).
template <int D>
__device__ __forceinline__ void store_q_rows(__nv_bfloat16* q_s, const float* q, int q0,
                                             int per_head, int g, int group, int s, size_t q_width,
                                             bool vec) {
  constexpr int P = D + kTcPad;
  const int warps = static_cast<int>(blockDim.x) / 32;
  for (int idx = threadIdx.x; idx < warps * kTcRows * (D / 4); idx += blockDim.x) {
    const int r = idx / (D / 4), e = idx % (D / 4) * 4;
    const int w = r / kTcRows, at = q0 + kTcRows * (w % per_head) + r % kTcRows;
    const int h = g * group + w / per_head;
    store4_bf16(q_s + r * P + e, q + at * q_width + static_cast<size_t>(h) * D, e, D, vec, at < s);
  }
}

// K and V of keys k0 .. k0 + Keys − 1 as bf16 [key, D + kTcPad] in shared memory: this
// thread's pieces fetched by fetch_kv_tile(), then, in a block of fewer than kTcWarps warps, the
// pieces beyond them, loaded now.
template <int D, int Keys>
__device__ __forceinline__ void store_kv_tile(__nv_bfloat16* k_s, __nv_bfloat16* v_s,
                                              const float4 (&k_next)[kTcFetch<D, Keys>],
                                              const float4 (&v_next)[kTcFetch<D, Keys>],
                                              const float* k, const float* v, int k0, int s,
                                              size_t kv_width, size_t head_offset, bool vec) {
  constexpr int P = D + kTcPad;
#pragma unroll
  for (int i = 0; i < kTcFetch<D, Keys>; ++i) {
    const int idx = static_cast<int>(threadIdx.x + i * blockDim.x);
    if (idx < kTcTilePieces<D, Keys>) {
      const int c = idx / (D / 4), e = idx % (D / 4) * 4;
      store_bf16x4(k_s + c * P + e, k_next[i]);
      store_bf16x4(v_s + c * P + e, v_next[i]);
    }
  }
  for (int idx = threadIdx.x + kTcFetch<D, Keys> * blockDim.x; idx < kTcTilePieces<D, Keys>;
       idx += blockDim.x) {
    const int c = idx / (D / 4), e = idx % (D / 4) * 4;
    const size_t at = static_cast<size_t>(k0 + c) * kv_width + head_offset;
    store4_bf16(k_s + c * P + e, k + at, e, D, vec, k0 + c < s);
    store4_bf16(v_s + c * P + e, v + at, e, D, vec, k0 + c < s);
  }
}

// Grid (h_k, ceil(s / tc_tile(group))), 32·group·tc_tile(group)/16 threads, tc_shared_bytes() of
// dynamic shared memory. D = h_d, a multiple of 16 up to kTcMaxHeadDim.
template <int D>
__global__ void __launch_bounds__(kTcWarps * 32, 1)
    flash_attention_tc_kernel(const float* q, const float* k, const float* v, float* out, int s,
                              int n_heads, int n_kv_heads, float scale, bool vec) {
  extern __shared__ __align__(32) unsigned char tc_smem[];
  // BEGIN SOLUTION(m5): Block (t, g) comes from longest_first_tile(). Its warp w owns rows
  // 16·(w % (T/16)) .. + 15 of query tile t (T = tc_tile(group) positions from q0 = t·T) of
  // query head g·group + w / (T/16). Load the block's Q rows into shared memory as bf16 (zeros
  // beyond s), then each warp's Q into D/16 matrix_a fragments, kept for the whole kernel, and
  // zero D/16 float accumulators for O. Lane i then serves row i / 2 of its warp, columns
  // 16·(i % 2) .. + 15 of each score tile, and keeps that row's running m (−inf) and l (0). For
  // each key tile u (keys k0 = 32u .. k0 + 31) up to the block's last position:
  //   1. store K and V as bf16 [key, dim] (zeros beyond s); __syncthreads(); then start the
  //      loads of the next tile into registers (fetch_kv_tile), so that they are in flight
  //      while the warps compute on this one; the first tile is fetched before the loop;
  //   2. a warp all of whose rows come before k0 has nothing to do in this tile; otherwise
  //      S = Q·Kᵀ (Kᵀ is K read col_major), stored to the warp's S; __syncwarp();
  //   3. the lane's 16 scores times `scale`, −inf for keys after its row's position or ≥ s;
  //      the row's tile maximum (one shuffle with the partner lane); the new m is that maximum
  //      when it exceeds m by more than kTcLazyRescale (or m is −inf), else m stays; p =
  //      exp(score − m) rounded to bf16 into the warp's P, l = l·exp(m_old − m) + Σ p (the
  //      rounded p, over both lanes); __syncwarp();
  //   4. if any row of the warp moved its m, rescale O's rows by exp(m_old − m): store the
  //      accumulators to the warp's S (kTcKeys columns at a time), multiply, load them back;
  //   5. O += P·V (P matrix_a row_major, V matrix_b row_major); __syncthreads() before the next
  //      tile overwrites K and V.
  // Finally store O through the warp's S and write out[pos, head·D + e] = O / l for pos < s.
  namespace wmma = nvcuda::wmma;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // bf16 fragments need compute capability 8.0
  constexpr int P = D + kTcPad;  // bf16 per row of Q, K and V
  constexpr int kFrags = D / 16;
  const int group = n_heads / n_kv_heads;
  const int T = static_cast<int>(blockDim.x) / 32 * kTcRows / group;  // query positions per block
  const auto [t, g] = longest_first_tile();
  const int q0 = t * T;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_head = T / kTcRows;
  const int head = g * group + warp / per_head, p0 = q0 + kTcRows * (warp % per_head);
  const int row = lane / 2, half = lane % 2, pos = p0 + row;
  const size_t q_width = static_cast<size_t>(n_heads) * D, kv_width = static_cast<size_t>(n_kv_heads) * D;

  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(tc_smem);
  __nv_bfloat16* k_s = q_s;  // K and V replace Q once its fragments are loaded
  __nv_bfloat16* v_s = k_s + kTcKeys * P;
  const size_t q_or_kv = staging_bytes(warps, D, kTcKeys);
  float* s_w = reinterpret_cast<float*>(tc_smem + q_or_kv) + warp * kTcRows * kTcScorePitch;
  __nv_bfloat16* p_w = reinterpret_cast<__nv_bfloat16*>(tc_smem + q_or_kv + warps * kTcRows * kTcScorePitch * 4) +
                       warp * kTcRows * kTcProbPitch;

  store_q_rows<D>(q_s, q, q0, per_head, g, group, s, q_width, vec);
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> q_f[kFrags];
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_f[kFrags];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) {
    wmma::load_matrix_sync(q_f[f], q_s + warp * kTcRows * P + 16 * f, P);
    wmma::fill_fragment(o_f[f], 0.f);
  }
  __syncthreads();  // Q's shared rows are K and V's from here on

  float m = -INFINITY, l = 0.f;
  const int last = min(q0 + T, s) - 1;  // the block's last real position
  // K and V travel one tile ahead in registers: tile u + 1's loads are in flight while the warps
  // compute on tile u, so a tile's load latency is not paid between tiles.
  const size_t head_offset = static_cast<size_t>(g) * D;
  float4 k_next[kTcFetch<D, kTcKeys>], v_next[kTcFetch<D, kTcKeys>];
  fetch_kv_tile<D, kTcKeys>(k, v, 0, s, kv_width, head_offset, vec, k_next, v_next);
  for (int k0 = 0; k0 <= last; k0 += kTcKeys) {
    store_kv_tile<D, kTcKeys>(k_s, v_s, k_next, v_next, k, v, k0, s, kv_width, head_offset, vec);
    __syncthreads();
    if (k0 + kTcKeys <= last)
      fetch_kv_tile<D, kTcKeys>(k, v, k0 + kTcKeys, s, kv_width, head_offset, vec, k_next, v_next);
    if (p0 <= last && k0 <= p0 + kTcRows - 1) {  // warp-uniform: some real row of the warp sees key k0
#pragma unroll
      for (int n = 0; n < kTcKeys / 16; ++n) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_f;
        wmma::fill_fragment(s_f, 0.f);
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> k_f;
          wmma::load_matrix_sync(k_f, k_s + 16 * n * P + 16 * f, P);
          wmma::mma_sync(s_f, q_f[f], k_f, s_f);
        }
        wmma::store_matrix_sync(s_w + 16 * n, s_f, kTcScorePitch, wmma::mem_row_major);
      }
      __syncwarp();

      constexpr int kCols = kTcKeys / 2;
      float x[kCols];
      float tile_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < kCols; c += 4) {
        const float4 raw = *reinterpret_cast<const float4*>(s_w + row * kTcScorePitch + half * kCols + c);
        const float r4[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = k0 + half * kCols + c + i;
          x[c + i] = key <= pos && key < s ? r4[i] * scale : -INFINITY;
          tile_max = fmaxf(tile_max, x[c + i]);
        }
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      const float m_old = m;
      if (tile_max > m + kTcLazyRescale || (m == -INFINITY && tile_max > -INFINITY)) m = tile_max;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < kCols; c += 2) {
        const __nv_bfloat162 p = m == -INFINITY ? __floats2bfloat162_rn(0.f, 0.f)
                                                : __floats2bfloat162_rn(__expf(x[c] - m), __expf(x[c + 1] - m));
        *reinterpret_cast<__nv_bfloat162*>(p_w + row * kTcProbPitch + half * kCols + c) = p;
        sum += __low2float(p) + __high2float(p);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      // O and l are zero while m is −inf: nothing to rescale then.
      const bool moved = m != m_old && m_old != -INFINITY;
      const float rescale = moved ? __expf(m_old - m) : 1.f;
      l = l * rescale + sum;
      __syncwarp();
      if (__any_sync(0xffffffffu, moved)) {
        // kTcKeys columns of O at a time through the warp's S: row `row`, half the columns per lane.
        for (int f0 = 0; f0 < kFrags; f0 += kTcKeys / 16) {
          const int nf = min(kTcKeys / 16, kFrags - f0), cols = 16 * nf;
          for (int f = 0; f < nf; ++f) {
            wmma::store_matrix_sync(s_w + 16 * f, o_f[f0 + f], kTcScorePitch, wmma::mem_row_major);
          }
          __syncwarp();
          for (int c = half * cols / 2; c < (half + 1) * cols / 2; ++c) s_w[row * kTcScorePitch + c] *= rescale;
          __syncwarp();
          for (int f = 0; f < nf; ++f) {
            wmma::load_matrix_sync(o_f[f0 + f], s_w + 16 * f, kTcScorePitch, wmma::mem_row_major);
          }
          __syncwarp();
        }
      }
#pragma unroll
      for (int kk = 0; kk < kTcKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> p_f;
        wmma::load_matrix_sync(p_f, p_w + 16 * kk, kTcProbPitch);
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> v_f;
          wmma::load_matrix_sync(v_f, v_s + 16 * kk * P + 16 * f, P);
          wmma::mma_sync(o_f[f], p_f, v_f, o_f[f]);
        }
      }
    }
    __syncthreads();
  }

  const float inv = 1.f / l;
  for (int f0 = 0; f0 < kFrags; f0 += kTcKeys / 16) {
    const int nf = min(kTcKeys / 16, kFrags - f0), cols = 16 * nf;
    for (int f = 0; f < nf; ++f) {
      wmma::store_matrix_sync(s_w + 16 * f, o_f[f0 + f], kTcScorePitch, wmma::mem_row_major);
    }
    __syncwarp();
    if (pos < s) {
      float* o = out + pos * q_width + static_cast<size_t>(head) * D + 16 * f0;
      for (int c = half * cols / 2; c < (half + 1) * cols / 2; ++c) o[c] = s_w[row * kTcScorePitch + c] * inv;
    }
    __syncwarp();
  }
#endif
  // STUB: (void)q; (void)k; (void)v; (void)out; (void)s; (void)n_heads; (void)n_kv_heads;
  // STUB: (void)scale; (void)vec; (void)tc_smem; (void)store4_bf16; (void)kTcLazyRescale;
  // STUB: (void)fetch_kv_tile<D, kTcKeys>; (void)store_q_rows<D>; (void)store_kv_tile<D, kTcKeys>;
  // END SOLUTION
}

// ---- the same on mma.sync: flash_attention_mma() -----------------------------------------------
//
// flash_attention_tensor_cores()'s blocks, rows and prefetch, with its products issued as PTX's
// mma.sync m16n8k16 and its operands loaded with ldmatrix (kernels/warp_mma.h), as
// FlashAttention-2 does. Their register layouts are documented: lane (r, c) = (lane / 4,
// lane % 4) holds rows r and r + 8 of an accumulator, columns 2c and 2c + 1 of each 8. So a warp's
// 16 × kMmaKeys scores stay in registers, kMmaKeys / 8 accumulators; a row's maximum is two
// shuffles among the four lanes that hold it; the output accumulators are rescaled in registers
// at every tile (the maximum moves exactly, not lazily); and the probabilities, rounded to bf16
// in pairs, are already in the order of the A operand of P·V. Nothing but Q, K and V goes through
// shared memory: no per-warp S and P (34 KB per block for Llama-3-8B instead of 86 KB), and no
// stores and loads of them between the two products.
//
// Key tiles are 64 keys here, not 32: half the barriers and rescales per key, twice the
// independent products between them. That takes 251 registers per thread for h_d = 128 on sm_90
// (no spills; sm_80–89 spill 12 bytes), still one block per multiprocessor. Llama-3-8B's heads
// at s = 4096: 0.833 ms with 32-key tiles, 0.762 ms (180 TFLOP/s) with 64 on an H100; 0.827 and
// 0.758 ms on an H200.
template <int D>
__global__ void __launch_bounds__(kTcWarps * 32, 1)
    flash_attention_mma_kernel(const float* q, const float* k, const float* v, float* out, int s,
                               int n_heads, int n_kv_heads, float scale, bool vec) {
  extern __shared__ __align__(16) unsigned char mma_smem[];
  // BEGIN SOLUTION(m5): Blocks, warps, rows and key tiles as in flash_attention_tc_kernel; lane
  // (r, c) = (lane / 4, lane % 4) of warp w holds, in every accumulator, rows r and r + 8 of the
  // warp's 16 (positions p0 + r, p0 + r + 8) and columns 2c, 2c + 1. Store the block's Q rows as
  // bf16 (store_q_rows), ldmatrix each warp's 16 rows into D/16 A operands (kept for the whole
  // kernel), zero D/8 output accumulators, and keep per row m (−inf) and this lane's part of l
  // (0). For each key tile (keys k0 .. k0 + 63) up to the block's last position:
  //   1. store_kv_tile, __syncthreads(), fetch_kv_tile of the next tile (as the wmma version);
  //   2. a warp all of whose rows come before k0 skips the tile; otherwise S = Q·Kᵀ: eight
  //      accumulators of 8 keys, B operands by ldmatrix from K's rows (K stored [key][dim] is B
  //      stored [n][k]);
  //   3. per element, score·scale, or −inf for a key after the row's position or ≥ s; the row's
  //      tile maximum over the lane's 8 values and the 3 other lanes of the row (shuffles xor 1,
  //      2); m_new = max(m, that); rescale = exp(m − m_new) multiplies l AND the row's output
  //      accumulators; p = exp(score − m_new) rounded to bf16 in pairs (pack_bf16x2), which are
  //      the A operands of P·V (accumulators 2j and 2j + 1 give the k-step j); l adds the
  //      rounded p;
  //   4. O += P·V, B operands by ldmatrix_trans from V's rows (V stored [key][dim] is B stored
  //      [k][n]); __syncthreads() before the next tile overwrites K and V.
  // Finally l summed over the row's 4 lanes, out[pos, head·D + e] = O / l for pos < s.
  namespace mma = warp_mma;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // bf16 mma.sync needs compute capability 8.0
  constexpr int P = D + kTcPad;                      // bf16 per row of Q, K and V
  constexpr int kSteps = D / 16;          // k-steps of Q·Kᵀ; pairs of 8-dim accumulators of O
  constexpr int kKeyTiles = kMmaKeys / 8;  // 8-key accumulators of S
  const int group = n_heads / n_kv_heads;
  const int T = static_cast<int>(blockDim.x) / 32 * kTcRows / group;  // query positions per block
  const auto [t, g] = longest_first_tile();
  const int q0 = t * T;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_head = T / kTcRows;
  const int head = g * group + warp / per_head, p0 = q0 + kTcRows * (warp % per_head);
  const int r = lane / 4, c = lane % 4;  // rows r and r + 8, columns 2c and 2c + 1
  const size_t q_width = static_cast<size_t>(n_heads) * D,
               kv_width = static_cast<size_t>(n_kv_heads) * D;

  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(mma_smem);
  __nv_bfloat16* k_s = q_s;  // K and V replace Q once it is in registers
  __nv_bfloat16* v_s = k_s + kMmaKeys * P;

  store_q_rows<D>(q_s, q, q0, per_head, g, group, s, q_width, vec);
  __syncthreads();
  // A operands: lanes 0–15 give rows 0–15 of the warp at dims 16j, lanes 16–31 at 16j + 8.
  uint32_t q_a[kSteps][4];
#pragma unroll
  for (int j = 0; j < kSteps; ++j)
    mma::ldmatrix(q_a[j], q_s + (warp * kTcRows + lane % 16) * P + 16 * j + 8 * (lane / 16));
  float o[2 * kSteps][4];
#pragma unroll
  for (int n = 0; n < 2 * kSteps; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  __syncthreads();  // Q's shared rows are K and V's from here on

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows r and r + 8; l: this lane's part
  const int last = min(q0 + T, s) - 1;                     // the block's last real position
  const size_t head_offset = static_cast<size_t>(g) * D;
  float4 k_next[kTcFetch<D, kMmaKeys>], v_next[kTcFetch<D, kMmaKeys>];
  fetch_kv_tile<D, kMmaKeys>(k, v, 0, s, kv_width, head_offset, vec, k_next, v_next);
  for (int k0 = 0; k0 <= last; k0 += kMmaKeys) {
    store_kv_tile<D, kMmaKeys>(k_s, v_s, k_next, v_next, k, v, k0, s, kv_width, head_offset, vec);
    __syncthreads();
    if (k0 + kMmaKeys <= last)
      fetch_kv_tile<D, kMmaKeys>(k, v, k0 + kMmaKeys, s, kv_width, head_offset, vec, k_next,
                                 v_next);
    if (p0 <= last &&
        k0 <= p0 + kTcRows - 1) {  // warp-uniform: some real row of the warp sees key k0
      float sc[kKeyTiles][4];
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
      for (int n = 0; n < kKeyTiles; n += 2) {
#pragma unroll
        for (int j = 0; j < kSteps; ++j) {
          // Keys 8n .. 8n + 15: lanes 0–7 and 16–23 give their rows at dims 16j, 8–15 and 24–31 at
          // 16j + 8.
          uint32_t kb[4];
          mma::ldmatrix(
              kb, k_s + (8 * n + 8 * (lane / 16) + lane % 8) * P + 16 * j + 8 * (lane / 8 % 2));
          const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
          mma::mma_m16n8k16(sc[n], q_a[j], b0, sc[n]);
          mma::mma_m16n8k16(sc[n + 1], q_a[j], b1, sc[n + 1]);
        }
      }

      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int pos = p0 + r + 8 * (i / 2), key = k0 + 8 * n + 2 * c + i % 2;
          sc[n][i] = key <= pos && key < s ? sc[n][i] * scale : -INFINITY;
          tile_max[i / 2] = fmaxf(tile_max[i / 2], sc[n][i]);
        }
      }
      float rescale[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        // Key k0 is visible to every row of the warp (k0 <= p0), so the new maximum is finite.
        const float m_new = fmaxf(m[h], tile_max[h]);
        rescale[h] = __expf(m[h] - m_new);  // 0 on the first tile (m = −inf)
        m[h] = m_new;
        l[h] *= rescale[h];
      }
#pragma unroll
      for (int n = 0; n < 2 * kSteps; ++n) {
        o[n][0] *= rescale[0];
        o[n][1] *= rescale[0];
        o[n][2] *= rescale[1];
        o[n][3] *= rescale[1];
      }
      // P in bf16 pairs, straight into the A operands of P·V: k-step j is accumulators 2j (its
      // registers 0 and 1) and 2j + 1 (registers 2 and 3).
      uint32_t p_a[kKeyTiles / 2][4];
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t pair =
              mma::pack_bf16x2(__expf(sc[n][2 * h] - m[h]), __expf(sc[n][2 * h + 1] - m[h]));
          l[h] +=
              __uint_as_float(pair << 16) + __uint_as_float(pair & 0xffff0000u);  // the rounded p
          p_a[n / 2][2 * (n % 2) + h] = pair;
        }
      }
#pragma unroll
      for (int j = 0; j < kKeyTiles / 2; ++j) {
#pragma unroll
        for (int n = 0; n < kSteps; ++n) {
          // Keys 16j .. 16j + 15 (lanes 0–15) at dims 16n, the same keys (lanes 16–31) at 16n + 8.
          uint32_t vb[4];
          mma::ldmatrix_trans(vb, v_s + (16 * j + lane % 16) * P + 16 * n + 8 * (lane / 16));
          const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
          mma::mma_m16n8k16(o[2 * n], p_a[j], b0, o[2 * n]);
          mma::mma_m16n8k16(o[2 * n + 1], p_a[j], b1, o[2 * n + 1]);
        }
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int pos = p0 + r + 8 * h;
    if (pos >= s) continue;
    const float inv = 1.f / l[h];
    float* row = out + pos * q_width + static_cast<size_t>(head) * D + 2 * c;
#pragma unroll
    for (int n = 0; n < 2 * kSteps; ++n) {
      const float2 x = make_float2(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
      if (vec) {
        *reinterpret_cast<float2*>(row + 8 * n) = x;
      } else {
        row[8 * n] = x.x;
        row[8 * n + 1] = x.y;
      }
    }
  }
#endif
  // STUB: (void)q; (void)k; (void)v; (void)out; (void)s; (void)n_heads; (void)n_kv_heads;
  // STUB: (void)scale; (void)vec; (void)mma_smem;
  // END SOLUTION
}

// Launches flash_attention_mma_kernel<D> (kMma) or flash_attention_tc_kernel<D> with blocks of
// `bytes` of shared memory.
template <int D, bool kMma>
void launch_tc(size_t bytes, const float* q, const float* k, const float* v, float* out, int s,
               int n_heads, int n_kv_heads, cudaStream_t stream) {
  const int group = n_heads / n_kv_heads;
  const int threads = 32 * tc_warps(group);
  // BEGIN SOLUTION(m5): Grid (n_kv_heads, ceil(s / tc_tile(group))), `threads` threads, `bytes`
  // of dynamic shared memory (opting in beyond 48 KB, as flash_attention() does); the scale is
  // 1/sqrt(D), and rows may be read as float4 when every pointer is 16-byte aligned.
  if (bytes > kDefaultSharedBytes) {
    CUDA_CHECK(
        cudaFuncSetAttribute(kMma ? flash_attention_mma_kernel<D> : flash_attention_tc_kernel<D>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto aligned = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool vec = aligned(q) && aligned(k) && aligned(v) && aligned(out);
  const int tile = tc_tile(group);
  const dim3 grid(static_cast<unsigned>(n_kv_heads), static_cast<unsigned>((s + tile - 1) / tile));
  if constexpr (kMma) {
    flash_attention_mma_kernel<D>
        <<<grid, threads, bytes, stream>>>(q, k, v, out, s, n_heads, n_kv_heads, scale, vec);
  } else {
    flash_attention_tc_kernel<D>
        <<<grid, threads, bytes, stream>>>(q, k, v, out, s, n_heads, n_kv_heads, scale, vec);
  }
  CUDA_CHECK(cudaGetLastError());
  // STUB: // Placeholder output (zeros), so that its tests fail cleanly.
  // STUB: const size_t out_bytes = static_cast<size_t>(s) * n_heads * D * sizeof(float);
  // STUB: CUDA_CHECK(cudaMemsetAsync(out, 0, out_bytes, stream));
  // STUB: (void)bytes; (void)q; (void)k; (void)v; (void)threads;
  // STUB: (void)flash_attention_tc_kernel<D>; (void)flash_attention_mma_kernel<D>;
  // END SOLUTION
}

}  // namespace

size_t flash_attention_shared_bytes(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_heads % n_kv_heads != 0) return 0;
  const int group = n_heads / n_kv_heads;
  Config c = choose_config(group, head_dim);
  if (c.tile == 0) {  // unsupported: what the small tile would need
    c = layout(head_dim);
    c.tile = kSmallTile;
  }
  return c.shared_floats(group) * sizeof(float);
}

int flash_attention_tile(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_heads % n_kv_heads != 0) return 0;
  return choose_config(n_heads / n_kv_heads, head_dim).tile;
}

namespace {

// The checks both launchers make first: sizes, GQA grouping, no aliasing.
void check_arguments(const char* who, const float* q, const float* k, const float* v,
                     const float* out, int s, int n_heads, int n_kv_heads, int head_dim) {
  if (s < 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    throw std::invalid_argument(
        std::string(who) + ": need s >= 0 and positive n_heads, n_kv_heads, head_dim (got s=" +
        std::to_string(s) + ", n_heads=" + std::to_string(n_heads) + ", n_kv_heads=" +
        std::to_string(n_kv_heads) + ", head_dim=" + std::to_string(head_dim) + ")");
  }
  if (s > kMaxPositions) {  // query tiles are the grid's y, at most 65535 of at least 16
    throw std::invalid_argument(std::string(who) + ": s = " + std::to_string(s) +
                                " positions; at most " + std::to_string(kMaxPositions) +
                                " (65535 query tiles of 16) in one launch");
  }
  if (n_heads % n_kv_heads != 0) {
    throw std::invalid_argument(std::string(who) + ": n_heads (" + std::to_string(n_heads) +
                                ") must be a multiple of n_kv_heads (" +
                                std::to_string(n_kv_heads) + ")");
  }
  if (out == q || out == k || out == v) {
    throw std::invalid_argument(std::string(who) + ": out must not alias q, k or v");
  }
}

}  // namespace

void flash_attention(const float* q, const float* k, const float* v, float* out, int s,
                     int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
  check_arguments("flash_attention", q, k, v, out, s, n_heads, n_kv_heads, head_dim);
  const int group = n_heads / n_kv_heads;
  const Config c = choose_config(group, head_dim);
  if (c.tile == 0) {
    Config small = layout(head_dim);
    small.tile = kSmallTile;
    throw std::invalid_argument(
        "flash_attention: " + std::to_string(group) + " query heads per KV head with head_dim " +
        std::to_string(head_dim) + " do not fit one block: even with the tile of " +
        std::to_string(kSmallTile) + " it needs " +
        std::to_string(small.shared_floats(group) * sizeof(float)) +
        " bytes of shared memory (at most " + std::to_string(kMaxSharedBytes) + ") and " +
        std::to_string(small.threads(group)) + " threads (at most " +
        std::to_string(kMaxThreads) + "); head_dim may be at most " +
        std::to_string(kMaxHeadDim));
  }
  if (s == 0) return;
  // One instance per (tile, lanes, dims) the chooser can return.
  using Launch = void (*)(const Config&, const float*, const float*, const float*, float*, int,
                          int, int, int, cudaStream_t);
  Launch launcher = nullptr;
  const int key = c.tile * 10000 + c.lanes * 100 + c.dims;
  switch (key) {
    case kTile * 10000 + 804: launcher = launch<kTile, 8, 4>; break;
    case kTile * 10000 + 808: launcher = launch<kTile, 8, 8>; break;
    case kTile * 10000 + 816: launcher = launch<kTile, 8, 16>; break;
    case kTile * 10000 + 1616: launcher = launch<kTile, 16, 16>; break;
    case kSmallTile * 10000 + 804: launcher = launch<kSmallTile, 8, 4>; break;
    case kSmallTile * 10000 + 808: launcher = launch<kSmallTile, 8, 8>; break;
    case kSmallTile * 10000 + 816: launcher = launch<kSmallTile, 8, 16>; break;
    case kSmallTile * 10000 + 1616: launcher = launch<kSmallTile, 16, 16>; break;
    default: break;
  }
  if (launcher == nullptr) {
    throw std::logic_error("flash_attention: no kernel instance for tile " +
                           std::to_string(c.tile) + ", " + std::to_string(c.lanes) + " lanes, " +
                           std::to_string(c.dims) + " dims per thread");
  }
  launcher(c, q, k, v, out, s, n_heads, n_kv_heads, head_dim, stream);
}

int flash_attention_tensor_cores_tile(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || n_heads / n_kv_heads > kTcWarps ||
      head_dim <= 0 || head_dim % 16 != 0 || head_dim > kTcMaxHeadDim) {
    return 0;
  }
  return tc_tile(n_heads / n_kv_heads);
}

size_t flash_attention_tensor_cores_shared_bytes(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_heads % n_kv_heads != 0) return 0;
  return tc_shared_bytes(n_heads / n_kv_heads, head_dim);
}

namespace {

// The checks of both tensor-core launchers (`who`), beyond check_arguments(): h_d, group, GPU.
void check_tensor_core_arguments(const char* who, const float* q, const float* k, const float* v,
                                 const float* out, int s, int n_heads, int n_kv_heads,
                                 int head_dim) {
  check_arguments(who, q, k, v, out, s, n_heads, n_kv_heads, head_dim);
  if (head_dim % 16 != 0 || head_dim > kTcMaxHeadDim) {
    throw std::invalid_argument(std::string(who) + ": head_dim " + std::to_string(head_dim) +
                                " must be a multiple of 16 (the tensor cores' tile) and at most " +
                                std::to_string(kTcMaxHeadDim) +
                                " (use flash_attention for others)");
  }
  const int group = n_heads / n_kv_heads;
  if (group > kTcWarps) {
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(group) +
                                " query heads per KV head; a block holds at most " +
                                std::to_string(kTcWarps) + " (use flash_attention)");
  }
  int device = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8) {
    throw std::runtime_error(std::string(who) +
                             ": bf16 tensor cores need compute capability 8.0 (this GPU has " +
                             std::to_string(major) + ".x)");
  }
}

// Calls f(std::integral_constant<int, h_d>()): h_d is a multiple of 16 up to kTcMaxHeadDim
// (checked before), and every such instance of the kernels is compiled.
template <int D = 16, class F>
void with_head_dim(int head_dim, F&& f) {
  if constexpr (D < kTcMaxHeadDim) {
    if (head_dim != D) return with_head_dim<D + 16>(head_dim, std::forward<F>(f));
  }
  f(std::integral_constant<int, D>());
}

}  // namespace

void flash_attention_tensor_cores(const float* q, const float* k, const float* v, float* out, int s,
                                  int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
  check_tensor_core_arguments("flash_attention_tensor_cores", q, k, v, out, s, n_heads, n_kv_heads,
                              head_dim);
  if (s == 0) return;
  with_head_dim(head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    launch_tc<D, false>(tc_shared_bytes(n_heads / n_kv_heads, D), q, k, v, out, s, n_heads,
                        n_kv_heads, stream);
  });
}

void flash_attention_mma(const float* q, const float* k, const float* v, float* out, int s,
                         int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
  check_tensor_core_arguments("flash_attention_mma", q, k, v, out, s, n_heads, n_kv_heads,
                              head_dim);
  if (s == 0) return;
  with_head_dim(head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    launch_tc<D, true>(mma_shared_bytes(n_heads / n_kv_heads, D), q, k, v, out, s, n_heads,
                       n_kv_heads, stream);
  });
}

size_t flash_attention_mma_shared_bytes(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_heads % n_kv_heads != 0) return 0;
  return mma_shared_bytes(n_heads / n_kv_heads, head_dim);
}

}  // namespace clockwork::kernels
