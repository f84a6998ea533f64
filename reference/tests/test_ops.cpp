// Tests of the reference operators against explicit loops in float64 on small seeded random
// inputs. The reference computes in fp32, so unless a test says otherwise the tolerance is
// atol = rtol = 1e-5: fp32 keeps ~7 significant digits and these sums have at most a few hundred
// O(1) terms, so a correct fp32 result is within ~1e-6 of the float64 loop.
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "reference/ops.h"
#include "reference/tests/check.h"

namespace ref = clockwork::ref;
using clockwork::RopeScaling;
using ref::testing::as_double;
using ref::testing::close;

namespace {

constexpr double kTol = 1e-5;  // see the file comment

// ---------------------------------------------------------------------------------------------
// Milestone 1
// ---------------------------------------------------------------------------------------------

TEST(Embedding, GathersRowsOfABf16Table) {
  torch::manual_seed(1);
  const torch::Tensor table = torch::randn({97, 12}).to(torch::kBFloat16);
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>{5, 0, 96, 5, 41}, torch::kLong);
  const torch::Tensor out = ref::embedding(ids, table);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(out.scalar_type(), torch::kFloat);
  for (int64_t p = 0; p < 5; ++p) {
    // bf16 -> fp32 is exact, so the rows must be identical.
    EXPECT_TRUE(out[p].equal(table[ids[p].item<int64_t>()].to(torch::kFloat))) << "row " << p;
  }
}

TEST(Embedding, OutOfRangeIdNamesTheIdAndTheVocabulary) {
  const torch::Tensor table = torch::randn({97, 4});
  for (int64_t bad : {97L, 128000L, -1L}) {
    const torch::Tensor ids = torch::tensor(std::vector<int64_t>{3, bad, 4}, torch::kLong);
    try {
      ref::embedding(ids, table);
      ADD_FAILURE() << "no exception for id " << bad;
    } catch (const std::out_of_range& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("97"), std::string::npos) << msg;
      EXPECT_NE(msg.find("position 1"), std::string::npos) << msg;
    }
  }
}

// x·wᵀ, a·b and a·bᵀ against the triple loop, with shapes that are neither square nor powers of 2.
TEST(Matmul, LinearAndVariantsMatchLoops) {
  torch::manual_seed(2);
  const int64_t m = 7, k = 33, n = 5;
  const torch::Tensor x = torch::randn({m, k});
  const torch::Tensor w = torch::randn({n, k}).to(torch::kBFloat16);  // a checkpoint weight
  const torch::Tensor b = torch::randn({k, n});
  const torch::Tensor xd_t = as_double(x);
  const auto xd = xd_t.accessor<double, 2>();
  const torch::Tensor wd_t = as_double(w);
  const auto wd = wd_t.accessor<double, 2>();
  const torch::Tensor bd_t = as_double(b);
  const auto bd = bd_t.accessor<double, 2>();
  torch::Tensor want_xwt = torch::zeros({m, n}, torch::kDouble);
  torch::Tensor want_xb = torch::zeros({m, n}, torch::kDouble);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc_wt = 0, acc_b = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        acc_wt += xd[i][kk] * wd[j][kk];
        acc_b += xd[i][kk] * bd[kk][j];
      }
      want_xwt[i][j] = acc_wt;
      want_xb[i][j] = acc_b;
    }
  }
  EXPECT_TRUE(close(ref::linear(x, w), want_xwt, kTol, kTol));
  EXPECT_TRUE(close(ref::matmul_bt(x, w), want_xwt, kTol, kTol));
  EXPECT_TRUE(close(ref::matmul(x, b), want_xb, kTol, kTol));
  EXPECT_THROW(ref::linear(x, b), std::invalid_argument);  // [k, n] is not an (out, in) weight
  EXPECT_THROW(ref::matmul(x, w), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Milestone 2
// ---------------------------------------------------------------------------------------------

TEST(RmsNorm, MatchesLoopWithEpsInsideTheRoot) {
  torch::manual_seed(3);
  for (int64_t d : {1, 7, 64, 130}) {
    const torch::Tensor x = torch::randn({3, d});
    const torch::Tensor gamma = (1 + 0.3 * torch::randn({d})).to(torch::kBFloat16);
    const double eps = 1e-5;
    const torch::Tensor xd_t = as_double(x);
    const auto xd = xd_t.accessor<double, 2>();
    const torch::Tensor gd_t = as_double(gamma);
    const auto gd = gd_t.accessor<double, 1>();
    torch::Tensor want = torch::zeros({3, d}, torch::kDouble);
    for (int64_t r = 0; r < 3; ++r) {
      double sum_sq = 0;
      for (int64_t j = 0; j < d; ++j) sum_sq += xd[r][j] * xd[r][j];
      const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps);
      for (int64_t j = 0; j < d; ++j) want[r][j] = xd[r][j] * scale * gd[j];
    }
    EXPECT_TRUE(close(ref::rms_norm(x, gamma, eps), want, kTol, kTol)) << "d = " << d;
  }
}

TEST(RmsNorm, SmallRowsShowWhereEpsGoes) {
  // Rows of size ~1e-3 (like Llama-3 embedding rows): mean(x²) ~ 1e-6 is comparable to ε, so
  // ε's place changes the result visibly; the reference must still equal the formula.
  torch::manual_seed(4);
  const torch::Tensor x = 1e-3 * torch::randn({2, 32});
  const torch::Tensor gamma = torch::ones({32});
  const torch::Tensor ms = x.to(torch::kDouble).pow(2).mean(-1, true);
  const torch::Tensor want = x.to(torch::kDouble) / (ms + 1e-5).sqrt();
  EXPECT_TRUE(close(ref::rms_norm(x, gamma, 1e-5), want, kTol, kTol));
}

// ---------------------------------------------------------------------------------------------
// RoPE
// ---------------------------------------------------------------------------------------------

TEST(Rope, InverseFrequenciesWithoutScaling) {
  const torch::Tensor inv = ref::rope_inv_freq(128, 500000.0);
  ASSERT_EQ(inv.numel(), 64);
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_DOUBLE_EQ(inv[i].item<double>(), std::pow(500000.0, -2.0 * i / 128.0)) << i;
  }
}

// A direct transcription of HuggingFace's llama3 rule in its vectorised torch.where form, which
// the reference writes as a per-frequency branch: the two must agree to float64 rounding.
TEST(Rope, Llama3ScalingMatchesTheHuggingFaceRule) {
  const RopeScaling sc{"llama3", /*factor=*/8.0, /*low_freq_factor=*/1.0,
                       /*high_freq_factor=*/4.0, /*original_max_position_embeddings=*/8192};
  const int64_t hd = 128;
  const double theta = 500000.0;
  const torch::Tensor inv_freq =
      1.0 / torch::pow(theta, torch::arange(0, hd, 2, torch::kDouble) / static_cast<double>(hd));
  const double low_freq_wavelen = 8192.0 / 1.0;
  const double high_freq_wavelen = 8192.0 / 4.0;
  const torch::Tensor wavelen = 2 * std::numbers::pi / inv_freq;
  torch::Tensor llama = torch::where(wavelen > low_freq_wavelen, inv_freq / 8.0, inv_freq);
  const torch::Tensor smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
  const torch::Tensor smoothed = (1 - smooth) * llama / 8.0 + smooth * llama;
  const torch::Tensor medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen);
  llama = torch::where(medium, smoothed, llama);

  // All three bands occur for these parameters, so each branch is exercised.
  ASSERT_GT((wavelen < high_freq_wavelen).sum().item<int64_t>(), 0);
  ASSERT_GT(medium.sum().item<int64_t>(), 0);
  ASSERT_GT((wavelen > low_freq_wavelen).sum().item<int64_t>(), 0);

  const torch::Tensor got = ref::rope_inv_freq(hd, theta, sc);
  EXPECT_TRUE(close(got, llama, 0, 1e-12));
  // The highest frequency is untouched and the lowest is divided by the factor.
  EXPECT_DOUBLE_EQ(got[0].item<double>(), 1.0);
  EXPECT_NEAR(got[63].item<double>(), inv_freq[63].item<double>() / 8.0, 1e-18);
}

// Per element: x'_i = x_i cos(pθ_i) − x_{i+h/2} sin(pθ_i), x'_{i+h/2} = x_i sin + x_{i+h/2} cos.
// Angles up to ~40 rad: fp32 tables carry ~4e-6 absolute error, hence atol 2e-5.
TEST(Rope, MatchesTheFormulaPerElement) {
  torch::manual_seed(5);
  const int64_t n_heads = 3, hd = 16, half = hd / 2;
  const double theta = 500000.0;
  // Arbitrary positions (not 0..s−1), like a decode step or a padded batch.
  const std::vector<int64_t> pos{0, 1, 2, 17, 40};
  const int64_t s = static_cast<int64_t>(pos.size());
  const torch::Tensor x = torch::randn({s, n_heads * hd});
  const ref::RopeTables tab = ref::rope_tables(torch::tensor(pos, torch::kLong), hd, theta);
  ASSERT_EQ(tab.cos.sizes(), (std::vector<int64_t>{s, half}));
  const torch::Tensor got = ref::apply_rope(x, tab, n_heads);

  const torch::Tensor xd_t = as_double(x);
  const auto xd = xd_t.accessor<double, 2>();
  torch::Tensor want = torch::zeros({s, n_heads * hd}, torch::kDouble);
  for (int64_t r = 0; r < s; ++r) {
    for (int64_t head = 0; head < n_heads; ++head) {
      const int64_t base = head * hd;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos[r]) * std::pow(theta, -2.0 * i / hd);
        const double a = xd[r][base + i], b = xd[r][base + i + half];
        want[r][base + i] = a * std::cos(angle) - b * std::sin(angle);
        want[r][base + i + half] = a * std::sin(angle) + b * std::cos(angle);
      }
    }
  }
  EXPECT_TRUE(close(got, want, 2e-5, kTol));
  // Position 0 is the identity rotation.
  EXPECT_TRUE(close(got[0], x[0], 0, 0));
  // rope_tables(s) is rope_tables(0 .. s−1).
  const ref::RopeTables t5 = ref::rope_tables(5, hd, theta);
  EXPECT_TRUE(t5.cos.equal(ref::rope_tables(torch::arange(5), hd, theta).cos));
  EXPECT_THROW(ref::apply_rope(x, t5, 4), std::invalid_argument);  // 48 is not 4 heads of 16
}

// ---------------------------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------------------------

// Float64 triple loop per head: scores, causal mask (column <= row position), stable softmax,
// weighted sum. Query rows are the last s_q of s_k positions. With window > 0 only the columns
// p - window < c <= p count; scale 0 means 1/sqrt(h_d).
torch::Tensor attention_loop(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             int64_t h, int64_t hk, double scale = 0, int64_t window = 0) {
  const int64_t s_q = q.size(0), s_k = k.size(0), hd = q.size(1) / h;
  const torch::Tensor qd_t = as_double(q);
  const auto qd = qd_t.accessor<double, 2>();
  const torch::Tensor kd_t = as_double(k), vd_t = as_double(v);
  const auto kd = kd_t.accessor<double, 2>();
  const auto vd = vd_t.accessor<double, 2>();
  torch::Tensor out = torch::zeros({s_q, h * hd}, torch::kDouble);
  for (int64_t head = 0; head < h; ++head) {
    const int64_t g = head / (h / hk);
    for (int64_t r = 0; r < s_q; ++r) {
      const int64_t p = s_k - s_q + r;
      const int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      std::vector<double> score(static_cast<size_t>(p + 1), 0.0);
      double mx = -INFINITY;
      for (int64_t c = first; c <= p; ++c) {
        double dot = 0;
        for (int64_t j = 0; j < hd; ++j) dot += qd[r][head * hd + j] * kd[c][g * hd + j];
        score[c] = dot * (scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(hd)));
        mx = std::max(mx, score[c]);
      }
      double sum = 0;
      for (int64_t c = first; c <= p; ++c) sum += (score[c] = std::exp(score[c] - mx));
      for (int64_t j = 0; j < hd; ++j) {
        double acc = 0;
        for (int64_t c = first; c <= p; ++c) acc += score[c] / sum * vd[c][g * hd + j];
        out[r][head * hd + j] = acc;
      }
    }
  }
  return out;
}

struct GqaCase {
  int64_t h, hk;
};

// Group sizes h/h_k = 1, 2, 4 (and 8 query heads on 2 KV heads); every row is compared, so a
// mask that is right only on the last row fails.
TEST(Attention, MatchesTripleLoopForGqaRatios) {
  torch::manual_seed(6);
  const int64_t s = 9, hd = 8;
  for (const GqaCase c : {GqaCase{4, 4}, GqaCase{4, 2}, GqaCase{4, 1}, GqaCase{8, 2}}) {
    const torch::Tensor q = torch::randn({s, c.h * hd});
    const torch::Tensor k = torch::randn({s, c.hk * hd});
    const torch::Tensor v = torch::randn({s, c.hk * hd});
    const torch::Tensor want = attention_loop(q, k, v, c.h, c.hk);
    const ref::AttentionDetail got = ref::causal_gqa_attention_detail(q, k, v, c.h, c.hk);
    EXPECT_TRUE(close(got.out, want, kTol, kTol)) << "h = " << c.h << ", h_k = " << c.hk;
    EXPECT_TRUE(got.out.equal(ref::causal_gqa_attention(q, k, v, c.h, c.hk)));

    // The mask on every row: −inf and probability 0 exactly above the diagonal, rows sum to 1.
    ASSERT_EQ(got.scores.sizes(), (std::vector<int64_t>{c.h, s, s}));
    for (int64_t head = 0; head < c.h; ++head) {
      for (int64_t r = 0; r < s; ++r) {
        for (int64_t col = 0; col < s; ++col) {
          const float sc = got.scores[head][r][col].item<float>();
          const float pr = got.probs[head][r][col].item<float>();
          if (col > r) {
            EXPECT_TRUE(std::isinf(sc) && sc < 0) << head << "," << r << "," << col;
            EXPECT_EQ(pr, 0.0f) << head << "," << r << "," << col;
          } else {
            EXPECT_TRUE(std::isfinite(sc));
            EXPECT_GT(pr, 0.0f);
          }
        }
        EXPECT_NEAR(got.probs[head][r].sum().item<float>(), 1.0f, 1e-6);
      }
    }
  }
}

TEST(Attention, QueriesAtTheEndOfALongerKeySet) {
  // A decode step: 2 query rows at positions 5 and 6 of 7 keys equal the last rows of the full
  // prompt's attention.
  torch::manual_seed(7);
  const int64_t s = 7, h = 4, hk = 2, hd = 8;
  const torch::Tensor q = torch::randn({s, h * hd});
  const torch::Tensor k = torch::randn({s, hk * hd});
  const torch::Tensor v = torch::randn({s, hk * hd});
  const torch::Tensor tail = ref::causal_gqa_attention(q.narrow(0, 5, 2), k, v, h, hk);
  EXPECT_TRUE(close(tail, attention_loop(q.narrow(0, 5, 2), k, v, h, hk), kTol, kTol));
  EXPECT_TRUE(close(tail, ref::causal_gqa_attention(q, k, v, h, hk).narrow(0, 5, 2), kTol, kTol));
  EXPECT_THROW(ref::causal_gqa_attention(q, k.narrow(0, 0, 3), v.narrow(0, 0, 3), h, hk),
               std::invalid_argument);  // more queries than keys
  EXPECT_THROW(ref::causal_gqa_attention(q, k, v, 4, 3), std::invalid_argument);
}

// Scores around 1e4 overflow exp() in fp32 without the max subtraction; the reference must stay
// finite and agree with the float64 loop. The fp32 scores themselves carry ~1e-3 absolute error
// at this magnitude, which moves the near-one-hot probabilities by ~1e-3, hence atol 2e-2.
TEST(Attention, HugeScoresStayFinite) {
  torch::manual_seed(8);
  const int64_t s = 6, h = 4, hk = 2, hd = 16;
  const torch::Tensor q = 100 * torch::randn({s, h * hd});
  const torch::Tensor k = 100 * torch::randn({s, hk * hd});
  const torch::Tensor v = torch::randn({s, hk * hd});
  const ref::AttentionDetail got = ref::causal_gqa_attention_detail(q, k, v, h, hk);
  ASSERT_GT(got.scores.masked_fill(torch::isinf(got.scores), 0).abs().max().item<float>(), 1e3);
  EXPECT_TRUE(torch::isfinite(got.out).all().item<bool>());
  EXPECT_TRUE(close(got.out, attention_loop(q, k, v, h, hk), 2e-2, 0));
}

TEST(Attention, SoftmaxRowsIsStableAndIgnoresMinusInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const torch::Tensor x = torch::tensor({1000.0f, 1001.0f, -inf, 999.0f}).reshape({1, 4});
  const torch::Tensor p = ref::softmax_rows(x);
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0);
  const double z = e1 + 1 + e2;
  const torch::Tensor want = torch::tensor({e1 / z, 1 / z, 0.0, e2 / z}, torch::kDouble);
  EXPECT_TRUE(close(p.reshape({4}), want, 1e-7, kTol));
}

TEST(Attention, HeadViewsReinterpretTheFlatLayout) {
  const int64_t s = 3, n = 2, hd = 4;
  const torch::Tensor x = torch::arange(s * n * hd, torch::kFloat).reshape({s, n * hd});
  const torch::Tensor heads = ref::to_heads(x, n);
  ASSERT_EQ(heads.sizes(), (std::vector<int64_t>{n, s, hd}));
  // Head j of row p starts at flat offset p·n·h_d + j·h_d.
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < s; ++p) {
      EXPECT_EQ(heads[j][p][0].item<float>(), static_cast<float>(p * n * hd + j * hd));
    }
  }
  EXPECT_TRUE(ref::from_heads(heads).equal(x));
  EXPECT_EQ(ref::kv_head_for(31, 32, 8), 7);
  EXPECT_EQ(ref::kv_head_for(4, 32, 8), 1);
  EXPECT_EQ(ref::kv_head_for(3, 32, 8), 0);
}

// ---------------------------------------------------------------------------------------------
// FFN and output
// ---------------------------------------------------------------------------------------------

TEST(Ffn, SwigluMatchesLoop) {
  torch::manual_seed(9);
  const torch::Tensor gate = 4 * torch::randn({3, 11});
  const torch::Tensor up = torch::randn({3, 11});
  const torch::Tensor g = as_double(gate), u = as_double(up);
  const torch::Tensor want = g / (1 + (-g).exp()) * u;
  EXPECT_TRUE(close(ref::swiglu(gate, up), want, kTol, kTol));
  // Far negative gate: silu -> −0, not NaN.
  EXPECT_EQ(ref::silu(torch::tensor({-200.0f})).item<float>(), 0.0f);
  EXPECT_TRUE(ref::residual_add(gate, up).equal(gate + up));
}

TEST(Output, LmHeadIsAGemvOverEveryChunk) {
  // V larger than the reference's 16384-row conversion chunk, so a chunk boundary is crossed.
  torch::manual_seed(10);
  const int64_t vocab = 16384 + 97, d = 8;
  const torch::Tensor w = torch::randn({vocab, d}).to(torch::kBFloat16);
  const torch::Tensor x = torch::randn({d});
  const torch::Tensor want = torch::mv(as_double(w), as_double(x));
  const torch::Tensor logits = ref::lm_head(x, w);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{vocab}));
  EXPECT_TRUE(close(logits, want, kTol, kTol));
  EXPECT_THROW(ref::lm_head(torch::randn({3, d}), w), std::invalid_argument);  // only one row
}

TEST(Output, ArgmaxAndTopKBreakTiesByLowerId) {
  const torch::Tensor l = torch::tensor({0.5f, 2.0f, -1.0f, 2.0f, 1.5f, 2.0f});
  EXPECT_EQ(ref::argmax(l), 1);
  const ref::TopK top = ref::top_k(l, 4);
  EXPECT_EQ(top.ids, (std::vector<int64_t>{1, 3, 5, 4}));
  EXPECT_EQ(top.values, (std::vector<float>{2.0f, 2.0f, 2.0f, 1.5f}));
  EXPECT_THROW(ref::argmax(torch::tensor({1.0f, NAN})), std::invalid_argument);
  EXPECT_THROW(ref::top_k(l, 7), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Gemma 3
// ---------------------------------------------------------------------------------------------

TEST(Gemma, RmsNormScalesByOnePlusW) {
  torch::manual_seed(21);
  const int64_t s = 5, d = 24;
  const torch::Tensor x = torch::randn({s, d});
  const torch::Tensor w = (0.1 * torch::randn({d})).to(torch::kBFloat16);
  const torch::Tensor xd = as_double(x), wd = as_double(w);
  const torch::Tensor want = xd / (xd.pow(2).mean(-1, true) + 1e-6).sqrt() * (1.0 + wd);
  EXPECT_TRUE(close(ref::rms_norm_gemma(x, w, 1e-6), want, kTol, kTol));
  // The same as the Llama norm with gamma = 1 + w; far from it with gamma = w.
  EXPECT_TRUE(close(ref::rms_norm_gemma(x, w, 1e-6), ref::rms_norm(x, 1.0 + as_double(w), 1e-6),
                    kTol, kTol));
  EXPECT_FALSE(close(ref::rms_norm_gemma(x, w, 1e-6), ref::rms_norm(x, w, 1e-6), 0.1, 0.1));
}

TEST(Gemma, QkNormNormalisesEveryHeadOnItsOwn) {
  torch::manual_seed(22);
  const int64_t s = 4, n = 3, hd = 8;
  // Heads of very different sizes: a norm over the whole row would leave them different.
  const torch::Tensor x = torch::randn({s, n * hd}) * torch::tensor({1.0f, 10.0f, 0.1f}).repeat_interleave(hd);
  const torch::Tensor w = 0.1 * torch::randn({hd});
  const torch::Tensor got = ref::head_rms_norm(x, w, 1e-6, n);
  ASSERT_EQ(got.sizes(), x.sizes());
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(close(got.narrow(1, j * hd, hd), ref::rms_norm_gemma(x.narrow(1, j * hd, hd), w, 1e-6),
                      kTol, kTol))
        << "head " << j;
  }
  EXPECT_THROW(ref::head_rms_norm(x, torch::zeros({n * hd}), 1e-6, n), std::invalid_argument);
}

TEST(Gemma, GeluIsTheTanhApproximation) {
  const torch::Tensor z = torch::linspace(-6, 6, 97);
  const torch::Tensor zd = as_double(z);
  const torch::Tensor want =
      0.5 * zd * (1 + torch::tanh(std::sqrt(2.0 / std::numbers::pi) * (zd + 0.044715 * zd.pow(3))));
  EXPECT_TRUE(close(ref::gelu_tanh(z), want, kTol, kTol));
  // The exact GELU differs by up to ~5e-4 on this range: far outside kTol.
  const torch::Tensor exact = 0.5 * zd * (1 + torch::erf(zd / std::sqrt(2.0)));
  EXPECT_GT((as_double(ref::gelu_tanh(z)) - exact).abs().max().item<double>(), 1e-4);
  const torch::Tensor gate = torch::randn({3, 7}), up = torch::randn({3, 7});
  EXPECT_TRUE(close(ref::geglu(gate, up), as_double(ref::gelu_tanh(gate)) * as_double(up), kTol, kTol));
}

TEST(Gemma, SlidingWindowAttentionMatchesTheLoop) {
  torch::manual_seed(23);
  const int64_t s = 9, h = 4, hk = 2, hd = 8;
  const torch::Tensor q = torch::randn({s, h * hd});
  const torch::Tensor k = torch::randn({s, hk * hd});
  const torch::Tensor v = torch::randn({s, hk * hd});
  const double scale = 1.0 / std::sqrt(32.0);
  for (int64_t window : {1, 3, 8, 9, 50}) {
    const ref::AttentionDetail got = ref::windowed_gqa_attention_detail(q, k, v, h, hk, {scale, window});
    EXPECT_TRUE(close(got.out, attention_loop(q, k, v, h, hk, scale, window), kTol, kTol))
        << "window " << window;
    // Row r sees exactly min(r + 1, window) keys.
    for (int64_t r = 0; r < s; ++r) {
      EXPECT_EQ((got.probs[0][r] > 0).sum().item<int64_t>(), std::min(r + 1, window))
          << "window " << window << ", row " << r;
    }
  }
  // A window at least as long as the sequence is plain causal attention; so is the default.
  EXPECT_TRUE(close(ref::windowed_gqa_attention(q, k, v, h, hk, {0.0, s}),
                    ref::causal_gqa_attention(q, k, v, h, hk), 0, 0));
  // Decode rows at the end of a longer key set keep the window relative to their own position.
  const torch::Tensor tail = ref::windowed_gqa_attention(q.narrow(0, 6, 3), k, v, h, hk, {scale, 3});
  EXPECT_TRUE(close(tail, attention_loop(q.narrow(0, 6, 3), k, v, h, hk, scale, 3), kTol, kTol));
}

TEST(Gemma, EmbeddingScaleIsRoundedToTheTableDtype) {
  EXPECT_EQ(ref::embedding_scale(1152, torch::kBFloat16), 34.0);  // sqrt(1152) = 33.94
  EXPECT_EQ(ref::embedding_scale(1152, torch::kFloat),
            static_cast<double>(static_cast<float>(std::sqrt(1152.0))));
  EXPECT_EQ(ref::embedding_scale(64, torch::kBFloat16), 8.0);
}

TEST(Gemma, LinearRopeScalingDividesEveryFrequency) {
  const RopeScaling linear{"linear", 8.0};
  EXPECT_TRUE(close(ref::rope_inv_freq(32, 1e6, linear), ref::rope_inv_freq(32, 1e6) / 8.0, 0, 1e-15));
}

}  // namespace
