// Tensor-core fragments (nvcuda::wmma): tile products of every supported shape, type and layout
// against a double-precision host product, a tiled GEMM through shared memory, element-wise work
// through x[i], and the mistakes the CPU backend reports (the CUDA build skips those: on a GPU
// they are undefined). The same file passes on a GPU (sm_80 or newer: __nv_bfloat16 fragments
// need it; a build for an older architecture skips).
//
// Tolerances. The products of two 16-bit floats are exact in float; the tensor cores sum them in
// float in an order (and with an internal rounding) CUDA leaves unspecified, the CPU backend one
// k after the other. Summing K + 1 terms in float is off by at most about (K + 1) * 2^-24 times
// the sum of their magnitudes (6.4e-6 for K = 16 + C, 1.5e-5 for K = 256); the tests allow
// 1e-4 times that sum, which leaves a GPU's summation room and still fails any element taken from
// the wrong row, column or layout (off by the order of the sum itself).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device_floats.h"
#include "diagnostic_exit.h"

namespace wmma = nvcuda::wmma;

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

// __nv_bfloat16 fragments need compute capability 8.0: older targets compile empty kernels (the
// test then skips, see WmmaTest::SetUp).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define WMMA_TARGET_OK 1
#else
#define WMMA_TARGET_OK 0
#endif

// Elements per lane, as CUDA's mma.h declares them (the CPU backend keeps the GPU's counts).
static_assert(wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>::num_elements == 16);
static_assert(wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>::num_elements == 16);
static_assert(wmma::fragment<wmma::accumulator, 16, 16, 16, float>::num_elements == 8);
static_assert(wmma::fragment<wmma::accumulator, 16, 16, 16, __half>::num_elements == 8);
#if WMMA_TARGET_OK  // CUDA declares __nv_bfloat16 fragments for compute capability 8.0 and up
static_assert(wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>::num_elements == 8);
static_assert(wmma::fragment<wmma::matrix_a, 32, 8, 16, __nv_bfloat16, wmma::row_major>::num_elements == 16);
static_assert(wmma::fragment<wmma::matrix_b, 32, 8, 16, __nv_bfloat16, wmma::row_major>::num_elements == 4);
static_assert(wmma::fragment<wmma::matrix_a, 8, 32, 16, __nv_bfloat16, wmma::col_major>::num_elements == 4);
static_assert(wmma::fragment<wmma::matrix_b, 8, 32, 16, __nv_bfloat16, wmma::col_major>::num_elements == 16);
#endif
static_assert(wmma::fragment<wmma::matrix_a, 32, 8, 16, __half, wmma::row_major>::num_elements == 16);
static_assert(wmma::fragment<wmma::matrix_b, 32, 8, 16, __half, wmma::row_major>::num_elements == 16);

// ---- kernels -------------------------------------------------------------------------------------

// D = A * B + C for one tile; A (M x K) and B (K x N) in the fragments' layouts, C and D at
// leading dimension ldc (C row-major, D in `d_layout`).
template <int M, int N, int K, class T, class LA, class LB, class Acc>
__global__ void tile_mma(const T* a, unsigned lda, const T* b, unsigned ldb, const Acc* c, Acc* d, unsigned ldc,
                         wmma::layout_t d_layout) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::matrix_a, M, N, K, T, LA> fa;
  wmma::fragment<wmma::matrix_b, M, N, K, T, LB> fb;
  wmma::fragment<wmma::accumulator, M, N, K, Acc> fc;
  wmma::load_matrix_sync(fa, a, lda);
  wmma::load_matrix_sync(fb, b, ldb);
  wmma::load_matrix_sync(fc, c, ldc, wmma::mem_row_major);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(d, fc, ldc, d_layout);
#endif
}

// D = alpha * ((2 A) * B): the A fragment is doubled and the accumulator scaled element by element
// through x[i], which gives the same matrices whichever lane holds which element.
__global__ void scaled_product(const __half* a, const __half* b, float alpha, float* d) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = __float2half(2.f * __half2float(fa.x[i]));
  wmma::fill_fragment(acc, 0.f);
  wmma::mma_sync(acc, fa, fb, acc);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= alpha;
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
#endif
}

// C (M x N, row-major, float) = A (M x K, row-major) * B (K x N, row-major), bf16 inputs. Each
// block computes a 64 x 64 tile of C with 4 warps of 32 x 32 (2 x 2 fragments each); the A and B
// tiles of each 16-wide step of K are staged in shared memory, rows padded by 8 elements.
// [[maybe_unused]]: a device pass below sm_80 compiles the kernel to nothing.
[[maybe_unused]] constexpr int kGemmTile = 64, kGemmStep = 16, kPad = 8;
__global__ void tiled_gemm(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c, int M, int N, int K) {
#if WMMA_TARGET_OK
  __shared__ __align__(32) __nv_bfloat16 as[kGemmTile][kGemmStep + kPad];  // rows of A's tile
  __shared__ __align__(32) __nv_bfloat16 bs[kGemmStep][kGemmTile + kPad];  // rows of B's tile
  const int warp = threadIdx.x / 32, wr = warp / 2, wc = warp % 2;
  const int row0 = blockIdx.y * kGemmTile, col0 = blockIdx.x * kGemmTile;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  for (int k0 = 0; k0 < K; k0 += kGemmStep) {
    for (int e = threadIdx.x; e < kGemmTile * kGemmStep; e += blockDim.x) {
      as[e / kGemmStep][e % kGemmStep] = a[(row0 + e / kGemmStep) * K + k0 + e % kGemmStep];
      bs[e / kGemmTile][e % kGemmTile] = b[(k0 + e / kGemmTile) * N + col0 + e % kGemmTile];
    }
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[2];
    for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &as[wr * 32 + i * 16][0], kGemmStep + kPad);
    for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &bs[0][wc * 32 + j * 16], kGemmTile + kPad);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    __syncthreads();  // the next step overwrites the tiles
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&c[(row0 + wr * 32 + i * 16) * N + col0 + wc * 32 + j * 16], acc[i][j], N,
                              wmma::mem_row_major);
#else
  (void)a, (void)b, (void)c, (void)M, (void)N, (void)K;
#endif
}

// ---- kernels with mistakes (the diagnostics tests; each records the line of its mistake) ---------

constexpr unsigned kMisalignedLine = __LINE__ + 4;
__global__ void misaligned_tile(const __half* a, float* d) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a + 8, 16);  // 16 bytes into the buffer
  d[threadIdx.x] = __half2float(fa.x[0]);
#endif
}

constexpr unsigned kBadLdmLine = __LINE__ + 4;
__global__ void bad_ldm_tile(const __half* a, float* d) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::load_matrix_sync(fb, a, 20);  // 40 bytes between columns
  d[threadIdx.x] = __half2float(fb.x[0]);
#endif
}

constexpr unsigned kBadStoreLdmLine = __LINE__ + 6;
__global__ void bad_store_ldm(float* d) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 1.f);
  // 18 floats between rows: not a multiple of 4
  wmma::store_matrix_sync(d, acc, 18, wmma::mem_row_major);
#endif
}

constexpr unsigned kHalfWarpLine = __LINE__ + 5;
__global__ void half_warp_tile(const __half* a, float* d) {
#if WMMA_TARGET_OK
  if (threadIdx.x % 32 >= 16) return;  // the upper half of the warp leaves
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, 16);
  d[threadIdx.x] = __half2float(fa.x[0]);
#endif
}

constexpr unsigned kLowerLoadLine = __LINE__ + 5, kUpperLoadLine = __LINE__ + 7;
__global__ void split_warp_tile(const __half* a, float* d) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  if (threadIdx.x < 16) {
    wmma::load_matrix_sync(fa, a, 16);
  } else {
    wmma::load_matrix_sync(fa, a + 256, 16);  // the two halves load different tiles
  }
  d[threadIdx.x] = __half2float(fa.x[0]);
#endif
}

constexpr unsigned kSmallBlockLine = __LINE__ + 5;
__global__ void small_block_tile(float* d) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 1.f);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
#endif
}

// Warp 0 stores its tile into shared memory, warp 1 loads it back: without a barrier in between,
// warp 1 may read before warp 0 has written.
constexpr unsigned kTileStoreLine = __LINE__ + 9, kTileLoadLine = __LINE__ + 13;
template <bool kBarrier>
__global__ void tile_handover(const float* c, float* d) {
#if WMMA_TARGET_OK
  __shared__ __align__(32) float tile[16 * 16];
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  if (threadIdx.x < 32) {
    wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
    for (int i = 0; i < acc.num_elements; ++i) acc.x[i] += 1.f;
    wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
  }
  if (kBarrier) __syncthreads();
  if (threadIdx.x >= 32) {
    wmma::load_matrix_sync(acc, tile, 16, wmma::mem_row_major);
    wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
  }
#endif
}

constexpr unsigned kLoadTileLine = __LINE__ + 4;
__global__ void load_tile(const __nv_bfloat16* a, unsigned ldm, float* d) {
#if WMMA_TARGET_OK
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, ldm);
  d[threadIdx.x] = __bfloat162float(fa.x[0]);
#endif
}

// ---- host side -----------------------------------------------------------------------------------

namespace {

using cudasim_tests::checked;
using cudasim_tests::download;
using cudasim_tests::kDiagnostic;
using cudasim_tests::upload;

template <class T>
T to16(float v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}
float from16(__half v) { return __half2float(v); }
float from16(__nv_bfloat16 v) { return __bfloat162float(v); }
float from16(float v) { return v; }
template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return to16<T>(v);
}

// Seeded values in [-1, 1) (none of them zero), rounded to T.
template <class T>
std::vector<T> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> v(n);
  for (auto& x : v) {
    float f = u(rng);
    if (std::fabs(f) < 1e-3f) f = 0.5f;
    x = from_float<T>(f);
  }
  return v;
}

// Padding between the rows (or columns) of a matrix: a value that would show if it were read.
constexpr float kPadValue = 1000.f;

}  // namespace

class WmmaTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef __CUDASIM__
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    cudaFuncAttributes attr{};
    ASSERT_EQ(cudaFuncGetAttributes(&attr, scaled_product), cudaSuccess);
    if (attr.ptxVersion < 80 && attr.binaryVersion < 80)
      GTEST_SKIP() << "built for compute capability " << attr.binaryVersion << ": __nv_bfloat16 fragments need 8.0";
#endif
  }
};

namespace {

// One tile product of the given shape, types and layouts, with `pad` extra elements in every
// leading dimension; D stored row- or column-major.
template <int M, int N, int K, class T, class LA, class LB, class Acc>
void check_tile(unsigned pad, wmma::layout_t d_layout, uint32_t seed) {
  constexpr bool a_row = std::is_same_v<LA, wmma::row_major>, b_row = std::is_same_v<LB, wmma::row_major>;
  const unsigned lda = (a_row ? K : M) + pad, ldb = (b_row ? N : K) + pad, ldc = (M > N ? M : N) + pad;
  const size_t a_size = static_cast<size_t>(lda) * (a_row ? M : K), b_size = static_cast<size_t>(ldb) * (b_row ? K : N);
  const size_t c_size = static_cast<size_t>(ldc) * (M > N ? M : N);
  std::vector<T> ha(a_size, to16<T>(kPadValue)), hb(b_size, to16<T>(kPadValue));
  std::vector<Acc> hc(c_size, from_float<Acc>(kPadValue));
  const std::vector<T> va = random_values<T>(M * K, seed), vb = random_values<T>(K * N, seed + 1);
  const std::vector<Acc> vc = random_values<Acc>(M * N, seed + 2);
  auto at = [](bool row, unsigned ld, int r, int c) { return row ? static_cast<size_t>(r) * ld + c : static_cast<size_t>(c) * ld + r; };
  for (int r = 0; r < M; ++r)
    for (int k = 0; k < K; ++k) ha[at(a_row, lda, r, k)] = va[r * K + k];
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < N; ++c) hb[at(b_row, ldb, k, c)] = vb[k * N + c];
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) hc[at(true, ldc, r, c)] = vc[r * N + c];

  T* da = upload(ha);
  T* db = upload(hb);
  Acc* dc = upload(hc);
  Acc* dd = upload(std::vector<Acc>(c_size, from_float<Acc>(kPadValue)));
  tile_mma<M, N, K, T, LA, LB, Acc><<<1, 32>>>(da, lda, db, ldb, dc, dd, ldc, d_layout);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const std::vector<Acc> got = download(dd, c_size);

  // Half accumulators round the result (and, on a GPU, the partial sums) to 11 bits: 2^-11 per
  // rounding, K + 1 of them at most, 1e-2 of the magnitudes' sum.
  const double rel = std::is_same_v<Acc, float> ? 1e-4 : 1e-2;
  const bool d_row = d_layout == wmma::mem_row_major;
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      double want = from16(vc[r * N + c]), mag = std::fabs(want);
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(from16(va[r * K + k])) * from16(vb[k * N + c]);
        want += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(from16(got[at(d_row, ldc, r, c)]), want, rel * mag)
          << "D(" << r << "," << c << ") of a " << M << "x" << N << "x" << K << " product";
    }
  }
  // Nothing outside the tile was written.
  for (size_t i = 0; i < c_size; ++i) {
    const size_t r = d_row ? i / ldc : i % ldc, c = d_row ? i % ldc : i / ldc;
    if (r >= static_cast<size_t>(M) || c >= static_cast<size_t>(N)) ASSERT_EQ(from16(got[i]), kPadValue) << i;
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dd);
}

}  // namespace

using wmma::col_major;
using wmma::row_major;

TEST_F(WmmaTest, Product16x16x16Bf16AndHalf) {
  check_tile<16, 16, 16, __nv_bfloat16, row_major, col_major, float>(0, wmma::mem_row_major, 1);
  check_tile<16, 16, 16, __half, row_major, col_major, float>(0, wmma::mem_row_major, 2);
}

TEST_F(WmmaTest, EveryLayoutWithLdmLargerThanTheTile) {
  check_tile<16, 16, 16, __nv_bfloat16, row_major, row_major, float>(8, wmma::mem_row_major, 3);
  check_tile<16, 16, 16, __nv_bfloat16, col_major, row_major, float>(8, wmma::mem_col_major, 4);
  check_tile<16, 16, 16, __nv_bfloat16, col_major, col_major, float>(16, wmma::mem_row_major, 5);
  check_tile<16, 16, 16, __half, col_major, col_major, float>(8, wmma::mem_col_major, 6);
  check_tile<16, 16, 16, __half, row_major, row_major, float>(24, wmma::mem_row_major, 7);
}

TEST_F(WmmaTest, Shape32x8x16) {
  check_tile<32, 8, 16, __nv_bfloat16, row_major, col_major, float>(0, wmma::mem_row_major, 8);
  check_tile<32, 8, 16, __nv_bfloat16, col_major, row_major, float>(8, wmma::mem_col_major, 9);
  check_tile<32, 8, 16, __half, row_major, row_major, float>(8, wmma::mem_row_major, 10);
  check_tile<32, 8, 16, __half, col_major, col_major, float>(0, wmma::mem_col_major, 11);
}

TEST_F(WmmaTest, Shape8x32x16) {
  check_tile<8, 32, 16, __nv_bfloat16, row_major, col_major, float>(0, wmma::mem_row_major, 12);
  check_tile<8, 32, 16, __nv_bfloat16, col_major, row_major, float>(8, wmma::mem_col_major, 13);
  check_tile<8, 32, 16, __half, row_major, row_major, float>(8, wmma::mem_row_major, 14);
  check_tile<8, 32, 16, __half, col_major, col_major, float>(0, wmma::mem_col_major, 15);
}

TEST_F(WmmaTest, HalfAccumulators) {
  check_tile<16, 16, 16, __half, row_major, col_major, __half>(0, wmma::mem_row_major, 16);
  check_tile<32, 8, 16, __half, col_major, row_major, __half>(8, wmma::mem_col_major, 17);
}

TEST_F(WmmaTest, ElementWiseScaleThroughX) {
  const std::vector<__half> a = random_values<__half>(256, 20), b = random_values<__half>(256, 21);
  __half* da = upload(a);
  __half* db = upload(b);
  float* dd = upload(std::vector<float>(256, kPadValue));
  const float alpha = -0.75f;
  scaled_product<<<1, 32>>>(da, db, alpha, dd);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(dd, 256);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      double want = 0, mag = 0;
      for (int k = 0; k < 16; ++k) {
        const double p = 2.0 * __half2float(a[r * 16 + k]) * __half2float(b[k * 16 + c]);
        want += p;
        mag += std::fabs(p);
      }
      // Doubling a __half is exact; the scale adds one float rounding to the tolerance's margin.
      ASSERT_NEAR(got[r * 16 + c], alpha * want, 1e-4 * std::fabs(alpha) * mag) << "D(" << r << "," << c << ")";
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
}

TEST_F(WmmaTest, TiledGemmThroughSharedMemory) {
  constexpr int M = 128, N = 128, K = 256;
  const std::vector<__nv_bfloat16> a = random_values<__nv_bfloat16>(M * K, 30), b = random_values<__nv_bfloat16>(K * N, 31);
  __nv_bfloat16* da = upload(a);
  __nv_bfloat16* db = upload(b);
  float* dc = upload(std::vector<float>(M * N, kPadValue));
  tiled_gemm<<<dim3(N / kGemmTile, M / kGemmTile), 128>>>(da, db, dc, M, N, K);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(dc, M * N);
  std::vector<double> fa(a.size()), fb(b.size());
  for (size_t i = 0; i < a.size(); ++i) fa[i] = __bfloat162float(a[i]);
  for (size_t i = 0; i < b.size(); ++i) fb[i] = __bfloat162float(b[i]);
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      double want = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        want += fa[r * K + k] * fb[k * N + c];
        mag += std::fabs(fa[r * K + k] * fb[k * N + c]);
      }
      ASSERT_NEAR(got[r * N + c], want, 1e-4 * mag) << "C(" << r << "," << c << ")";
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

TEST_F(WmmaTest, TileHandedOverThroughSharedMemoryAfterABarrier) {
  const std::vector<float> c = random_values<float>(256, 40);
  float* dc = upload(c);
  float* dd = upload(std::vector<float>(256, kPadValue));
  tile_handover<true><<<1, 64>>>(dc, dd);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(dd, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(got[i], c[i] + 1.f) << i;  // the same float addition as here
  cudaFree(dc);
  cudaFree(dd);
}

// ---- diagnostics (CPU backend only) -----------------------------------------------------------------

class WmmaDiagnostics : public cudasim_tests::CpuBackendDiagnostics {
 protected:
  void SetUp() override {
    CpuBackendDiagnostics::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaMalloc(&half_buf, 1024 * sizeof(__half)), cudaSuccess);
    ASSERT_EQ(cudaMemset(half_buf, 0x3c, 1024 * sizeof(__half)), cudaSuccess);  // 0x3c3c: about 1.06
    ASSERT_EQ(cudaMalloc(&float_buf, 1024 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemset(float_buf, 0, 1024 * sizeof(float)), cudaSuccess);
  }
  void TearDown() override {
    cudaFree(half_buf);
    cudaFree(float_buf);
  }
  static std::string at(unsigned line) { return "wmma_test.cu:" + std::to_string(line); }
  __half* half_buf = nullptr;
  float* float_buf = nullptr;
};

class WmmaChecked : public WmmaDiagnostics {
 protected:
  void SetUp() override {
    WmmaDiagnostics::SetUp();
    if (IsSkipped()) return;
    if (!checked()) GTEST_SKIP() << "needs the checked build (cudasim_wmma_test_check, CUDASIM_CHECK=all)";
  }
};

TEST_F(WmmaDiagnostics, MisalignedPointer) {
  auto run = [&] { misaligned_tile<<<1, 32>>>(half_buf, float_buf); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'misaligned_tile'.*warp 0.*wmma::load_matrix_sync \\(matrix_a\\) at .*" + at(kMisalignedLine) +
                  ": the matrix pointer .* is not 32-byte aligned \\(it is 16 bytes past");
}

TEST_F(WmmaDiagnostics, LdmNotAMultipleOf8) {
  auto run = [&] { bad_ldm_tile<<<1, 32>>>(half_buf, float_buf); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'bad_ldm_tile'.*wmma::load_matrix_sync \\(matrix_b\\) at .*" + at(kBadLdmLine) +
                  ": ldm = 20 is not a multiple of 8");
}

TEST_F(WmmaDiagnostics, FloatLdmNotAMultipleOf4) {
  auto run = [&] { bad_store_ldm<<<1, 32>>>(float_buf); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'bad_store_ldm'.*wmma::store_matrix_sync at .*" + at(kBadStoreLdmLine) +
                  ": ldm = 18 is not a multiple of 4");
}

TEST_F(WmmaDiagnostics, CallByHalfAWarp) {
  auto run = [&] { half_warp_tile<<<1, 64>>>(half_buf, float_buf); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'half_warp_tile'.*warp [01]: wmma::load_matrix_sync \\(matrix_a\\) at .*" + at(kHalfWarpLine) +
                  " is reached by thread \\([0-9]+,0,0\\), but lane (1[6-9]|2[0-9]|3[01]) .*has already exited.*"
                  "warp-collective");
}

TEST_F(WmmaDiagnostics, HalvesOfAWarpAtDifferentCalls) {
  auto run = [&] { split_warp_tile<<<1, 32>>>(half_buf, float_buf); cudaDeviceSynchronize(); };
  const std::string lines = "(" + std::to_string(kLowerLoadLine) + "|" + std::to_string(kUpperLoadLine) + ")";
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'split_warp_tile'.*warp 0: lanes of one warp meet at different warp-synchronous calls.*"
              "wmma::load_matrix_sync \\(matrix_a\\) at .*wmma_test.cu:" + lines +
                  ".*wmma::load_matrix_sync \\(matrix_a\\) at .*wmma_test.cu:" + lines);
}

TEST_F(WmmaDiagnostics, BlockSmallerThanAWarp) {
  auto run = [&] { small_block_tile<<<1, 16>>>(float_buf); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'small_block_tile'.*warp 0.*wmma::store_matrix_sync at .*" + at(kSmallBlockLine) +
                  " needs a whole warp of 32 threads, but this warp has 16");
}

TEST_F(WmmaChecked, TileHandedOverWithoutABarrierIsARace) {
  float* c = float_buf;
  float* d = float_buf + 256;
  auto run = [&] { tile_handover<false><<<1, 64>>>(c, d); cudaDeviceSynchronize(); };
  const std::string lines = "(" + std::to_string(kTileStoreLine) + "|" + std::to_string(kTileLoadLine) + ")";
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'tile_handover<false>'.*shared-memory race .* on element [0-9]+ of __shared__ array 'tile'.*"
              "wmma_test.cu:" + lines + ".*wmma_test.cu:" + lines);
}

TEST_F(WmmaChecked, LoadOfMemoryNothingWrote) {
  __nv_bfloat16* a = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 256 * sizeof(__nv_bfloat16)), cudaSuccess);
  auto run = [&] { load_tile<<<1, 32>>>(a, 16, float_buf); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'load_tile'.*uninitialised read of 2 bytes at .*" + at(kLoadTileLine));
  cudaFree(a);
}

TEST_F(WmmaChecked, LoadPastTheEndOfABuffer) {
  // A 16 x 16 tile read with ldm = 32 from a buffer of 256 elements: rows 8 to 15 lie past its end.
  __nv_bfloat16* a = upload(random_values<__nv_bfloat16>(256, 50));
  auto run = [&] { load_tile<<<1, 32>>>(a, 32, float_buf); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'load_tile'.*thread \\([0-9]+,0,0\\): out-of-bounds read of 2 bytes at .*" + at(kLoadTileLine) +
                  ".*element (2[5-9][0-9]|[3-4][0-9][0-9]|50[0-9]) of the 512-byte buffer");
  cudaFree(a);
}
