// Floats to and from the device for the CPU backend's tests (and the same tests built by nvcc).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

namespace cudasim_tests {

/// `h.size()` floats on the device, copied from `h`.
inline float* upload(const std::vector<float>& h) {
  float* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

/// The first `n` floats at `d`, copied to the host.
inline std::vector<float> download(const float* d, size_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

}  // namespace cudasim_tests
