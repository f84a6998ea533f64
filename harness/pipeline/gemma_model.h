/// @file gemma_model.h
/// A Gemma 3 model on the device (milestone 6), from token ids to the logits of the next token,
/// run by the student's kernels and gemma_decoder_layer (kernels/steps.h). No KV cache: each
/// forward pass runs the whole sequence, like milestone 3's Model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
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
  std::vector<float> forward(const std::vector<int32_t>& ids, ForwardCapture* capture = nullptr);

 private:
  struct Impl;
  explicit GemmaModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace clockwork
