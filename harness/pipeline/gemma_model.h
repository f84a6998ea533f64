/// @file gemma_model.h
/// A Gemma 3 model on the device (milestone 6), from token ids to the logits of the next token,
/// run by the student's kernels and gemma_decoder_layer (kernels/steps.h). forward() runs the
/// whole sequence, like milestone 3's Model; prefill() and decode() generate with a KV cache
/// (gemma_prefill_layer and gemma_decode_layer): global layers cache every position, local layers
/// a ring of sliding_window slots, since they never look further back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness/model/weights.h"
#include "harness/pipeline/model.h"
#include "kernels/model_config.h"

namespace clockwork {

class GemmaModel {
 public:
  /// Reads `dir`/config.json (a Gemma 3 config: model_type gemma3_text or gemma3) and copies
  /// every weight of the safetensors checkpoint in `dir` to the device after checking its name,
  /// dtype (bf16) and shape. Throws ConfigError or CheckpointError naming the file and tensor.
  static GemmaModel load(const std::filesystem::path& dir, const LoadProgress& progress = {});

  GemmaModel(GemmaModel&&) noexcept;
  GemmaModel& operator=(GemmaModel&&) noexcept;
  ~GemmaModel();

  const ModelConfig& config() const;

  /// Runs the full sequence `ids` and returns the logits [V] of the last position. Throws
  /// std::invalid_argument for an empty sequence, one longer than the context, or an id outside
  /// the vocabulary. `capture` receives every layer's output and the last row's final norm.
  /// The KV cache, if any, is untouched.
  std::vector<float> forward(const std::vector<int32_t>& ids, ForwardCapture* capture = nullptr);

  /// Allocates the KV cache for sequences of up to max_positions tokens (0: the context,
  /// max_position_embeddings): max_positions slots per global layer and a ring of
  /// min(sliding_window, max_positions) slots per local layer. Replaces any earlier cache.
  /// Throws std::invalid_argument for max_positions outside [0, context].
  void enable_cache(int max_positions = 0);
  /// Whether enable_cache() was called.
  bool has_cache() const;
  /// One line: the slots of each layer type and the bytes of K and V.
  std::string describe_cache() const;
  /// Slots of a local layer's ring (0 without a cache or without local layers).
  int local_ring_slots() const;
  /// Layer `layer`'s K (or, with values, V) cache on the host: [slots, h_k·h_d], slot-major.
  std::vector<float> download_cache(int layer, bool values) const;

  /// Clears the cache and runs the prompt through every layer, writing what each layer keeps of
  /// its K and V; returns the logits [V] of the last position. Throws std::logic_error without a
  /// cache, std::invalid_argument for bad ids, std::length_error when the prompt exceeds the
  /// cache's max_positions.
  std::vector<float> prefill(const std::vector<int32_t>& ids, ForwardCapture* capture = nullptr);
  /// One decode step: `token` at position cached_ids().size(); returns its logits [V]. Throws
  /// std::logic_error before a prefill, std::invalid_argument for an id outside the vocabulary,
  /// std::length_error when the sequence would exceed max_positions (nothing changes then).
  std::vector<float> decode(int32_t token);
  /// The ids the cache holds (empty before a prefill).
  const std::vector<int32_t>& cached_ids() const;
  /// Logits [V] of the token after `ids`, the one call a generation loop needs: one decode step
  /// when `ids` is the cached sequence plus one token, otherwise a prefill (with a cache) or a
  /// forward pass over the whole sequence (without).
  std::vector<float> logits(const std::vector<int32_t>& ids);

 private:
  struct Impl;
  explicit GemmaModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace clockwork
