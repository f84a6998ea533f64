// check_config_fits_checkpoint (config_check.h).
#include "harness/model/config_check.h"

#include <cstdint>
#include <string>

namespace clockwork {

namespace {

// a * b + c in 64 bits; false when it does not fit (or an operand is negative).
bool mul_add(uint64_t a, int64_t b, uint64_t c, uint64_t& out) {
  if (b < 0) return false;
  uint64_t product = 0;
  return !__builtin_mul_overflow(a, static_cast<uint64_t>(b), &product) &&
         !__builtin_add_overflow(product, c, &out);
}

}  // namespace

void check_config_fits_checkpoint(const ModelConfig& c, const Checkpoint& checkpoint) {
  const std::string where = checkpoint.path().string() + ": ";
  const std::string sizes = "config.json's hidden_size " + std::to_string(c.hidden_size) +
                            ", num_hidden_layers " + std::to_string(c.num_layers) +
                            ", intermediate_size " + std::to_string(c.intermediate_size) +
                            ", vocab_size " + std::to_string(c.vocab_size);
  auto too_large = [&]() {
    throw CheckpointError(where + sizes + " imply more weights than fit in 64 bits");
  };

  // embed_tokens, 9 tensors a layer, model.norm and (unless tied) lm_head.
  uint64_t tensors = 0;
  if (!mul_add(9, c.num_layers, c.tie_word_embeddings ? 2 : 3, tensors)) too_large();
  if (tensors > checkpoint.size()) {
    throw CheckpointError(where + "config.json's num_hidden_layers " +
                          std::to_string(c.num_layers) + " implies " + std::to_string(tensors) +
                          " tensors, but the checkpoint holds " +
                          std::to_string(checkpoint.size()));
  }

  // Elements: d (input_layernorm) + d (post_attention_layernorm) + 2 q_width d (q_proj, o_proj)
  // + 2 kv_width d (k_proj, v_proj) + 3 d_ff d (the MLP) a layer; V d for each of the
  // embedding table and lm_head; d for model.norm.
  const uint64_t d = static_cast<uint64_t>(c.hidden_size);
  uint64_t q_width = 0, kv_width = 0, layer = 0, total = 0;
  if (!mul_add(static_cast<uint64_t>(c.num_heads), c.head_dim, 0, q_width) ||
      !mul_add(static_cast<uint64_t>(c.num_kv_heads), c.head_dim, 0, kv_width) ||
      !mul_add(2 * d, static_cast<int64_t>(q_width), 2 * d, layer) ||
      !mul_add(2 * d, static_cast<int64_t>(kv_width), layer, layer) ||
      !mul_add(3 * d, c.intermediate_size, layer, layer) ||
      !mul_add(layer, c.num_layers, d, total) ||
      !mul_add(c.tie_word_embeddings ? d : 2 * d, c.vocab_size, total, total) ||
      !mul_add(2, static_cast<int64_t>(total), 0, total)) {
    too_large();
  }
  if (total > checkpoint.total_bytes()) {
    throw CheckpointError(where + sizes + " imply at least " + std::to_string(total) +
                          " bytes of weights, but the checkpoint's tensors hold " +
                          std::to_string(checkpoint.total_bytes()));
  }
}

}  // namespace clockwork
