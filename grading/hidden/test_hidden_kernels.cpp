// INSTRUCTOR-ONLY: hidden tests, never part of a handout.
//
// The milestone 1 and 2 kernels on shapes the public tests do not use. Every test draws its data
// from test_seed(), so the autograder's secret CLOCKWORK_SEED gives data nobody has seen; without
// it the fixed seeds below apply (the instructor's build runs these on the reference solution).
#include <gtest/gtest.h>

#include <string>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "kernels/steps.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

TEST(HiddenEmbedding, OtherShapes) {
  struct Case {
    int s, d, vocab;
  };
  for (const Case c : {Case{2, 1, 3}, Case{9, 129, 500}, Case{64, 33, 77}}) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " d=" + std::to_string(c.d) + " vocab=" + std::to_string(c.vocab));
    const uint64_t seed = test_seed(9100 + c.d);
    const auto ids = random_ids(c.s, c.vocab, seed);
    const auto table = to_bf16(random_normal(static_cast<size_t>(c.vocab) * c.d, seed + 1));
    DeviceBuffer<int32_t> d_ids("ids", {c.s});
    DeviceBuffer<__nv_bfloat16> d_table("embed_tokens", {c.vocab, c.d});
    DeviceBuffer<float> x("x", {c.s, c.d});
    d_ids.upload(ids);
    d_table.upload(table);
    kernels::embedding(d_ids.data(), d_table.data(), x.data(), c.s, c.d, c.vocab);
    const auto expected = to_vector(ref::embedding(to_tensor(ids, {c.s}), to_tensor(table, {c.vocab, c.d})));
    EXPECT_TRUE(matches_reference(x, expected, tol::embedding()));
  }
}

TEST(HiddenMatmul, OtherShapes) {
  struct Case {
    int m, n, k;
  };
  // Thin, wide, a k shorter than a tile, and a decode-like row against a long k.
  for (const Case c : {Case{40, 3, 1}, Case{2, 257, 31}, Case{65, 17, 97}, Case{31, 64, 200}, Case{1, 512, 1500}}) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
    const uint64_t seed = test_seed(9200 + c.m * 31 + c.n * 7 + c.k);
    const auto x = random_normal(static_cast<size_t>(c.m) * c.k, seed);
    const auto w = to_bf16(random_normal(static_cast<size_t>(c.n) * c.k, seed + 1, 0.05f));
    DeviceBuffer<float> d_x("x", {c.m, c.k});
    DeviceBuffer<__nv_bfloat16> d_w("w", {c.n, c.k});
    DeviceBuffer<float> y("y", {c.m, c.n});
    d_x.upload(x);
    d_w.upload(w);
    kernels::matmul(d_x.data(), d_w.data(), y.data(), c.m, c.n, c.k);
    const auto tx = to_tensor(x, {c.m, c.k});
    const auto tw = to_tensor(w, {c.n, c.k});
    EXPECT_TRUE(matches_reference(y, to_vector(ref::linear(tx, tw)), tol::matmul(c.k), linear_pitfalls(tx, tw)));
  }
}

TEST(HiddenRmsNorm, OtherShapes) {
  const float eps = 1e-5f;
  struct Case {
    int rows, d;
    float scale;
  };
  for (const Case c : {Case{9, 255, 1.f}, Case{2, 257, 3.f}, Case{33, 64, 1e-3f}, Case{1, 4095, 1.f}}) {
    SCOPED_TRACE("rows=" + std::to_string(c.rows) + " d=" + std::to_string(c.d));
    const uint64_t seed = test_seed(9300 + c.d);
    const auto x = random_normal(static_cast<size_t>(c.rows) * c.d, seed, c.scale);
    const auto gamma = to_bf16(random_normal(c.d, seed + 1, 0.5f, 1.f));
    DeviceBuffer<float> d_x("x", {c.rows, c.d});
    DeviceBuffer<__nv_bfloat16> d_gamma("input_layernorm.weight", {c.d});
    DeviceBuffer<float> y("x_norm", {c.rows, c.d});
    d_x.upload(x);
    d_gamma.upload(gamma);
    kernels::rmsnorm(d_x.data(), d_gamma.data(), y.data(), c.rows, c.d, eps);
    const auto tx = to_tensor(x, {c.rows, c.d});
    const auto tg = to_tensor(gamma, {c.d});
    EXPECT_TRUE(matches_reference(y, to_vector(ref::rms_norm(tx, tg, eps)), tol::rms_norm(c.d),
                                  rms_norm_pitfalls(tx, tg, eps)));
  }
}

TEST(HiddenQkv, GqaLayerWithEightQueryHeads) {
  ModelConfig c;
  c.hidden_size = 128;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.num_layers = 1;
  c.intermediate_size = 256;
  c.vocab_size = 256;
  c.max_position_embeddings = 64;
  const int s = 7;
  const int64_t d = c.hidden_size, qw = c.num_heads * c.head_dim, kvw = c.num_kv_heads * c.head_dim;
  const uint64_t seed = test_seed(9400);
  const auto x = random_normal(s * d, seed);
  const auto gamma = to_bf16(random_normal(d, seed + 1, 0.3f, 1.f));
  const auto wq = to_bf16(random_normal(qw * d, seed + 2, 0.05f));
  const auto wk = to_bf16(random_normal(kvw * d, seed + 3, 0.05f));
  const auto wv = to_bf16(random_normal(kvw * d, seed + 4, 0.05f));
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
  const auto xn = ref::rms_norm(to_tensor(x, {s, d}), to_tensor(gamma, {d}), c.rms_norm_eps);
  EXPECT_TRUE(matches_reference(x_norm, to_vector(xn), tol::rms_norm(d)));
  Tolerance t = tol::matmul(d);
  t.rtol += tol::rms_norm(d).rtol;
  t.rms_atol += tol::rms_norm(d).rtol;
  EXPECT_TRUE(matches_reference(q, to_vector(ref::linear(xn, to_tensor(wq, {qw, d}))), t));
  EXPECT_TRUE(matches_reference(k, to_vector(ref::linear(xn, to_tensor(wk, {kvw, d}))), t));
  EXPECT_TRUE(matches_reference(v, to_vector(ref::linear(xn, to_tensor(wv, {kvw, d}))), t));
}

}  // namespace
}  // namespace clockwork
