// Floats (and other elements) to and from the device for the CPU backend's tests (and the same
// tests built by nvcc).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

namespace cudasim_tests {

/// `h.size()` elements on the device, copied from `h`.
template <class T>
T* upload(const std::vector<T>& h) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

/// Floats, also from a braced list: upload({1.f, 2.f}).
inline float* upload(const std::vector<float>& h) {
  return upload<float>(h);
}

/// The first `n` elements at `d`, copied to the host.
template <class T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

}  // namespace cudasim_tests
