// Small helpers shared by the reference sources (argument checks and messages). Not part of the
// public reference API.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include <torch/types.h>

namespace clockwork::ref::detail {

/// Throws std::invalid_argument(message) when `ok` is false.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

/// "[3, 64]" for a tensor's shape, "(undefined)" for an empty handle.
inline std::string shape_str(const torch::Tensor& t) {
  if (!t.defined()) return "(undefined)";
  std::ostringstream out;
  out << "[";
  for (int64_t i = 0; i < t.dim(); ++i) out << (i ? ", " : "") << t.size(i);
  out << "]";
  return out.str();
}

/// Checks q [s_q, h*h_d], k and v [s_k, h_k*h_d] with h a multiple of h_k and s_q <= s_k.
inline void check_attention_shapes(const std::string& who, const torch::Tensor& q,
                                   const torch::Tensor& k, const torch::Tensor& v, int64_t n_heads,
                                   int64_t n_kv_heads) {
  const std::string shapes = " (got q " + shape_str(q) + ", k " + shape_str(k) + ", v " +
                             shape_str(v) + ", h = " + std::to_string(n_heads) +
                             ", h_k = " + std::to_string(n_kv_heads) + ")";
  require(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
          who + ": h must be a positive multiple of h_k" + shapes);
  require(q.dim() == 2 && k.dim() == 2 && v.dim() == 2 && q.size(1) % n_heads == 0,
          who + ": expected q [s, h*h_d], k and v [s, h_k*h_d]" + shapes);
  const int64_t head_dim = q.size(1) / n_heads;
  require(k.size(1) == n_kv_heads * head_dim && v.sizes() == k.sizes(),
          who + ": k and v must be [s_k, h_k*h_d] with the h_d of q" + shapes);
  require(q.size(0) >= 1 && q.size(0) <= k.size(0),
          who + ": need 1 <= s_q <= s_k (queries are the last s_q positions)" + shapes);
}

}  // namespace clockwork::ref::detail
