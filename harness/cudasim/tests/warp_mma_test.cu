// ldmatrix and mma.sync m16n8k16 with PTX's register layouts (kernels/warp_mma.h): which lane holds
// which element, checked against the layout tables written out here a second time; tile products
// through shared memory; an accumulator handed on as the next product's A operand without
// leaving the registers (FlashAttention-2's P); and the misuses the CPU backend reports. The same
// file passes on a GPU of compute capability 8.0 or newer; there it checks cudasim's layouts
// against the hardware's.
//
// Tolerances. The layout tests move integers below 256, exact in bf16, and compare exactly. The
// products of two bf16 are exact in fp32; a tensor core sums the 16 of one mma (and C) in an
// order PTX leaves unspecified, cudasim one k after the other. A sum of n + 1 fp32 terms is off by
// at most about (n + 1)·2^-24 times the sum of their magnitudes (4e-6 for one mma, 1.6e-5 for
// K = 64 over four mma); the tests allow 1e-4 times that sum. An element taken from the wrong
// lane, register or half is off by the order of the sum itself.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "device_floats.h"
#include "diagnostic_exit.h"
#include "kernels/warp_mma.h"

namespace mma = clockwork::kernels::warp_mma;

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

// ---- kernels (the diagnostics tests name some of their lines)
// ------------------------------------

// The low and high bf16 of a register as floats.
__device__ __forceinline__ float low_of(uint32_t r) {
  return __uint_as_float(r << 16);
}
__device__ __forceinline__ float high_of(uint32_t r) {
  return __uint_as_float(r & 0xffff0000u);
}

// 32 rows of 8 bf16 (row R of `m` is row R % 8 of matrix R / 8) are stored to shared memory in the
// order `slot` gives (row R at slot[R]); lane l gives the address of row l, lanes from 8·N on a
// null pointer (ldmatrix does not use their addresses). out[(lane·N + j)·2 + h] is half h of r[j].
template <int N, bool Trans>
__global__ void ldmatrix_layout(const __nv_bfloat16* m, const int* slot, float* out) {
  __shared__ __align__(16) __nv_bfloat16 rows[32 * 8];
  const unsigned lane = threadIdx.x;
  for (int e = 0; e < 8; ++e) rows[slot[lane] * 8 + e] = m[lane * 8 + e];
  __syncwarp();
  const void* row = lane < 8u * N ? static_cast<const void*>(&rows[slot[lane] * 8]) : nullptr;
  uint32_t r[N];
  if constexpr (Trans) {
    mma::ldmatrix_trans(r, row);
  } else {
    mma::ldmatrix(r, row);
  }
  for (int j = 0; j < N; ++j) {
    out[(lane * N + j) * 2] = low_of(r[j]);
    out[(lane * N + j) * 2 + 1] = high_of(r[j]);
  }
}

// D = A·B + C with every lane's registers read from global memory by the layout tables: A 16 x 16
// and B 16 x 8 ([k][n]) row-major bf16, C and D 16 x 8 row-major fp32. The accumulator is updated
// in place (d is c).
__global__ void mma_by_layout(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c,
                              float* d) {
  const unsigned lane = threadIdx.x, g = lane / 4, q = lane % 4;
  const auto pair = [](const __nv_bfloat16* p) {
    return mma::pack_bf16x2(__bfloat162float(p[0]), __bfloat162float(p[1]));
  };
  const auto col_pair = [&](unsigned k, unsigned n) {  // B[k][n], B[k + 1][n]
    return mma::pack_bf16x2(__bfloat162float(b[k * 8 + n]), __bfloat162float(b[(k + 1) * 8 + n]));
  };
  const uint32_t ra[4] = {pair(a + g * 16 + 2 * q), pair(a + (g + 8) * 16 + 2 * q),
                          pair(a + g * 16 + 2 * q + 8), pair(a + (g + 8) * 16 + 2 * q + 8)};
  const uint32_t rb[2] = {col_pair(2 * q, g), col_pair(2 * q + 8, g)};
  float acc[4] = {c[g * 8 + 2 * q], c[g * 8 + 2 * q + 1], c[(g + 8) * 8 + 2 * q],
                  c[(g + 8) * 8 + 2 * q + 1]};
  mma::mma_m16n8k16(acc, ra, rb, acc);
  d[g * 8 + 2 * q] = acc[0];
  d[g * 8 + 2 * q + 1] = acc[1];
  d[(g + 8) * 8 + 2 * q] = acc[2];
  d[(g + 8) * 8 + 2 * q + 1] = acc[3];
}

// D (16 x 8) = A (16 x K, row-major) · B (K x 8) over K / 16 steps, operands loaded with
// ldmatrix from shared rows padded by 8 elements (16 bytes: rows stay aligned). B is given twice:
// `bt` stored [n][k] (loaded as it is) and `b` stored [k][n] (loaded transposed); d_t and d_b get
// the two products, which must be equal.
constexpr int kPad = 8;
template <int K>
__global__ void tile_product(const __nv_bfloat16* a, const __nv_bfloat16* bt,
                             const __nv_bfloat16* b, float* d_t, float* d_b) {
  __shared__ __align__(16) __nv_bfloat16 a_s[16 * (K + kPad)], bt_s[8 * (K + kPad)],
      b_s[K * (8 + kPad)];
  const unsigned lane = threadIdx.x, g = lane / 4, q = lane % 4;
  for (int i = lane; i < 16 * K; i += 32) a_s[i / K * (K + kPad) + i % K] = a[i];
  for (int i = lane; i < 8 * K; i += 32) bt_s[i / K * (K + kPad) + i % K] = bt[i];
  for (int i = lane; i < K * 8; i += 32) b_s[i / 8 * (8 + kPad) + i % 8] = b[i];
  __syncwarp();
  float acc_t[4] = {0.f, 0.f, 0.f, 0.f}, acc_b[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t ra[4], rbt[2], rb[2];
    // A: lanes 0–15 give rows 0–15 at column k0, lanes 16–31 the same rows at k0 + 8.
    mma::ldmatrix(ra, &a_s[(lane % 16) * (K + kPad) + k0 + 8 * (lane / 16)]);
    // Bᵀ: lanes 0–7 give rows n = 0–7 at column k0, lanes 8–15 at k0 + 8 (the others are unused).
    mma::ldmatrix(rbt, &bt_s[(lane % 8) * (K + kPad) + k0 + 8 * (lane / 8 % 2)]);
    // B: lanes 0–15 give rows k0 .. k0 + 15, each matrix transposed on the way.
    mma::ldmatrix_trans(rb, &b_s[(k0 + lane % 16) * (8 + kPad)]);
    mma::mma_m16n8k16(acc_t, ra, rbt, acc_t);
    mma::mma_m16n8k16(acc_b, ra, rb, acc_b);
  }
  for (int i = 0; i < 4; ++i) {
    const unsigned at = (g + 8 * (i / 2)) * 8 + 2 * q + i % 2;
    d_t[at] = acc_t[i];
    d_b[at] = acc_b[i];
  }
}

// O (16 x 8) = (A·B1) · V with S = A·B1 (16 x 16, two mma of n = 8) rounded to bf16 and reused as
// the A operand of the second product straight from the accumulators. A 16 x 16, B1 16 x 16 and
// V 16 x 8, all row-major and read by the layout tables.
__global__ void chained_product(const __nv_bfloat16* a, const __nv_bfloat16* b1,
                                const __nv_bfloat16* v, float* o) {
  const unsigned lane = threadIdx.x, g = lane / 4, q = lane % 4;
  const auto f = [](const __nv_bfloat16* p, unsigned i) { return __bfloat162float(p[i]); };
  const uint32_t ra[4] = {
      mma::pack_bf16x2(f(a, g * 16 + 2 * q), f(a, g * 16 + 2 * q + 1)),
      mma::pack_bf16x2(f(a, (g + 8) * 16 + 2 * q), f(a, (g + 8) * 16 + 2 * q + 1)),
      mma::pack_bf16x2(f(a, g * 16 + 2 * q + 8), f(a, g * 16 + 2 * q + 9)),
      mma::pack_bf16x2(f(a, (g + 8) * 16 + 2 * q + 8), f(a, (g + 8) * 16 + 2 * q + 9))};
  float s[2][4] = {};
  for (int half = 0; half < 2; ++half) {  // columns 8·half .. 8·half + 7 of S
    const unsigned n = 8 * half + g;
    const uint32_t rb[2] = {
        mma::pack_bf16x2(f(b1, 2 * q * 16 + n), f(b1, (2 * q + 1) * 16 + n)),
        mma::pack_bf16x2(f(b1, (2 * q + 8) * 16 + n), f(b1, (2 * q + 9) * 16 + n))};
    mma::mma_m16n8k16(s[half], ra, rb, s[half]);
  }
  // The accumulators of the two halves, in the order of A's registers: rows g and g + 8, columns
  // 2q (first half) and 2q + 8 (second half).
  const uint32_t rp[4] = {mma::pack_bf16x2(s[0][0], s[0][1]), mma::pack_bf16x2(s[0][2], s[0][3]),
                          mma::pack_bf16x2(s[1][0], s[1][1]), mma::pack_bf16x2(s[1][2], s[1][3])};
  const uint32_t rv[2] = {mma::pack_bf16x2(f(v, 2 * q * 8 + g), f(v, (2 * q + 1) * 8 + g)),
                          mma::pack_bf16x2(f(v, (2 * q + 8) * 8 + g), f(v, (2 * q + 9) * 8 + g))};
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  mma::mma_m16n8k16(acc, rp, rv, acc);
  for (int i = 0; i < 4; ++i) o[(g + 8 * (i / 2)) * 8 + 2 * q + i % 2] = acc[i];
}

constexpr unsigned kMisalignedLine = __LINE__ + 6;
__global__ void misaligned_row(float* out) {
  __shared__ __align__(16) __nv_bfloat16 rows[8 * 16];
  for (int i = threadIdx.x; i < 8 * 16; i += 32) rows[i] = __float2bfloat16(1.f);
  __syncwarp();
  uint32_t r[1];
  mma::ldmatrix(r, &rows[(threadIdx.x % 8) * 16 + 4]);  // 8 bytes into a row
  out[threadIdx.x] = low_of(r[0]);
}

constexpr unsigned kGlobalRowLine = __LINE__ + 3;
__global__ void row_in_global_memory(const __nv_bfloat16* m, float* out) {
  uint32_t r[2];
  mma::ldmatrix(r, m + (threadIdx.x % 16) * 8);
  out[threadIdx.x] = low_of(r[0]);
}

constexpr unsigned kHalfWarpLine = __LINE__ + 5;
__global__ void half_warp_mma(float* out) {
  const uint32_t ra[4] = {0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u};  // bf16 1.0 pairs
  const uint32_t rb[2] = {0x3f803f80u, 0x3f803f80u};
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (threadIdx.x % 32 < 16) mma::mma_m16n8k16(acc, ra, rb, acc);
  out[threadIdx.x] = acc[0];
}

// Warp 1 stores a tile that warp 0 loads with ldmatrix; with `Barrier` a __syncthreads() orders
// them.
constexpr unsigned kTileStoreLine = __LINE__ + 7;  // and the line after it
constexpr unsigned kTileLoadLine = __LINE__ + 12;
template <bool Barrier>
__global__ void tile_handover(float* out) {
  __shared__ __align__(16) __nv_bfloat16 tile[8 * 8];
  if (threadIdx.x >= 32) {
    const unsigned i = threadIdx.x - 32;
    tile[2 * i] = __float2bfloat16(2.f);
    tile[2 * i + 1] = __float2bfloat16(0.f);
  }
  if (Barrier) __syncthreads();
  if (threadIdx.x < 32) {
    uint32_t r[1];
    mma::ldmatrix(r, &tile[(threadIdx.x % 8) * 8]);
    out[threadIdx.x] = low_of(r[0]);
  }
}

// ---- host side
// -----------------------------------------------------------------------------------

namespace {

using cudasim_tests::checked;
using cudasim_tests::download;
using cudasim_tests::kDiagnostic;
using cudasim_tests::upload;

std::vector<__nv_bfloat16> bf16(const std::vector<float>& x) {
  std::vector<__nv_bfloat16> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = __float2bfloat16(x[i]);
  return r;
}

// n seeded values in [-1, 1), rounded to bf16 (so that the host reference sees what the kernel
// sees).
std::vector<float> random_bf16_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(n);
  for (float& v : x) v = __bfloat162float(__float2bfloat16(u(rng)));
  return x;
}

// n seeded integers in [-3, 3], none of them 0.
std::vector<float> small_integers(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(1, 3), sign(0, 1);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(sign(rng) ? u(rng) : -u(rng));
  return x;
}

// Expects got (m x n) to equal A (m x k) · B (k x n) + C (C may be empty) within 1e-4 of each
// element's sum of magnitudes.
void expect_product(const std::vector<float>& got, const std::vector<float>& a,
                    const std::vector<float>& b, const std::vector<float>& c, int m, int n, int k,
                    const char* what) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double want = c.empty() ? 0.0 : c[i * n + j], magnitude = c.empty() ? 0.0 : std::fabs(want);
      for (int kk = 0; kk < k; ++kk) {
        const double p = static_cast<double>(a[i * k + kk]) * b[kk * n + j];
        want += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(got[i * n + j], want, 1e-4 * magnitude + 1e-30)
          << what << ": D[" << i << "][" << j << "]";
    }
  }
}

}  // namespace

class WarpMma : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef __CUDASIM__
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    int device = 0, major = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
              cudaSuccess);
    if (major < 8) GTEST_SKIP() << "compute capability " << major << ".x: the bf16 mma needs 8.0";
#endif
  }
};

namespace {

// Row R of the 32 x 8 matrix holds R·8 + c in column c; it is stored at slot (5R + 3) mod 32, so
// that a lane's address, not its number, decides what it loads.
template <int N, bool Trans>
void check_ldmatrix_layout() {
  std::vector<float> m(32 * 8);
  for (int i = 0; i < 32 * 8; ++i) m[i] = static_cast<float>(i);
  std::vector<int> slot(32);
  for (int r = 0; r < 32; ++r) slot[r] = (5 * r + 3) % 32;
  __nv_bfloat16* d_m = upload(bf16(m));
  int* d_slot = upload(slot);
  float* d_out = upload(std::vector<float>(32 * N * 2, -1.f));
  ldmatrix_layout<N, Trans><<<1, 32>>>(d_m, d_slot, d_out);
  CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = download(d_out, 32 * N * 2);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, q = lane % 4;
    for (int j = 0; j < N; ++j) {
      for (int h = 0; h < 2; ++h) {
        // Element (row, col) of matrix j is row 8j + row of m: value (8j + row)·8 + col.
        const int row = Trans ? 2 * q + h : g, col = Trans ? g : 2 * q + h;
        ASSERT_EQ(out[(lane * N + j) * 2 + h], static_cast<float>((8 * j + row) * 8 + col))
            << (Trans ? "ldmatrix_trans" : "ldmatrix") << "<" << N << ">: lane " << lane << ", r["
            << j << "], " << (h ? "high" : "low") << " half";
      }
    }
  }
  cudaFree(d_m);
  cudaFree(d_slot);
  cudaFree(d_out);
}

}  // namespace

TEST_F(WarpMma, LdmatrixGivesEachLaneItsDocumentedElements) {
  check_ldmatrix_layout<1, false>();
  check_ldmatrix_layout<2, false>();
  check_ldmatrix_layout<4, false>();
}

TEST_F(WarpMma, LdmatrixTransGivesEachLaneItsDocumentedElements) {
  check_ldmatrix_layout<1, true>();
  check_ldmatrix_layout<2, true>();
  check_ldmatrix_layout<4, true>();
}

TEST_F(WarpMma, MmaWithRegistersFromTheLayoutTables) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> a = random_bf16_values(16 * 16, seed),
                             b = random_bf16_values(16 * 8, seed + 10);
    const std::vector<float> c = random_bf16_values(16 * 8, seed + 20);
    __nv_bfloat16* d_a = upload(bf16(a));
    __nv_bfloat16* d_b = upload(bf16(b));
    float* d_c = upload(c);
    float* d_d = upload(std::vector<float>(16 * 8, NAN));
    mma_by_layout<<<1, 32>>>(d_a, d_b, d_c, d_d);
    CHECK(cudaDeviceSynchronize());
    expect_product(download(d_d, 16 * 8), a, b, c, 16, 8, 16, "mma_m16n8k16");
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    cudaFree(d_d);
  }
}

TEST_F(WarpMma, TileProductWithLdmatrixOperands) {
  constexpr int K = 64;
  const std::vector<float> a = random_bf16_values(16 * K, 7), b = random_bf16_values(K * 8, 8);
  std::vector<float> bt(8 * K);
  for (int k = 0; k < K; ++k) {
    for (int n = 0; n < 8; ++n) bt[n * K + k] = b[k * 8 + n];
  }
  __nv_bfloat16* d_a = upload(bf16(a));
  __nv_bfloat16* d_bt = upload(bf16(bt));
  __nv_bfloat16* d_b = upload(bf16(b));
  float* d_t = upload(std::vector<float>(16 * 8, NAN));
  float* d_b_out = upload(std::vector<float>(16 * 8, NAN));
  tile_product<K><<<1, 32>>>(d_a, d_bt, d_b, d_t, d_b_out);
  CHECK(cudaDeviceSynchronize());
  expect_product(download(d_t, 16 * 8), a, b, {}, 16, 8, K, "B stored [n][k], ldmatrix");
  expect_product(download(d_b_out, 16 * 8), a, b, {}, 16, 8, K, "B stored [k][n], ldmatrix_trans");
  cudaFree(d_a);
  cudaFree(d_bt);
  cudaFree(d_b);
  cudaFree(d_t);
  cudaFree(d_b_out);
}

// Small integers keep S (|S| <= 16·9) and O exact in bf16 and fp32: the comparison is exact.
TEST_F(WarpMma, AccumulatorsReusedAsTheNextAOperand) {
  const std::vector<float> a = small_integers(16 * 16, 11), b1 = small_integers(16 * 16, 12);
  const std::vector<float> v = small_integers(16 * 8, 13);
  __nv_bfloat16* d_a = upload(bf16(a));
  __nv_bfloat16* d_b1 = upload(bf16(b1));
  __nv_bfloat16* d_v = upload(bf16(v));
  float* d_o = upload(std::vector<float>(16 * 8, NAN));
  chained_product<<<1, 32>>>(d_a, d_b1, d_v, d_o);
  CHECK(cudaDeviceSynchronize());
  const std::vector<float> o = download(d_o, 16 * 8);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double want = 0.0;
      for (int c = 0; c < 16; ++c) {
        double s = 0.0;
        for (int k = 0; k < 16; ++k) s += static_cast<double>(a[i * 16 + k]) * b1[k * 16 + c];
        want += s * v[c * 8 + j];
      }
      ASSERT_EQ(o[i * 8 + j], want) << "O[" << i << "][" << j << "]: S's accumulators reused as P";
    }
  }
  cudaFree(d_a);
  cudaFree(d_b1);
  cudaFree(d_v);
  cudaFree(d_o);
}

class WarpMmaDiagnostics : public cudasim_tests::CpuBackendDiagnostics {
 protected:
  void SetUp() override {
    CpuBackendDiagnostics::SetUp();
    if (IsSkipped()) return;
    out = upload(std::vector<float>(64, 0.f));
    rows = upload(bf16(std::vector<float>(16 * 8, 1.f)));
  }
  void TearDown() override {
    cudaFree(out);
    cudaFree(rows);
  }
  static std::string at(unsigned line) {
    return "warp_mma_test.cu:" + std::to_string(line);
  }
  float* out = nullptr;
  __nv_bfloat16* rows = nullptr;
};

TEST_F(WarpMmaDiagnostics, MisalignedRowAddress) {
  auto run = [&] {
    misaligned_row<<<1, 32>>>(out);
    cudaDeviceSynchronize();
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'misaligned_row'.*warp 0.*ldmatrix.x1 at .*" + at(kMisalignedLine) +
                  ": the row address .* is not 16-byte aligned \\(it is 8 bytes past");
}

TEST_F(WarpMmaDiagnostics, RowInGlobalMemory) {
  auto run = [&] {
    row_in_global_memory<<<1, 32>>>(rows, out);
    cudaDeviceSynchronize();
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'row_in_global_memory'.*ldmatrix.x2 at .*" + at(kGlobalRowLine) +
                  ": the row address .* is not 16 bytes inside the block's shared memory");
}

TEST_F(WarpMmaDiagnostics, MmaByHalfAWarp) {
  auto run = [&] {
    half_warp_mma<<<1, 32>>>(out);
    cudaDeviceSynchronize();
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'half_warp_mma'.*mma.sync.m16n8k16 at .*" + at(kHalfWarpLine) +
                  ".*has already exited.*warp-collective");
}

TEST_F(WarpMmaDiagnostics, MmaInABlockOfSixteenThreads) {
  auto run = [&] {
    half_warp_mma<<<1, 16>>>(out);
    cudaDeviceSynchronize();
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'half_warp_mma'.*mma.sync.m16n8k16 at .*" + at(kHalfWarpLine) +
                  " needs a whole warp of 32 threads, but this warp has 16");
}

TEST_F(WarpMmaDiagnostics, TileHandedOverWithABarrierIsNotARace) {
  tile_handover<true><<<1, 64>>>(out);
  CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = download(out, 32);
  // Every lane's low half is an even column of the tile, which warp 1 set to 2.
  for (int lane = 0; lane < 32; ++lane) ASSERT_EQ(got[lane], 2.f) << "lane " << lane;
}

TEST_F(WarpMmaDiagnostics, TileHandedOverWithoutABarrierIsARace) {
  if (!checked())
    GTEST_SKIP() << "needs the checked build (cudasim_warp_mma_test_check, CUDASIM_CHECK=all)";
  auto run = [&] {
    tile_handover<false><<<1, 64>>>(out);
    cudaDeviceSynchronize();
  };
  const std::string lines = "(" + std::to_string(kTileStoreLine) + "|" +
                            std::to_string(kTileStoreLine + 1) + "|" +
                            std::to_string(kTileLoadLine) + ")";
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'tile_handover<false>'.*shared-memory race .*__shared__ array 'tile'.*"
              "warp_mma_test.cu:" +
                  lines + ".*warp_mma_test.cu:" + lines);
}
