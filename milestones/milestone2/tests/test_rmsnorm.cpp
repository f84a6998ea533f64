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
  float eps = 1e-5f;  // the ε passed in (Llama 3's by default)
};

// The last cases pass other ε than Llama 3's 1e-5 (Llama 2 uses 1e-6; ε is the config's
// rms_norm_eps, an argument). Their rows have mean(x²) close to ε, so a kernel that adds a fixed
// 1e-5 changes every output far beyond the tolerance (3e-5 relative for d = 4096): at ε = 1e-6
// with rows of size 1e-3 the scale is off by sqrt(11/2) ≈ 2.3, at ε = 1e-2 with rows of size 0.1
// by about sqrt(2) ≈ 1.4.
const RmsNormCase kCases[] = {
    {1, 1, 1.f, "one element"},
    {3, 7, 1.f, "d smaller than a warp"},
    {17, 100, 1.f, "d not a multiple of the block"},
    {5, 1000, 1.f, "several elements per thread, ragged end"},
    {4, 4096, 1.f, "Llama-3-8B's hidden size"},
    {4, 4096, 1e-3f, "rows of size 1e-3 like Llama-3's embeddings: here ε matters"},
    {3, 1000, 1e-3f, "ε = 1e-6 (Llama 2's) on rows of size 1e-3", 1e-6f},
    {2, 4096, 1e-3f, "ε = 1e-6 at Llama's hidden size", 1e-6f},
    {5, 64, 0.1f, "ε = 1e-2 on rows of size 0.1", 1e-2f},
};

TEST(RmsNorm, MatchesReference) {
  for (const RmsNormCase& c : kCases) {
    SCOPED_TRACE("rows=" + std::to_string(c.rows) + " d=" + std::to_string(c.d) +
                 " eps=" + std::to_string(c.eps) + " (" + c.why + ")");
    const uint64_t seed = test_seed(300 + c.d);
    const auto x = random_normal(static_cast<size_t>(c.rows) * c.d, seed, c.scale);
    const auto gamma = to_bf16(random_normal(c.d, seed + 1, 0.5f, 1.f));  // γ around 1, never all ones
    DeviceBuffer<float> d_x("x", {c.rows, c.d});
    DeviceBuffer<__nv_bfloat16> d_gamma("input_layernorm.weight", {c.d});
    DeviceBuffer<float> y("x_norm", {c.rows, c.d});
    d_x.upload(x);
    d_gamma.upload(gamma);
    kernels::rmsnorm(d_x.data(), d_gamma.data(), y.data(), c.rows, c.d, c.eps);
    const auto tx = to_tensor(x, {c.rows, c.d});
    const auto tg = to_tensor(gamma, {c.d});
    const double eps = c.eps;  // the same fp32 value the kernel received
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
