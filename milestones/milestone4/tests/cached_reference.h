// The reference model generating with a KV cache, built from the reference operators, with
// known mistakes that can be switched on. The model tests compare a wrong cached generation
// with these to name the mistake ("your cache holds K before RoPE", ...).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "reference/model.h"

namespace clockwork {

/// Mistakes of a cached pipeline (all off: the correct one).
struct CacheMistakes {
  bool prefill_k_before_rope = false;  ///< prefill stores the prompt's K before RoPE
  bool decode_k_before_rope = false;   ///< decode steps store their k before RoPE
  bool rope_position_zero = false;  ///< decode steps rotate q and k as if at position 0
  bool excludes_current = false;    ///< decode attends to 0 .. pos−1, not to its own position
};

/// Prefill and decode steps on the reference operators (fp32, on the CPU).
class ReferenceCachedModel {
 public:
  /// `model` must outlive this object.
  explicit ReferenceCachedModel(const ref::Model& model, CacheMistakes mistakes = {});

  /// The prompt through the reference forward pass; its K (after RoPE, unless
  /// prefill_k_before_rope) and V of every layer become the cache. Returns the logits [V] of the last position.
  torch::Tensor prefill(const std::vector<int64_t>& ids);

  /// `token` at position length(): returns its logits [V] and appends its K and V.
  torch::Tensor decode(int64_t token);

  /// Positions cached.
  int64_t length() const { return length_; }

 private:
  const ref::Model& model_;
  CacheMistakes mistakes_;
  std::vector<torch::Tensor> k_, v_;  // per layer [length, h_k·h_d]
  int64_t length_ = 0;
};

}  // namespace clockwork
