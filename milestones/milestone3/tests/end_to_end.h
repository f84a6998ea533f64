// Whole-model checks shared by the model tests: the tolerance of the residual stream after L
// layers, the greedy-choice check, and check_end_to_end(), which runs a checkpoint directory
// through Model (the student pipeline) and through the reference on the same mapped weights and
// compares every layer, the logits, the next token and, optionally, greedy steps.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/types.h>

#include "harness/check/compare.h"
#include "kernels/model_config.h"
#include "harness/model/safetensors.h"
#include "harness/model/tokenizer.h"
#include "reference/model.h"

namespace clockwork {

/// The residual stream after `layers` layers at sequence length s: each layer adds the rounding
/// of its nine ops (two norms, five projections, RoPE, attention, SwiGLU) and carries the earlier
/// layers' errors on, so the allowance is the sum of the op tolerances times the layers so far.
Tolerance after_layers(const ModelConfig& config, int64_t s, int64_t layers);

/// The final norm and the logits: after_layers() of every layer, then the final RMSNorm and the
/// lm_head GEMV over d.
Tolerance logits_tolerance(const ModelConfig& config, int64_t s);

/// The greedy token `got` may differ from the reference's `want` only when the reference's two
/// logits are closer than twice the logits tolerance `t` (two correct fp32 implementations may
/// then disagree); otherwise a failure naming both tokens and logits.
void expect_same_choice(int32_t got, int64_t want, const torch::Tensor& ref_logits,
                        const Tolerance& t, const std::string& what);

/// What check_end_to_end() does besides the first forward pass.
struct EndToEndOptions {
  std::string label;  ///< names the model in messages, e.g. "2 layers of Llama-3-8B's sizes"
  /// Greedy steps of the top-5 inclusion gate after the first token (each one forward pass of
  /// both sides): each side's argmax must be among the other's five largest logits.
  int gate_steps = 0;
  /// Check the next token with Model::next_token() (the argmax kernel, one more forward pass)
  /// rather than with the host argmax of Model::forward()'s logits.
  bool device_argmax = true;
  /// On a mismatch, re-run the reference once per known mistake (chain.h) to name it. Costs one
  /// reference forward pass per pitfall, only when something already differs.
  bool name_pitfalls = false;
  const Tokenizer* tokenizer = nullptr;  ///< prints tokens as text when set
};

/// Loads `dir` (config.json and the safetensors checkpoint) with Model::load and, for the
/// reference, through ref::checkpoint_lookup(), runs both on `ids` and checks: the output of every
/// layer [s, d] within after_layers(), the final norm of the last row and the logits within
/// logits_tolerance(), the greedy next token (equal, or a near-tie), and options.gate_steps steps
/// of the top-5 gate. Prints a per-layer table of the errors and the time each side took.
void check_end_to_end(const std::filesystem::path& dir, const std::vector<int32_t>& ids,
                      const EndToEndOptions& options);

}  // namespace clockwork
