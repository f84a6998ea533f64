// Milestone 2: the Q/K/V step of a decoder layer, on a small layer and on Llama-3-8B's shapes.
#include <gtest/gtest.h>

#include <string>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/steps.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

ModelConfig layer_config(int64_t d, int64_t h, int64_t h_k) {
  ModelConfig c;
  c.hidden_size = d;
  c.num_heads = h;
  c.num_kv_heads = h_k;
  c.head_dim = d / h;
  c.num_layers = 1;
  c.intermediate_size = 4 * d;
  c.vocab_size = 256;
  c.max_position_embeddings = 1024;
  return c;
}

void check_step(const ModelConfig& c, int s) {
  const int64_t d = c.hidden_size, qw = c.num_heads * c.head_dim, kvw = c.num_kv_heads * c.head_dim;
  SCOPED_TRACE("s=" + std::to_string(s) + " d=" + std::to_string(d) + " h=" + std::to_string(c.num_heads) +
               " h_k=" + std::to_string(c.num_kv_heads));
  const uint64_t seed = test_seed(500 + d);
  const auto x = random_normal(s * d, seed);
  const auto gamma = to_bf16(random_normal(d, seed + 1, 0.3f, 1.f));
  const auto wq = to_bf16(random_normal(qw * d, seed + 2, 0.02f));
  const auto wk = to_bf16(random_normal(kvw * d, seed + 3, 0.02f));
  const auto wv = to_bf16(random_normal(kvw * d, seed + 4, 0.02f));
  DeviceBuffer<float> d_x("x", {s, d}), x_norm("x_norm", {s, d}), q("q", {s, qw}), k("k", {s, kvw}),
      v("v", {s, kvw});
  DeviceBuffer<__nv_bfloat16> d_gamma("input_layernorm.weight", {d}), d_wq("q_proj.weight", {qw, d}),
      d_wk("k_proj.weight", {kvw, d}), d_wv("v_proj.weight", {kvw, d});
  d_x.upload(x);
  d_gamma.upload(gamma);
  d_wq.upload(wq);
  d_wk.upload(wk);
  d_wv.upload(wv);
  qkv_projection(c, {d_gamma.data(), d_wq.data(), d_wk.data(), d_wv.data()}, d_x.data(), x_norm.data(), q.data(),
                 k.data(), v.data(), s);

  const auto tx = to_tensor(x, {s, d});
  const auto xn = ref::rms_norm(tx, to_tensor(gamma, {d}), c.rms_norm_eps);
  const auto twq = to_tensor(wq, {qw, d}), twk = to_tensor(wk, {kvw, d}), twv = to_tensor(wv, {kvw, d});
  const QkvCandidates wrong = qkv_pitfalls(tx, to_tensor(gamma, {d}), twq, twk, twv, c.rms_norm_eps);
  EXPECT_TRUE(matches_reference(x_norm, to_vector(xn), tol::rms_norm(d), wrong.x_norm));
  // x_norm carries the RMSNorm's rounding into the projections: allow both.
  Tolerance t = tol::matmul(d);
  t.rtol += tol::rms_norm(d).rtol;
  t.rms_atol += tol::rms_norm(d).rtol;
  EXPECT_TRUE(matches_reference(q, to_vector(ref::linear(xn, twq)), t, wrong.q));
  EXPECT_TRUE(matches_reference(k, to_vector(ref::linear(xn, twk)), t, wrong.k));
  EXPECT_TRUE(matches_reference(v, to_vector(ref::linear(xn, twv)), t, wrong.v));
}

TEST(QkvStep, SmallLayerWithGqa) {
  check_step(layer_config(64, 4, 2), 5);
  // ε comes from the config: with rms_norm_eps = 1e-2 and rows of size 1, a fixed 1e-5 changes
  // x_norm by 0.5%, hundreds of times the tolerance.
  ModelConfig c = layer_config(64, 4, 2);
  c.rms_norm_eps = 1e-2;
  check_step(c, 4);
}

TEST(QkvStep, MultiHeadWithoutGqa) { check_step(layer_config(96, 3, 3), 1); }

TEST(QkvStep, LlamaThreeEightBLayerShapes) { check_step(layer_config(4096, 32, 8), 2); }

}  // namespace
}  // namespace clockwork
