// The bridge to the libtorch reference: vectors <-> tensors, and known mistakes recognised from
// the reference's pitfall table. Each "student output" below is a pitfall computed on purpose;
// the check must fail and name that pitfall first, and a correct output must pass untouched.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "harness/check/tests/expect_text.h"
#include "reference/ops.h"
#include "reference/pitfalls.h"

namespace {

namespace ref = clockwork::ref;
namespace tol = clockwork::tol;
using clockwork::matches_reference;
using clockwork::to_tensor;
using clockwork::to_vector;

#define EXPECT_STARTS_WITH(text, prefix)                                            \
  do {                                                                              \
    const std::string t_ = (text);                                                  \
    EXPECT_EQ(t_.rfind(prefix, 0), 0u) << "should start with: " << (prefix) << "\n" \
                                       << "got:\n"                                  \
                                       << t_;                                       \
  } while (0)

constexpr const char* kKnown = "This looks like a known mistake: ";

torch::Tensor normal(std::vector<int64_t> shape, uint64_t seed, float stddev = 1.f) {
  return to_tensor(clockwork::random_normal(clockwork::element_count(shape), seed, stddev), shape);
}

TEST(TorchBridge, RoundTrips) {
  const auto v = clockwork::random_normal(12, 1);
  const torch::Tensor t = to_tensor(v, {3, 4});
  EXPECT_EQ(t.scalar_type(), torch::kFloat);
  EXPECT_EQ(clockwork::shape_of(t), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(to_vector(t), v);
  EXPECT_EQ(to_vector(t.t()), to_vector(t.t().contiguous())) << "non-contiguous views are copied";

  const auto b = clockwork::to_bf16(v);
  const torch::Tensor tb = to_tensor(b, {12});
  EXPECT_EQ(tb.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(to_vector(tb), clockwork::from_bf16(b)) << "torch reads the same bf16 bits";
  const auto back = clockwork::to_bf16_vector(tb);
  EXPECT_EQ(std::memcmp(back.data(), b.data(), b.size() * sizeof(b[0])), 0);
  EXPECT_EQ(clockwork::from_bf16(clockwork::to_bf16_vector(t.flatten())), clockwork::from_bf16(b))
      << "fp32 tensors are rounded like to_bf16";

  const std::vector<int32_t> ids{0, 5, 96};
  EXPECT_EQ(to_tensor(ids, {3}).scalar_type(), torch::kInt);
  EXPECT_EQ(clockwork::to_int32_vector(to_tensor(ids, {3})), ids);
  EXPECT_EQ(to_tensor(std::vector<int64_t>{7, 8}, {2}).scalar_type(), torch::kLong);

  EXPECT_THROW(to_tensor(v, {5, 5}), std::invalid_argument);
}

TEST(TorchPitfalls, LinearWithoutTransposeIsNamed) {
  const int64_t m = 5, k = 8, n = 6;
  const uint64_t seed = clockwork::test_seed(10);
  const torch::Tensor x = normal({m, k}, seed);
  const torch::Tensor w =
      to_tensor(clockwork::to_bf16(clockwork::random_normal(n * k, 11)), {n, k});
  const auto expected = to_vector(ref::linear(x, w));
  const auto pitfalls = clockwork::linear_pitfalls(x, w);
  ASSERT_FALSE(pitfalls.empty());

  EXPECT_TRUE(matches_reference("y", expected, expected, {m, n}, tol::matmul(k), pitfalls));

  const auto student = to_vector(ref::wrong::linear_no_transpose(x, w));
  const auto r = matches_reference("y", student, expected, {m, n}, tol::matmul(k), pitfalls);
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(), std::string(kKnown) + "Your output equals X·W instead of X·Wᵀ");
  EXPECT_CONTAINS(r.message(), "test data: seed " + std::to_string(seed));
}

TEST(TorchPitfalls, RmsNormWithoutGammaIsNamed) {
  const int64_t s = 3, d = 32;
  const torch::Tensor x = normal({s, d}, 20);
  const torch::Tensor gamma =
      to_tensor(clockwork::to_bf16(clockwork::random_uniform(d, 21, 0.5f, 1.5f)), {d});
  const auto expected = to_vector(ref::rms_norm(x, gamma, 1e-5));
  const auto student = to_vector(ref::rms_norm(x, torch::ones({d}), 1e-5));
  const auto r = matches_reference("x_norm", student, expected, {s, d}, tol::rms_norm(d),
                                   clockwork::rms_norm_pitfalls(x, gamma, 1e-5));
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(),
                     std::string(kKnown) + "Your RMSNorm output is missing the multiply by γ");
}

TEST(TorchPitfalls, RmsNormEpsilonOutsideTheRootOnSmallRows) {
  const int64_t s = 4, d = 64;
  const torch::Tensor x = normal({s, d}, 22, 1e-3f);  // mean(x²) ≈ 1e-6, comparable to ε
  const torch::Tensor gamma = torch::ones({d});
  const auto expected = to_vector(ref::rms_norm(x, gamma, 1e-5));
  const auto student = to_vector(ref::wrong::rms_norm_eps_outside(x, gamma, 1e-5));
  const auto r = matches_reference("x_norm", student, expected, {s, d}, tol::rms_norm(d),
                                   clockwork::rms_norm_pitfalls(x, gamma, 1e-5));
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(), std::string(kKnown) + "You added ε outside the square root");
}

TEST(TorchPitfalls, RopeInterleavedIsNamed) {
  const int64_t s = 6, h = 2, hd = 16;
  const torch::Tensor x = normal({s, h * hd}, 30);
  const torch::Tensor pos = torch::arange(s, torch::kLong);
  const auto expected = to_vector(ref::apply_rope(x, ref::rope_tables(pos, hd, 500000.0), h));
  const auto student = to_vector(ref::wrong::rope_interleaved(x, pos, h, 500000.0, std::nullopt));
  const auto r =
      matches_reference("q", student, expected, {s, h, hd}, tol::rope(s),
                        clockwork::rope_pitfalls(x, pos, h, 500000.0), {"position", "head", "dim"});
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(), std::string(kKnown) + "Your RoPE rotates even/odd pairs");
  EXPECT_CONTAINS(r.message(), "positions 1..5 (5 of 6)");  // position 0 is never rotated
}

TEST(TorchPitfalls, AttentionHeadModuloIsNamedAndLocatedByHead) {
  const int64_t s = 5, h = 4, hk = 2, hd = 8;
  const torch::Tensor q = normal({s, h * hd}, 40);
  const torch::Tensor k = normal({s, hk * hd}, 41);
  const torch::Tensor v = normal({s, hk * hd}, 42);
  const auto expected = to_vector(ref::causal_gqa_attention(q, k, v, h, hk));
  const auto pitfalls = clockwork::attention_pitfalls(q, k, v, h, hk);
  EXPECT_GE(pitfalls.size(), 5u);

  EXPECT_TRUE(
      matches_reference("attn", expected, expected, {s, h * hd}, tol::attention(hd, s), pitfalls));

  const auto student = to_vector(ref::wrong::attention_gqa_modulo(q, k, v, h, hk));
  const auto r = matches_reference("attn", student, expected, {s, h, hd}, tol::attention(hd, s),
                                   pitfalls, {"row", "head", "dim"});
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(), std::string(kKnown) + "Query head i used KV head i mod h_k");
  // Heads 0 and 3 use the right KV head either way (0 mod 2 = 0/2, 3 mod 2 = 3/2).
  EXPECT_CONTAINS(r.message(), "heads 1..2 (2 of 4)");
}

TEST(TorchPitfalls, AttentionMaskIncludingTheDiagonalIsNamed) {
  const int64_t s = 4, h = 2, hk = 1, hd = 8;
  const torch::Tensor q = normal({s, h * hd}, 50);
  const torch::Tensor k = normal({s, hk * hd}, 51);
  const torch::Tensor v = normal({s, hk * hd}, 52);
  const auto expected = to_vector(ref::causal_gqa_attention(q, k, v, h, hk));
  const auto student = to_vector(ref::wrong::attention_mask_includes_diagonal(q, k, v, h, hk));
  const auto r = matches_reference("attn", student, expected, {s, h * hd}, tol::attention(hd, s),
                                   clockwork::attention_pitfalls(q, k, v, h, hk));
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(), std::string(kKnown) + "Your mask also hides the diagonal");
  EXPECT_CONTAINS(r.message(), "NaN where the expected value is finite");
}

TEST(TorchPitfalls, SoftmaxWithoutMaxIsNamed) {
  const torch::Tensor scores = normal({3, 10}, 60, 40.f) + 60.f;  // exp overflows in fp32
  const auto expected = to_vector(ref::softmax_rows(scores));
  const auto student = to_vector(ref::wrong::softmax_no_max(scores));
  const auto r = matches_reference("p", student, expected, {3, 10}, tol::softmax(10),
                                   clockwork::softmax_pitfalls(scores));
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(),
                     std::string(kKnown) + "Your softmax exponentiates the raw scores");
}

TEST(TorchPitfalls, LmHeadOverAllRowsIsNamedFromItsSize) {
  const int64_t s = 3, d = 16, V = 11;
  const torch::Tensor x = normal({s, d}, 70);
  const torch::Tensor w =
      to_tensor(clockwork::to_bf16(clockwork::random_normal(V * d, 71)), {V, d});
  const auto expected = to_vector(ref::lm_head(ref::last_row(x), w));
  const auto student = to_vector(ref::wrong::lm_head_all_rows(x, w));
  const auto r = matches_reference("logits", student, expected, {V}, tol::matmul(d),
                                   clockwork::lm_head_pitfalls(x, w));
  EXPECT_FALSE(r);
  EXPECT_STARTS_WITH(r.message(), std::string(kKnown) + "You projected all s rows through lm_head");
  EXPECT_CONTAINS(r.message(), "'logits' has 33 elements, but the expected shape [11] has 11.");
}

}  // namespace
