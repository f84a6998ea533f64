/// @file model.h
/// The whole model on the device, from token ids to the logits of the next token, run by the
/// student's kernels (kernels/) and steps (milestones/: decoder_layer, run_layers, output_logits).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/model/weights.h"
#include "kernels/model_config.h"

namespace clockwork {

/// What forward() can record for the per-layer diagnosis (fp32, copied to the host).
struct ForwardCapture {
  std::vector<std::vector<float>> layer_outputs;  ///< [L][s·d]: X after each decoder layer
  std::vector<float> final_norm_last;             ///< [d]: RMSNorm(model.norm) of the last row
};

/// Throws std::invalid_argument("<who>: token id ... at position p is outside the vocabulary")
/// unless 0 <= id < config.vocab_size. The pipelines check every id before it reaches the
/// embedding kernel, which would read outside the table.
void check_token_id(const ModelConfig& config, int32_t id, size_t position, const char* who);

/// Throws std::invalid_argument naming `who` when `ids` is empty, longer than the context
/// (max_position_embeddings), or holds an id outside the vocabulary.
void check_token_ids(const ModelConfig& config, const std::vector<int32_t>& ids, const char* who);

/// Llama model with bf16 weights on the device and fp32 activations, run by the student kernels.
class Model {
 public:
  /// Reads `dir`/config.json and the safetensors checkpoint in `dir`, validates every tensor's
  /// name, dtype and shape, and copies the weights to the device. Throws CheckpointError or
  /// ConfigError naming the file and tensor on anything missing or malformed.
  static Model load(const std::filesystem::path& dir, const LoadProgress& progress = {});

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  /// The configuration read from config.json.
  const ModelConfig& config() const;

  /// Runs the full sequence `ids` (no KV cache) and returns the logits [V] of the last position.
  /// Throws std::invalid_argument when `ids` is empty, longer than the context
  /// (max_position_embeddings), or holds an id outside the vocabulary.
  std::vector<float> forward(const std::vector<int32_t>& ids, ForwardCapture* capture = nullptr);

  /// argmax of forward(ids): the greedy next token.
  int32_t next_token(const std::vector<int32_t>& ids);

  /// Chooses the attention of the following forward passes: milestone 3's kernels::attention with
  /// an [s, s] score workspace (the default), or milestone 5's fused kernels::flash_attention,
  /// for which no workspace is allocated. Changing it frees the activations (reallocated, for
  /// the new choice, by the next forward pass).
  void use_fused_attention(bool fused);
  bool fused_attention() const;

  /// Bytes of device memory the activations hold now (the sum of their cudaMalloc sizes; the
  /// weights are not counted). They are sized for the longest sequence run so far.
  size_t activation_bytes() const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace clockwork
