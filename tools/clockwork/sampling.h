// Choosing the next token from the logits: argmax (greedy), or a draw from
// softmax(logits / temperature) restricted to the top-k tokens and then to the smallest set whose
// probability reaches top-p.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tools/clockwork/cli.h"

namespace clockwork::cli {

struct SamplingOptions {
  double temperature = 0.0;  ///< 0: greedy
  int64_t top_k = 0;         ///< 0: all tokens
  double top_p = 1.0;        ///< 1: no nucleus cut
  uint64_t seed = 0;
};

/// Reads --temperature, --top-k, --top-p and --seed. The last three need --temperature > 0
/// (UsageError otherwise); without --seed a random seed is chosen (describe() prints it).
SamplingOptions sampling_from_args(const Args& args);

/// "greedy" or "sampling: temperature 0.6, top-p 0.9, seed 42".
std::string describe(const SamplingOptions& options);

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  /// The next token among ids [0, limit). Greedy takes the first largest logit; sampling uses
  /// this sampler's own random stream, so a seed reproduces a run.
  int32_t pick(const std::vector<float>& logits, int32_t limit);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;  // specified bit for bit by the standard, unlike the distributions
};

}  // namespace clockwork::cli
