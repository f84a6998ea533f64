// Milestone 3: the element-wise kernels of the layer — SwiGLU and the residual add.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "milestones/milestone3/tests/candidates.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

struct ElementwiseCase {
  int rows, cols;
  float spread;  // standard deviation of the gate values
  const char* why;
};

const ElementwiseCase kCases[] = {
    {1, 1, 1.f, "one element"},
    {3, 97, 1.f, "a prime row length"},
    {7, 1000, 4.f, "gates up to ±15: SiLU saturates at both ends"},
    {2, 262147, 1.f, "more elements than one pass of the grid: the grid-stride loop must wrap"},
    {2, 14336, 1.f, "Llama-3-8B's d_ff for two tokens"},
};

TEST(SwiGlu, MatchesReference) {
  for (const ElementwiseCase& c : kCases) {
    SCOPED_TRACE("[" + std::to_string(c.rows) + " x " + std::to_string(c.cols) + "] (" + c.why +
                 ")");
    const size_t n = static_cast<size_t>(c.rows) * c.cols;
    const uint64_t seed = test_seed(1500 + c.cols);
    const auto gate = random_normal(n, seed, c.spread);
    const auto up = random_normal(n, seed + 1);
    DeviceBuffer<float> d_gate("gate", {c.rows, c.cols}), d_up("up", {c.rows, c.cols});
    DeviceBuffer<float> out("ffn_hidden", {c.rows, c.cols});
    d_gate.upload(gate);
    d_up.upload(up);
    kernels::swiglu(d_gate.data(), d_up.data(), out.data(), n);
    const auto tg = to_tensor(gate, {c.rows, c.cols}), tu = to_tensor(up, {c.rows, c.cols});
    EXPECT_TRUE(matches_reference(out, to_vector(ref::swiglu(tg, tu)), tol::swiglu(),
                                  explaining(swiglu_pitfalls(tg, tu), out)));
    EXPECT_TRUE(guards_intact(d_gate));
  }
}

TEST(SwiGlu, ExtremeGatesGiveTheLimits) {
  // SiLU(−100) is −3.7e−42 and SiLU(100) is 100: no NaN from exp overflowing.
  const std::vector<float> gate{-100.f, -30.f, -1.f, 0.f, 1.f, 30.f, 100.f};
  const std::vector<float> up{2.f, 2.f, 2.f, 2.f, 2.f, 2.f, 2.f};
  const int n = static_cast<int>(gate.size());
  DeviceBuffer<float> d_gate("gate", {n}), d_up("up", {n}), out("ffn_hidden", {n});
  d_gate.upload(gate);
  d_up.upload(up);
  kernels::swiglu(d_gate.data(), d_up.data(), out.data(), gate.size());
  EXPECT_TRUE(matches_reference(
      out, to_vector(ref::swiglu(to_tensor(gate, {n}), to_tensor(up, {n}))), tol::swiglu()));
}

TEST(ResidualAdd, MatchesReferenceExactly) {
  for (const ElementwiseCase& c : kCases) {
    SCOPED_TRACE("[" + std::to_string(c.rows) + " x " + std::to_string(c.cols) + "] (" + c.why +
                 ")");
    const size_t n = static_cast<size_t>(c.rows) * c.cols;
    const uint64_t seed = test_seed(1600 + c.cols);
    const auto x = random_normal(n, seed);
    const auto y = random_normal(n, seed + 1, 0.5f);
    DeviceBuffer<float> d_x("x (residual stream)", {c.rows, c.cols}),
        d_y("attn_out", {c.rows, c.cols});
    d_x.upload(x);
    d_y.upload(y);
    kernels::residual_add(d_x.data(), d_y.data(), n);
    const auto tx = to_tensor(x, {c.rows, c.cols}), ty = to_tensor(y, {c.rows, c.cols});
    EXPECT_TRUE(matches_reference(d_x, to_vector(ref::residual_add(tx, ty)), tol::residual_add(),
                                  explaining(residual_pitfalls(tx, ty), d_x)));
    EXPECT_TRUE(guards_intact(d_y));
  }
}

TEST(ResidualAdd, LlamaThreeEightBResidualStream) {
  const int s = 3, d = 4096;
  const size_t n = static_cast<size_t>(s) * d;
  const auto x = random_normal(n, test_seed(1700));
  const auto y = random_normal(n, test_seed(1701));
  DeviceBuffer<float> d_x("x (residual stream)", {s, d}), d_y("ffn_out", {s, d});
  d_x.upload(x);
  d_y.upload(y);
  kernels::residual_add(d_x.data(), d_y.data(), n);
  EXPECT_TRUE(matches_reference(
      d_x, to_vector(ref::residual_add(to_tensor(x, {s, d}), to_tensor(y, {s, d}))),
      tol::residual_add()));
}

}  // namespace
}  // namespace clockwork
