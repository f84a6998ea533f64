// A config.json checked against the checkpoint it describes, before anything is sized from it.
#pragma once

#include "harness/model/safetensors.h"
#include "kernels/model_config.h"

namespace clockwork {

/// Sanity checks of `config` against `checkpoint` before a list of expected tensors or of layers
/// is built from it: the weights it implies must be countable in 64 bits (the sizes multiplied
/// with overflow checks), and num_hidden_layers must not exceed the layers the checkpoint holds
/// (the highest N of its model.layers.N.* tensors, plus one). A missing or misshapen tensor is
/// left to the per-tensor checks, whose messages name it. Throws CheckpointError naming the
/// checkpoint and the config.json fields.
void check_config_fits_checkpoint(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace clockwork
