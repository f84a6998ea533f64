// Milestone 5: the fused causal prefill attention (kernels/flash_attention.cu) against the
// reference and against milestone 3's attention, at the sequence lengths where tiling goes wrong
// (one token, a tile minus one, a tile, a tile plus one, primes, about a thousand), every GQA
// ratio of the course (1, 2, 4, 8) and scores in the thousands; then the recognisers of the
// fused kernel's own mistakes, each shown to name its mistake.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
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
#include "reference/pitfalls.h"

namespace clockwork {
namespace {

constexpr int kTile = kernels::kFlashAttentionTile;
using Mistake = ref::wrong::OnlineSoftmaxMistake;

// The fused kernel's allowance: milestone 3's attention tolerance (scores summed over h_d in
// another order, exp turning their rounding into relative error, the weighted sum over s keys),
// which covers any kernel structure, plus the online softmax's own rounding: each of the up to
// ceil(s / tile) key tiles may multiply the running l and acc by a rescale factor exp(m − m')
// that fast exp gives to a few ulp, and those roundings compound.
Tolerance flash_tolerance(int head_dim, int s) {
  Tolerance t = tol::attention(head_dim, s);
  const double rescales = 4 * tol::kUnitRoundoff * ((s + kTile - 1) / kTile);
  t.rtol += rescales;
  t.rms_atol += rescales;
  t.why =
      "milestone 3's attention allowance (scores over h_d in another order, exp, the weighted sum "
      "over s keys) plus a few ulp of fast exp for each running-state rescale, one per key tile";
  return t;
}

struct Case {
  int s, h, h_k, h_d;
  const char* why;
};

std::string describe(const Case& c) {
  return "s=" + std::to_string(c.s) + " h=" + std::to_string(c.h) + " h_k=" +
         std::to_string(c.h_k) + " h_d=" + std::to_string(c.h_d) + " (" + c.why + ")";
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const Case& c) {
  const uint64_t seed = test_seed(5100 + c.s * 17 + c.h * 5 + c.h_k + c.h_d);
  return {random_normal(static_cast<size_t>(c.s) * c.h * c.h_d, seed),
          random_normal(static_cast<size_t>(c.s) * c.h_k * c.h_d, seed + 1),
          random_normal(static_cast<size_t>(c.s) * c.h_k * c.h_d, seed + 2)};
}

struct Tensors {
  torch::Tensor q, k, v;
};

Tensors tensors(const Case& c, const Inputs& in) {
  return {to_tensor(in.q, {c.s, c.h * c.h_d}), to_tensor(in.k, {c.s, c.h_k * c.h_d}),
          to_tensor(in.v, {c.s, c.h_k * c.h_d})};
}

enum class Kernel { kFused, kMilestone3, kTensorCores, kMma };

// Runs flash_attention (or milestone 3's attention with its [s, s] workspace, or the
// tensor-core version) on the inputs; the output is shaped [s, h, h_d] for the report.
DeviceBuffer<float> run(const Case& c, const Inputs& in, Kernel kernel = Kernel::kFused) {
  DeviceBuffer<float> q("q", {c.s, c.h * c.h_d}), k("k", {c.s, c.h_k * c.h_d}),
      v("v", {c.s, c.h_k * c.h_d});
  DeviceBuffer<float> out(kernel == Kernel::kMilestone3    ? "milestone 3 attention output"
                          : kernel == Kernel::kTensorCores ? "tensor-core flash attention output"
                          : kernel == Kernel::kMma         ? "mma.sync flash attention output"
                                                           : "flash attention output",
                          {c.s, c.h, c.h_d});
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  if (kernel == Kernel::kMilestone3) {
    DeviceBuffer<float> scores("scores", {c.s, c.s});
    kernels::attention(q.data(), k.data(), v.data(), out.data(), scores.data(), c.s, c.h, c.h_k,
                       c.h_d);
  } else if (kernel == Kernel::kTensorCores) {
    kernels::flash_attention_tensor_cores(q.data(), k.data(), v.data(), out.data(), c.s, c.h,
                                          c.h_k, c.h_d);
  } else if (kernel == Kernel::kMma) {
    kernels::flash_attention_mma(q.data(), k.data(), v.data(), out.data(), c.s, c.h, c.h_k, c.h_d);
  } else {
    kernels::flash_attention(q.data(), k.data(), v.data(), out.data(), c.s, c.h, c.h_k, c.h_d);
  }
  EXPECT_TRUE(guards_intact(q) && guards_intact(k) && guards_intact(v));
  return out;
}

// The fused output against the reference (naming a known mistake when it matches one) and
// against milestone 3's attention on the same inputs.
void check(const Case& c, const Inputs& in, bool against_milestone3 = true) {
  SCOPED_TRACE(describe(c));
  const Tensors t = tensors(c, in);
  const DeviceBuffer<float> out = run(c, in);
  const Tolerance tol = flash_tolerance(c.h_d, c.s);
  EXPECT_TRUE(matches_reference(out,
                                to_vector(ref::causal_gqa_attention(t.q, t.k, t.v, c.h, c.h_k)),
                                tol, explaining(attention_pitfalls(t.q, t.k, t.v, c.h, c.h_k), out),
                                {"row", "head", "dim"}));
  if (!against_milestone3) return;
  // Both are within their allowance of the reference, so within the sum of the two of each
  // other (milestone 3's is tol::attention, smaller than the fused one's).
  Tolerance both = tol;
  const Tolerance m3 = tol::attention(c.h_d, c.s);
  both.rtol += m3.rtol;
  both.rms_atol += m3.rms_atol;
  both.why = "each kernel is within its own allowance of the reference: the two allowances added";
  const DeviceBuffer<float> m3_out = run(c, in, Kernel::kMilestone3);
  EXPECT_TRUE(matches_reference("flash attention output vs milestone 3's attention",
                                out.download(), m3_out.download(), {c.s, c.h, c.h_d}, both, {},
                                {"row", "head", "dim"}));
}

void check(const Case& c) { check(c, random_inputs(c)); }

// ---- sequence lengths around the tile ------------------------------------------------------------

TEST(FlashAttention, OneToken) {
  check({1, 2, 1, 16, "one token: one query tile with one visible key"});
}

TEST(FlashAttention, TileBoundaries) {
  check({kTile - 1, 4, 2, 16, "a tile minus one: one partial tile, no second one"});
  check({kTile, 4, 2, 16, "exactly one tile: the diagonal tile is the only one"});
  check({kTile + 1, 4, 2, 16, "a tile plus one: a second query tile of one row"});
  check({2 * kTile, 2, 1, 8, "two full tiles"});
}

TEST(FlashAttention, PrimeLengths) {
  check({37, 4, 2, 24, "prime: the last tile is partial, h_d = 24"});
  check({97, 2, 2, 10, "prime, h_d = 10 (not a multiple of anything)"});
}

// About a thousand tokens, kept cheap for the CPU backend: one KV head, two query heads, h_d 16.
TEST(FlashAttention, AThousandTokens) {
  check({1000, 2, 1, 16, "63 query tiles, up to 63 key tiles each"});
}

// ---- GQA ratios ---------------------------------------------------------------------------------

TEST(FlashAttention, GqaRatios) {
  check({23, 2, 2, 16, "ratio 1: every query head has its own KV head"});
  check({23, 4, 2, 16, "ratio 2: heads 0,1 share KV head 0, heads 2,3 KV head 1"});
  check({23, 8, 2, 16, "ratio 4: two groups of four"});
  check({23, 8, 1, 16, "ratio 8: one KV head for all query heads"});
  check({20, 16, 2, 8, "ratio 8 with two groups"});
}

TEST(FlashAttention, LlamaThreeEightBShapes) {
  check({20, 32, 8, 128, "h = 32, h_k = 8, h_d = 128: 45 KB of shared memory per block"});
}

// h_d = 256 (Gemma 3's heads): more dims than the threads of a row quad hold at h_d <= 128, and,
// with four query heads per KV head, more shared memory than a tile of kTile fits in.
TEST(FlashAttention, HeadDim256) {
  check({kTile + 3, 2, 2, 256, "h_d = 256, one query head per KV head"});
  check({kTile + 3, 4, 1, 256, "h_d = 256, four query heads per KV head"});
}

// Group 8 with h_d = 128 (Llama-3-70B's ratio) needs more than 48 KB of shared memory: the
// launcher must opt in.
TEST(FlashAttention, MoreThan48KbOfSharedMemory) {
  ASSERT_GT(kernels::flash_attention_shared_bytes(8, 1, 128), 48u * 1024);
  check({18, 8, 1, 128, "group 8, h_d = 128"}, random_inputs({18, 8, 1, 128, ""}),
        /*against_milestone3=*/false);
}

// ---- large scores ---------------------------------------------------------------------------------

// Scores in the thousands, growing along the sequence so that a row's maximum changes from key
// tile to key tile: a rescale factor exp(m − m') is then exactly 0 in fp32, and forgetting one
// leaves the early tiles' terms at full weight. Q and K hold small multiples of powers of two, so
// every score is exact in fp32 whatever the summation order: the usual tolerance applies.
Inputs large_score_inputs(const Case& c) {
  Inputs in = random_inputs(c);
  const int kv_width = c.h_k * c.h_d;
  for (float& x : in.q) x = 256.f * std::nearbyint(4.f * x);
  for (size_t i = 0; i < in.k.size(); ++i) {
    const int pos = static_cast<int>(i / kv_width);
    // Later keys a little larger: the maximum of a row tends to come late.
    in.k[i] = std::nearbyint(4.f * in.k[i] * (1.f + pos / 16.f)) / 4.f;
  }
  return in;
}

TEST(FlashAttention, ScoresInTheThousands) {
  for (const Case& c : {Case{40, 4, 2, 16, "ratio 2, three key tiles"},
                        Case{kTile + 1, 8, 2, 16, "ratio 4, a tile plus one"}}) {
    const Inputs in = large_score_inputs(c);
    const Tensors t = tensors(c, in);
    // The data really is large: without the maximum, exp overflows.
    ASSERT_FALSE(torch::isfinite(ref::wrong::attention_softmax_no_max(t.q, t.k, t.v, c.h, c.h_k))
                     .all()
                     .item<bool>());
    check(c, in);
  }
}

// With V = identity, output row r of head i is the probability row r gives each key: exactly 0
// for every later position (the diagonal tile's mask), something for every earlier one.
TEST(FlashAttention, CausalMaskInsideTheDiagonalTile) {
  const Case c{kTile + 4, 2, 1, kTile + 4, "V = identity, h_d = s"};
  Inputs in = random_inputs(c);
  for (int p = 0; p < c.s; ++p) {
    for (int j = 0; j < c.h_k * c.h_d; ++j)
      in.v[static_cast<size_t>(p) * c.h_k * c.h_d + j] = (j % c.h_d == p);
  }
  check(c, in);
  const std::vector<float> o = run(c, in).download();
  for (int i = 0; i < c.h; ++i) {
    for (int r = 0; r < c.s; ++r) {
      for (int col = 0; col < c.s; ++col) {
        const float w = o[(static_cast<size_t>(r) * c.h + i) * c.h_d + col];
        if (col > r) {
          EXPECT_EQ(w, 0.f) << "head " << i << ", row " << r << " gives weight " << w
                            << " to the later position " << col
                            << ": inside the diagonal tile, mask every key after the query";
        } else {
          EXPECT_GT(w, 0.f) << "head " << i << ", row " << r << " gives no weight to position "
                            << col << " (keys up to the query, itself included, stay visible)";
        }
      }
    }
  }
}

TEST(FlashAttention, RejectsBadArguments) {
  DeviceBuffer<float> q("q", {2, 12}), k("k", {2, 8}), v("v", {2, 8}), o("o", {2, 12});
  EXPECT_THROW(kernels::flash_attention(q.data(), k.data(), v.data(), o.data(), 2, 3, 2, 4),
               std::invalid_argument);  // h = 3 is not a multiple of h_k = 2
  EXPECT_THROW(kernels::flash_attention(q.data(), k.data(), v.data(), q.data(), 2, 3, 1, 4),
               std::invalid_argument);  // the output aliases q
  EXPECT_THROW(kernels::flash_attention(q.data(), k.data(), v.data(), o.data(), -1, 3, 1, 4),
               std::invalid_argument);
  // More query tiles than a grid's y holds (65535 of 16); refused before anything is read.
  EXPECT_THROW(
      kernels::flash_attention(q.data(), k.data(), v.data(), o.data(), 65535 * 16 + 1, 3, 1, 4),
      std::invalid_argument);
  // A group too large for one block's shared memory is refused, not launched.
  EXPECT_THROW(kernels::flash_attention(q.data(), k.data(), v.data(), o.data(), 2, 64, 1, 256),
               std::invalid_argument);
}

// ---- the tensor-core version ----------------------------------------------------------------------

// Its operands are bf16: Q, K and V as it rounds them (to nearest, ties to even, like torch's
// conversion), and each probability before P·V. The reference gets the same rounded Q, K and V,
// so what is left is the probabilities' rounding: up to 2^-8 relative on each weight of the
// weighted sum of V rows (the row sum l adds the rounded values, so the weights still sum to 1),
// with random signs, about 2^-8 of the output's size; the fp32 sums and fast exp add far less.
// Allowed: 2^-5 (eight such roundings) of the output's rms, and 2^-7 relative. A forgotten
// rescale or a mask one key off moves an output by a large fraction of its size.
Tolerance tensor_core_tolerance() {
  return {0, 0x1p-7,
          "the softmax's probabilities are rounded to bf16 (8 significant bits) before P·V: up to "
          "2^-8 relative on each weight, against a reference given the same bf16 Q, K and V",
          0x1p-5};
}

void check_tensor_cores(Kernel kernel, const Case& c, const Inputs& in) {
  SCOPED_TRACE(describe(c));
  const Tensors t = tensors(c, in);
  const auto bf16 = [](const torch::Tensor& x) { return x.to(torch::kBFloat16).to(torch::kFloat); };
  const torch::Tensor q = bf16(t.q), k = bf16(t.k), v = bf16(t.v);
  const DeviceBuffer<float> out = run(c, in, kernel);
  EXPECT_TRUE(matches_reference(out, to_vector(ref::causal_gqa_attention(q, k, v, c.h, c.h_k)),
                                tensor_core_tolerance(),
                                explaining(attention_pitfalls(q, k, v, c.h, c.h_k), out),
                                {"row", "head", "dim"}));
}

void check_tensor_cores(Kernel kernel, const Case& c) {
  check_tensor_cores(kernel, c, random_inputs(c));
}

// The tests of both tensor-core kernels, flash_attention_tensor_cores() (wmma) and
// flash_attention_mma() (mma.sync), which share their blocks, tiles and rounding.

// A block holds 128 query rows (16·8/group positions of each of the group's heads) and walks
// key tiles of 32 (wmma) or 64 (mma), the next one fetched while it computes on the current one:
// lengths around all three.
void tile_boundaries(Kernel kernel) {
  for (const Case& c :
       {Case{1, 2, 1, 16, "one token"}, Case{15, 4, 2, 16, "a warp's 16 rows minus one"},
        Case{17, 4, 2, 16, "a warp's rows plus one"}, Case{31, 4, 2, 32, "a 32-key tile minus one"},
        Case{32, 4, 2, 32, "exactly one 32-key tile"},
        Case{33, 4, 2, 32, "a 32-key tile plus one: a second tile of one key"},
        Case{63, 4, 2, 32, "a 64-key tile minus one; group 2: a block of 64 positions"},
        Case{64, 4, 2, 32, "exactly one 64-key tile and one block"},
        Case{65, 4, 2, 32, "a block plus one: a second block of one row, a key tile of one key"},
        Case{127, 4, 2, 32, "two 64-key tiles minus one"},
        Case{128, 4, 2, 32, "exactly two 64-key tiles"},
        Case{129, 2, 2, 16, "group 1: a block of 128 positions, a last key tile of one key"}}) {
    check_tensor_cores(kernel, c);
  }
}

void gqa_ratios(Kernel kernel) {
  for (const Case& c : {Case{70, 2, 2, 32, "ratio 1: 128 positions per block"},
                        Case{70, 4, 2, 32, "ratio 2: 64 positions per block"},
                        Case{70, 6, 2, 32, "ratio 3: 32 positions of 3 heads, six warps"},
                        Case{70, 8, 2, 32, "ratio 4: 32 positions per block"},
                        Case{70, 8, 1, 32, "ratio 8: 16 positions of 8 heads"}}) {
    check_tensor_cores(kernel, c);
  }
}

void head_dimensions(Kernel kernel) {
  for (int h_d : {48, 64, 80, 96, 112}) {
    check_tensor_cores(kernel, {40, 4, 2, h_d, "h_d a multiple of 16 below 128"});
  }
}

// Scores in the thousands, the largest ones late (see large_score_inputs; its Q and K are exact
// in bf16 too): a row's maximum jumps by far more than the wmma kernel's lazy threshold from key
// tile to key tile, so a kernel must rescale its output accumulators, not only l.
void scores_in_the_thousands(Kernel kernel) {
  for (const Case& c :
       {Case{150, 4, 2, 16, "ratio 2, 150 keys"}, Case{100, 8, 2, 32, "ratio 4, 100 keys"}}) {
    check_tensor_cores(kernel, c, large_score_inputs(c));
  }
}

// Scores that rise by 1/2 per key along every row (Q and K multiples of powers of two, exact in
// bf16 and in every sum): each 32 keys raise a row's maximum by 16, past the lazy threshold, and
// V carries a different value at every position, so weighting an earlier tile at its stale scale
// changes the output by about its own size.
void rescales_when_the_maximum_grows(Kernel kernel) {
  const Case c{200, 2, 1, 16, "scores rise by 16 per 32 keys"};
  Inputs in = random_inputs(c);
  // Only dim 0 of each row: the score of key p is q·k/sqrt(16) = 8 · (p/4) / 4 = p/2.
  for (size_t i = 0; i < in.q.size(); ++i) in.q[i] = i % c.h_d == 0 ? 8.f : 0.f;
  for (size_t i = 0; i < in.k.size(); ++i) in.k[i] = i % c.h_d == 0 ? 0.25f * (i / c.h_d) : 0.f;
  check_tensor_cores(kernel, c, in);
}

void rejects_bad_arguments(Kernel kernel) {
  DeviceBuffer<float> q("q", {2, 16 * 16}), k("k", {2, 256}), v("v", {2, 256}), o("o", {2, 16 * 16});
  auto call = [&](int h, int h_k, int h_d, float* out, int s = 2) {
    if (kernel == Kernel::kMma) {
      kernels::flash_attention_mma(q.data(), k.data(), v.data(), out, s, h, h_k, h_d);
    } else {
      kernels::flash_attention_tensor_cores(q.data(), k.data(), v.data(), out, s, h, h_k, h_d);
    }
  };
  EXPECT_THROW(call(2, 1, 40, o.data()), std::invalid_argument);   // h_d not a multiple of 16
  EXPECT_THROW(call(1, 1, 256, o.data()), std::invalid_argument);  // h_d over 128
  EXPECT_THROW(call(16, 1, 16, o.data()), std::invalid_argument);  // 16 query heads per KV head
  EXPECT_THROW(call(3, 2, 16, o.data()), std::invalid_argument);   // h not a multiple of h_k
  EXPECT_THROW(call(2, 1, 16, q.data()), std::invalid_argument);   // the output aliases q
  // More query tiles than a grid's y holds (65535 of 16); refused before anything is read.
  EXPECT_THROW(call(2, 1, 16, o.data(), 65535 * 16 + 1), std::invalid_argument);
}

TEST(FlashAttentionTensorCores, TileBoundaries) {
  tile_boundaries(Kernel::kTensorCores);
}
TEST(FlashAttentionTensorCores, GqaRatios) {
  gqa_ratios(Kernel::kTensorCores);
}
TEST(FlashAttentionTensorCores, HeadDimensions) {
  head_dimensions(Kernel::kTensorCores);
}

// Llama-3-8B's heads: 86 KB of shared memory, past the 48 KB a block gets without opting in.
TEST(FlashAttentionTensorCores, LlamaThreeEightBShapes) {
  ASSERT_GT(kernels::flash_attention_tensor_cores_shared_bytes(32, 8, 128), 48u * 1024);
  check_tensor_cores(Kernel::kTensorCores, {80, 32, 8, 128, "h = 32, h_k = 8, h_d = 128"});
}

TEST(FlashAttentionTensorCores, ScoresInTheThousands) {
  scores_in_the_thousands(Kernel::kTensorCores);
}
TEST(FlashAttentionTensorCores, RescalesWhenTheMaximumGrows) {
  rescales_when_the_maximum_grows(Kernel::kTensorCores);
}

TEST(FlashAttentionTensorCores, RejectsBadArguments) {
  rejects_bad_arguments(Kernel::kTensorCores);
  // The shapes it refuses have no tile; Llama-3-8B's has 128 / 4 positions per block.
  EXPECT_EQ(kernels::flash_attention_tensor_cores_tile(2, 1, 40), 0);
  EXPECT_EQ(kernels::flash_attention_tensor_cores_tile(1, 1, 256), 0);
  EXPECT_EQ(kernels::flash_attention_tensor_cores_tile(16, 1, 16), 0);
  EXPECT_EQ(kernels::flash_attention_tensor_cores_tile(32, 8, 128), 32);
}

TEST(FlashAttentionMma, TileBoundaries) {
  tile_boundaries(Kernel::kMma);
}
TEST(FlashAttentionMma, GqaRatios) {
  gqa_ratios(Kernel::kMma);
}
TEST(FlashAttentionMma, HeadDimensions) {
  head_dimensions(Kernel::kMma);
}

// Llama-3-8B's heads: without a per-warp S and P, 34 KB of shared memory, within the 48 KB a
// block gets without opting in.
TEST(FlashAttentionMma, LlamaThreeEightBShapes) {
  EXPECT_EQ(kernels::flash_attention_mma_shared_bytes(32, 8, 128), 128u * (128 + 8) * 2);
  check_tensor_cores(Kernel::kMma, {80, 32, 8, 128, "h = 32, h_k = 8, h_d = 128"});
}

TEST(FlashAttentionMma, ScoresInTheThousands) {
  scores_in_the_thousands(Kernel::kMma);
}
TEST(FlashAttentionMma, RescalesWhenTheMaximumGrows) {
  rescales_when_the_maximum_grows(Kernel::kMma);
}
TEST(FlashAttentionMma, RejectsBadArguments) {
  rejects_bad_arguments(Kernel::kMma);
}

// ---- the recognisers of the fused kernel's mistakes ---------------------------------------------

constexpr const char* kKnown = "This looks like a known mistake: ";

// `mistaken` handed to matches_reference() as a student's output must fail with the message of
// the pitfall `name` first; the reference itself must pass without naming anything.
void expect_named(const std::string& name, const torch::Tensor& mistaken,
                  const torch::Tensor& expected, Tolerance t,
                  const std::vector<PitfallCandidate>& candidates) {
  SCOPED_TRACE(name);
  const std::vector<int64_t> shape = shape_of(expected);
  const std::vector<float> want = to_vector(expected);
  const auto ok = matches_reference("out", want, want, shape, t, candidates);
  EXPECT_TRUE(ok) << ok.message();
  EXPECT_EQ(std::string(ok.message()).find(kKnown), std::string::npos)
      << "a correct output named a mistake";
  const auto r = matches_reference("out", to_vector(mistaken), want, shape, t, candidates);
  ASSERT_FALSE(r) << "the mistake passed the tolerance: these inputs do not separate it";
  const std::string text = ref::find_pitfall(name).message;
  EXPECT_EQ(std::string(r.message()).rfind(kKnown + text, 0), 0u)
      << "should start with: " << kKnown << text << "\ngot:\n"
      << r.message();
}

// The tiled reference without a mistake is the reference: the recognisers start from the right
// computation. Both are fp32 torch; the tiles only change the order of the sums.
TEST(FlashAttentionPitfalls, TiledReferenceWithoutMistakeIsTheReference) {
  const Case c{50, 4, 2, 16, "four key tiles"};
  const Tensors t = tensors(c, random_inputs(c));
  for (int64_t tile : {16, 32, 64}) {
    EXPECT_TRUE(matches_reference(
        "tiled reference, tile " + std::to_string(tile),
        to_vector(ref::wrong::attention_online_tiled(t.q, t.k, t.v, c.h, c.h_k, tile,
                                                      Mistake::kNone)),
        to_vector(ref::causal_gqa_attention(t.q, t.k, t.v, c.h, c.h_k)), {c.s, c.h * c.h_d},
        tol::attention(c.h_d, c.s)));
  }
}

// Each mistake, made with this kernel's tile on ordinary and on large scores, is named.
TEST(FlashAttentionPitfalls, EachMistakeIsNamed) {
  const Case c{40, 4, 2, 16, "40 positions: several key tiles"};
  const std::string tile = "_" + std::to_string(kTile);
  for (bool large : {false, true}) {
    SCOPED_TRACE(large ? "scores ~1e3" : "scores ~1");
    const Inputs in = large ? large_score_inputs(c) : random_inputs(c);
    const Tensors t = tensors(c, in);
    const torch::Tensor want = ref::causal_gqa_attention(t.q, t.k, t.v, c.h, c.h_k);
    // The recognisers exactly as a test of the kernel uses them.
    const std::vector<PitfallCandidate> candidates =
        attention_pitfalls(t.q, t.k, t.v, c.h, c.h_k);
    const Tolerance tol = flash_tolerance(c.h_d, c.s);
    for (const auto& [name, mistake] :
         {std::pair{"online_output_not_rescaled", Mistake::kOutputNotRescaled},
          std::pair{"online_sum_not_rescaled", Mistake::kSumNotRescaled},
          std::pair{"causal_diagonal_tile_skipped", Mistake::kDiagonalTileSkipped},
          std::pair{"causal_diagonal_tile_unmasked", Mistake::kDiagonalTileUnmasked}}) {
      expect_named(name + tile,
                   ref::wrong::attention_online_tiled(t.q, t.k, t.v, c.h, c.h_k, kTile, mistake),
                   want, tol, candidates);
    }
  }
}

// The skipped diagonal leaves the first query tile with no key at all: NaN, as the kernel gives.
TEST(FlashAttentionPitfalls, SkippedDiagonalLeavesTheFirstTileEmpty) {
  const Case c{kTile + 4, 2, 1, 8, "a tile plus four"};
  const Tensors t = tensors(c, random_inputs(c));
  const torch::Tensor o = ref::wrong::attention_online_tiled(t.q, t.k, t.v, c.h, c.h_k, kTile,
                                                              Mistake::kDiagonalTileSkipped);
  EXPECT_TRUE(torch::isnan(o.narrow(0, 0, kTile)).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(o.narrow(0, kTile, c.s - kTile)).all().item<bool>());
}

}  // namespace
}  // namespace clockwork
