// Milestone 6: gemma_decoder_layer (milestones/milestone6/gemma_layer.cpp) on every layer of a
// tiny Gemma 3 checkpoint written by transformers (reference/tests/transformers/
// gemma3-local-global: local layers 0, 1, 3 with a window of 4 keys, global layer 2, an 11-token
// prompt), fed the reference's input of that layer and compared with the reference's output and
// intermediate values. A wrong output is matched against the layer computed with each known
// mistake of a port from Llama, so the report names it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "harness/model/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/steps.h"
#include "reference/model.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "gemma3-local-global";

// The allowance after a chain of ops is the sum of the ops' allowances (as in milestone 3's
// layer test): each adds its own rounding, relative to the size of its result, and the norms keep
// every intermediate at the scale of its input.
Tolerance chained(std::initializer_list<Tolerance> parts, const char* why) {
  Tolerance t{0, 0, why, 0};
  for (const Tolerance& p : parts) {
    t.atol += p.atol;
    t.rtol += p.rtol;
    t.rms_atol += p.rms_atol;
  }
  return t;
}

// The mistakes a layer can make with correct kernels: wiring, not arithmetic.
enum class Mistake { none, qk_norm_after_rope, other_layer_type, other_rope_base, llama_norms };

// The reference layer, optionally with one mistake, from ref ops (x [s, d] in, out [s, d]).
torch::Tensor layer_ref(const ModelConfig& c, const ref::Model& m, int layer, const torch::Tensor& x,
                        Mistake mistake) {
  const int64_t d = c.hidden_size, h = c.num_heads, hk = c.num_kv_heads, hd = c.head_dim;
  const int64_t ff = c.intermediate_size, s = x.size(0);
  const double eps = c.rms_norm_eps;
  auto w = [&](const std::string& suffix, std::vector<int64_t> shape) {
    return m.weight(ref::layer_weight_name(layer, suffix), shape);
  };
  bool local = c.is_sliding(layer);
  if (mistake == Mistake::other_layer_type) local = !local;
  bool local_rope = local;
  if (mistake == Mistake::other_rope_base) local_rope = !local_rope;
  const ref::RopeTables rope = local_rope ? ref::rope_tables(s, hd, c.rope_local_theta)
                                          : ref::rope_tables(s, hd, c.rope_theta, c.rope_scaling);
  const ref::AttentionOptions attention{c.attention_scale(), local ? c.sliding_window : 0};

  const torch::Tensor a = ref::rms_norm_gemma(x, w("input_layernorm.weight", {d}), eps);
  torch::Tensor q = ref::linear(a, w("self_attn.q_proj.weight", {h * hd, d}));
  torch::Tensor k = ref::linear(a, w("self_attn.k_proj.weight", {hk * hd, d}));
  const torch::Tensor v = ref::linear(a, w("self_attn.v_proj.weight", {hk * hd, d}));
  const torch::Tensor qn = w("self_attn.q_norm.weight", {hd}), kn = w("self_attn.k_norm.weight", {hd});
  if (mistake == Mistake::qk_norm_after_rope) {
    q = ref::head_rms_norm(ref::apply_rope(q, rope, h), qn, eps, h);
    k = ref::head_rms_norm(ref::apply_rope(k, rope, hk), kn, eps, hk);
  } else {
    q = ref::apply_rope(ref::head_rms_norm(q, qn, eps, h), rope, h);
    k = ref::apply_rope(ref::head_rms_norm(k, kn, eps, hk), rope, hk);
  }
  const torch::Tensor attn = ref::windowed_gqa_attention(q, k, v, h, hk, attention);
  torch::Tensor attn_out = ref::linear(attn, w("self_attn.o_proj.weight", {d, h * hd}));
  torch::Tensor y;
  if (mistake == Mistake::llama_norms) {
    // Llama's two norms: post_attention_layernorm as the FFN's input norm, no norms after.
    y = x + attn_out;
    const torch::Tensor f = ref::rms_norm_gemma(y, w("post_attention_layernorm.weight", {d}), eps);
    return y + ref::linear(ref::geglu(ref::linear(f, w("mlp.gate_proj.weight", {ff, d})),
                                      ref::linear(f, w("mlp.up_proj.weight", {ff, d}))),
                           w("mlp.down_proj.weight", {d, ff}));
  }
  y = x + ref::rms_norm_gemma(attn_out, w("post_attention_layernorm.weight", {d}), eps);
  const torch::Tensor f = ref::rms_norm_gemma(y, w("pre_feedforward_layernorm.weight", {d}), eps);
  const torch::Tensor g = ref::linear(ref::geglu(ref::linear(f, w("mlp.gate_proj.weight", {ff, d})),
                                                 ref::linear(f, w("mlp.up_proj.weight", {ff, d}))),
                                      w("mlp.down_proj.weight", {d, ff}));
  return y + ref::rms_norm_gemma(g, w("post_feedforward_layernorm.weight", {d}), eps);
}

std::vector<PitfallCandidate> layer_pitfalls(const ModelConfig& c, const ref::Model& m, int layer,
                                             const torch::Tensor& x) {
  auto out = [&](Mistake mistake) { return to_vector(layer_ref(c, m, layer, x, mistake)); };
  return {
      {"gemma_qk_norm_after_rope",
       "QK-norm applied after RoPE; Gemma normalises each head of q and k BEFORE rotating them",
       out(Mistake::qk_norm_after_rope)},
      {"gemma_layer_type_swapped",
       "the layer ran as the other type (local as global or global as local: window and RoPE "
       "base); layer i's type is config.is_sliding(i) (layer_types), e.g. a pattern shifted by one",
       out(Mistake::other_layer_type)},
      {"gemma_rope_base_swapped",
       "RoPE with the other layer type's base: local layers rotate with rope_local_base_freq, "
       "global ones with rope_theta",
       out(Mistake::other_rope_base)},
      {"gemma_llama_norms",
       "Llama's norm wiring: Gemma normalises the attention and FFN outputs "
       "(post_attention_layernorm, post_feedforward_layernorm) before adding them, and the FFN's "
       "input norm is pre_feedforward_layernorm",
       out(Mistake::llama_norms)},
  };
}

std::vector<__nv_bfloat16> bf16_of(const TensorInfo& t) {
  std::vector<__nv_bfloat16> out(t.nbytes / sizeof(__nv_bfloat16));
  std::memcpy(out.data(), t.data, t.nbytes);
  return out;
}

TEST(GemmaLayer, EveryLayerOfATransformersCheckpoint) {
  std::ifstream in(kFixture / "expected.json");
  ASSERT_TRUE(in) << "cannot read " << (kFixture / "expected.json");
  const std::vector<int64_t> prompt =
      nlohmann::json::parse(in).at("prompt").get<std::vector<int64_t>>();
  const ModelConfig c = ModelConfig::from_file(kFixture / "config.json");
  const Checkpoint checkpoint = Checkpoint::open(kFixture);
  const ref::Model model(c, ref::checkpoint_lookup(checkpoint));
  torch::NoGradGuard no_grad;
  ref::ForwardOptions capture_all;
  capture_all.capture = true;
  const ref::ForwardResult r = model.forward(prompt, capture_all);

  const int s = static_cast<int>(prompt.size());
  const int d = static_cast<int>(c.hidden_size), h = static_cast<int>(c.num_heads);
  const int hk = static_cast<int>(c.num_kv_heads), hd = static_cast<int>(c.head_dim);
  const int ff = static_cast<int>(c.intermediate_size);
  ASSERT_LT(c.sliding_window, s) << "the fixture's window must be shorter than its prompt";

  // RoPE tables of both layer types, from the reference (milestone 3 tested the table kernel).
  auto upload_tables = [&](const ref::RopeTables& t, const char* what) {
    std::vector<DeviceBuffer<float>> out;
    out.emplace_back(std::string(what) + " cos", std::vector<int64_t>{s, hd / 2});
    out.emplace_back(std::string(what) + " sin", std::vector<int64_t>{s, hd / 2});
    out[0].upload(to_vector(t.cos));
    out[1].upload(to_vector(t.sin));
    return out;
  };
  const auto local = upload_tables(ref::rope_tables(s, hd, c.rope_local_theta), "local");
  const auto global =
      upload_tables(ref::rope_tables(s, hd, c.rope_theta, c.rope_scaling), "global");

  // Allowances of the chain up to each point compared (see chained()).
  const Tolerance norm = tol::rms_norm(d);
  const Tolerance qk = chained({norm, tol::matmul(d), tol::rms_norm(hd), tol::rope(s)},
                              "RMSNorm, a projection over d, QK-norm over h_d, then RoPE");
  const Tolerance attn = chained({qk, tol::attention(hd, s)}, "Q and K as above, then attention");
  const Tolerance attn_out = chained({attn, tol::matmul(h * hd), tol::rms_norm(d)},
                                     "the attention output, o_proj, then its norm");
  const Tolerance hidden = chained({attn_out, norm, tol::matmul(d), Tolerance{0, 64 * tol::kUnitRoundoff, "", 64 * tol::kUnitRoundoff}},
                                   "the attention block, the FFN's norm, gate and up, then GeGLU");
  const Tolerance layer = chained({hidden, tol::matmul(ff), tol::rms_norm(d)},
                                  "everything in the layer: the FFN's down projection and its "
                                  "norm after the attention block");

  for (int i = 0; i < static_cast<int>(c.num_layers); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i) + (c.is_sliding(i) ? " (local)" : " (global)"));
    auto upload = [&](const std::string& suffix) {
      const TensorInfo& t = checkpoint.get(ref::layer_weight_name(i, suffix));
      DeviceBuffer<__nv_bfloat16> buf(ref::layer_weight_name(i, suffix), t.shape);
      buf.upload(bf16_of(t));
      return buf;
    };
    const auto in_ln = upload("input_layernorm.weight"), wq = upload("self_attn.q_proj.weight"),
               wk = upload("self_attn.k_proj.weight"), wv = upload("self_attn.v_proj.weight"),
               wo = upload("self_attn.o_proj.weight"), post_attn = upload("post_attention_layernorm.weight"),
               qn = upload("self_attn.q_norm.weight"), kn = upload("self_attn.k_norm.weight"),
               pre_ff = upload("pre_feedforward_layernorm.weight"),
               post_ff = upload("post_feedforward_layernorm.weight"),
               wg = upload("mlp.gate_proj.weight"), wu = upload("mlp.up_proj.weight"),
               wd = upload("mlp.down_proj.weight");
    GemmaLayerWeights w;
    w.base = {in_ln.data(), wq.data(), wk.data(), wv.data(), wo.data(), post_attn.data(),
              wg.data(), wu.data(), wd.data()};
    w.q_norm = qn.data();
    w.k_norm = kn.data();
    w.pre_feedforward_layernorm = pre_ff.data();
    w.post_feedforward_layernorm = post_ff.data();

    DeviceBuffer<float> attn_norm("attn_norm", {s, d}), q("q", {s, h, hd}), k("k", {s, hk, hd}),
        v("v", {s, hk * hd}), attn_buf("attn", {s, h, hd}), attn_out_buf("attn_out (normed)", {s, d}),
        ffn_norm("ffn_norm", {s, d}), gate("gate", {s, ff}), up("up", {s, ff}),
        ffn_hidden("ffn_hidden", {s, ff}), ffn_out("ffn_out (normed)", {s, d});
    LayerBuffers b;
    b.attn_norm = attn_norm.data();
    b.q = q.data();
    b.k = k.data();
    b.v = v.data();
    b.attn = attn_buf.data();
    b.attn_out = attn_out_buf.data();
    b.ffn_norm = ffn_norm.data();
    b.gate = gate.data();
    b.up = up.data();
    b.ffn_hidden = ffn_hidden.data();
    b.ffn_out = ffn_out.data();

    const torch::Tensor x_in = i == 0 ? r.embeddings : r.hidden[i - 1];
    DeviceBuffer<float> x("x (residual stream)", {s, d});
    x.upload(to_vector(x_in));
    gemma_decoder_layer(c, i, w, {local[0].data(), local[1].data()},
                        {global[0].data(), global[1].data()}, x.data(), b, s);

    const ref::LayerCapture& cap = r.layers[i];
    EXPECT_TRUE(matches_reference(q, to_vector(cap.q), qk, {}, {"row", "head", "dim"}));
    EXPECT_TRUE(matches_reference(k, to_vector(cap.k), qk, {}, {"row", "head", "dim"}));
    EXPECT_TRUE(matches_reference(attn_buf, to_vector(cap.attn), attn, {}, {"row", "head", "dim"}));
    EXPECT_TRUE(matches_reference(attn_out_buf, to_vector(cap.attn_post_norm), attn_out));
    EXPECT_TRUE(matches_reference(ffn_hidden, to_vector(cap.ffn_hidden), hidden));
    EXPECT_TRUE(matches_reference(x, to_vector(r.hidden[i]), layer,
                                  layer_pitfalls(c, model, i, x_in)));
    for (const DeviceBuffer<float>* buf : {&q, &k, &attn_buf, &attn_out_buf, &ffn_out, &x}) {
      EXPECT_TRUE(guards_intact(*buf));
    }
  }
}

// The candidates: the reference layer without a mistake is the reference's own layer, and each
// mistake's output is far from it and reported by name.
TEST(GemmaLayer, RecognisesTheWiringMistakes) {
  std::ifstream in(kFixture / "expected.json");
  ASSERT_TRUE(in);
  const std::vector<int64_t> prompt =
      nlohmann::json::parse(in).at("prompt").get<std::vector<int64_t>>();
  const ModelConfig c = ModelConfig::from_file(kFixture / "config.json");
  const Checkpoint checkpoint = Checkpoint::open(kFixture);
  const ref::Model model(c, ref::checkpoint_lookup(checkpoint));
  torch::NoGradGuard no_grad;
  const ref::ForwardResult r = model.forward(prompt);
  const int64_t s = static_cast<int64_t>(prompt.size()), d = c.hidden_size;
  const Tolerance tol{0, 0, "the recognisers' check: 1e-4 of rms", 1e-4};
  for (int i : {1, 2}) {  // a local and the global layer
    SCOPED_TRACE("layer " + std::to_string(i));
    const std::vector<float> expected = to_vector(r.hidden[i]);
    EXPECT_TRUE(matches_reference("layer output", to_vector(layer_ref(c, model, i, r.hidden[i - 1], Mistake::none)),
                                  expected, {s, d}, tol));
    const auto pitfalls = layer_pitfalls(c, model, i, r.hidden[i - 1]);
    for (const PitfallCandidate& p : pitfalls) {
      const ::testing::AssertionResult res =
          matches_reference("layer output", p.output, expected, {s, d}, tol, pitfalls);
      EXPECT_FALSE(res) << p.name << " is not visible in this layer";
      EXPECT_NE(std::string(res.message()).find("This looks like a known mistake: " + p.message),
                std::string::npos)
          << p.name << " is not named:\n" << res.message();
    }
  }
}

}  // namespace
}  // namespace clockwork
