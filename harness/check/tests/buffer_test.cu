// DeviceBuffer on a real backend: small kernels make each classic indexing mistake on purpose
// (one element past the end, one before the start, rows left unwritten by a grid that rounds down)
// and the harness must name each one. Runs on the CPU backend and, with a GPU, under nvcc.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/cuda_check.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tests/expect_text.h"

using clockwork::DeviceBuffer;

// y[i] = 2·x[i] for i < n: the correct kernel.
__global__ void kernel_double(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i];
}

// Bounds test off by one (`<=`): thread n writes y[n], one past the end.
__global__ void kernel_double_off_by_one(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) y[i] = 2.f * (i < n ? x[i] : 1.f);
}

// Writes y[i - 1] for i in [0, n): thread 0 writes y[-1], one before the start.
__global__ void kernel_shifted_left(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i - 1] = 2.f * x[i];
}

// One block per tile of `tile` rows; the launcher below computes the grid with rows / tile
// (rounding down), so the rows past the last full tile are never written.
__global__ void kernel_copy_rows(const float* x, float* y, int rows, int cols, int tile) {
  const int row = blockIdx.x * tile + threadIdx.y;
  const int col = threadIdx.x;
  if (row < rows && col < cols) y[row * cols + col] = x[row * cols + col];
}

namespace {

constexpr int kThreads = 128;

int blocks_for(int n) {
  return (n + kThreads - 1) / kThreads;
}

std::vector<float> doubled(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = 2.f * x[i];
  return y;
}

constexpr clockwork::Tolerance kExact{0, 0, "a product by 2 is exact"};

TEST(DeviceBuffer, StartsPoisonedWithIntactGuards) {
  DeviceBuffer<float> f("f", {3, 5});
  EXPECT_EQ(f.size(), 15u);
  EXPECT_EQ(f.bytes(), 60u);
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(f.name(), "f");
  EXPECT_EQ(f.label(), "'f' [3 x 5]");
  for (float v : f.download()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(f.check_guards(), "");

  DeviceBuffer<int32_t> i("ids", {7});
  for (int32_t v : i.download()) EXPECT_EQ(v, -1);
  DeviceBuffer<int64_t> l("l", {2, 2});
  for (int64_t v : l.download()) EXPECT_EQ(v, -1);
  DeviceBuffer<__nv_bfloat16> b("w", {4});
  for (float v : clockwork::from_bf16(b.download())) EXPECT_TRUE(std::isnan(v));
  EXPECT_GE(DeviceBuffer<float>::guard_bytes_for(4), 256u);
}

TEST(DeviceBuffer, UploadDownloadRoundTripsAndChecksSizes) {
  const std::vector<float> x = clockwork::random_normal(100, clockwork::test_seed(1));
  DeviceBuffer<float> d("x", {10, 10});
  d.upload(x);
  EXPECT_EQ(d.download(), x);
  d.poison();
  for (float v : d.download()) EXPECT_TRUE(std::isnan(v));

  DeviceBuffer<__nv_bfloat16> w("w", {3});
  const auto wb = clockwork::to_bf16({1.f, -2.f, 0.5f});
  w.upload(wb);
  EXPECT_EQ(clockwork::from_bf16(w.download()), (std::vector<float>{1.f, -2.f, 0.5f}));

  DeviceBuffer<int64_t> l("pos", {3});
  l.upload({0, 1, 1000});
  EXPECT_EQ(l.download(), (std::vector<int64_t>{0, 1, 1000}));

  try {
    d.upload(std::vector<float>(99));
    FAIL() << "a wrong-sized upload must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_CONTAINS(e.what(), "upload to 'x' [10 x 10]: got 99 elements, the buffer holds 100");
  }
}

TEST(DeviceBuffer, MovesOwnership) {
  DeviceBuffer<float> a("a", {4});
  a.upload({1.f, 2.f, 3.f, 4.f});
  const float* p = a.data();
  DeviceBuffer<float> b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.download(), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(a.check_guards(), "");
  DeviceBuffer<float> c("c", {1});
  c = std::move(b);
  EXPECT_EQ(c.name(), "a");
  EXPECT_EQ(c.size(), 4u);
}

TEST(DeviceBuffer, CorrectKernelPassesEveryCheck) {
  const int n = 300;  // not a multiple of the block size
  const auto xv = clockwork::random_normal(n, clockwork::test_seed(2));
  DeviceBuffer<float> x("x", {n}), y("y", {n});
  x.upload(xv);
  kernel_double<<<blocks_for(n), kThreads>>>(x.data(), y.data(), n);
  CUDA_CHECK(cudaGetLastError());
  EXPECT_TRUE(clockwork::guards_intact(y));
  EXPECT_TRUE(clockwork::matches_reference(y, doubled(xv), kExact));
}

// The CPU backend's checked build stops the kernel at the first write outside the buffer, naming
// it; the guard bands are what other builds have.
bool checked_build() {
#ifdef __CUDASIM__
  return cudasim::checking();
#else
  return false;
#endif
}

TEST(DeviceBuffer, CatchesOneElementPastTheEnd) {
  const int rows = 4, cols = 16, n = rows * cols;
  const auto xv = clockwork::random_normal(n, clockwork::test_seed(3));
  DeviceBuffer<float> x("x", {n}), y("y", {rows, cols});
  x.upload(xv);
  if (checked_build()) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto run = [&] { kernel_double_off_by_one<<<blocks_for(n + 1), kThreads>>>(x.data(), y.data(), n); };
    EXPECT_EXIT(run(), ::testing::ExitedWithCode(70),
                "kernel 'kernel_double_off_by_one'.*thread \\(64,0,0\\): out-of-bounds write .*buffer_test.cu:33.*"
                "element 64 of buffer 'y' \\[4 x 16\\].*1 element past its end");
    return;
  }
  kernel_double_off_by_one<<<blocks_for(n + 1), kThreads>>>(x.data(), y.data(), n);
  CUDA_CHECK(cudaGetLastError());
  EXPECT_EQ(y.check_guards(),
            "kernel wrote 1 element past the end of 'y' [4 x 16] (first at +0 elements, index 64)");
  const auto guards = clockwork::guards_intact(y);
  EXPECT_FALSE(guards);
  EXPECT_CONTAINS(guards.message(), "check the kernel's bounds test");
  // The values inside are right, but the check as a whole still fails and says why.
  const auto r = clockwork::matches_reference(y, doubled(xv), kExact);
  EXPECT_FALSE(r);
  EXPECT_CONTAINS(r.message(), "past the end of 'y' [4 x 16]");
  EXPECT_CONTAINS(r.message(), "all 64 elements match");
  y.reset_guards();
  EXPECT_EQ(y.check_guards(), "");
}

TEST(DeviceBuffer, CatchesOneElementBeforeTheStart) {
  const int n = 50;
  const auto xv = clockwork::random_normal(n, clockwork::test_seed(4));
  DeviceBuffer<float> x("x", {n}), y("k", {n});
  x.upload(xv);
  if (checked_build()) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto run = [&] { kernel_shifted_left<<<blocks_for(n), kThreads>>>(x.data(), y.data(), n); };
    EXPECT_EXIT(run(), ::testing::ExitedWithCode(70),
                "kernel 'kernel_shifted_left'.*thread \\(0,0,0\\): out-of-bounds write .*buffer_test.cu:39.*"
                "element -1 of buffer 'k' \\[50\\].*1 element before its start");
    return;
  }
  kernel_shifted_left<<<blocks_for(n), kThreads>>>(x.data(), y.data(), n);
  CUDA_CHECK(cudaGetLastError());
  EXPECT_EQ(
      y.check_guards(),
      "kernel wrote 1 element before the start of 'k' [50] (nearest at -1 elements, index -1)");
  const auto r = clockwork::matches_reference(y, doubled(xv), kExact);
  EXPECT_FALSE(r);
  EXPECT_CONTAINS(r.message(), "before the start of 'k' [50]");
  EXPECT_CONTAINS(r.message(), "Element 49 was not written");  // the last one never got its value
}

TEST(DeviceBuffer, CatchesRowsPastTheLastFullTile) {
  const int rows = 70, cols = 8, tile = 16;
  const auto xv = clockwork::random_normal(rows * cols, clockwork::test_seed(5));
  DeviceBuffer<float> x("x", {rows, cols}), y("y", {rows, cols});
  x.upload(xv);
  kernel_copy_rows<<<rows / tile, dim3(cols, tile)>>>(x.data(), y.data(), rows, cols, tile);
  CUDA_CHECK(cudaGetLastError());
  EXPECT_EQ(y.check_guards(), "");
  const clockwork::CompareReport rep = clockwork::compare(y.download(), xv, y.shape(), kExact);
  EXPECT_EQ(rep.unwritten, 6u * cols);
  ASSERT_EQ(rep.unwritten_rows.size(), 1u);
  EXPECT_EQ(rep.unwritten_rows[0].first, 64);
  EXPECT_EQ(rep.unwritten_rows[0].last, 69);
  const auto r = clockwork::matches_reference(y, xv, kExact);
  EXPECT_FALSE(r);
  EXPECT_CONTAINS(r.message(),
                  "Rows 64..69 were not written: they are the rows past the last full "
                  "tile (for tiles of 8, 16, 32 or 64 rows).");
  EXPECT_CONTAINS(r.message(), "ceil_div(70, tile)");
}

TEST(CudaCheck, BadLaunchThrowsWithCallAndErrorName) {
  DeviceBuffer<float> y("y", {4});
  kernel_double<<<1, 2048>>>(y.data(), y.data(), 4);  // more threads than a block may have
  try {
    CUDA_CHECK(cudaGetLastError());
    FAIL() << "CUDA_CHECK must throw";
  } catch (const clockwork::CudaError& e) {
    // CUDA 13 (and the CPU backend, which follows it) says cudaErrorInvalidValue; older
    // toolkits said cudaErrorInvalidConfiguration. Both messages explain the launch limits.
    EXPECT_TRUE(e.code() == cudaErrorInvalidValue || e.code() == cudaErrorInvalidConfiguration)
        << cudaGetErrorName(e.code());
#ifdef __CUDASIM__
    EXPECT_EQ(e.code(), cudaErrorInvalidValue);
#endif
    EXPECT_CONTAINS(e.what(), "buffer_test.cu:");
    EXPECT_CONTAINS(e.what(), std::string("cudaGetLastError() failed: ") + cudaGetErrorName(e.code()));
    EXPECT_CONTAINS(e.what(), "1 to 1024 threads per block");
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the error must not resurface at the next check";
  try {
    CUDA_CHECK(cudaSetDevice(12345));
    FAIL() << "CUDA_CHECK must throw";
  } catch (const std::runtime_error& e) {  // CudaError is a std::runtime_error
    EXPECT_CONTAINS(e.what(), "cudaSetDevice(12345) failed: cudaErrorInvalidDevice");
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
