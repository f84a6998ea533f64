// Milestone 3: causal grouped-query attention and its parts — the strided fp32 matmul, the
// causal softmax — against the reference, with the known mistakes recognised.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
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

// The float whose bits are DeviceBuffer's poison: what an element nobody wrote still holds.
float poison_value() {
  const uint32_t bits = 0xFFFFFFFFu;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// ---- matmul_f32 with row strides (the two products of attention) ------------------------------

struct StridedCase {
  int m, n, k;
  bool transpose_b;
  int a_pad, b_pad, c_pad;  // extra columns of the surrounding matrices (0: packed)
  const char* why;
};

void check_strided(const StridedCase& c) {
  SCOPED_TRACE(std::string(c.transpose_b ? "a·bᵀ" : "a·b") + " m=" + std::to_string(c.m) +
               " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) + " (" + c.why + ")");
  const int lda = c.k + c.a_pad;
  const int b_rows = c.transpose_b ? c.n : c.k, b_cols = c.transpose_b ? c.k : c.n;
  const int ldb = b_cols + c.b_pad, ldc = c.n + c.c_pad;
  const uint64_t seed = test_seed(900 + c.m * 7 + c.n * 3 + c.k);
  const auto a = random_normal(static_cast<size_t>(c.m) * lda, seed);
  const auto b = random_normal(static_cast<size_t>(b_rows) * ldb, seed + 1);
  DeviceBuffer<float> d_a("a", {c.m, lda}), d_b("b", {b_rows, ldb}), d_c("c", {c.m, ldc});
  d_a.upload(a);
  d_b.upload(b);
  // The operands sit at column offset a_pad, b_pad and the result at c_pad of wider matrices, as
  // one head sits inside a [s, h·h_d] activation.
  kernels::matmul_f32(d_a.data() + c.a_pad, d_b.data() + c.b_pad, d_c.data() + c.c_pad, c.m, c.n,
                      c.k, c.transpose_b, nullptr, lda, ldb, ldc);

  const torch::Tensor ta = to_tensor(a, {c.m, lda}).narrow(1, c.a_pad, c.k);
  const torch::Tensor tb = to_tensor(b, {b_rows, ldb}).narrow(1, c.b_pad, b_cols);
  const torch::Tensor prod = c.transpose_b ? ref::matmul_bt(ta, tb) : ref::matmul(ta, tb);
  // Columns outside the result must stay untouched: they are expected to hold the poison still.
  std::vector<float> want(static_cast<size_t>(c.m) * ldc, poison_value());
  const std::vector<float> p = to_vector(prod);
  for (int r = 0; r < c.m; ++r) {
    for (int j = 0; j < c.n; ++j)
      want[static_cast<size_t>(r) * ldc + c.c_pad + j] = p[static_cast<size_t>(r) * c.n + j];
  }
  EXPECT_TRUE(matches_reference(d_c, want, tol::matmul(c.k)));
}

TEST(MatmulF32, StridedOperandsMatchReference) {
  const StridedCase cases[] = {
      {1, 1, 1, false, 0, 0, 0, "the smallest case"},
      {5, 7, 13, false, 0, 0, 0, "primes, packed: P·V"},
      {17, 31, 23, true, 0, 0, 0, "primes, packed: Q·Kᵀ"},
      {33, 16, 40, false, 0, 48, 112,
       "P·V_g: V is a head of [s, h_k·h_d], the result a head of [s, h·h_d]"},
      {40, 40, 16, true, 48, 16, 0, "Q_i·K_gᵀ: both operands are heads inside wider rows"},
      {3, 65, 70, true, 5, 3, 7, "one past a tile, with odd strides"},
  };
  for (const StridedCase& c : cases) check_strided(c);
}

// ---- causal softmax ----------------------------------------------------------------------------

struct SoftmaxCase {
  int rows, cols;
  float spread;  // standard deviation of the raw scores
  const char* why;
};

// The reference: scale, hide columns after each row's position, softmax_rows. [rows, cols].
torch::Tensor masked_scores(const std::vector<float>& raw, int rows, int cols, float scale) {
  const torch::Tensor s = to_tensor(raw, {rows, cols}) * scale;
  const torch::Tensor future = torch::ones({rows, cols}, torch::kBool).triu(cols - rows + 1);
  return s.masked_fill(future, -std::numeric_limits<float>::infinity());
}

// The mask is the kernel's own work, so its mistakes are built from the raw scores: each wrong
// mask, with an empty row given as NaN (torch) and as zeros (a kernel that sums only the keys it
// sees writes 0 there). The diagonal hidden comes first: on a 1×1 input it cannot be told from a
// mask on the diagonal only, and it is the more common slip (q >= p for q > p).
std::vector<PitfallCandidate> mask_pitfalls(const std::vector<float>& raw, int rows, int cols,
                                            float scale) {
  const torch::Tensor s = to_tensor(raw, {rows, cols}) * scale;
  const torch::Tensor col = torch::arange(cols).unsqueeze(0);
  const torch::Tensor pos = (torch::arange(rows) + (cols - rows)).unsqueeze(1);
  struct WrongMask {
    const char* name;             // the pitfall when an empty row is NaN
    const char* empty_rows_zero;  // ... and when it is 0
    torch::Tensor hidden;
  };
  const WrongMask masks[] = {
      {"mask_includes_diagonal", "mask_includes_diagonal_zero_rows", col >= pos},
      {"mask_diagonal_only", "mask_diagonal_only", col == pos},
      {"mask_missing", "mask_missing", torch::zeros({rows, cols}, torch::kBool)},
  };
  std::vector<PitfallCandidate> out;
  for (const WrongMask& m : masks) {
    const torch::Tensor probs =
        ref::softmax_rows(s.masked_fill(m.hidden, -std::numeric_limits<float>::infinity()));
    const ref::Pitfall& as_nan = ref::find_pitfall(m.name);
    const ref::Pitfall& as_zero = ref::find_pitfall(m.empty_rows_zero);
    out.push_back({as_nan.name, as_nan.message, to_vector(probs)});
    out.push_back({as_zero.name, as_zero.message, to_vector(probs.nan_to_num(0.0))});
  }
  return out;
}

TEST(CausalSoftmax, MatchesReference) {
  const SoftmaxCase cases[] = {
      {1, 1, 1.f, "one score"},
      {5, 5, 3.f, "a short prompt"},
      {33, 33, 3.f, "one past a warp"},
      {300, 300, 3.f, "rows longer than a block: several columns per thread"},
      {3, 10, 3.f, "fewer query rows than keys: the rows are the last positions"},
      {6, 6, 400.f, "scores in the hundreds: exp overflows unless the row maximum is subtracted"},
  };
  const float scale = 0.25f;  // 1/sqrt(16), exact
  for (const SoftmaxCase& c : cases) {
    SCOPED_TRACE("rows=" + std::to_string(c.rows) + " cols=" + std::to_string(c.cols) + " (" +
                 c.why + ")");
    const auto raw =
        random_normal(static_cast<size_t>(c.rows) * c.cols, test_seed(1100 + c.cols), c.spread);
    DeviceBuffer<float> scores("scores", {c.rows, c.cols});
    scores.upload(raw);
    kernels::causal_softmax(scores.data(), c.rows, c.cols, scale);
    const torch::Tensor masked = masked_scores(raw, c.rows, c.cols, scale);
    std::vector<PitfallCandidate> candidates = softmax_pitfalls(masked);
    for (PitfallCandidate& m : mask_pitfalls(raw, c.rows, c.cols, scale)) {
      candidates.push_back(std::move(m));
    }
    EXPECT_TRUE(matches_reference(scores, to_vector(ref::softmax_rows(masked)),
                                  tol::softmax(c.cols),
                                  explaining(std::move(candidates), scores)));
  }
}

// Each row on its own: the future must get exactly 0, every visible column something, and the
// row must sum to 1. A mask on the diagonal only, or on the last row only, fails here by row.
TEST(CausalSoftmax, MasksEveryLaterColumnOfEveryRow) {
  const int n = 12;
  DeviceBuffer<float> scores("scores", {n, n});
  scores.upload(random_normal(static_cast<size_t>(n) * n, test_seed(1200)));
  kernels::causal_softmax(scores.data(), n, n, 0.25f);
  const std::vector<float> p = scores.download();
  for (int r = 0; r < n; ++r) {
    double sum = 0;
    for (int c = 0; c < n; ++c) {
      const float v = p[static_cast<size_t>(r) * n + c];
      if (c > r) {
        EXPECT_EQ(v, 0.f) << "row " << r << " gives weight " << v << " to the later position " << c
                          << ": the causal mask must hide every column c > r, in every row";
      } else {
        EXPECT_GT(v, 0.f) << "row " << r << " gives no weight to position " << c
                          << " (c <= r must stay visible, the diagonal included)";
      }
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r << " does not sum to 1";
  }
}

// ---- attention ---------------------------------------------------------------------------------

struct AttentionCase {
  int s, h, h_k, h_d;
  const char* why;
};

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const AttentionCase& c) {
  const uint64_t seed = test_seed(1300 + c.s * 17 + c.h * 5 + c.h_k + c.h_d);
  return {random_normal(static_cast<size_t>(c.s) * c.h * c.h_d, seed),
          random_normal(static_cast<size_t>(c.s) * c.h_k * c.h_d, seed + 1),
          random_normal(static_cast<size_t>(c.s) * c.h_k * c.h_d, seed + 2)};
}

// Runs the student's attention; returns the output buffer, shaped [s, h, h_d] for the report.
DeviceBuffer<float> run_attention(const AttentionCase& c, const Inputs& in) {
  DeviceBuffer<float> q("q", {c.s, c.h * c.h_d}), k("k", {c.s, c.h_k * c.h_d}),
      v("v", {c.s, c.h_k * c.h_d});
  DeviceBuffer<float> scores("scores", {c.s, c.s}), out("attention output", {c.s, c.h, c.h_d});
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  kernels::attention(q.data(), k.data(), v.data(), out.data(), scores.data(), c.s, c.h, c.h_k,
                     c.h_d);
  EXPECT_TRUE(guards_intact(scores));
  return out;
}

void check_attention(const AttentionCase& c, const Inputs& in, Tolerance t) {
  SCOPED_TRACE("s=" + std::to_string(c.s) + " h=" + std::to_string(c.h) + " h_k=" +
               std::to_string(c.h_k) + " h_d=" + std::to_string(c.h_d) + " (" + c.why + ")");
  const DeviceBuffer<float> out = run_attention(c, in);
  const torch::Tensor tq = to_tensor(in.q, {c.s, c.h * c.h_d});
  const torch::Tensor tk = to_tensor(in.k, {c.s, c.h_k * c.h_d});
  const torch::Tensor tv = to_tensor(in.v, {c.s, c.h_k * c.h_d});
  EXPECT_TRUE(matches_reference(out, to_vector(ref::causal_gqa_attention(tq, tk, tv, c.h, c.h_k)),
                                t, explaining(attention_pitfalls(tq, tk, tv, c.h, c.h_k), out),
                                {"row", "head", "dim"}));
}

void check_attention(const AttentionCase& c) {
  check_attention(c, random_inputs(c), tol::attention(c.h_d, c.s));
}

TEST(Attention, GqaRatioOne) {
  check_attention({1, 2, 2, 8, "one token: it attends to itself only"});
  check_attention({7, 4, 4, 16, "every query head has its own KV head"});
}

TEST(Attention, GqaRatioTwo) {
  check_attention({5, 4, 2, 16, "heads 0,1 share KV head 0; heads 2,3 share KV head 1"});
  check_attention({37, 6, 3, 24, "s beyond one 32-row tile"});
}

TEST(Attention, GqaRatioFour) {
  check_attention({9, 8, 2, 10, "groups of 4; h_d = 10 is not a multiple of anything"});
  check_attention({13, 4, 1, 32, "one KV head for all query heads"});
}

TEST(Attention, LlamaThreeEightBShapes) {
  check_attention({4, 32, 8, 128, "h = 32, h_k = 8, h_d = 128"});
}

// Scores in the thousands: a softmax without the row maximum overflows to inf and NaN. Q and K
// hold small multiples of powers of two, so every product and every partial sum of the scores
// is exact in fp32 whatever the summation order: the usual attention tolerance still applies.
TEST(Attention, HugeScoresNeedTheRowMaximum) {
  for (const AttentionCase& c : {AttentionCase{11, 4, 2, 16, "ratio 2, scores ~1e3"},
                                 AttentionCase{8, 8, 2, 16, "ratio 4, scores ~1e3"}}) {
    Inputs in = random_inputs(c);
    for (float& x : in.q) x = 256.f * std::nearbyint(4.f * x);
    for (float& x : in.k) x = std::nearbyint(4.f * x) / 4.f;
    const torch::Tensor tq = to_tensor(in.q, {c.s, c.h * c.h_d});
    const torch::Tensor tk = to_tensor(in.k, {c.s, c.h_k * c.h_d});
    const torch::Tensor tv = to_tensor(in.v, {c.s, c.h_k * c.h_d});
    // The data really separates the two: without the maximum the result is not finite.
    ASSERT_FALSE(torch::isfinite(ref::wrong::attention_softmax_no_max(tq, tk, tv, c.h, c.h_k))
                     .all()
                     .item<bool>());
    check_attention(c, in, tol::attention(c.h_d, c.s));
  }
}

// With V = identity (every KV head), output row r of head i is row r of its probabilities:
// row r must give exactly 0 to every later position c > r and something to every c <= r.
TEST(Attention, CausalMaskHoldsInEveryRowOfEveryHead) {
  const AttentionCase c{12, 4, 2, 16, "V = identity"};
  Inputs in = random_inputs(c);
  for (int p = 0; p < c.s; ++p) {
    for (int j = 0; j < c.h_k * c.h_d; ++j)
      in.v[static_cast<size_t>(p) * c.h_k * c.h_d + j] = (j % c.h_d == p);
  }
  check_attention(c, in, tol::attention(c.h_d, c.s));
  const std::vector<float> o = run_attention(c, in).download();
  for (int i = 0; i < c.h; ++i) {
    for (int r = 0; r < c.s; ++r) {
      for (int col = 0; col < c.s; ++col) {
        const float w = o[(static_cast<size_t>(r) * c.h + i) * c.h_d + col];
        if (col > r) {
          EXPECT_EQ(w, 0.f) << "head " << i << ", row " << r << " attends to the later position "
                            << col << " with weight " << w
                            << ": mask every column c > r of every row";
        } else {
          EXPECT_GT(w, 0.f) << "head " << i << ", row " << r << " gives no weight to position "
                            << col
                            << " (positions c <= r, the diagonal included, must stay visible)";
        }
      }
    }
  }
}

TEST(Attention, RejectsBadArguments) {
  DeviceBuffer<float> q("q", {2, 12}), k("k", {2, 8}), v("v", {2, 8}), o("o", {2, 12}),
      sc("scores", {2, 2});
  // h = 3 is not a multiple of h_k = 2.
  EXPECT_THROW(kernels::attention(q.data(), k.data(), v.data(), o.data(), sc.data(), 2, 3, 2, 4),
               std::invalid_argument);
  EXPECT_THROW(kernels::attention(q.data(), k.data(), v.data(), q.data(), sc.data(), 2, 3, 1, 4),
               std::invalid_argument);  // output aliases q
  EXPECT_THROW(kernels::causal_softmax(sc.data(), 3, 2, 0.5f),
               std::invalid_argument);  // rows > cols
}

}  // namespace
}  // namespace clockwork
