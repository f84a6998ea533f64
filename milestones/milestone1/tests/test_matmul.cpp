// Milestone 1: both matmul variants (x·wᵀ with bf16 weights) against the reference.
#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "harness/check/checked_run.h"
#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

struct MatmulCase {
  int m, n, k;
  const char* why;
};

const MatmulCase kSmall[] = {
    {1, 1, 1, "the smallest case"},
    {1, 7, 13, "one row (the decode shape)"},
    {17, 31, 23, "primes: nothing is a multiple of the tile"},
    {33, 65, 70, "one past a tile in every dimension"},
    {64, 64, 64, "exact tiles, square (x·w would fit the shapes too)"},
    {5, 96, 128, "fewer rows than a tile"},
};

// Llama-3-8B's projections for a short prompt: q/o (4096×4096), k/v (1024×4096), up (14336×4096).
const MatmulCase kLlama[] = {
    {3, 1024, 4096, "k_proj / v_proj"},
    {2, 4096, 4096, "q_proj / o_proj"},
    {2, 14336, 4096, "gate_proj / up_proj"},
};

const char* variant_name(kernels::MatmulVariant v) {
  return v == kernels::MatmulVariant::Naive ? "naive" : "tiled";
}

void check_case(const MatmulCase& c, kernels::MatmulVariant variant) {
  SCOPED_TRACE(std::string(variant_name(variant)) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
               " k=" + std::to_string(c.k) + " (" + c.why + ")");
  const uint64_t seed = test_seed(1000 + c.m * 7 + c.n * 13 + c.k);
  const auto x = random_normal(static_cast<size_t>(c.m) * c.k, seed);
  const auto w = to_bf16(random_normal(static_cast<size_t>(c.n) * c.k, seed + 1, 0.05f));
  DeviceBuffer<float> d_x("x", {c.m, c.k});
  DeviceBuffer<__nv_bfloat16> d_w("w", {c.n, c.k});
  DeviceBuffer<float> y("y", {c.m, c.n});
  d_x.upload(x);
  d_w.upload(w);
  kernels::matmul(d_x.data(), d_w.data(), y.data(), c.m, c.n, c.k, nullptr, variant);
  const auto tx = to_tensor(x, {c.m, c.k});
  const auto tw = to_tensor(w, {c.n, c.k});
  EXPECT_TRUE(matches_reference(y, to_vector(ref::linear(tx, tw)), tol::matmul(c.k), linear_pitfalls(tx, tw)));
}

TEST(Matmul, TiledMatchesReferenceOnAwkwardShapes) {
  for (const MatmulCase& c : kSmall) check_case(c, kernels::MatmulVariant::Tiled);
}

TEST(Matmul, NaiveMatchesReferenceOnAwkwardShapes) {
  for (const MatmulCase& c : kSmall) check_case(c, kernels::MatmulVariant::Naive);
}

// Under the checker (checked_run()) the k/v shape alone is checked: races and bounds depend on k
// and on the tile edges, which it shares with the others; q/o and up only add blocks of the same
// code, and the plain run (.sim, .cuda) still compares all three.
TEST(Matmul, LlamaProjectionShapes) {
  const size_t cases = checked_run() ? 1 : std::size(kLlama);
  for (size_t i = 0; i < cases; ++i) check_case(kLlama[i], kernels::MatmulVariant::Tiled);
  check_case(kLlama[0], kernels::MatmulVariant::Naive);
}

TEST(Matmul, EmptyShapesWriteNothingAndZeroKWritesZeros) {
  DeviceBuffer<float> x("x", {4, 1});
  DeviceBuffer<__nv_bfloat16> w("w", {3, 1});
  DeviceBuffer<float> y("y", {4, 3});
  kernels::matmul(x.data(), w.data(), y.data(), 4, 3, 0);  // k = 0: every output is an empty sum
  for (float v : y.download()) EXPECT_EQ(v, 0.f);
  EXPECT_TRUE(guards_intact(y));
  EXPECT_THROW(kernels::matmul(x.data(), w.data(), y.data(), -1, 3, 1), std::invalid_argument);
}

}  // namespace
}  // namespace clockwork
