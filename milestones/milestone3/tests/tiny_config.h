/// @file tiny_config.h
/// The small model shape of the layer, model and cached-model tests.
#pragma once

#include <cstdint>

#include "kernels/model_config.h"

namespace clockwork {

/// d = 64, h = 4 (h_d = 16), d_ff = 96, V = 97: every dimension differs from the others, so an
/// index that swaps two of them cannot pass by accident. Token 1 begins, 2 ends a sequence.
inline ModelConfig tiny_test_config(int64_t n_kv_heads, int64_t layers, int64_t context) {
  ModelConfig c;
  c.hidden_size = 64;
  c.num_layers = layers;
  c.num_heads = 4;
  c.num_kv_heads = n_kv_heads;
  c.head_dim = 16;
  c.intermediate_size = 96;
  c.vocab_size = 97;
  c.max_position_embeddings = context;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

}  // namespace clockwork
