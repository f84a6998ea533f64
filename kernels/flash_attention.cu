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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = kFlashAttentionTile;  // query rows and key positions per tile
constexpr int kSmallTile = kTile / 2;       // when a tile of kTile does not fit
constexpr int kRowsPerThread = 4;           // rows of S and of acc that one thread owns
constexpr int kPad = 4;                     // floats of padding per row of Kᵀ (see its load)
constexpr int kMaxThreads = 512;            // at most 128 registers each: 64 K per block
constexpr int kMaxHeadDim = 256;
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

// Grid (ceil(s / Tile), h_k), Config::threads() threads, Config::shared_floats() of dynamic
// shared memory. `vec`: h_d is a multiple of 4 and q, k, v, out are 16-byte aligned, so rows can
// be read and written as float4.
template <int Tile, int Lanes, int Dims>
__global__ void __launch_bounds__(kMaxThreads)
    flash_attention_kernel(const float* q, const float* k, const float* v, float* out, int s,
                           int n_heads, int n_kv_heads, int head_dim, float scale, bool vec) {
  extern __shared__ __align__(16) float smem[];
  // BEGIN SOLUTION(m5): Block (t, g): query positions q0 = t·Tile .. q0 + Tile − 1 of the
  // group = n_heads / n_kv_heads query heads g·group + j (j < group), all reading KV head g.
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
  // The last query tiles have the most key tiles: start them first, so that the short ones
  // fill the gaps at the end instead of a long one running alone.
  const int t = gridDim.x - 1 - blockIdx.x, g = blockIdx.y, q0 = t * Tile;
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
  // BEGIN SOLUTION(m5): Grid (ceil(s / Tile), n_kv_heads), c.threads(group) threads, `bytes`
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
  const dim3 grid(static_cast<unsigned>((s + Tile - 1) / Tile), static_cast<unsigned>(n_kv_heads));
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

}  // namespace clockwork::kernels
