// Asynchronous copies from global to shared memory (CUDA's pipeline primitives): copies land when
// their thread waits for their batch, a wait for all but the newest batch leaves that one in
// flight, zero fill, and the misuses the CPU backend reports. The same file passes on a GPU,
// except for what only cudasim can promise (a copy not waited for has not landed yet) and its
// diagnostics, which skip there.
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_floats.h"
#include "diagnostic_exit.h"

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

// ---- kernels (the diagnostics tests name some of their lines) ------------------------------------

// Each thread copies its 4 floats of `in` into shared memory and, after the block's barrier,
// writes its right neighbour's 4 to `out`: the copies must have landed for every thread.
__global__ void copy_through_shared(const float* in, float* out) {
  __shared__ __align__(16) float tile[4 * 128];
  const unsigned t = threadIdx.x, right = (t + 1) % blockDim.x;
  __pipeline_memcpy_async(&tile[4 * t], &in[4 * t], 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  for (int i = 0; i < 4; ++i) out[4 * t + i] = tile[4 * right + i];
}

// Two batches, then a wait for all but the newest: out[0..3] is the first copy, out[4..7] what
// the second copy's destination holds before its wait, out[8..11] the second copy after it.
__global__ void two_batches(const float* a, const float* b, float* out) {
  __shared__ __align__(16) float x[4], y[4];
  for (int i = 0; i < 4; ++i) {
    x[i] = -1.f;
    y[i] = -1.f;
  }
  __pipeline_memcpy_async(x, a, 16);
  __pipeline_commit();
  __pipeline_memcpy_async(y, b, 16);
  __pipeline_commit();
  __pipeline_wait_prior(1);
  for (int i = 0; i < 4; ++i) out[i] = x[i];
  for (int i = 0; i < 4; ++i) out[4 + i] = y[i];
  __pipeline_wait_prior(0);
  for (int i = 0; i < 4; ++i) out[8 + i] = y[i];
}

// Copies of 4, 8 and 16 bytes, the 16-byte one with its last 8 bytes zero-filled, into dynamic
// shared memory; copies started but not committed before a wait stay in flight until the next.
__global__ void sizes_and_zero_fill(const float* in, float* out) {
  extern __shared__ __align__(16) float dyn[];
  for (int i = 0; i < 12; ++i) dyn[i] = -1.f;
  __pipeline_memcpy_async(&dyn[0], &in[0], 4);
  __pipeline_memcpy_async(&dyn[2], &in[2], 8);
  __pipeline_memcpy_async(&dyn[4], &in[4], 16, 8);
  __pipeline_commit();
  __pipeline_memcpy_async(&dyn[8], &in[8], 16);  // not committed: a wait does not cover it
  __pipeline_wait_prior(0);
  for (int i = 0; i < 8; ++i) out[i] = dyn[i];
  __pipeline_commit();
  __pipeline_wait_prior(0);
  for (int i = 8; i < 12; ++i) out[i] = dyn[i];
}

constexpr unsigned kBadSizeLine = __LINE__ + 3;
__global__ void bad_size(const float* in, float* out) {
  __shared__ __align__(16) float x[4];
  __pipeline_memcpy_async(x, in, 12);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  out[0] = x[0];
}

constexpr unsigned kToGlobalLine = __LINE__ + 2;
__global__ void copy_to_global(const float* in, float* out) {
  __pipeline_memcpy_async(out, in, 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);
}

constexpr unsigned kMisalignedLine = __LINE__ + 3;
__global__ void misaligned_copy(const float* in, float* out) {
  __shared__ __align__(16) float x[8];
  __pipeline_memcpy_async(&x[1], in, 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  out[0] = x[1];
}

constexpr unsigned kFromSharedLine = __LINE__ + 4;
__global__ void copy_from_shared(float* out) {
  __shared__ __align__(16) float x[4], y[4];
  for (int i = 0; i < 4; ++i) x[i] = 1.f;
  __pipeline_memcpy_async(y, x, 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  out[0] = y[0];
}

// Thread 0 copies into x and waits; thread 1 reads x without a barrier in between.
constexpr unsigned kRacyWaitLine = __LINE__ + 7;
constexpr unsigned kRacyReadLine = __LINE__ + 8;
__global__ void read_without_barrier(const float* in, float* out) {
  __shared__ __align__(16) float x[4];
  if (threadIdx.x == 0) {
    __pipeline_memcpy_async(x, in, 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
  }
  if (threadIdx.x == 1) out[0] = x[0];
}

// ---- host side -----------------------------------------------------------------------------------

namespace {

using cudasim_tests::checked;
using cudasim_tests::download;
using cudasim_tests::kDiagnostic;
using cudasim_tests::upload;

// Distinct values that are exact in float: 0.5, 1.5, 2.5, ...
std::vector<float> ramp(size_t n) {
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<float>(i) + 0.5f;
  return h;
}

}  // namespace

TEST(Pipeline, CopiesLandWhenTheirThreadWaits) {
  const std::vector<float> in = ramp(4 * 128);
  float* d_in = upload(in);
  float* d_out = upload(std::vector<float>(in.size(), 0.f));
  copy_through_shared<<<1, 128>>>(d_in, d_out);
  CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = download(d_out, in.size());
  for (unsigned t = 0; t < 128; ++t) {
    for (unsigned i = 0; i < 4; ++i) {
      ASSERT_EQ(out[4 * t + i], in[4 * ((t + 1) % 128) + i]) << "thread " << t << ", float " << i;
    }
  }
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST(Pipeline, WaitingForAllButTheNewestBatch) {
  float* a = upload({1.f, 2.f, 3.f, 4.f});
  float* b = upload({5.f, 6.f, 7.f, 8.f});
  float* d_out = upload(std::vector<float>(12, 0.f));
  two_batches<<<1, 1>>>(a, b, d_out);
  CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = download(d_out, 12);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i], 1.f + i) << "the first batch has landed after __pipeline_wait_prior(1)";
    EXPECT_EQ(out[8 + i], 5.f + i) << "the second batch has landed after __pipeline_wait_prior(0)";
  }
#ifdef __CUDASIM__
  // On a GPU the second copy may or may not have landed before its wait; cudasim promises not.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[4 + i], -1.f) << "the second batch is still in flight";
#endif
  cudaFree(a);
  cudaFree(b);
  cudaFree(d_out);
}

TEST(Pipeline, SizesZeroFillAndCopiesNotCommitted) {
  float* d_in = upload(ramp(12));
  float* d_out = upload(std::vector<float>(12, 0.f));
  sizes_and_zero_fill<<<1, 1, 12 * sizeof(float)>>>(d_in, d_out);
  CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = download(d_out, 12);
  const std::vector<float> want = {0.5f, -1.f, 2.5f, 3.5f, 4.5f, 5.5f, 0.f, 0.f, 8.5f, 9.5f, 10.5f, 11.5f};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], want[i]) << "float " << i;
  cudaFree(d_in);
  cudaFree(d_out);
}

class PipelineDiagnostics : public cudasim_tests::CpuBackendDiagnostics {
 protected:
  void SetUp() override {
    CpuBackendDiagnostics::SetUp();
    if (IsSkipped()) return;
    in = upload(ramp(16));
    out = upload(std::vector<float>(16, 0.f));
  }
  void TearDown() override {
    cudaFree(in);
    cudaFree(out);
  }
  static std::string at(unsigned line) { return "pipeline_test.cu:" + std::to_string(line); }
  float* in = nullptr;
  float* out = nullptr;
};

TEST_F(PipelineDiagnostics, SizeOtherThanFourEightOrSixteen) {
  auto run = [&] { bad_size<<<1, 1>>>(in, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'bad_size'.*thread \\(0,0,0\\): __pipeline_memcpy_async at .*" + at(kBadSizeLine) +
                  ": size_and_align = 12 must be 4, 8 or 16");
}

TEST_F(PipelineDiagnostics, DestinationInGlobalMemory) {
  auto run = [&] { copy_to_global<<<1, 1>>>(in, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'copy_to_global'.*__pipeline_memcpy_async at .*" + at(kToGlobalLine) +
                  ": the destination .* is not in the block's shared memory");
}

TEST_F(PipelineDiagnostics, MisalignedDestination) {
  auto run = [&] { misaligned_copy<<<1, 1>>>(in, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'misaligned_copy'.*__pipeline_memcpy_async at .*" + at(kMisalignedLine) +
                  ": the destination .* must both be aligned to size_and_align = 16 bytes");
}

TEST_F(PipelineDiagnostics, SourceInSharedMemory) {
  auto run = [&] { copy_from_shared<<<1, 1>>>(out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'copy_from_shared'.*__pipeline_memcpy_async at .*" + at(kFromSharedLine) +
                  ": the source .* is in shared memory");
}

// The checker sees a copy as the waiting thread's writes at its wait: another thread's read with
// no barrier in between is a race.
TEST_F(PipelineDiagnostics, ReadOfACopiedBufferWithoutABarrier) {
  if (!checked()) GTEST_SKIP() << "needs the checked build (cudasim_pipeline_test_check, CUDASIM_CHECK=all)";
  auto run = [&] { read_without_barrier<<<1, 32>>>(in, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "shared-memory race.*__shared__ array 'x'.*(" + at(kRacyWaitLine) + ".*" + at(kRacyReadLine) + "|" +
                  at(kRacyReadLine) + ".*" + at(kRacyWaitLine) + ")");
}
