// Math intrinsics, bit operations, reinterpretation, bf16/fp16 conversions and printf in kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

__global__ void math(const float* x, float* out) {
  int i = threadIdx.x;
  float v = x[i];
  out[8 * i + 0] = __expf(v);
  out[8 * i + 1] = __logf(fabsf(v) + 1.f);
  out[8 * i + 2] = rsqrtf(fabsf(v) + 0.5f);
  out[8 * i + 3] = __fdividef(v, 3.f);
  out[8 * i + 4] = __saturatef(v);
  out[8 * i + 5] = __fmaf_rn(v, 2.f, 1.f);
  out[8 * i + 6] = __int_as_float(__float_as_int(v));
  out[8 * i + 7] = __bfloat162float(__float2bfloat16(v)) + __half2float(__float2half(v));
}

__global__ void bits(const unsigned* x, int* out) {
  unsigned v = x[threadIdx.x];
  out[4 * threadIdx.x + 0] = __popc(v);
  out[4 * threadIdx.x + 1] = __clz(static_cast<int>(v));
  out[4 * threadIdx.x + 2] = __ffs(static_cast<int>(v));
  out[4 * threadIdx.x + 3] = static_cast<int>(__brev(v));
}

__global__ void hello(int tag) {
  if (threadIdx.x == 3 && blockIdx.x == 1) printf("hello from thread %d of block %d, tag %d\n", threadIdx.x, blockIdx.x, tag);
}

__global__ void ldg(const float* __restrict__ in, float* out) { out[threadIdx.x] = __ldg(in + threadIdx.x) * 2.f; }

TEST(Intrinsics, MathMatchesTheHostWithinTheGpuApproximationBounds) {
  const int n = 64;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = -4.f + 0.13f * i;
  float *dx, *dout;
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dout, 8 * n * 4));
  CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  math<<<1, n>>>(dx, dout);
  CHECK(cudaGetLastError());
  std::vector<float> out(8 * n);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    float v = x[i];
    // Relative 1e-5: __expf/__logf/rsqrtf/__fdividef are approximate on a GPU (a few ulp, more
    // for __expf at large |x|), and the CPU backend gives them the same error.
    EXPECT_NEAR(out[8 * i + 0], std::exp(v), 1e-5f * std::exp(v));
    EXPECT_NEAR(out[8 * i + 1], std::log(std::fabs(v) + 1.f), 1e-5f);
    EXPECT_NEAR(out[8 * i + 2], 1.f / std::sqrt(std::fabs(v) + 0.5f), 1e-5f);
    EXPECT_NEAR(out[8 * i + 3], v / 3.f, 1e-5f);
    EXPECT_EQ(out[8 * i + 4], std::fmin(std::fmax(v, 0.f), 1.f));
    EXPECT_EQ(out[8 * i + 5], std::fma(v, 2.f, 1.f));
    EXPECT_EQ(out[8 * i + 6], v);
    // bf16 keeps 7 fraction bits and fp16 10: round-to-nearest errs by at most 2^-8 and 2^-11
    // of the value.
    EXPECT_NEAR(out[8 * i + 7], 2.f * v, std::fabs(v) * (1.f / 256 + 1.f / 2048) + 1e-6f);
  }
  cudaFree(dx);
  cudaFree(dout);
}

TEST(Intrinsics, BitOperations) {
  const std::vector<unsigned> x = {0u, 1u, 0x80000000u, 0xffffffffu, 0x00f0f000u, 12345u};
  const int n = static_cast<int>(x.size());
  unsigned* dx;
  int* dout;
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dout, 4 * n * 4));
  CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  bits<<<1, n>>>(dx, dout);
  std::vector<int> out(4 * n);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    unsigned v = x[i], rev = 0;
    for (int b = 0; b < 32; ++b) rev |= ((v >> b) & 1u) << (31 - b);
    EXPECT_EQ(out[4 * i + 0], __builtin_popcount(v));
    EXPECT_EQ(out[4 * i + 1], v ? __builtin_clz(v) : 32);
    EXPECT_EQ(out[4 * i + 2], v ? __builtin_ctz(v) + 1 : 0);
    EXPECT_EQ(static_cast<unsigned>(out[4 * i + 3]), rev);
  }
}

TEST(Intrinsics, LdgReadsThroughTheReadOnlyPath) {
  float *din, *dout;
  CHECK(cudaMalloc(&din, 32 * 4));
  CHECK(cudaMalloc(&dout, 32 * 4));
  std::vector<float> h(32);
  for (int i = 0; i < 32; ++i) h[i] = static_cast<float>(i) - 7.5f;
  CHECK(cudaMemcpy(din, h.data(), 32 * 4, cudaMemcpyHostToDevice));
  ldg<<<1, 32>>>(din, dout);
  std::vector<float> out(32);
  CHECK(cudaMemcpy(out.data(), dout, 32 * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 32; ++i) ASSERT_EQ(out[i], 2.f * h[i]);
}

TEST(Intrinsics, PrintfFromAKernel) {
  ::testing::internal::CaptureStdout();
  hello<<<2, 8>>>(42);
  CHECK(cudaDeviceSynchronize());
  std::fflush(stdout);
  std::string got = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(got, "hello from thread 3 of block 1, tag 42\n");
}

// ---- integer intrinsics, min/max and conversions: what nvcc provides ------------------------------

__global__ void integer_ops(const int* a, const int* b, long long* out) {
  const int i = threadIdx.x, x = a[i], y = b[i];
  const unsigned ux = static_cast<unsigned>(x), uy = static_cast<unsigned>(y);
  long long* o = out + 12 * i;
  o[0] = min(x, y);
  o[1] = max(x, y);
  o[2] = umin(ux, uy);
  o[3] = umax(ux, uy);
  o[4] = llmin(static_cast<long long>(x) << 20, static_cast<long long>(y));
  o[5] = __mul24(x, y);
  o[6] = __umul24(ux, uy);
  o[7] = __mulhi(x, y);
  o[8] = __umulhi(ux, uy);
  o[9] = __sad(x, y, 7u);
  o[10] = __byte_perm(ux, uy, 0x5140u);
  o[11] = __funnelshift_l(ux, uy, 12u);
}

__global__ void conversions(const float* x, int* out) {
  const int i = threadIdx.x;
  const float v = x[i];
  out[8 * i + 0] = __float2int_rn(v);
  out[8 * i + 1] = __float2int_rz(v);
  out[8 * i + 2] = __float2int_ru(v);
  out[8 * i + 3] = __float2int_rd(v);
  out[8 * i + 4] = static_cast<int>(__float2uint_rn(v));
  out[8 * i + 5] = __float_as_int(__int2float_rz(16777217 + i));
  out[8 * i + 6] = __float_as_int(__int2float_ru(16777217 + i));
  out[8 * i + 7] = __float_as_int(__fadd_rz(1.f, 1e-8f * v));
}

TEST(Intrinsics, IntegerOperationsAndMinMax) {
  const std::vector<int> a = {3, -7, 100000, 0x7fffff, -1, 2000000000};
  const std::vector<int> b = {5, 2, -300, 0x1000000 + 3, -1, 3};
  const int n = static_cast<int>(a.size());
  int *da, *db;
  long long* dout;
  CHECK(cudaMalloc(&da, n * 4));
  CHECK(cudaMalloc(&db, n * 4));
  CHECK(cudaMalloc(&dout, 12 * n * 8));
  CHECK(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice));
  integer_ops<<<1, n>>>(da, db, dout);
  CHECK(cudaGetLastError());
  std::vector<long long> out(12 * n);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 8, cudaMemcpyDeviceToHost));
  auto low24 = [](int v) { return static_cast<long long>(static_cast<int>(static_cast<unsigned>(v) << 8) >> 8); };
  for (int i = 0; i < n; ++i) {
    const long long x = a[i], y = b[i];
    const unsigned long long ux = static_cast<unsigned>(a[i]), uy = static_cast<unsigned>(b[i]);
    const long long* o = out.data() + 12 * i;
    EXPECT_EQ(o[0], std::min(x, y)) << i;
    EXPECT_EQ(o[1], std::max(x, y)) << i;
    EXPECT_EQ(o[2], static_cast<long long>(std::min(ux, uy))) << i;
    EXPECT_EQ(o[3], static_cast<long long>(std::max(ux, uy))) << i;
    EXPECT_EQ(o[4], std::min(x << 20, y)) << i;
    EXPECT_EQ(o[5], static_cast<int>(static_cast<unsigned>(low24(a[i]) * low24(b[i])))) << "__mul24 uses 24 bits, " << i;
    EXPECT_EQ(o[6], static_cast<long long>(static_cast<unsigned>((ux & 0xffffff) * (uy & 0xffffff)))) << i;
    EXPECT_EQ(o[7], (x * y) >> 32) << i;
    EXPECT_EQ(o[8], static_cast<long long>((ux * uy) >> 32)) << i;
    EXPECT_EQ(o[9], static_cast<long long>(static_cast<unsigned>(std::llabs(x - y)) + 7u)) << i;
    const unsigned long long both = (uy << 32) | ux;
    unsigned perm = 0;
    for (int k = 0; k < 4; ++k) perm |= static_cast<unsigned>((both >> (8 * ((0x5140u >> (4 * k)) & 7))) & 0xff) << (8 * k);
    EXPECT_EQ(o[10], static_cast<long long>(perm)) << i;
    EXPECT_EQ(o[11], static_cast<long long>(static_cast<unsigned>(both << 12 >> 32))) << i;
  }
}

TEST(Intrinsics, ConversionsRoundAndSaturate) {
  const std::vector<float> x = {2.5f, -2.5f, 3.5f, -0.75f, 1e10f, -1e10f, NAN, 7.0f};
  const int n = static_cast<int>(x.size());
  float* dx;
  int* dout;
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dout, 8 * n * 4));
  CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  conversions<<<1, n>>>(dx, dout);
  CHECK(cudaGetLastError());
  std::vector<int> out(8 * n);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  // PTX cvt: round as asked, clamp to the integer range, NaN -> 0.
  auto expect_int = [](float v, double r) {
    if (std::isnan(v)) return 0;
    return r >= INT_MAX ? INT_MAX : r <= INT_MIN ? INT_MIN : static_cast<int>(r);
  };
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    EXPECT_EQ(out[8 * i + 0], expect_int(v, std::nearbyint(v))) << "rn " << v;
    EXPECT_EQ(out[8 * i + 1], expect_int(v, std::trunc(v))) << "rz " << v;
    EXPECT_EQ(out[8 * i + 2], expect_int(v, std::ceil(v))) << "ru " << v;
    EXPECT_EQ(out[8 * i + 3], expect_int(v, std::floor(v))) << "rd " << v;
    const double u = std::isnan(v) || v < 0 ? 0.0 : std::min<double>(std::nearbyint(v), 4294967295.0);
    EXPECT_EQ(static_cast<unsigned>(out[8 * i + 4]), static_cast<unsigned>(u)) << "uint rn " << v;
    // 16777217 + i needs 25 bits: rounding towards zero and up differ by one float step.
    float rz, ru;
    std::memcpy(&rz, &out[8 * i + 5], 4);
    std::memcpy(&ru, &out[8 * i + 6], 4);
    const double exact = 16777217.0 + i;
    EXPECT_LE(rz, exact);
    EXPECT_GE(ru, exact);
    EXPECT_EQ(ru - rz, (16777217 + i) % 2 ? 2.f : 0.f) << i;
    float sum;
    std::memcpy(&sum, &out[8 * i + 7], 4);
    if (!std::isnan(v) && 1e-8f * v > 0 && 1e-8f * v < 1e-7f) EXPECT_EQ(sum, 1.f) << "__fadd_rz drops a tiny addend";
  }
}

// ---- the fast-math intrinsics carry a GPU's error ---------------------------------------------------

__global__ void fast_math(const float* x, float* out) {
  const int i = threadIdx.x;
  const float v = x[i];
  out[6 * i + 0] = __expf(v);
  out[6 * i + 1] = __logf(v * v + 0.25f);
  out[6 * i + 2] = __sinf(v);
  out[6 * i + 3] = rsqrtf(v * v + 0.25f);
  out[6 * i + 4] = __fdividef(v, 3.f);
  out[6 * i + 5] = __fdividef(1.f + v * v, 3e38f);  // denominator above 2^126
}

TEST(Intrinsics, FastMathIsApproximateWithinTheProgrammingGuideBounds) {
  const int n = 256;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = -3.f + 6.f * static_cast<float>(i) / n;
  float *dx, *dout;
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dout, 6 * n * 4));
  CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  fast_math<<<1, n>>>(dx, dout);
  CHECK(cudaGetLastError());
  std::vector<float> out(6 * n);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  auto ulps = [](float got, double exact) {
    const float e = static_cast<float>(exact);
    return std::fabs(static_cast<double>(got) - exact) / (std::nextafter(std::fabs(e), INFINITY) - std::fabs(e));
  };
  int inexact = 0;
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    const double e = std::exp(v), l = std::log(v * v + 0.25), s = std::sin(v), r = 1 / std::sqrt(v * v + 0.25);
    // CUDA C++ Programming Guide, intrinsic functions: __expf 2 + floor(|1.173 x|) ulp; __logf
    // 2^-21.41 absolute in [0.5, 2], else 3 ulp; __sinf 2^-21.41 absolute in [-pi, pi]; rsqrtf
    // 2 ulp; __fdividef 2 ulp.
    EXPECT_LE(ulps(out[6 * i + 0], e), 2 + std::floor(std::fabs(1.173 * v)) + 0.5) << "__expf(" << v << ")";
    const double lx = v * v + 0.25;
    if (lx >= 0.5 && lx <= 2) {
      EXPECT_LE(std::fabs(out[6 * i + 1] - l), std::exp2(-21.41) * 1.01) << "__logf(" << lx << ")";
    } else {
      EXPECT_LE(ulps(out[6 * i + 1], l), 3.5) << "__logf(" << lx << ")";
    }
    EXPECT_LE(std::fabs(out[6 * i + 2] - s), std::exp2(-21.41) * 1.01) << "__sinf(" << v << ")";
    EXPECT_LE(ulps(out[6 * i + 3], r), 2.5) << "rsqrtf";
    EXPECT_LE(ulps(out[6 * i + 4], v / 3), 2.5) << "__fdividef";
    EXPECT_EQ(out[6 * i + 5], 0.f) << "__fdividef(x, y) is 0 for 2^126 < |y| < 2^128";
    inexact += out[6 * i + 0] != static_cast<float>(e);
  }
#ifdef __CUDASIM__
  // What makes the emulation worth having: a test that only an exact __expf passes fails here too.
  EXPECT_GT(inexact, n / 2) << "__expf must not be exact on the CPU backend";
#endif
}

// ---- half and bfloat16: the functions cuda_fp16.h / cuda_bf16.h declare for nvcc only ----------------

__global__ void half_math(const float* x, float* out, __half2* acc_h, __nv_bfloat162* acc_b) {
  const int i = threadIdx.x;
  const __half h = __float2half(x[i]);
  const __nv_bfloat16 b = __float2bfloat16(x[i]);
  out[6 * i + 0] = __half2float(hexp(h));
  out[6 * i + 1] = __bfloat162float(hexp(b));
  out[6 * i + 2] = __half2float(__hfma(h, h, __float2half(1.f)));
  const __half2 h2 = h2exp(__halves2half2(h, __float2half(0.f)));
  out[6 * i + 3] = __half2float(h2.x) + __half2float(h2.y);
  const __nv_bfloat162 p = __hmul2(__halves2bfloat162(b, b), __halves2bfloat162(b, __float2bfloat16(2.f)));
  out[6 * i + 4] = __bfloat162float(p.x) + __bfloat162float(p.y);
  out[6 * i + 5] = __half2float(__hfma2(__halves2half2(h, h), __halves2half2(h, h), __halves2half2(h, h)).y);
  atomicAdd(acc_h, __halves2half2(__float2half(1.f), __float2half(0.5f)));
  atomicAdd(acc_b, __halves2bfloat162(__float2bfloat16(1.f), __float2bfloat16(2.f)));
}

TEST(Intrinsics, HalfAndBfloat16Math) {
  const int n = 64;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = -2.f + 4.f * static_cast<float>(i) / n;
  float *dx, *dout;
  __half2* acc_h;
  __nv_bfloat162* acc_b;
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dout, 6 * n * 4));
  CHECK(cudaMalloc(&acc_h, sizeof(__half2)));
  CHECK(cudaMalloc(&acc_b, sizeof(__nv_bfloat162)));
  CHECK(cudaMemset(acc_h, 0, sizeof(__half2)));
  CHECK(cudaMemset(acc_b, 0, sizeof(__nv_bfloat162)));
  CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  half_math<<<1, n>>>(dx, dout, acc_h, acc_b);
  CHECK(cudaGetLastError());
  std::vector<float> out(6 * n);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const float v = x[i], hv = __half2float(__float2half(v)), bv = __bfloat162float(__float2bfloat16(v));
    // One rounding to fp16 (2^-11 relative) or bf16 (2^-8) of a function of the rounded input.
    EXPECT_NEAR(out[6 * i + 0], std::exp(hv), std::exp(hv) * 1e-3) << "hexp(half)";
    EXPECT_NEAR(out[6 * i + 1], std::exp(bv), std::exp(bv) * 8e-3) << "hexp(bf16)";
    EXPECT_NEAR(out[6 * i + 2], hv * hv + 1.f, (hv * hv + 1.f) * 1e-3) << "__hfma";
    EXPECT_NEAR(out[6 * i + 3], std::exp(hv) + 1.f, (std::exp(hv) + 1.f) * 2e-3) << "h2exp";
    EXPECT_NEAR(out[6 * i + 4], bv * bv + 2.f * bv, std::fabs(bv * bv) * 8e-3 + std::fabs(2.f * bv) * 8e-3 + 1e-6) << "__hmul2";
    EXPECT_NEAR(out[6 * i + 5], hv * hv + hv, std::fabs(hv * hv + hv) * 1e-3 + 1e-3) << "__hfma2";
  }
  __half2 h;
  __nv_bfloat162 b;
  CHECK(cudaMemcpy(&h, acc_h, sizeof h, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&b, acc_b, sizeof b, cudaMemcpyDeviceToHost));
  // 64 exact additions of 1, 0.5 and 2: representable in fp16 and bf16.
  EXPECT_EQ(__half2float(h.x), 64.f);
  EXPECT_EQ(__half2float(h.y), 32.f);
  EXPECT_EQ(__bfloat162float(b.x), 64.f);
  EXPECT_EQ(__bfloat162float(b.y), 128.f);
}

// ---- warp reductions and matches (compute capability 8.0 / 7.0) ----------------------------------------

__global__ void warp_reduce(const int* x, int* out) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  const int v = x[threadIdx.x];
  out[5 * threadIdx.x + 0] = __reduce_add_sync(0xffffffffu, v);
  out[5 * threadIdx.x + 1] = __reduce_min_sync(0xffffffffu, v);
  out[5 * threadIdx.x + 2] = __reduce_max_sync(0xffffffffu, v);
  out[5 * threadIdx.x + 3] = static_cast<int>(__reduce_or_sync(0xffffffffu, static_cast<unsigned>(v)));
  out[5 * threadIdx.x + 4] = static_cast<int>(__match_any_sync(0xffffffffu, v % 3));
#else
  (void)x;
  (void)out;
#endif
}

TEST(Intrinsics, WarpReductionsAndMatches) {
  std::vector<int> x(32);
  for (int i = 0; i < 32; ++i) x[i] = (i * 37) % 101 - 50;
  int *dx, *dout;
  CHECK(cudaMalloc(&dx, 32 * 4));
  CHECK(cudaMalloc(&dout, 5 * 32 * 4));
  CHECK(cudaMemcpy(dx, x.data(), 32 * 4, cudaMemcpyHostToDevice));
  warp_reduce<<<1, 32>>>(dx, dout);
  CHECK(cudaGetLastError());
  std::vector<int> out(5 * 32);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  int sum = 0, lo = x[0], hi = x[0];
  unsigned any = 0;
  for (int v : x) {
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    any |= static_cast<unsigned>(v);
  }
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(out[5 * t + 0], sum);
    EXPECT_EQ(out[5 * t + 1], lo);
    EXPECT_EQ(out[5 * t + 2], hi);
    EXPECT_EQ(static_cast<unsigned>(out[5 * t + 3]), any);
    unsigned same = 0;
    for (int u = 0; u < 32; ++u) same |= (x[u] % 3 == x[t] % 3 ? 1u : 0u) << u;
    EXPECT_EQ(static_cast<unsigned>(out[5 * t + 4]), same) << t;
  }
}
