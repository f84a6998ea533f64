// check_config_fits_checkpoint (config_check.h).
#include "harness/model/config_check.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

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

  // Elements: d (input_layernorm) + d (post_attention_layernorm) + 2 q_width d (q_proj, o_proj)
  // + 2 kv_width d (k_proj, v_proj) + 3 d_ff d (the MLP) a layer; V d for each of the
  // embedding table and lm_head; d for model.norm.
  if (c.hidden_size < 0) too_large();
  const uint64_t d = static_cast<uint64_t>(c.hidden_size);
  uint64_t d2 = 0, d3 = 0, q_width = 0, kv_width = 0, layer = 0, total = 0;
  if (!mul_add(d, 2, 0, d2) || !mul_add(d, 3, 0, d3) ||
      !mul_add(static_cast<uint64_t>(c.num_heads), c.head_dim, 0, q_width) ||
      !mul_add(static_cast<uint64_t>(c.num_kv_heads), c.head_dim, 0, kv_width) ||
      !mul_add(d2, static_cast<int64_t>(q_width), d2, layer) ||
      !mul_add(d2, static_cast<int64_t>(kv_width), layer, layer) ||
      !mul_add(d3, c.intermediate_size, layer, layer) || !mul_add(layer, c.num_layers, d, total) ||
      !mul_add(c.tie_word_embeddings ? d : d2, c.vocab_size, total, total) ||
      !mul_add(2, static_cast<int64_t>(total), 0, total)) {
    too_large();  // a negative size lands here too (mul_add refuses it)
  }

  // The layers the checkpoint holds: the highest N of its "model.layers.N." names.
  constexpr std::string_view kLayerPrefix = "model.layers.";
  int64_t last_layer = -1;
  for (const std::string& name : checkpoint.names()) {
    if (!name.starts_with(kLayerPrefix)) continue;
    int64_t n = 0;
    const char* first = name.data() + kLayerPrefix.size();
    const char* last = name.data() + name.size();
    auto [end, ec] = std::from_chars(first, last, n);
    if (ec == std::errc() && end != first && end != last && *end == '.') {
      last_layer = std::max(last_layer, n);
    }
  }
  const int64_t layers = last_layer + (last_layer < std::numeric_limits<int64_t>::max() ? 1 : 0);
  if (c.num_layers > layers) {
    throw CheckpointError(
        where + "config.json's num_hidden_layers is " + std::to_string(c.num_layers) + ", but " +
        (layers == 0
             ? std::string("the checkpoint holds no model.layers.N tensors")
             : "the checkpoint's layers stop at model.layers." + std::to_string(layers - 1)));
  }
}

}  // namespace clockwork
