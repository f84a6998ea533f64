// Memory API, constant memory, streams and events, device queries, and poisoning.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

__constant__ float coeffs[4];

__global__ void polynomial(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = coeffs[0] + x[i] * (coeffs[1] + x[i] * (coeffs[2] + x[i] * coeffs[3]));
}

// Reads shared memory before anyone wrote it: the CPU backend poisons it, so this reads NaN.
__global__ void read_unwritten_shared(float* out) {
  __shared__ float s[32];
  out[threadIdx.x] = s[threadIdx.x];
}

// Shared memory is per block: each block writes its index and reads it back after a barrier.
__global__ void per_block_shared(int* out) {
  __shared__ int s;
  if (threadIdx.x == 0) s = static_cast<int>(blockIdx.x);
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

TEST(Memory, CopiesRoundTripAndMemset) {
  std::vector<int> h(1000), back(1000);
  for (int i = 0; i < 1000; ++i) h[i] = i * 7 - 3;
  int *a, *b;
  CHECK(cudaMalloc(&a, 1000 * sizeof(int)));
  CHECK(cudaMalloc(&b, 1000 * sizeof(int)));
  CHECK(cudaMemcpy(a, h.data(), 4000, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, a, 4000, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpyAsync(back.data(), b, 4000, cudaMemcpyDeviceToHost, 0));
  EXPECT_EQ(back, h);
  CHECK(cudaMemset(b, 0, 4000));
  CHECK(cudaMemcpy(back.data(), b, 4000, cudaMemcpyDeviceToHost));
  for (int v : back) ASSERT_EQ(v, 0);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
}

TEST(Memory, ConstantMemoryThroughMemcpyToSymbol) {
  const float c[4] = {1.f, -2.f, 0.5f, 0.25f};
  CHECK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
  const int n = 300;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = 0.01f * i - 1.f;
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dy, n * 4));
  CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  polynomial<<<(n + 127) / 128, 128>>>(dx, dy, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(y.data(), dy, n * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    float r = c[0] + x[i] * (c[1] + x[i] * (c[2] + x[i] * c[3]));
    ASSERT_NEAR(y[i], r, 1e-5f) << i;  // fma contraction may differ between compilers
  }
  cudaFree(dx);
  cudaFree(dy);
}

TEST(Memory, SharedMemoryIsPerBlock) {
  const int blocks = 37, threads = 64;
  int* d;
  CHECK(cudaMalloc(&d, blocks * threads * 4));
  per_block_shared<<<blocks, threads>>>(d);
  std::vector<int> h(blocks * threads);
  CHECK(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < blocks * threads; ++i) ASSERT_EQ(h[i], i / threads);
  cudaFree(d);
}

TEST(Memory, StreamsAndEvents) {
  cudaStream_t s;
  cudaEvent_t start, stop;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, s));
  float* d;
  CHECK(cudaMalloc(&d, 1 << 20));
  CHECK(cudaMemsetAsync(d, 0, 1 << 20, s));
  CHECK(cudaEventRecord(stop, s));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaStreamSynchronize(s));
  float ms = -1.f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 0.f);
  EXPECT_LT(ms, 10000.f);
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaStreamDestroy(s));
  cudaFree(d);
}

TEST(Memory, DeviceQueries) {
  int count = -1;
  CHECK(cudaGetDeviceCount(&count));
  EXPECT_GE(count, 1);
  CHECK(cudaSetDevice(0));
  EXPECT_EQ(cudaSetDevice(count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  EXPECT_EQ(p.warpSize, 32);
  EXPECT_EQ(p.maxThreadsPerBlock, 1024);
  EXPECT_GE(p.sharedMemPerBlock, 48u * 1024);
  EXPECT_GT(p.multiProcessorCount, 0);
  EXPECT_STRNE(cudaGetErrorString(cudaErrorInvalidConfiguration), "");
}

#ifdef __CUDASIM__
TEST(Memory, CopiesOutsideAllocationsFailLikeOnAGpu) {
  std::vector<char> host(64);
  char* d;
  CHECK(cudaMalloc(&d, 64));
  EXPECT_EQ(cudaMemcpy(d, host.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue) << "one byte too many";
  EXPECT_EQ(cudaMemcpy(host.data(), d, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue) << "swapped pointers";
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue) << "freeing a host pointer";
  cudaGetLastError();
  cudaFree(d);
}

TEST(Memory, FreshAllocationsAndSharedMemoryArePoisoned) {
  float* d;
  CHECK(cudaMalloc(&d, 32 * sizeof(float)));
  std::vector<float> h(32);
  CHECK(cudaMemcpy(h.data(), d, 32 * 4, cudaMemcpyDeviceToHost));
  for (float v : h) ASSERT_TRUE(std::isnan(v)) << "cudaMalloc memory should read as NaN";
  CHECK(cudaMemset(d, 0, 32 * 4));
  read_unwritten_shared<<<1, 32>>>(d);
  CHECK(cudaMemcpy(h.data(), d, 32 * 4, cudaMemcpyDeviceToHost));
  for (float v : h) ASSERT_TRUE(std::isnan(v)) << "unwritten shared memory should read as NaN";
#ifdef __CUDASIM__
  // A NaN of its own (16-bit words 0xFFF1), so an output computed from it can be told apart from
  // an output never written (0xFF bytes).
  for (float v : h) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    ASSERT_EQ(bits, 0xFFF1FFF1u) << "the CPU backend's __shared__ poison";
  }
#endif
  cudaFree(d);
}
#endif
