// Milestone 2: the RMSNorm kernel against the reference, with the known mistakes recognised.
#include <gtest/gtest.h>

#include <string>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

struct RmsNormCase {
  int rows, d;
  float scale;  // size of the inputs: small rows make ε matter
  const char* why;
};

const RmsNormCase kCases[] = {
    {1, 1, 1.f, "one element"},
    {3, 7, 1.f, "d smaller than a warp"},
    {17, 100, 1.f, "d not a multiple of the block"},
    {5, 1000, 1.f, "several elements per thread, ragged end"},
    {4, 4096, 1.f, "Llama-3-8B's hidden size"},
    {4, 4096, 1e-3f, "rows of size 1e-3 like Llama-3's embeddings: here ε matters"},
};

TEST(RmsNorm, MatchesReference) {
  const float eps = 1e-5f;
  for (const RmsNormCase& c : kCases) {
    SCOPED_TRACE("rows=" + std::to_string(c.rows) + " d=" + std::to_string(c.d) + " (" + c.why + ")");
    const uint64_t seed = test_seed(300 + c.d);
    const auto x = random_normal(static_cast<size_t>(c.rows) * c.d, seed, c.scale);
    const auto gamma = to_bf16(random_normal(c.d, seed + 1, 0.5f, 1.f));  // γ around 1, never all ones
    DeviceBuffer<float> d_x("x", {c.rows, c.d});
    DeviceBuffer<__nv_bfloat16> d_gamma("input_layernorm.weight", {c.d});
    DeviceBuffer<float> y("x_norm", {c.rows, c.d});
    d_x.upload(x);
    d_gamma.upload(gamma);
    kernels::rmsnorm(d_x.data(), d_gamma.data(), y.data(), c.rows, c.d, eps);
    const auto tx = to_tensor(x, {c.rows, c.d});
    const auto tg = to_tensor(gamma, {c.d});
    EXPECT_TRUE(matches_reference(y, to_vector(ref::rms_norm(tx, tg, eps)), tol::rms_norm(c.d),
                                  rms_norm_pitfalls(tx, tg, eps)));
  }
}

TEST(RmsNorm, RejectsBadArguments) {
  DeviceBuffer<float> x("x", {2, 8});
  DeviceBuffer<__nv_bfloat16> g("gamma", {8});
  EXPECT_THROW(kernels::rmsnorm(x.data(), g.data(), x.data(), 2, 8, 1e-5f), std::invalid_argument);  // aliasing
  DeviceBuffer<float> y("y", {2, 8});
  EXPECT_THROW(kernels::rmsnorm(x.data(), g.data(), y.data(), 2, 0, 1e-5f), std::invalid_argument);
  EXPECT_THROW(kernels::rmsnorm(x.data(), g.data(), y.data(), 2, 8, 0.f), std::invalid_argument);
}

}  // namespace
}  // namespace clockwork
