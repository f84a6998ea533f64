// Milestone 3: the decoder-layer glue and the output head against the reference model, step by
// step, with mistakes anywhere inside the layer named by the chained pitfalls (chain.h).
#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "kernels/steps.h"
#include "milestones/milestone3/tests/chain.h"
#include "milestones/milestone3/tests/tiny_config.h"
#include "reference/model.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

// One layer of the tiny shape (tiny_config.h).
ModelConfig small_config(int64_t n_kv_heads) { return tiny_test_config(n_kv_heads, 1, 64); }

// Rounding errors of a chain of ops add up: each op contributes its own (relative to the size
// of its result), and the later ops carry the earlier errors forward at about the same relative
// size (RMSNorm rescales, and random weights of variance 1/in keep projections at the scale of
// their input). So the allowance after a chain is the sum of the allowances of its ops.
Tolerance chained(std::initializer_list<Tolerance> parts, const char* why) {
  Tolerance t{0, 0, why, 0};
  for (const Tolerance& p : parts) {
    t.atol += p.atol;
    t.rtol += p.rtol;
    t.rms_atol += p.rms_atol;
  }
  return t;
}

// Device buffers for one layer at sequence length s, named like LayerBuffers.
struct Buffers {
  DeviceBuffer<float> attn_norm, q, k, v, scores, attn, attn_out, ffn_norm, gate, up, ffn_hidden,
      ffn_out;
  Buffers(const ModelConfig& c, int s)
      : attn_norm("attn_norm", {s, c.hidden_size}),
        q("q", {s, c.num_heads, c.head_dim}),
        k("k", {s, c.num_kv_heads, c.head_dim}),
        v("v", {s, c.num_kv_heads, c.head_dim}),
        scores("scores", {s, s}),
        attn("attn", {s, c.num_heads, c.head_dim}),
        attn_out("attn_out", {s, c.hidden_size}),
        ffn_norm("ffn_norm", {s, c.hidden_size}),
        gate("gate", {s, c.intermediate_size}),
        up("up", {s, c.intermediate_size}),
        ffn_hidden("ffn_hidden", {s, c.intermediate_size}),
        ffn_out("ffn_out", {s, c.hidden_size}) {}
  LayerBuffers view() {
    return {attn_norm.data(), q.data(),    k.data(),          v.data(),
            scores.data(),    attn.data(), attn_out.data(),   ffn_norm.data(),
            gate.data(),      up.data(),   ffn_hidden.data(), ffn_out.data()};
  }
};

// A bf16 weight of the reference's random model, on the device.
DeviceBuffer<__nv_bfloat16> upload_weight(const std::map<std::string, torch::Tensor>& w,
                                          const std::string& name) {
  const torch::Tensor& t = w.at(name);
  DeviceBuffer<__nv_bfloat16> d(name, shape_of(t));
  d.upload(to_bf16_vector(t));
  return d;
}

// RoPE tables of positions 0 .. s−1 from the student's kernels.
struct DeviceRope {
  DeviceBuffer<float> cos, sin;
  DeviceRope(const ModelConfig& c, int s)
      : cos("cos_table", {s, c.head_dim / 2}), sin("sin_table", {s, c.head_dim / 2}) {
    std::vector<int32_t> pos(static_cast<size_t>(s));
    for (int i = 0; i < s; ++i) pos[static_cast<size_t>(i)] = i;
    DeviceBuffer<int32_t> d_pos("positions", {s});
    d_pos.upload(pos);
    const std::vector<double> inv =
        kernels::rope_inv_freq(static_cast<int>(c.head_dim), c.rope_theta);
    double* d_inv = nullptr;
    EXPECT_EQ(cudaMalloc(&d_inv, inv.size() * sizeof(double)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d_inv, inv.data(), inv.size() * sizeof(double), cudaMemcpyHostToDevice),
              cudaSuccess);
    kernels::rope_tables(d_pos.data(), d_inv, cos.data(), sin.data(), s,
                         static_cast<int>(c.head_dim / 2));
    cudaFree(d_inv);
  }
};

// rms_norm_eps and rope_theta are the config's; other values than Llama 3's (1e-5, 500000) show
// whether the layer passes them on.
void check_layer(int64_t n_kv_heads, int s, double eps = 1e-5, double theta = 500000.0) {
  ModelConfig c = small_config(n_kv_heads);
  c.rms_norm_eps = eps;
  c.rope_theta = theta;
  SCOPED_TRACE("one decoder layer, d=64 h=4 h_k=" + std::to_string(n_kv_heads) +
               " s=" + std::to_string(s) + " rms_norm_eps=" + std::to_string(eps) +
               " rope_theta=" + std::to_string(theta));
  const uint64_t seed = test_seed(2000 + n_kv_heads * 10 + s);
  const auto weights = ref::random_weights(c, seed);
  const ref::WeightLookup lookup = ref::lookup_from_map(weights);
  const std::vector<int32_t> ids = random_ids(static_cast<size_t>(s), c.vocab_size, seed + 1);
  std::vector<int64_t> ids64(ids.begin(), ids.end());
  ref::ForwardOptions capture;
  capture.capture = true;
  const ref::ForwardResult r = ref::Model(c, lookup).forward(ids64, capture);
  const ref::LayerCapture& want = r.layers.at(0);

  auto W = [&](const char* suffix) {
    return upload_weight(weights, ref::layer_weight_name(0, suffix));
  };
  const auto in_norm = W("input_layernorm.weight"), wq = W("self_attn.q_proj.weight"),
             wk = W("self_attn.k_proj.weight"), wv = W("self_attn.v_proj.weight"),
             wo = W("self_attn.o_proj.weight"), post_norm = W("post_attention_layernorm.weight"),
             wg = W("mlp.gate_proj.weight"), wu = W("mlp.up_proj.weight"),
             wd = W("mlp.down_proj.weight");
  const LayerWeights lw{in_norm.data(),   wq.data(), wk.data(), wv.data(), wo.data(),
                        post_norm.data(), wg.data(), wu.data(), wd.data()};
  const DeviceRope rope(c, s);
  Buffers b(c, s);
  DeviceBuffer<float> x("x (layer output)", {s, c.hidden_size});
  x.upload(to_vector(r.embeddings));
  decoder_layer(c, lw, {rope.cos.data(), rope.sin.data()}, x.data(), b.view(), s);

  // Tolerances of the chain up to each point (see chained()).
  const int64_t d = c.hidden_size, qw = c.num_heads * c.head_dim;
  const Tolerance norm = tol::rms_norm(d);
  const Tolerance proj = chained({norm, tol::matmul(d)}, "RMSNorm, then a projection over d");
  const Tolerance roped = chained({proj, tol::rope(s)}, "RMSNorm, a projection over d, then RoPE");
  const Tolerance attn =
      chained({roped, tol::attention(c.head_dim, s)}, "Q and K as above, then attention");
  const Tolerance attn_out = chained({attn, tol::matmul(qw)}, "the attention output, then o_proj");
  const Tolerance ffn_norm = chained({attn_out, norm}, "the attention block, then RMSNorm");
  const Tolerance hidden = chained({ffn_norm, tol::matmul(d), tol::swiglu()},
                                   "the attention block, RMSNorm, gate/up and SwiGLU");
  const Tolerance ffn_out = chained({hidden, tol::matmul(c.intermediate_size)}, "the whole layer");

  // Candidates: the same point of the layer with one known mistake somewhere before it.
  const torch::Tensor x0 = r.embeddings;
  auto named = [&](const DeviceBuffer<float>& got, const char* point) {
    return explaining(
        chain_pitfalls(c, lookup, x0, 1, [point](const Chain& ch) { return ch.first.at(point); }),
        got);
  };
  const std::vector<std::string> per_head{"row", "head", "dim"};
  EXPECT_TRUE(matches_reference(b.attn_norm, to_vector(want.attn_norm), norm,
                                named(b.attn_norm, "attn_norm")));
  EXPECT_TRUE(matches_reference(b.q, to_vector(want.q), roped, named(b.q, "q"), per_head));
  EXPECT_TRUE(matches_reference(b.k, to_vector(want.k), roped, named(b.k, "k"), per_head));
  EXPECT_TRUE(matches_reference(b.v, to_vector(want.v), proj, named(b.v, "v"), per_head));
  EXPECT_TRUE(
      matches_reference(b.attn, to_vector(want.attn), attn, named(b.attn, "attn"), per_head));
  EXPECT_TRUE(matches_reference(b.attn_out, to_vector(want.attn_out), attn_out,
                                named(b.attn_out, "attn_out")));
  // The second norm on its own as well: a mistake in this one call (a fixed ε, no γ) leaves the
  // rest of the layer right, which no chained candidate reproduces.
  std::vector<PitfallCandidate> ffn_norm_wrong = named(b.ffn_norm, "ffn_norm");
  for (PitfallCandidate& p :
       explaining(rms_norm_pitfalls(want.attn_residual,
                                    weights.at(ref::layer_weight_name(0, "post_attention_layernorm.weight")),
                                    c.rms_norm_eps),
                  b.ffn_norm)) {
    ffn_norm_wrong.push_back(std::move(p));
  }
  EXPECT_TRUE(matches_reference(b.ffn_norm, to_vector(want.ffn_norm), ffn_norm, ffn_norm_wrong));
  EXPECT_TRUE(matches_reference(b.ffn_hidden, to_vector(want.ffn_hidden), hidden,
                                named(b.ffn_hidden, "ffn_hidden")));
  EXPECT_TRUE(
      matches_reference(b.ffn_out, to_vector(want.ffn_out), ffn_out, named(b.ffn_out, "ffn_out")));
  EXPECT_TRUE(matches_reference(
      x, to_vector(r.hidden.at(0)), ffn_out,
      explaining(chain_pitfalls(c, lookup, x0, 1, [](const Chain& ch) { return ch.hidden.at(0); }),
                 x)));
}

TEST(DecoderLayer, GqaRatioOneMatchesReference) {
  check_layer(4, 7);
}

TEST(DecoderLayer, GqaRatioTwoMatchesReference) {
  check_layer(2, 9);
  check_layer(2, 1);  // one token: attention is a copy of V
}

TEST(DecoderLayer, GqaRatioFourMatchesReference) {
  check_layer(1, 11);
}

// ε = 0.1 changes every RMSNorm of these rows by a few percent against a fixed 1e-5; base
// 10000 turns every pair of a 16-wide head at a different speed than 500000 does.
TEST(DecoderLayer, TakesEpsilonAndThetaFromTheConfig) {
  check_layer(2, 9, 0.1, 10000.0);
}

// output_logits: the final RMSNorm of the LAST row and the GEMV over it.
// With the config's ε: 1e-5, then 1e-2 (on rows of size 1 that moves the result by 0.5%).
void check_output_head(double eps) {
  SCOPED_TRACE("rms_norm_eps=" + std::to_string(eps));
  const int s = 5, d = 64, vocab = 97;
  ModelConfig c = small_config(2);
  c.rms_norm_eps = eps;
  const uint64_t seed = test_seed(2100);
  const auto x = random_normal(static_cast<size_t>(s) * d, seed);
  const auto gamma = to_bf16(random_normal(d, seed + 1, 0.1f, 1.f));
  const auto w = to_bf16(random_normal(static_cast<size_t>(vocab) * d, seed + 2, 0.125f));
  DeviceBuffer<float> d_x("x", {s, d}), x_last_norm("x_last_norm", {d}), logits("logits", {vocab});
  DeviceBuffer<__nv_bfloat16> d_gamma("model.norm.weight", {d}), d_w("lm_head.weight", {vocab, d});
  d_x.upload(x);
  d_gamma.upload(gamma);
  d_w.upload(w);
  output_logits(c, d_x.data(), s, d_gamma.data(), d_w.data(), x_last_norm.data(), logits.data());

  const torch::Tensor tx = to_tensor(x, {s, d}), tg = to_tensor(gamma, {d}),
                      tw = to_tensor(w, {vocab, d});
  const torch::Tensor normed =
      ref::rms_norm(tx, tg, c.rms_norm_eps);  // every row, for the candidates
  // The final norm skipped: x_last_norm holds the last row of x itself.
  const ref::Pitfall& skipped = ref::find_pitfall("final_norm_skipped");
  std::vector<PitfallCandidate> norm_wrong =
      explaining(rms_norm_pitfalls(tx[s - 1].unsqueeze(0), tg, c.rms_norm_eps), x_last_norm);
  norm_wrong.push_back({skipped.name, skipped.message, to_vector(tx[s - 1])});
  const ref::Pitfall& first_row = ref::find_pitfall("lm_head_first_row");
  norm_wrong.push_back({first_row.name, first_row.message, to_vector(normed[0])});
  EXPECT_TRUE(matches_reference(x_last_norm, to_vector(normed[s - 1]), tol::rms_norm(d), norm_wrong));
  // Projecting every row writes s·V logits: a [V] buffer then holds row 0's logits, exactly what
  // projecting row 0 alone leaves, but the guard band after it is damaged too. The guards tell
  // the two mistakes apart.
  const bool overran = !guards_intact(logits);
  std::vector<PitfallCandidate> candidates;
  for (PitfallCandidate& p : explaining(lm_head_pitfalls(normed, tw), logits)) {
    if (p.name != (overran ? first_row.name : "lm_head_all_rows")) candidates.push_back(std::move(p));
  }
  candidates.push_back({skipped.name, skipped.message, to_vector(ref::lm_head(tx[s - 1], tw))});
  if (overran) add_first_row_views(candidates, static_cast<size_t>(vocab));
  EXPECT_TRUE(matches_reference(
      logits, to_vector(ref::lm_head(normed[s - 1], tw)),
      chained({tol::rms_norm(d), tol::matmul(d)}, "RMSNorm, then the GEMV over d"), candidates));
  EXPECT_TRUE(guards_intact(x_last_norm));
}

TEST(OutputHead, NormsAndProjectsOnlyTheLastRow) {
  check_output_head(1e-5);
  check_output_head(1e-2);
}

}  // namespace
}  // namespace clockwork
