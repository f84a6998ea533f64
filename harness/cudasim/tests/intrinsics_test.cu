// Math intrinsics, bit operations, reinterpretation, bf16/fp16 conversions and printf in kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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
    // for __expf at large |x|); exact on the CPU backend.
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
