// The recognisers of the pitfall table, one by one: each mistake is computed on purpose with the
// reference, handed to matches_reference() as a student's output, and must fail with that
// mistake's message first; the correct output must pass with no mistake named. The inputs are
// chosen so that each mistake really differs from the reference (see reference/pitfalls.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "reference/ops.h"
#include "reference/pitfalls.h"

namespace {

namespace ref = clockwork::ref;
namespace tol = clockwork::tol;
using clockwork::matches_reference;
using clockwork::PitfallCandidate;
using clockwork::to_tensor;
using clockwork::to_vector;
using clockwork::Tolerance;

constexpr const char* kKnown = "This looks like a known mistake: ";

torch::Tensor normal(std::vector<int64_t> shape, uint64_t seed, float stddev = 1.f) {
  return to_tensor(clockwork::random_normal(clockwork::element_count(shape), seed, stddev), shape);
}

torch::Tensor bf16_normal(std::vector<int64_t> shape, uint64_t seed, float stddev) {
  return to_tensor(clockwork::to_bf16(clockwork::random_normal(clockwork::element_count(shape),
                                                               seed, stddev)),
                   shape);
}

// The mistaken output must fail naming `name`'s message; the reference itself must pass.
void expect_named(const std::string& name, const torch::Tensor& mistaken,
                  const torch::Tensor& expected, Tolerance t,
                  const std::vector<PitfallCandidate>& candidates,
                  std::optional<std::string> message = std::nullopt) {
  SCOPED_TRACE(name);
  const std::vector<int64_t> shape = clockwork::shape_of(expected);
  const std::vector<float> want = to_vector(expected);
  const auto ok = matches_reference("out", want, want, shape, t, candidates);
  EXPECT_TRUE(ok) << ok.message();
  EXPECT_EQ(std::string(ok.message()).find(kKnown), std::string::npos)
      << "a correct output named a mistake";

  const auto r = matches_reference("out", to_vector(mistaken), want, shape, t, candidates);
  ASSERT_FALSE(r) << "the mistake passed the tolerance: these inputs do not separate it";
  const std::string text = message ? *message : ref::find_pitfall(name).message;
  EXPECT_EQ(std::string(r.message()).rfind(kKnown + text, 0), 0u)
      << "should start with: " << kKnown << text << "\ngot:\n" << r.message();
}

TEST(PitfallRecognisers, RmsNormEpsilonNotThePassedOne) {
  const int64_t s = 4, d = 64;
  const torch::Tensor gamma = bf16_normal({d}, 101, 0.3f) + 1.f;
  // ε = 1e-6 on rows of size 1e-3 (mean(x²) ≈ 1e-6): a fixed 1e-5 changes the scale 2.3×.
  {
    const torch::Tensor x = normal({s, d}, 100, 1e-3f);
    expect_named("rms_norm_eps_fixed_1e-5", ref::wrong::rms_norm_eps_fixed(x, gamma, 1e-5),
                 ref::rms_norm(x, gamma, 1e-6), tol::rms_norm(d),
                 clockwork::rms_norm_pitfalls(x, gamma, 1e-6));
  }
  // ε = 1e-2 on rows of size 0.1: a fixed 1e-5 or 1e-6 changes the scale by about 1.4×.
  {
    const torch::Tensor x = normal({s, d}, 102, 0.1f);
    for (const char* name : {"rms_norm_eps_fixed_1e-5", "rms_norm_eps_fixed_1e-6"}) {
      const double fixed = std::string(name).ends_with("1e-5") ? 1e-5 : 1e-6;
      expect_named(name, ref::wrong::rms_norm_eps_fixed(x, gamma, fixed),
                   ref::rms_norm(x, gamma, 1e-2), tol::rms_norm(d),
                   clockwork::rms_norm_pitfalls(x, gamma, 1e-2));
    }
  }
  const auto& p = ref::find_pitfall("rms_norm_eps_fixed_1e-5");
  EXPECT_NE(p.message.find("looks like epsilon is not the one passed in"), std::string::npos);
}

TEST(PitfallRecognisers, MatmulTileMistakes) {
  // k = 88: two full tiles of 32 and a remainder of 24, or five of 16 and a remainder of 8.
  const int64_t m = 9, n = 11, k = 88;
  const torch::Tensor x = normal({m, k}, 110);
  const torch::Tensor w = bf16_normal({n, k}, 111, 0.1f);
  const torch::Tensor want = ref::linear(x, w);
  const auto candidates = clockwork::linear_pitfalls(x, w);
  for (int64_t tile : {32, 16}) {
    const std::string t = std::to_string(tile);
    expect_named("linear_k_tail_dropped_" + t, ref::wrong::linear_k_tail_dropped(x, w, tile), want,
                 tol::matmul(k), candidates);
  }
  // Unbounded loads: the tile of 32 reads 8 terms on into the next rows.
  expect_named("linear_k_loads_unbounded_32", ref::wrong::linear_k_loads_unbounded(x, w, 32),
               want, tol::matmul(k), candidates);
  expect_named("linear_bf16_accumulation", ref::wrong::linear_bf16_accumulation(x, w, false),
               want, tol::matmul(k), candidates);
  expect_named("linear_bf16_accumulation_bf16_products",
               ref::wrong::linear_bf16_accumulation(x, w, true), want, tol::matmul(k), candidates);
}

TEST(PitfallRecognisers, UnboundedLoadsReadTheNextRow) {
  // x [2, 3] and w [1, 3] with a tile of 4: row 0 also multiplies x[1][0] by the guard value
  // past w's end (about −3e-16), which leaves it unchanged; nothing else is read.
  const torch::Tensor x = torch::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}).reshape({2, 3});
  const torch::Tensor w = torch::tensor({1.f, 1.f, 1.f}).reshape({1, 3});
  const torch::Tensor y = ref::wrong::linear_k_loads_unbounded(x, w, 4);
  EXPECT_NEAR(y[0][0].item<float>(), 6.f, 1e-6);
  EXPECT_NEAR(y[1][0].item<float>(), 15.f, 1e-6);
  // With two rows of w the overrun of row 0 meets real values: x[1][0]·w[1][0] = 4·2.
  const torch::Tensor w2 = torch::tensor({1.f, 1.f, 1.f, 2.f, 2.f, 2.f}).reshape({2, 3});
  EXPECT_NEAR(ref::wrong::linear_k_loads_unbounded(x, w2, 4)[0][0].item<float>(), 14.f, 1e-6);
  // k a multiple of the tile: neither mistake changes anything, so neither makes a candidate.
  EXPECT_THROW(ref::wrong::linear_k_loads_unbounded(x, w, 3), std::invalid_argument);
  EXPECT_THROW(ref::wrong::linear_k_tail_dropped(x, w, 3), std::invalid_argument);
  EXPECT_TRUE(clockwork::linear_pitfalls(normal({2, 64}, 160), bf16_normal({3, 64}, 161, 0.1f))
                  .size() == 3u)  // no transpose and the two bf16 accumulations
      << "k = 64 is a multiple of both tiles";
}

TEST(PitfallRecognisers, RopeMistakes) {
  const int64_t s = 6, h = 2, hd = 16;
  const torch::Tensor x = normal({s, h * hd}, 120);
  const torch::Tensor pos = torch::arange(s, torch::kLong) + 3;
  const double theta = 20000.0;  // neither 10000 nor 500000
  const torch::Tensor want = ref::apply_rope(x, ref::rope_tables(pos, hd, theta), h);
  const auto candidates = clockwork::rope_pitfalls(x, pos, h, theta);
  const Tolerance t = tol::rope(8);
  expect_named("rope_theta_fixed_500000",
               ref::wrong::rope_theta_fixed_500000(x, pos, h, theta, std::nullopt), want, t,
               candidates);
  expect_named("rope_sign_flipped", ref::wrong::rope_sign_flipped(x, pos, h, theta, std::nullopt),
               want, t, candidates);
  expect_named("rope_positions_from_one",
               ref::wrong::rope_positions_from_one(x, pos, h, theta, std::nullopt), want, t,
               candidates);
}

TEST(PitfallRecognisers, RopeTableMistakes) {
  // Positions around 100000: an fp32 angle there is off by up to 4e-3 radians.
  const int64_t hd = 32;
  const torch::Tensor pos = torch::arange(4, torch::kLong) + 100000;
  const double theta = 20000.0;
  const ref::RopeTables want = ref::rope_tables(pos, hd, theta);
  const auto candidates = clockwork::rope_table_pitfalls(pos, hd, theta);
  const Tolerance t{0, 0, "one rounding of a value computed in double", 4 * tol::kUnitRoundoff};
  auto cos_of = [&](const std::string& name) {
    for (const PitfallCandidate& c : candidates.cos) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << "no candidate " << name;
    return PitfallCandidate{};
  };
  for (const char* name : {"rope_fp32_angle", "rope_row_index_as_position", "rope_base_10000",
                           "rope_theta_fixed_500000", "rope_positions_from_one"}) {
    const PitfallCandidate c = cos_of(name);
    expect_named(name, to_tensor(c.output, {4, hd / 2}), want.cos, t, candidates.cos, c.message);
  }
  EXPECT_NE(cos_of("rope_fp32_angle").message.find("fp32"), std::string::npos);
}

TEST(PitfallRecognisers, SwigluAndResidual) {
  const torch::Tensor gate = normal({3, 40}, 130, 2.f), up = normal({3, 40}, 131);
  expect_named("swiglu_silu_on_up", ref::wrong::swiglu_silu_on_up(gate, up),
               ref::swiglu(gate, up), tol::swiglu(), clockwork::swiglu_pitfalls(gate, up));
  const torch::Tensor x = normal({3, 40}, 132), y = normal({3, 40}, 133, 0.5f);
  expect_named("residual_overwritten", ref::wrong::residual_overwritten(x, y),
               ref::residual_add(x, y), tol::residual_add(), clockwork::residual_pitfalls(x, y));
}

TEST(PitfallRecognisers, AttentionScaledByHeadDim) {
  const int64_t s = 5, h = 4, hk = 2, hd = 16;
  const torch::Tensor q = normal({s, h * hd}, 140), k = normal({s, hk * hd}, 141),
                      v = normal({s, hk * hd}, 142);
  expect_named("attention_scale_one_over_hd",
               ref::wrong::attention_scale_one_over_hd(q, k, v, h, hk),
               ref::causal_gqa_attention(q, k, v, h, hk), tol::attention(hd, s),
               clockwork::attention_pitfalls(q, k, v, h, hk));
}

// The fused attention's mistakes for every tile size the table knows: the mistake made with
// tiles of T is named with T's entry. s = 140 spans three tiles of 64.
TEST(PitfallRecognisers, FusedAttentionMistakesForEachTile) {
  const int64_t s = 140, h = 4, hk = 2, hd = 8;
  const torch::Tensor q = normal({s, h * hd}, 143), k = normal({s, hk * hd}, 144),
                      v = normal({s, hk * hd}, 145);
  const auto candidates = clockwork::attention_pitfalls(q, k, v, h, hk);
  using M = ref::wrong::OnlineSoftmaxMistake;
  for (int64_t tile : {16, 32, 64}) {
    for (const auto& [name, mistake] :
         {std::pair{"online_output_not_rescaled_", M::kOutputNotRescaled},
          std::pair{"online_sum_not_rescaled_", M::kSumNotRescaled},
          std::pair{"causal_diagonal_tile_skipped_", M::kDiagonalTileSkipped},
          std::pair{"causal_diagonal_tile_unmasked_", M::kDiagonalTileUnmasked}}) {
      expect_named(name + std::to_string(tile),
                   ref::wrong::attention_online_tiled(q, k, v, h, hk, tile, mistake),
                   ref::causal_gqa_attention(q, k, v, h, hk), tol::attention(hd, s), candidates);
    }
  }
}

TEST(PitfallRecognisers, QkvStepWiring) {
  const int64_t s = 3, d = 32, qw = 32, kvw = 16;
  const torch::Tensor x = normal({s, d}, 150);
  const torch::Tensor gamma = bf16_normal({d}, 151, 0.3f) + 1.f;
  const torch::Tensor wq = bf16_normal({qw, d}, 152, 0.1f), wk = bf16_normal({kvw, d}, 153, 0.1f),
                      wv = bf16_normal({kvw, d}, 154, 0.1f);
  const torch::Tensor xn = ref::rms_norm(x, gamma, 1e-5);
  const clockwork::QkvCandidates c = clockwork::qkv_pitfalls(x, gamma, wq, wk, wv, 1e-5);
  Tolerance t = tol::matmul(d);
  t.rtol += tol::rms_norm(d).rtol;
  t.rms_atol += tol::rms_norm(d).rtol;
  expect_named("q_from_unnormalised_x", ref::linear(x, wq), ref::linear(xn, wq), t, c.q);
  expect_named("v_from_k_proj", ref::linear(xn, wk), ref::linear(xn, wv), t, c.v);
  // A mistake of the norm shows in every projection.
  expect_named("rms_norm_no_gamma", ref::linear(ref::wrong::rms_norm_no_gamma(x, gamma, 1e-5), wk),
               ref::linear(xn, wk), t, c.k);
}

TEST(PitfallRecognisers, FirstLayerWeightsLookup) {
  const ref::WeightLookup base = [](const std::string& name) {
    return torch::tensor({static_cast<float>(name.size())});
  };
  const ref::WeightLookup wrong = ref::wrong::first_layer_weights(base);
  EXPECT_EQ(wrong("model.layers.7.mlp.up_proj.weight").item<float>(),
            base("model.layers.0.mlp.up_proj.weight").item<float>());
  EXPECT_EQ(wrong("model.layers.12.mlp.up_proj.weight").item<float>(),
            base("model.layers.0.mlp.up_proj.weight").item<float>());
  EXPECT_EQ(wrong("model.norm.weight").item<float>(), base("model.norm.weight").item<float>());
}

TEST(PitfallRecognisers, KernelOnlyEntriesAreTheLoopMistakes) {
  for (const ref::Pitfall& p : ref::pitfalls()) {
    const bool loop = p.name.starts_with("linear_k_") || p.name.starts_with("linear_bf16_") ||
                      p.name.starts_with("online_") || p.name.starts_with("causal_diagonal_tile_");
    EXPECT_EQ(p.kernel_only, loop) << p.name;
  }
}

}  // namespace
