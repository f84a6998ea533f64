// Tests of the reference model on a tiny random Llama (d = 64, h = 4, h_k = 2, 2 layers, V = 97)
// and of the pitfall table: every wrong-on-purpose function must really differ from the correct
// operator on inputs chosen to separate them.
#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "reference/model.h"
#include "reference/ops.h"
#include "reference/pitfalls.h"
#include "reference/tests/check.h"

namespace ref = clockwork::ref;
using clockwork::ModelConfig;
using ref::testing::as_double;
using ref::testing::close;
using ref::testing::max_abs_diff;

namespace {

ModelConfig tiny_config(bool tied) {
  ModelConfig c;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 96;
  c.vocab_size = 97;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.tie_word_embeddings = tied;
  return c;
}

const std::vector<int64_t> kPrompt{3, 14, 15, 92, 65, 35, 89, 79, 32};

// The forward pass written out op by op from the course's block order, independently of
// model.cpp. Returns the residual stream after each layer, then the logits as the last element.
std::vector<torch::Tensor> hand_chain(const ModelConfig& c,
                                      const std::map<std::string, torch::Tensor>& w,
                                      const std::vector<int64_t>& ids) {
  auto W = [&](const std::string& name) { return w.at(name); };
  auto L = [&](int64_t i, const std::string& s) { return w.at(ref::layer_weight_name(i, s)); };
  const int64_t s = static_cast<int64_t>(ids.size());
  std::vector<torch::Tensor> out;
  torch::Tensor x =
      ref::embedding(torch::tensor(ids, torch::kLong), W("model.embed_tokens.weight"));
  const ref::RopeTables rope = ref::rope_tables(s, c.head_dim, c.rope_theta);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const torch::Tensor a = ref::rms_norm(x, L(i, "input_layernorm.weight"), c.rms_norm_eps);
    const torch::Tensor q =
        ref::apply_rope(ref::linear(a, L(i, "self_attn.q_proj.weight")), rope, c.num_heads);
    const torch::Tensor k =
        ref::apply_rope(ref::linear(a, L(i, "self_attn.k_proj.weight")), rope, c.num_kv_heads);
    const torch::Tensor v = ref::linear(a, L(i, "self_attn.v_proj.weight"));
    const torch::Tensor o = ref::causal_gqa_attention(q, k, v, c.num_heads, c.num_kv_heads);
    x = x + ref::linear(o, L(i, "self_attn.o_proj.weight"));
    const torch::Tensor f =
        ref::rms_norm(x, L(i, "post_attention_layernorm.weight"), c.rms_norm_eps);
    const torch::Tensor gate = ref::linear(f, L(i, "mlp.gate_proj.weight"));
    const torch::Tensor up = ref::linear(f, L(i, "mlp.up_proj.weight"));
    x = x + ref::linear(gate * torch::sigmoid(gate) * up, L(i, "mlp.down_proj.weight"));
    out.push_back(x);
  }
  const torch::Tensor last = ref::rms_norm(x[s - 1], W("model.norm.weight"), c.rms_norm_eps);
  const torch::Tensor lm =
      c.tie_word_embeddings ? W("model.embed_tokens.weight") : W("lm_head.weight");
  out.push_back(ref::lm_head(last, lm));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------------

// Same ops in the same order on the same fp32 data: the only freedom left is how torch fuses
// x + y, so 1e-6 (a few fp32 ulps of O(1) values) is the tolerance.
TEST(Model, ForwardEqualsTheHandChainedOps) {
  for (bool tied : {false, true}) {
    const ModelConfig c = tiny_config(tied);
    const auto weights = ref::random_weights(c, 42);
    const ref::Model model(c, ref::lookup_from_map(weights));
    const ref::ForwardResult r = model.forward(kPrompt);
    const std::vector<torch::Tensor> want = hand_chain(c, weights, kPrompt);
    ASSERT_EQ(r.hidden.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(close(r.hidden[i], want[i], 1e-6, 1e-6)) << "layer " << i << ", tied " << tied;
    }
    ASSERT_EQ(r.logits.sizes(), (std::vector<int64_t>{97}));
    EXPECT_TRUE(close(r.logits, want[2], 1e-6, 1e-6)) << "tied " << tied;
    EXPECT_EQ(r.next_token, ref::argmax(want[2]));
    EXPECT_EQ(r.final_norm_last.sizes(), (std::vector<int64_t>{64}));
    // Random weights keep the activations O(1): a meaningful test, not one on tiny numbers.
    EXPECT_GT(r.hidden[1].abs().mean().item<float>(), 0.1f);
  }
}

TEST(Model, TiedHeadUsesTheEmbeddingAndUntiedUsesLmHead) {
  const ModelConfig tied = tiny_config(true);
  const ModelConfig untied = tiny_config(false);
  auto weights = ref::random_weights(untied, 7);
  ASSERT_EQ(weights.count("lm_head.weight"), 1u);
  EXPECT_EQ(ref::random_weights(tied, 7).count("lm_head.weight"), 0u);

  const ref::ForwardResult ru = ref::Model(untied, ref::lookup_from_map(weights)).forward(kPrompt);
  // Tied: lm_head.weight must not even be asked for; remove it to prove it.
  auto without_head = weights;
  without_head.erase("lm_head.weight");
  const ref::ForwardResult rt =
      ref::Model(tied, ref::lookup_from_map(without_head)).forward(kPrompt);

  EXPECT_TRUE(rt.final_norm_last.equal(ru.final_norm_last));  // same body, same weights
  EXPECT_TRUE(close(
      rt.logits, ref::lm_head(rt.final_norm_last, weights.at("model.embed_tokens.weight")), 0, 0));
  EXPECT_TRUE(
      close(ru.logits, ref::lm_head(ru.final_norm_last, weights.at("lm_head.weight")), 0, 0));
  EXPECT_GT(max_abs_diff(rt.logits, ru.logits), 0.1);

  // Untied without lm_head.weight: a clear error naming it.
  try {
    ref::Model(untied, ref::lookup_from_map(without_head)).forward(kPrompt);
    ADD_FAILURE() << "missing lm_head.weight not reported";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos) << e.what();
  }
}

TEST(Model, MisshapenWeightReportsExpectedAndActual) {
  const ModelConfig c = tiny_config(false);
  auto weights = ref::random_weights(c, 1);
  weights["model.layers.1.self_attn.k_proj.weight"] = torch::zeros({64, 64}, torch::kBFloat16);
  try {
    ref::Model(c, ref::lookup_from_map(weights)).forward(kPrompt);
    ADD_FAILURE() << "wrong shape not reported";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.layers.1.self_attn.k_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Expected: [32, 64]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Actual: [64, 64]"), std::string::npos) << msg;
  }
}

TEST(Model, CapturesEveryIntermediateWithItsShape) {
  const ModelConfig c = tiny_config(false);
  const auto weights = ref::random_weights(c, 3);
  const ref::Model model(c, ref::lookup_from_map(weights));
  const int64_t s = static_cast<int64_t>(kPrompt.size());

  EXPECT_TRUE(model.forward(kPrompt).layers.empty());  // nothing kept without the flag

  ref::ForwardOptions all;
  all.capture = true;
  const ref::ForwardResult r = model.forward(kPrompt, all);
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(r.embeddings.sizes(), (std::vector<int64_t>{s, 64}));
  for (const ref::LayerCapture& lc : r.layers) {
    using Shape = std::vector<int64_t>;
    EXPECT_EQ(lc.attn_norm.sizes(), (Shape{s, 64}));
    EXPECT_EQ(lc.q_proj.sizes(), (Shape{s, 64}));
    EXPECT_EQ(lc.k_proj.sizes(), (Shape{s, 32}));
    EXPECT_EQ(lc.q.sizes(), (Shape{s, 64}));
    EXPECT_EQ(lc.k.sizes(), (Shape{s, 32}));
    EXPECT_EQ(lc.v.sizes(), (Shape{s, 32}));
    EXPECT_EQ(lc.attn.sizes(), (Shape{s, 64}));
    EXPECT_EQ(lc.attn_out.sizes(), (Shape{s, 64}));
    EXPECT_EQ(lc.attn_residual.sizes(), (Shape{s, 64}));
    EXPECT_EQ(lc.ffn_norm.sizes(), (Shape{s, 64}));
    EXPECT_EQ(lc.ffn_hidden.sizes(), (Shape{s, 96}));
    EXPECT_EQ(lc.ffn_out.sizes(), (Shape{s, 64}));
  }
  // The captured points chain into each other and into the layer outputs.
  const ref::LayerCapture& l1 = r.layers[1];
  EXPECT_EQ(l1.layer, 1);
  EXPECT_TRUE(l1.attn_residual.equal(r.hidden[0] + l1.attn_out));
  EXPECT_TRUE(r.hidden[1].equal(l1.attn_residual + l1.ffn_out));
  const ref::RopeTables rope = ref::rope_tables(s, 16, c.rope_theta);
  EXPECT_TRUE(l1.q.equal(ref::apply_rope(l1.q_proj, rope, 4)));
  EXPECT_TRUE(l1.k.equal(ref::apply_rope(l1.k_proj, rope, 2)));

  ref::ForwardOptions only1 = all;
  only1.capture_layers = {1};
  const ref::ForwardResult r1 = model.forward(kPrompt, only1);
  ASSERT_EQ(r1.layers.size(), 1u);
  EXPECT_EQ(r1.layers[0].layer, 1);
}

TEST(Model, LaterTokensDoNotChangeEarlierPositions) {
  // Causality end to end: appending tokens leaves every earlier row of every layer unchanged
  // (up to fp32 reduction order in the larger matmuls, hence 1e-5).
  const ModelConfig c = tiny_config(false);
  const ref::Model model(c, ref::lookup_from_map(ref::random_weights(c, 5)));
  std::vector<int64_t> longer = kPrompt;
  longer.insert(longer.end(), {1, 2, 3});
  const ref::ForwardResult a = model.forward(kPrompt);
  const ref::ForwardResult b = model.forward(longer);
  const int64_t s = static_cast<int64_t>(kPrompt.size());
  for (size_t i = 0; i < a.hidden.size(); ++i) {
    EXPECT_TRUE(close(b.hidden[i].narrow(0, 0, s), a.hidden[i], 1e-5, 1e-5)) << "layer " << i;
  }
}

TEST(Model, GreedyGenerationRerunsTheWholeSequence) {
  const ModelConfig c = tiny_config(false);
  const ref::Model model(c, ref::lookup_from_map(ref::random_weights(c, 11)));
  const ref::GenerateResult g = model.generate_greedy(kPrompt, 4);
  ASSERT_EQ(g.tokens.size(), 4u);
  ASSERT_EQ(g.logits.size(), 4u);
  std::vector<int64_t> ids = kPrompt;
  for (size_t step = 0; step < 4; ++step) {
    const ref::ForwardResult r = model.forward(ids);
    EXPECT_EQ(g.tokens[step], r.next_token) << "step " << step;
    EXPECT_TRUE(g.logits[step].equal(r.logits)) << "step " << step;
    EXPECT_EQ(ref::top_k(g.logits[step], 5).ids.front(), g.tokens[step]);
    ids.push_back(r.next_token);
  }
  // A stop id ends generation right after it is produced.
  const ref::GenerateResult stopped = model.generate_greedy(kPrompt, 4, {g.tokens[1]});
  EXPECT_EQ(stopped.tokens.size(), 2u);
}

TEST(Model, Llama3RopeScalingReachesTheAttention) {
  ModelConfig c = tiny_config(false);
  c.rope_scaling = clockwork::RopeScaling{"llama3", 8.0, 1.0, 4.0, 16};
  const auto weights = ref::random_weights(c, 13);
  ref::ForwardOptions capture;
  capture.capture = true;
  const ref::ForwardResult r =
      ref::Model(c, ref::lookup_from_map(weights)).forward(kPrompt, capture);
  const int64_t s = static_cast<int64_t>(kPrompt.size());
  const ref::RopeTables scaled = ref::rope_tables(s, 16, c.rope_theta, c.rope_scaling);
  EXPECT_TRUE(r.layers[0].q.equal(ref::apply_rope(r.layers[0].q_proj, scaled, 4)));
  const ref::RopeTables plain = ref::rope_tables(s, 16, c.rope_theta);
  EXPECT_GT(max_abs_diff(r.layers[0].q, ref::apply_rope(r.layers[0].q_proj, plain, 4)), 1e-3);
}

// ---------------------------------------------------------------------------------------------
// Pitfalls
// ---------------------------------------------------------------------------------------------

// "Differs" means: another shape, a non-finite value where the correct result is finite, or a
// difference far above fp32 rounding (1e-3 on O(1) values).
bool differs(const torch::Tensor& wrong, const torch::Tensor& right) {
  return !wrong.defined() || wrong.sizes() != right.sizes() || max_abs_diff(wrong, right) > 1e-3;
}

TEST(Pitfalls, TableIsWellFormed) {
  std::set<std::string> names;
  std::set<int> items;
  for (const ref::Pitfall& p : ref::pitfalls()) {
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate " << p.name;
    EXPECT_GT(p.message.size(), 30u) << p.name;
    const int ops = bool(p.linear) + bool(p.rms_norm) + bool(p.softmax) + bool(p.rope) +
                    bool(p.attention) + bool(p.lm_head) + bool(p.weights) + bool(p.swiglu) +
                    bool(p.residual) + !p.wiring.is_default();
    EXPECT_GE(ops, 1) << p.name << " has no wrong computation";
    items.insert(p.course_item);
    EXPECT_EQ(&ref::find_pitfall(p.name), &p);
  }
  for (int item = 1; item <= 9; ++item) EXPECT_EQ(items.count(item), 1u) << "course item " << item;
  EXPECT_THROW(ref::find_pitfall("no_such_mistake"), std::invalid_argument);
  const ref::Pitfall& ok = ref::correct_ops();
  EXPECT_TRUE(ok.linear && ok.rms_norm && ok.softmax && ok.rope && ok.attention && ok.lm_head &&
              ok.weights && ok.swiglu && ok.residual && ok.wiring.is_default());
}

// Every callable of every pitfall against correct_ops() on inputs that separate them.
TEST(Pitfalls, EachWrongComputationDiffersFromTheCorrectOp) {
  torch::manual_seed(21);
  const ref::Pitfall& ok = ref::correct_ops();
  // linear: non-square, bf16 weight.
  const torch::Tensor x = torch::randn({5, 12});
  const torch::Tensor w = torch::randn({7, 12}).to(torch::kBFloat16);
  // rms_norm: small rows (mean(x²) near ε, where ε's place matters) and γ away from 1.
  const torch::Tensor xs = 2e-3 * torch::randn({3, 32});
  const torch::Tensor gamma = 1 + 0.5 * torch::randn({32});
  // softmax: scores whose exp overflows fp32.
  const torch::Tensor big = 200 * torch::randn({4, 9});
  // rope and attention: s > 1, 1 < h_k < h, positions beyond 0.
  const int64_t s = 6, h = 4, hk = 2, hd = 8;
  const torch::Tensor xr = torch::randn({s, h * hd});
  const torch::Tensor pos = torch::arange(s) + 3;
  const torch::Tensor q = torch::randn({s, h * hd});
  const torch::Tensor k = torch::randn({s, hk * hd});
  const torch::Tensor v = torch::randn({s, hk * hd});
  const torch::Tensor q_big = 100 * q;  // for the softmax pitfall inside attention
  const int64_t s_long = 150;  // for the fused attention's pitfalls: three tiles of 64
  const torch::Tensor q_long = torch::randn({s_long, h * hd});
  const torch::Tensor k_long = torch::randn({s_long, hk * hd});
  const torch::Tensor v_long = torch::randn({s_long, hk * hd});
  const torch::Tensor lm = torch::randn({11, h * hd});
  // model: tiny random Llama.
  const ModelConfig c = tiny_config(false);
  const ref::WeightLookup lookup = ref::lookup_from_map(ref::random_weights(c, 17));
  const torch::Tensor right_logits = ref::Model(c, ok.weights(lookup)).forward(kPrompt).logits;

  for (const ref::Pitfall& p : ref::pitfalls()) {
    SCOPED_TRACE(p.name);
    if (p.linear) {
      EXPECT_TRUE(differs(p.linear(x, w), ok.linear(x, w)));
    }
    if (p.rms_norm) {
      // ε = 2e-6: neither of the fixed values the table tries, and comparable to mean(x²).
      EXPECT_TRUE(differs(p.rms_norm(xs, gamma, 2e-6), ok.rms_norm(xs, gamma, 2e-6)));
    }
    if (p.softmax) {
      EXPECT_TRUE(differs(p.softmax(big), ok.softmax(big)));
    }
    if (p.rope) {
      // Base 20000: neither 10000 nor 500000, which two pitfalls use whatever theta says.
      EXPECT_TRUE(differs(p.rope(xr, pos, h, 20000.0, std::nullopt),
                          ok.rope(xr, pos, h, 20000.0, std::nullopt)));
    }
    if (p.attention) {
      const bool needs_big = p.name == "softmax_no_max";
      // The fused kernel's mistakes need more than one tile of 64 positions.
      const bool needs_tiles =
          p.name.starts_with("online_") || p.name.starts_with("causal_diagonal_tile_");
      const torch::Tensor& qq = needs_big ? q_big : needs_tiles ? q_long : q;
      const torch::Tensor& kk = needs_tiles ? k_long : k;
      const torch::Tensor& vv = needs_tiles ? v_long : v;
      EXPECT_TRUE(differs(p.attention(qq, kk, vv, h, hk), ok.attention(qq, kk, vv, h, hk)));
    }
    if (p.lm_head) {
      EXPECT_TRUE(differs(p.lm_head(xr, lm), ok.lm_head(xr, lm)));
    }
    if (p.swiglu) {
      EXPECT_TRUE(differs(p.swiglu(q, xr), ok.swiglu(q, xr)));
    }
    if (p.residual) {
      EXPECT_TRUE(differs(p.residual(q, xr), ok.residual(q, xr)));
    }
    if (p.weights) {
      const torch::Tensor wrong_logits = ref::Model(c, p.weights(lookup)).forward(kPrompt).logits;
      EXPECT_TRUE(differs(wrong_logits, right_logits));
    }
  }
}

TEST(Pitfalls, WrongComputationsAreTheDescribedMistakes) {
  torch::manual_seed(22);
  namespace wrong = ref::wrong;
  // Square weight: exactly X·W.
  const torch::Tensor x = torch::randn({3, 6});
  const torch::Tensor w = torch::randn({6, 6});
  EXPECT_TRUE(close(wrong::linear_no_transpose(x, w), torch::matmul(x, w), 1e-6, 1e-6));

  // ε outside the root and no γ, by formula.
  const torch::Tensor xs = 1e-3 * torch::randn({2, 16});
  const torch::Tensor gamma = 1 + 0.5 * torch::randn({16});
  const torch::Tensor rms = xs.to(torch::kDouble).pow(2).mean(-1, true).sqrt();
  EXPECT_TRUE(close(wrong::rms_norm_eps_outside(xs, gamma, 1e-5),
                    xs.to(torch::kDouble) / (rms + 1e-5) * gamma.to(torch::kDouble), 1e-5, 1e-5));
  EXPECT_TRUE(close(wrong::rms_norm_no_gamma(xs, gamma, 1e-5),
                    ref::rms_norm(xs, torch::ones({16}), 1e-5), 0, 0));

  // Naive softmax overflows where the stable one does not.
  const torch::Tensor big = torch::tensor({100.0f, 101.0f, 99.0f}).reshape({1, 3});
  EXPECT_FALSE(torch::isfinite(wrong::softmax_no_max(big)).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(ref::softmax_rows(big)).all().item<bool>());

  // Interleaved RoPE, per element: pairs (2i, 2i+1) rotate by p·θ_i.
  const int64_t s = 4, n = 2, hd = 8;
  const torch::Tensor xr = torch::randn({s, n * hd});
  const torch::Tensor got =
      wrong::rope_interleaved(xr, torch::arange(s), n, 500000.0, std::nullopt);
  const torch::Tensor xd_t = as_double(xr);
  const auto xd = xd_t.accessor<double, 2>();
  torch::Tensor want = torch::zeros({s, n * hd}, torch::kDouble);
  for (int64_t p = 0; p < s; ++p) {
    for (int64_t head = 0; head < n; ++head) {
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double a = p * std::pow(500000.0, -2.0 * i / hd);
        const double e = xd[p][head * hd + 2 * i], o = xd[p][head * hd + 2 * i + 1];
        want[p][head * hd + 2 * i] = e * std::cos(a) - o * std::sin(a);
        want[p][head * hd + 2 * i + 1] = e * std::sin(a) + o * std::cos(a);
      }
    }
  }
  EXPECT_TRUE(close(got, want, 1e-5, 1e-5));
  EXPECT_GT(max_abs_diff(got, ref::apply_rope(xr, ref::rope_tables(s, hd, 500000.0), n)), 1e-2);

  // RoPE base 10000 equals RoPE computed with theta = 10000.
  EXPECT_TRUE(wrong::rope_base_10000(xr, torch::arange(s), n, 500000.0, std::nullopt)
                  .equal(ref::apply_rope(xr, ref::rope_tables(s, hd, 10000.0), n)));

  // GQA modulo: with h_k = 1 or h_k = h every mapping is the same, so it must equal the correct op.
  const torch::Tensor q = torch::randn({5, 4 * 4});
  const torch::Tensor k1 = torch::randn({5, 4}), v1 = torch::randn({5, 4});
  EXPECT_TRUE(close(wrong::attention_gqa_modulo(q, k1, v1, 4, 1),
                    ref::causal_gqa_attention(q, k1, v1, 4, 1), 1e-6, 1e-6));

  // Mask variants: masking the diagonal too leaves row 0 with nothing, hence NaN; a missing mask
  // still gets the last row right (it has nothing to hide), which is why every row is checked.
  const torch::Tensor k = torch::randn({5, 2 * 4}), v = torch::randn({5, 2 * 4});
  EXPECT_TRUE(
      torch::isnan(wrong::attention_mask_includes_diagonal(q, k, v, 4, 2)[0]).all().item<bool>());
  EXPECT_TRUE(close(wrong::attention_no_mask(q, k, v, 4, 2)[4],
                    ref::causal_gqa_attention(q, k, v, 4, 2)[4], 1e-6, 1e-6));

  // Per-head output layout: the correct output's per-head memory, read flat.
  const torch::Tensor right = ref::causal_gqa_attention(q, k, v, 4, 2);
  EXPECT_TRUE(close(wrong::attention_output_per_head(q, k, v, 4, 2),
                    ref::to_heads(right, 4).reshape({5, 16}), 1e-6, 1e-6));

  // lm_head over every row: [s, V] whose last row is the right logits.
  const torch::Tensor xn = torch::randn({3, 8}), lm = torch::randn({11, 8});
  const torch::Tensor all_rows = wrong::lm_head_all_rows(xn, lm);
  EXPECT_EQ(all_rows.sizes(), (std::vector<int64_t>{3, 11}));
  EXPECT_TRUE(close(all_rows[2], ref::lm_head(xn[2], lm), 1e-6, 1e-6));

  // One norm weight for both norms: identical to the correct model when the two are equal.
  const ModelConfig c = tiny_config(false);
  auto weights = ref::random_weights(c, 19);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    weights[ref::layer_weight_name(i, "post_attention_layernorm.weight")] =
        weights.at(ref::layer_weight_name(i, "input_layernorm.weight"));
  }
  const ref::WeightLookup lookup = ref::lookup_from_map(weights);
  EXPECT_TRUE(ref::Model(c, wrong::norm_weight_reused(lookup))
                  .forward(kPrompt)
                  .logits.equal(ref::Model(c, lookup).forward(kPrompt).logits));
}

}  // namespace
