// Milestone 1: both matmul variants (x·wᵀ with bf16 weights) against the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

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

// The launcher's grid is (ceil(n/T), ceil(m/T)): blockIdx.x walks the n columns of y, blockIdx.y
// its m rows. A kernel that takes blockIdx.x for the rows computes only rows < ceil(n/T)·T and
// columns < ceil(m/T)·T: correct there, never written elsewhere. One candidate per plausible tile.
std::vector<PitfallCandidate> swapped_block_pitfalls(const std::vector<float>& want, int m, int n) {
  float poison;
  std::memset(&poison, kPoisonByte, sizeof poison);
  std::vector<PitfallCandidate> out;
  for (int t : {8, 16, 32, 64}) {
    const int rows = std::min(m, (n + t - 1) / t * t), cols = std::min(n, (m + t - 1) / t * t);
    if (rows == m && cols == n) continue;  // the same as the right mapping for this shape
    std::vector<float> v(want.size(), poison);
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < cols; ++j) v[static_cast<size_t>(r) * n + j] = want[static_cast<size_t>(r) * n + j];
    }
    out.push_back({"matmul_block_mapping_swapped",
                   "Your kernel maps blockIdx.x to rows and blockIdx.y to columns; the launcher's "
                   "grid is (ceil(n/tile), ceil(m/tile)), so blockIdx.x runs along the n columns "
                   "of y and blockIdx.y along its m rows. The launch is right: swap the two in the "
                   "kernel (row0 from blockIdx.y, col0 from blockIdx.x).",
                   std::move(v)});
  }
  return out;
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
  const std::vector<float> want = to_vector(ref::linear(tx, tw));
  std::vector<PitfallCandidate> candidates = linear_pitfalls(tx, tw);
  for (PitfallCandidate& p : swapped_block_pitfalls(want, c.m, c.n)) candidates.push_back(std::move(p));
  EXPECT_TRUE(matches_reference(y, want, tol::matmul(c.k), candidates));
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
