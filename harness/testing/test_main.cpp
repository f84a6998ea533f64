// main() of every kernel test binary. The same object serves both backends: linked with the CPU
// backend it always finds its one simulated device; linked with the CUDA runtime it reports the
// whole binary as skipped when the machine has no usable GPU, so CPU-only machines stay green
// without pretending that the GPU tests ran.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  int count = 0;
  // Without a driver this returns an error and leaves `count` unwritten: check the code first.
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("CLOCKWORK-SKIP: no CUDA device (%s); the GPU tests did not run.\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
    return 0;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    std::printf("device: %s (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);
  }
  return RUN_ALL_TESTS();
}
