// Milestone 3: the output of the model — the lm_head GEMV over one row, and argmax.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

struct GemvCase {
  int vocab, d;
  const char* why;
};

TEST(LmHead, GemvMatchesReference) {
  const GemvCase cases[] = {
      {1, 1, "one logit of one product"},
      {97, 64, "a prime vocabulary, d of two warps"},
      {1001, 100, "d not a multiple of 32: a ragged last step for some lanes"},
      {13, 4100, "long rows"},
      {5003, 4096, "Llama-3-8B's hidden size (a slice of its 128256-row vocabulary)"},
  };
  for (const GemvCase& c : cases) {
    SCOPED_TRACE("V=" + std::to_string(c.vocab) + " d=" + std::to_string(c.d) + " (" + c.why + ")");
    const uint64_t seed = test_seed(1800 + c.vocab + c.d);
    const auto x = random_normal(static_cast<size_t>(c.d), seed);
    const auto w = to_bf16(random_normal(static_cast<size_t>(c.vocab) * c.d, seed + 1, 0.05f));
    DeviceBuffer<float> d_x("x_last", {c.d}), logits("logits", {c.vocab});
    DeviceBuffer<__nv_bfloat16> d_w("lm_head.weight", {c.vocab, c.d});
    d_x.upload(x);
    d_w.upload(w);
    kernels::lm_head(d_x.data(), d_w.data(), logits.data(), c.vocab, c.d);
    const auto want = ref::lm_head(to_tensor(x, {c.d}), to_tensor(w, {c.vocab, c.d}));
    EXPECT_TRUE(matches_reference(logits, to_vector(want), tol::matmul(c.d)));
  }
}

int32_t device_argmax(const std::vector<float>& values) {
  const int n = static_cast<int>(values.size());
  DeviceBuffer<float> d_values("logits", {n});
  DeviceBuffer<int32_t> index("index", {1});
  d_values.upload(values);
  kernels::argmax(d_values.data(), n, index.data());
  EXPECT_TRUE(guards_intact(index));
  return index.download()[0];
}

TEST(Argmax, MatchesReferenceOnRandomLogits) {
  for (int n : {1, 2, 97, 1025, 5003, 128256}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto logits = random_normal(static_cast<size_t>(n), test_seed(1900 + n), 3.f);
    EXPECT_EQ(device_argmax(logits), ref::argmax(to_tensor(logits, {n})));
  }
}

TEST(Argmax, TiesGoToTheLowestIndex) {
  std::vector<float> v(128256, 0.5f);
  EXPECT_EQ(device_argmax(v), 0) << "all values equal: the first index wins";
  v[90000] = 7.f;
  v[5000] = 7.f;
  v[77] = 7.f;
  EXPECT_EQ(device_argmax(v), 77)
      << "three equal maxima (indices 77, 5000, 90000): the lowest index wins";
  v.assign(2049, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(device_argmax(v), 0) << "every value is -inf: still a valid index, the first";
  v[2048] = -1e30f;
  EXPECT_EQ(device_argmax(v), 2048) << "the maximum is the very last element";
}

TEST(Argmax, NeverChoosesNaN) {
  std::vector<float> v = random_normal(3000, test_seed(1950));
  v[0] = std::numeric_limits<float>::quiet_NaN();
  v[1234] = 100.f;
  v[2999] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(device_argmax(v), 1234);
}

TEST(Output, RejectsBadArguments) {
  DeviceBuffer<float> x("x", {4}), logits("logits", {4});
  DeviceBuffer<int32_t> index("index", {1});
  EXPECT_THROW(kernels::argmax(logits.data(), 0, index.data()), std::invalid_argument);
  EXPECT_THROW(kernels::argmax(logits.data(), 4, nullptr), std::invalid_argument);
  DeviceBuffer<__nv_bfloat16> w("w", {4, 4});
  EXPECT_THROW(kernels::lm_head(x.data(), w.data(), logits.data(), 4, 0), std::invalid_argument);
}

}  // namespace
}  // namespace clockwork
