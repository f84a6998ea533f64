// The reference forward pass chained op by op, with any op swapped for a known mistake: the
// outputs a whole layer or a whole model gives when one mistake sits somewhere inside it. The
// layer and model tests hand these to matches_reference() so that a wrong layer output is named
// ("Your RoPE rotates even/odd pairs ...") instead of only reported as different.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "harness/check/compare.h"
#include "milestones/milestone3/tests/candidates.h"
#include "kernels/model_config.h"
#include "reference/model.h"
#include "reference/pitfalls.h"

namespace clockwork {

/// What a chained forward pass produced.
struct Chain {
  std::vector<torch::Tensor> hidden;  ///< [L] x after each layer, [s, d]
  std::map<std::string, torch::Tensor>
      first;                 ///< intermediates of the first layer, by LayerBuffers name
  torch::Tensor final_norm;  ///< [s, d] RMSNorm(model.norm) of every row
  torch::Tensor logits;      ///< [V], or [s, V] for the all-rows mistake
};

/// Runs `n_layers` layers (all of them when −1) from x0 [s, d], with the ops of `p` where it has
/// them and the correct ops elsewhere; the weights go through p.weights when set. Logits are
/// only computed when every layer ran.
Chain run_chain(const ModelConfig& config, const ref::WeightLookup& lookup, const ref::Pitfall& p,
                const torch::Tensor& x0, int64_t n_layers = -1);

/// One candidate per pitfall of ref::pitfalls(): pick(run_chain(..., pitfall, ...)).
std::vector<PitfallCandidate> chain_pitfalls(
    const ModelConfig& config, const ref::WeightLookup& lookup, const torch::Tensor& x0,
    int64_t n_layers, const std::function<torch::Tensor(const Chain&)>& pick);

}  // namespace clockwork
