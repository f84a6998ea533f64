/// @file shape.h
/// Shapes as the harness prints them: `[4 x 4096]`, row-major, outermost dimension first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace clockwork {

/// `[4 x 4096]` for {4, 4096}; `[]` for a scalar (no dimensions).
inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += " x ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

/// Number of elements of a shape (1 for a scalar). Throws std::invalid_argument for a negative
/// dimension.
inline size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_string(shape));
    n *= static_cast<size_t>(d);
  }
  return n;
}

}  // namespace clockwork
