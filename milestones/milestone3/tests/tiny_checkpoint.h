// A random checkpoint written in the real on-disk format, and the reference model over the same
// weights: what the model tests of milestones 3 to 5 start from.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <torch/types.h>

#include "harness/check/temp_dir.h"
#include "kernels/model_config.h"
#include "reference/model.h"

namespace clockwork {

/// A checkpoint's tensors by name.
using Weights = std::map<std::string, torch::Tensor>;

/// Writes config.json and the weights `config` names (in checkpoint order; names missing from
/// `weights` are left out, so a test can write a checkpoint that lacks one) as model.safetensors,
/// or as 3 shards with an index when `sharded`.
void write_checkpoint(const std::filesystem::path& dir, const ModelConfig& config,
                      const Weights& weights, bool sharded = false);

/// Random weights for `config`, written to a temporary folder, and the reference over them.
struct TinyCheckpoint {
  ModelConfig config;
  Weights weights;
  TempDir dir;
  ref::Model reference;

  TinyCheckpoint(const ModelConfig& config, uint64_t seed);
};

}  // namespace clockwork
