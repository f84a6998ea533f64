/// @file weights.h
/// Milestone 3: a checkpoint's weights on the device. Model (milestone 3) and CachedModel
/// (milestone 4) load them the same way.
#pragma once

#include <cuda_bf16.h>

#include <filesystem>
#include <string>
#include <vector>

#include "milestones/milestone1/config.h"
#include "milestones/milestone3/decoder.h"
#include "milestones/milestone3/model.h"

namespace clockwork {

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
