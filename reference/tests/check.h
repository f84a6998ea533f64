// Comparison helpers for the reference's own tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/types.h>

namespace clockwork::ref::testing {

/// Passes when |actual − expected| <= atol + rtol·|expected| everywhere (same shape, both finite);
/// otherwise reports the first offending element and the largest difference.
inline ::testing::AssertionResult close(const torch::Tensor& actual, const torch::Tensor& expected,
                                        double atol, double rtol) {
  if (actual.sizes() != expected.sizes()) {
    std::ostringstream msg;
    msg << "shape " << actual.sizes() << " vs expected " << expected.sizes();
    return ::testing::AssertionFailure() << msg.str();
  }
  const torch::Tensor a = actual.to(torch::kDouble).reshape({-1});
  const torch::Tensor e = expected.to(torch::kDouble).reshape({-1});
  const double* pa = a.data_ptr<double>();
  const double* pe = e.data_ptr<double>();
  double worst = 0;
  int64_t first_bad = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double diff = std::abs(pa[i] - pe[i]);
    const bool ok =
        std::isfinite(pa[i]) && std::isfinite(pe[i]) && diff <= atol + rtol * std::abs(pe[i]);
    if (!std::isnan(diff)) worst = std::max(worst, diff);
    if (!ok && first_bad < 0) first_bad = i;
  }
  if (first_bad < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "flat index " << first_bad << ": got " << pa[first_bad]
                                       << ", expected " << pe[first_bad] << " (max |diff| " << worst
                                       << ", atol " << atol << ", rtol " << rtol << ")";
}

/// Largest |a − b| (inf when a value is not finite in one of them).
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor d = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs();
  if (!torch::isfinite(d).all().item<bool>()) return INFINITY;
  return d.numel() ? d.max().item<double>() : 0.0;
}

/// Float accessor of a 2-D tensor converted to double, for explicit loops.
inline torch::Tensor as_double(const torch::Tensor& t) {
  return t.to(torch::kDouble).contiguous();
}

}  // namespace clockwork::ref::testing
