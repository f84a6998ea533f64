// __syncthreads and its variants; a missing barrier must show up as a wrong answer.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

constexpr int T = 16;

// C = A·B for n×n matrices, n a multiple of T: the classic shared-memory tiled kernel.
__global__ void matmul_tiled(const float* A, const float* B, float* C, int n) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < n; k0 += T) {
    As[ty][tx] = A[row * n + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

// The same kernel with the barrier after the loads forgotten: a race between threads of a block.
__global__ void matmul_missing_barrier(const float* A, const float* B, float* C, int n) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < n; k0 += T) {
    As[ty][tx] = A[row * n + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * n + col];
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

__global__ void count_and_or(const int* flags, int* out) {
  int f = flags[threadIdx.x];
  int c = __syncthreads_count(f);
  int a = __syncthreads_and(f);
  int o = __syncthreads_or(f);
  if (threadIdx.x == 0) {
    out[0] = c;
    out[1] = a;
    out[2] = o;
  }
}

// Threads that return early do not hold back a barrier of the others (PTX bar.sync semantics).
__global__ void early_exit(int* out, int active) {
  __shared__ int s[64];
  if (threadIdx.x >= static_cast<unsigned>(active)) return;
  s[threadIdx.x] = static_cast<int>(threadIdx.x) * 2;
  __syncthreads();
  out[threadIdx.x] = s[active - 1 - threadIdx.x];
}

class Matmul : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    a.resize(n * n);
    b.resize(n * n);
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    ref.assign(n * n, 0.f);
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < n; ++k)
        for (int j = 0; j < n; ++j) ref[i * n + j] += a[i * n + k] * b[k * n + j];
    ASSERT_EQ(cudaMalloc(&da, n * n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, n * n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dc, n * n * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(da, a.data(), n * n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db, b.data(), n * n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void TearDown() override {
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
#ifdef __CUDASIM__
    unsetenv("CUDASIM_ORDER");
    cudasim::reload_options();
#endif
  }
  // Largest |C - ref|; 1e-4 allows for fp32 summation in a different order than the host loop.
  double max_error() {
    std::vector<float> c(n * n);
    EXPECT_EQ(cudaMemcpy(c.data(), dc, n * n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    double m = 0;
    for (int i = 0; i < n * n; ++i) m = std::isnan(c[i]) ? INFINITY : std::fmax(m, std::fabs(c[i] - ref[i]));
    return m;
  }
  const int n = 64;
  std::vector<float> a, b, ref;
  float *da = nullptr, *db = nullptr, *dc = nullptr;
};

TEST_F(Matmul, TiledKernelIsCorrectInEveryThreadOrder) {
  for (const char* order : {"forward", "reverse", "shuffle:7"}) {
#ifdef __CUDASIM__
    setenv("CUDASIM_ORDER", order, 1);
    cudasim::reload_options();
#endif
    matmul_tiled<<<dim3(n / T, n / T), dim3(T, T)>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    EXPECT_LT(max_error(), 1e-4) << "order " << order;
  }
}

TEST_F(Matmul, MissingBarrierGivesAWrongAnswer) {
#ifndef __CUDASIM__
  GTEST_SKIP() << "thread order is a CPU-backend setting";
#else
  if (cudasim::checking()) {  // the checked build names the race instead of computing garbage
    auto run = [&] { matmul_missing_barrier<<<dim3(n / T, n / T), dim3(T, T)>>>(da, db, dc, n); };
    EXPECT_EXIT(run(), ::testing::ExitedWithCode(70),
                "kernel 'matmul_missing_barrier'.*shared-memory race .* __shared__ array '[AB]s'");
    return;
  }
  for (const char* order : {"reverse", "shuffle:3"}) {
    setenv("CUDASIM_ORDER", order, 1);
    cudasim::reload_options();
    matmul_missing_barrier<<<dim3(n / T, n / T), dim3(T, T)>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    EXPECT_GT(max_error(), 1e-2) << "order " << order << ": the race went unnoticed";
  }
#endif
}

TEST(Sync, CountAndOr) {
  std::vector<int> flags(256);
  std::mt19937 rng(5);
  int expected = 0;
  for (auto& f : flags) expected += (f = static_cast<int>(rng() % 3 == 0) * 7) != 0;
  int *df, *dout;
  CHECK(cudaMalloc(&df, 256 * sizeof(int)));
  CHECK(cudaMalloc(&dout, 3 * sizeof(int)));
  CHECK(cudaMemcpy(df, flags.data(), 256 * sizeof(int), cudaMemcpyHostToDevice));
  count_and_or<<<1, 256>>>(df, dout);
  int out[3];
  CHECK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
  EXPECT_EQ(out[0], expected);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], 1);
  std::vector<int> all(256, 1);
  CHECK(cudaMemcpy(df, all.data(), 256 * sizeof(int), cudaMemcpyHostToDevice));
  count_and_or<<<1, 256>>>(df, dout);
  CHECK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
  EXPECT_EQ(out[0], 256);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 1);
  cudaFree(df);
  cudaFree(dout);
}

TEST(Sync, ExitedThreadsDoNotHoldTheBarrier) {
  int* d;
  CHECK(cudaMalloc(&d, 64 * sizeof(int)));
  early_exit<<<1, 64>>>(d, 40);
  CHECK(cudaGetLastError());
  std::vector<int> h(40);
  CHECK(cudaMemcpy(h.data(), d, 40 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int k = 0; k < 40; ++k) ASSERT_EQ(h[k], (39 - k) * 2);
  cudaFree(d);
}
