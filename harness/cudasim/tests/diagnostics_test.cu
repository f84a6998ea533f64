// Mistakes the CPU backend reports instead of computing garbage. Each one stops the process with
// a message naming the kernel, block, thread and source line; these are death tests.
// On a GPU these kernels hang or are undefined, so the CUDA build skips them.
// The tests assert the source lines of the kernels below: keep the kernels where they are.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <stdexcept>

__global__ void divergent_barrier(float* x) {
  if (threadIdx.x < 16) {
    x[threadIdx.x] = 1.f;
    __syncthreads();  // reached by threads 0-15
  } else {
    x[threadIdx.x] = 2.f;
    __syncthreads();  // reached by threads 16-31
  }
}

__global__ void barrier_vs_shuffle(float* x) {
  float v = x[threadIdx.x];
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 1);  // lane 0 never arrives here
  }
  x[threadIdx.x] = v;
}

__global__ void mask_without_caller(int* x) {
  x[threadIdx.x] = __shfl_sync(0x0000fffeu, x[threadIdx.x], 1);  // lane 0 is not in the mask
}

__global__ void mask_names_exited_lane(int* x) {
  if (threadIdx.x >= 8) return;
  x[threadIdx.x] = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1);
}

#ifdef __CUDASIM__  // ptxas rejects it at compile time ("too much shared data")
__global__ void too_much_static_shared(float* x) {
  __shared__ float big[16 * 1024];  // 64 KB
  big[threadIdx.x] = 1.f;
  x[threadIdx.x] = big[threadIdx.x];
}
#endif

#ifdef __CUDASIM__  // device code cannot throw under nvcc
__global__ void throws(int* x) {
  if (threadIdx.x == 5) throw std::runtime_error("boom");
  x[threadIdx.x] = 1;
}
#endif

// 16 KB of __shared__ variables beside dynamic shared memory. A GPU refuses the launch when the
// two together pass 48 KB without an opt-in, so the CUDA build does not launch it that way.
__global__ void static_beside_dynamic(float* x) {
  __shared__ float fixed[4096];
  extern __shared__ float rest[];
  fixed[threadIdx.x] = 1.f;
  rest[threadIdx.x] = 2.f;
  __syncthreads();
  x[threadIdx.x] = fixed[threadIdx.x] + rest[threadIdx.x];
}

// A GPU refuses a launch of more threads per block than a kernel's __launch_bounds__.
__global__ void __launch_bounds__(64) bounded(float* x) {
  x[threadIdx.x] = 1.f;
}
template <int Threads>
__global__ void __launch_bounds__(Threads, 1) bounded_by(float* x) {
  x[threadIdx.x] = 2.f;
}

class Diagnostics : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef __CUDASIM__
    GTEST_SKIP() << "CPU-backend diagnostics: these kernels hang or are undefined on a GPU";
#endif
    ASSERT_EQ(cudaMalloc(&buf, 1024 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemset(buf, 0, 1024 * sizeof(float)), cudaSuccess);
  }
  void TearDown() override { cudaFree(buf); }
  float* buf = nullptr;
  static constexpr int kExit = 70;  // cudasim::kDiagnosticExitStatus
};

TEST_F(Diagnostics, DivergentSyncthreadsNamesBothLines) {
  // Launches go in lambdas: the commas of <<<...>>> would split a macro argument under nvcc.
  auto run = [&] { divergent_barrier<<<1, 32>>>(buf); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kExit),
      "kernel 'divergent_barrier'.*block \\(0,0,0\\).*divergent __syncthreads.*"
      "thread \\(0,0,0\\) waits at .*diagnostics_test.cu:13.*thread \\(16,0,0\\) waits at .*diagnostics_test.cu:16");
}

TEST_F(Diagnostics, ALaunchThroughAFunctionPointerNamesTheKernel) {
  auto run = [&] {
    void (*const kernel)(float*) = divergent_barrier;
    kernel<<<1, 32>>>(buf);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kExit),
              "kernel 'divergent_barrier'.*divergent __syncthreads");
}

TEST_F(Diagnostics, BarrierAgainstShuffleIsADeadlock) {
  auto run = [&] { barrier_vs_shuffle<<<1, 32>>>(buf); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kExit),
              "kernel 'barrier_vs_shuffle'.*deadlock.*__syncthreads at .*diagnostics_test.cu:23.*"
              "__shfl_xor_sync at .*diagnostics_test.cu:25");
}

TEST_F(Diagnostics, ShuffleMaskMustIncludeTheCaller) {
  auto run = [&] { mask_without_caller<<<1, 32>>>(reinterpret_cast<int*>(buf)); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kExit),
              "thread \\(([0-9]+),0,0\\): __shfl_sync at .*diagnostics_test.cu:31 is called with mask 0xfffe.*does "
              "not include the calling lane [0-9]+");  // lane 0 or 16-31, whichever runs first
}

TEST_F(Diagnostics, ShuffleMaskNamingAnExitedLane) {
  auto run = [&] { mask_names_exited_lane<<<1, 32>>>(reinterpret_cast<int*>(buf)); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kExit),
              "__shfl_down_sync at .*diagnostics_test.cu:36 uses mask 0xffffffff, which names lane 8.*"
              "already exited");
}

TEST_F(Diagnostics, StaticSharedMemoryLimit) {
#ifdef __CUDASIM__
  auto run = [&] { too_much_static_shared<<<1, 32>>>(buf); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kExit),
              "kernel 'too_much_static_shared'.*65536 bytes.*diagnostics_test.cu:41.*49152 bytes");
#endif
}

// Static and dynamic shared memory share a block's 48 KB unless the kernel opts in; with an
// opt-in, the static part must still fit beside it. Either way a GPU runs nothing.
TEST_F(Diagnostics, StaticAndDynamicSharedMemoryTogether) {
#ifdef __CUDASIM__
  auto over_default = [&] { static_beside_dynamic<<<1, 32, 40 * 1024>>>(buf); };
  EXPECT_EXIT(over_default(), ::testing::ExitedWithCode(kExit),
              "kernel 'static_beside_dynamic'.*need 16384 bytes.*diagnostics_test.cu:[0-9]+.*"
              "asks for 40960 bytes of dynamic shared memory: together more than the 49152 bytes.*"
              "cudaFuncSetAttribute\\(static_beside_dynamic,");
  auto over_opt_in = [&] {
    const int most = 160 * 1024;
    ASSERT_EQ(cudaFuncSetAttribute(static_beside_dynamic,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, most),
              cudaSuccess);
    static_beside_dynamic<<<1, 32, 1024>>>(buf);
  };
  EXPECT_EXIT(
      over_opt_in(), ::testing::ExitedWithCode(kExit),
      "need 16384 bytes.*opted in to 163840 bytes.*more than the 166912 bytes a block may have");
#endif
}

TEST_F(Diagnostics, MoreThreadsThanTheLaunchBounds) {
#ifdef __CUDASIM__
  auto over = [&] { bounded<<<1, 128>>>(buf); };
  EXPECT_EXIT(over(), ::testing::ExitedWithCode(kExit),
              "kernel 'bounded'.*a block of 128 threads, more than the 64 its __launch_bounds__ "
              "allow.*A GPU refuses this launch");
  auto over_instantiation = [&] { bounded_by<32><<<2, dim3(8, 8)>>>(buf); };
  EXPECT_EXIT(over_instantiation(), ::testing::ExitedWithCode(kExit),
              "kernel 'bounded_by<32>'.*a block of 64 threads, more than the 32");
#endif
}

TEST_F(Diagnostics, UncaughtExceptionNamesTheThread) {
#ifdef __CUDASIM__
  auto run = [&] { throws<<<2, 32>>>(reinterpret_cast<int*>(buf)); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kExit),
              "kernel 'throws'.*block \\([01],0,0\\).*thread \\(5,0,0\\): uncaught exception: boom");
#endif
}
