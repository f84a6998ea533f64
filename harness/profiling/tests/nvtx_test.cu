// nvtx.h on both backends: the header compiles in a .cu file (rewritten for the CPU backend and
// compiled by g++, or compiled by nvcc), ranges open and close around kernel launches, and the
// recorder (nvtx_recorder.h) sees their names, domain and nesting.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/check/cuda_check.h"
#include "harness/profiling/nvtx.h"
#include "harness/profiling/nvtx_recorder.h"

namespace clockwork {
namespace {

__global__ void fill_kernel(float* out, int n, float value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

// The recorder only sees ranges when no profiler's tool took NVTX over (nsys does).
#define SKIP_UNDER_A_PROFILER()                                                                  \
  if (!nvtx_recorder::recorder_installed()) {                                                    \
    GTEST_SKIP() << "CLOCKWORK-SKIP: another NVTX tool (a profiler) is attached, so the test's " \
                    "recorder sees no ranges";                                                   \
  }

std::vector<std::string> paths() {
  std::vector<std::string> out;
  for (const nvtx_recorder::RecordedRange& r : nvtx_recorder::ranges()) out.push_back(r.path);
  return out;
}

TEST(Nvtx, RangesNestAroundKernelLaunchesAndCloseAtScopeExit) {
  constexpr int n = 100;
  float* d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  {
    const nvtx::Range warm_up("warm-up");  // the first NVTX call installs the tool
  }
  SKIP_UNDER_A_PROFILER();
  nvtx_recorder::clear();
  {
    const nvtx::Range forward("forward");
    for (int layer = 0; layer < 2; ++layer) {
      const nvtx::Range in_layer("layer ", layer);
      const nvtx::Range op("fill");
      fill_kernel<<<1, 128>>>(d_out, n, static_cast<float>(layer));
      CUDA_CHECK(cudaGetLastError());
    }
    EXPECT_EQ(nvtx_recorder::open_ranges(), 1) << "only 'forward' should still be open";
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(nvtx_recorder::open_ranges(), 0) << "a range was not closed at the end of its scope";
  EXPECT_EQ(paths(),
            (std::vector<std::string>{"forward", "forward > layer 0", "forward > layer 0 > fill",
                                      "forward > layer 1", "forward > layer 1 > fill"}));
  for (const nvtx_recorder::RecordedRange& r : nvtx_recorder::ranges()) {
    EXPECT_EQ(r.domain, "clockwork") << "range '" << r.path << "' is not in the clockwork domain";
  }

  std::vector<float> out(n);
  CUDA_CHECK(cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(out[n - 1], 1.0f) << "the kernel inside the ranges did not run";
  CUDA_CHECK(cudaFree(d_out));
}

TEST(Nvtx, NumberedNamesAreFormattedInFull) {
  { const nvtx::Range warm_up("warm-up"); }
  SKIP_UNDER_A_PROFILER();
  nvtx_recorder::clear();
  {
    const nvtx::Range a("layer ", 31);
    const nvtx::Range b("forward s=", 1000000);
    const nvtx::Range c("negative ", -1);
  }
  const std::vector<nvtx_recorder::RecordedRange> r = nvtx_recorder::ranges();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].name, "layer 31");
  EXPECT_EQ(r[1].name, "forward s=1000000");
  EXPECT_EQ(r[2].name, "negative -1");
  EXPECT_EQ(r[2].depth, 2);
}

}  // namespace
}  // namespace clockwork
