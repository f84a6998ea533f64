/// @file weights.h
/// A checkpoint's weights on the device. Model and CachedModel (harness/pipeline) load them the
/// same way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "harness/check/cuda_check.h"
#include "kernels/model_config.h"
#include "kernels/steps.h"

namespace clockwork {

/// Called while weights load: (bytes copied so far, total bytes, name of the tensor).
using LoadProgress = std::function<void(uint64_t done, uint64_t total, const std::string& tensor)>;

/// cudaMalloc of `count` T's, recorded in `memory` (freed by free_device_memory). Throws
/// CudaError naming `owner` (the model class), the size and `what`.
template <class T>
T* allocate_device(std::vector<void*>& memory, size_t count, const std::string& owner,
                   const std::string& what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, count * sizeof(T));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw CudaError(err, owner + ": cannot allocate " + std::to_string(count * sizeof(T)) +
                             " bytes on the device for " + what + ": " + cudaGetErrorString(err));
  }
  memory.push_back(p);
  return static_cast<T*>(p);
}

/// Frees every allocation in `memory` (errors ignored: it runs in destructors) and empties it.
inline void free_device_memory(std::vector<void*>& memory) {
  for (void* p : memory) cudaFree(p);
  memory.clear();
}

/// Device pointers to every weight of the model (bf16) and the RoPE inverse frequencies.
struct DeviceWeights {
  const __nv_bfloat16* embed = nullptr;    ///< [V, d]
  std::vector<LayerWeights> layers;        ///< [L]
  const __nv_bfloat16* norm = nullptr;     ///< [d]
  const __nv_bfloat16* lm_head = nullptr;  ///< [V, d]; `embed` when the embeddings are tied
  double* inv_freq = nullptr;              ///< [h_d/2], with the config's rope scaling
};

/// Checks every tensor the model reads in the safetensors checkpoint of `dir` (name, bf16, the
/// shape `config` implies) before copying any, then copies them to the device (one allocation
/// each, appended to `memory`, which the caller frees). `owner` names the caller in allocation
/// errors. Throws CheckpointError naming the file and tensor, or CudaError.
DeviceWeights load_device_weights(const std::filesystem::path& dir, const ModelConfig& config,
                                  std::vector<void*>& memory, const LoadProgress& progress,
                                  const std::string& owner);

}  // namespace clockwork
