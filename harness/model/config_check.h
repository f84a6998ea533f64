// A config.json checked against the checkpoint it describes, before anything is sized from it.
#pragma once

#include "harness/model/safetensors.h"
#include "kernels/model_config.h"

namespace clockwork {

/// The number of tensors and the bytes of weights `config` implies (every weight at least 2
/// bytes an element) must not exceed what `checkpoint` holds; the sizes are computed with
/// overflow checks. Called before a list of expected tensors or of layers is built, so a corrupt
/// num_hidden_layers or hidden_size fails with a message instead of an allocation of its size.
/// Throws CheckpointError naming the checkpoint and the config.json fields.
void check_config_fits_checkpoint(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace clockwork
