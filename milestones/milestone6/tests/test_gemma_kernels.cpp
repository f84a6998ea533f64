// Milestone 6: Gemma 3's kernels (kernels/geglu.cu, rmsnorm_gemma.cu,
// sliding_window_attention.cu) against the libtorch reference, on seeded random inputs at the
// sizes where each goes wrong, and the known mistakes of a port from Llama, each shown to be
// recognised by name when a kernel makes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "milestones/milestone4/tests/device_cache.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

constexpr double kU = tol::kUnitRoundoff;

// The message of the first candidate in `pitfalls` that a kernel's output equal to `wrong` is
// reported as (empty when none is): the checks below feed each mistake's own output through
// the same comparison a student's kernel goes through.
bool names_mistake(const std::vector<float>& wrong, const std::vector<float>& expected,
                   const std::vector<int64_t>& shape, const Tolerance& tol,
                   const std::vector<PitfallCandidate>& pitfalls, const PitfallCandidate& which) {
  const ::testing::AssertionResult r =
      matches_reference("output", wrong, expected, shape, tol, pitfalls);
  if (r) {
    ADD_FAILURE() << which.name << ": the mistake's output passes the tolerance";
    return false;
  }
  const std::string message = r.message();
  if (message.find("This looks like a known mistake: " + which.message) == std::string::npos) {
    ADD_FAILURE() << which.name << " is not named; the report was:\n" << message;
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// GeGLU
// ---------------------------------------------------------------------------------------------

// tanhf is a few ulp off, and 1 + tanh cancels for very negative gates, where the result is
// tiny: 64·u relative plus 64·u of rms absolute covers both. The exact GELU differs from the tanh
// form by up to 5e-4 absolute around |z| = 2, hundreds of times more.
Tolerance geglu_tolerance() {
  return {0, 64 * kU,
          "tanhf is a few ulp off and 1 + tanh(...) cancels for very negative gates, where the "
          "output is tiny",
          64 * kU};
}

std::vector<PitfallCandidate> geglu_pitfalls(const torch::Tensor& gate, const torch::Tensor& up) {
  return {
      {"geglu_exact_gelu",
       "GELU computed exactly (0.5·z·(1 + erf(z/√2))); Gemma uses the tanh approximation "
       "0.5·z·(1 + tanh(√(2/π)·(z + 0.044715·z³)))",
       to_vector(torch::gelu(gate, "none") * up)},
      {"geglu_silu", "SiLU (milestone 3's SwiGLU) used where Gemma's GeGLU needs GELU",
       to_vector(ref::swiglu(gate, up))},
      {"geglu_gelu_on_up", "GELU applied to up instead of gate", to_vector(ref::geglu(up, gate))},
  };
}

std::vector<float> run_geglu(const std::vector<float>& gate, const std::vector<float>& up) {
  const int64_t n = static_cast<int64_t>(gate.size());
  DeviceBuffer<float> d_gate("gate", {n}), d_up("up", {n}), out("ffn_hidden", {n});
  d_gate.upload(gate);
  d_up.upload(up);
  kernels::geglu(d_gate.data(), d_up.data(), out.data(), gate.size());
  EXPECT_TRUE(guards_intact(d_gate) && guards_intact(d_up) && guards_intact(out));
  return out.download();
}

TEST(GeGlu, MatchesReference) {
  struct Case {
    int rows, cols;
    const char* why;
  } cases[] = {{1, 1, "one element"},
               {3, 100, "not a multiple of the block"},
               {4, 6912, "Gemma 3 1B's d_ff"},
               {1, 300000, "more elements than the grid's threads: the loop must stride"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.cols) + " (" + c.why + ")");
    const size_t n = static_cast<size_t>(c.rows) * c.cols;
    const uint64_t seed = test_seed(6100 + c.cols);
    const auto gate = random_normal(n, seed, 2.f);  // |z| up to ~8: both tails of GELU
    const auto up = random_normal(n, seed + 1);
    const auto tg = to_tensor(gate, {c.rows, c.cols}), tu = to_tensor(up, {c.rows, c.cols});
    EXPECT_TRUE(matches_reference("ffn_hidden", run_geglu(gate, up), to_vector(ref::geglu(tg, tu)),
                                  {c.rows, c.cols}, geglu_tolerance(), geglu_pitfalls(tg, tu)));
  }
}

TEST(GeGlu, ExtremeGatesGiveTheLimits) {
  // GELU(−30) is 0 (to fp32), GELU(30) is 30; tanh saturates without NaN.
  const std::vector<float> gate{-100.f, -30.f, -3.f, -0.5f, 0.f, 0.5f, 3.f, 30.f, 100.f};
  const std::vector<float> up(gate.size(), 2.f);
  const int64_t n = static_cast<int64_t>(gate.size());
  EXPECT_TRUE(matches_reference("ffn_hidden", run_geglu(gate, up),
                                to_vector(ref::geglu(to_tensor(gate, {n}), to_tensor(up, {n}))),
                                {n}, geglu_tolerance()));
}

TEST(GeGlu, RecognisesItsMistakes) {
  const int64_t n = 4096;
  const uint64_t seed = test_seed(6150);
  const auto tg = to_tensor(random_normal(n, seed, 2.f), {n});
  const auto tu = to_tensor(random_normal(n, seed + 1), {n});
  const std::vector<float> expected = to_vector(ref::geglu(tg, tu));
  const auto pitfalls = geglu_pitfalls(tg, tu);
  for (const PitfallCandidate& p : pitfalls) {
    EXPECT_TRUE(names_mistake(p.output, expected, {n}, geglu_tolerance(), pitfalls, p)) << p.name;
  }
}

// ---------------------------------------------------------------------------------------------
// The embedding scale
// ---------------------------------------------------------------------------------------------

TEST(Scale, MultipliesEveryElementBySqrtD) {
  // One fp32 multiplication per element, correctly rounded: a correct kernel matches bit for bit.
  const float factor = 34.f;  // sqrt(1152) = 33.94, rounded to bf16 as Gemma 3 1B's checkpoints do
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{11} * 1152, int64_t{300000}}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto x = random_normal(static_cast<size_t>(n), test_seed(6180 + n));
    DeviceBuffer<float> d_x("embeddings", {n});
    d_x.upload(x);
    kernels::scale(d_x.data(), factor, static_cast<size_t>(n));
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] * factor;
    EXPECT_TRUE(matches_reference(
        d_x, want,
        tol::exact("one fp32 multiplication per element, correctly rounded: a correct kernel "
                   "reproduces x * factor bit for bit"),
        {{"embedding_scale_missing",
          "the embeddings were not multiplied: Gemma scales the looked-up rows by sqrt(d)", x}}));
    EXPECT_TRUE(guards_intact(d_x));
  }
}

// ---------------------------------------------------------------------------------------------
// Gemma's RMSNorm and QK-norm
// ---------------------------------------------------------------------------------------------

std::vector<PitfallCandidate> rmsnorm_gemma_pitfalls(const torch::Tensor& x, const torch::Tensor& w,
                                                     double eps) {
  return {
      {"rmsnorm_gemma_scale_w",
       "the row is scaled by w; Gemma stores the scale minus one, so it must be scaled by (1 + w)",
       to_vector(ref::rms_norm(x, w, eps))},
      {"rmsnorm_gemma_no_scale", "the weight is ignored: Gemma's norm scales by (1 + w)",
       to_vector(ref::rms_norm_gemma(x, torch::zeros_like(w), eps))},
  };
}

TEST(RmsNormGemma, MatchesReference) {
  struct Case {
    int rows, d;
    const char* why;
  } cases[] = {{1, 1, "one element"},
               {3, 100, "d not a multiple of the block"},
               {5, 1152, "Gemma 3 1B's hidden size"},
               {2, 2560, "Gemma 3 4B's hidden size"}};
  const float eps = 1e-6f;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.d) + " (" + c.why + ")");
    const uint64_t seed = test_seed(6200 + c.d);
    const auto x = random_normal(static_cast<size_t>(c.rows) * c.d, seed, 3.f);
    const auto w = to_bf16(random_normal(c.d, seed + 1, 0.3f));  // the offset: around 0, not 0
    DeviceBuffer<float> d_x("x", {c.rows, c.d}), y("x_norm", {c.rows, c.d});
    DeviceBuffer<__nv_bfloat16> d_w("input_layernorm.weight", {c.d});
    d_x.upload(x);
    d_w.upload(w);
    kernels::rmsnorm_gemma(d_x.data(), d_w.data(), y.data(), c.rows, c.d, eps);
    const auto tx = to_tensor(x, {c.rows, c.d});
    const auto tw = to_tensor(w, {c.d});
    EXPECT_TRUE(matches_reference(y, to_vector(ref::rms_norm_gemma(tx, tw, eps)),
                                  tol::rms_norm(c.d), rmsnorm_gemma_pitfalls(tx, tw, eps)));
    EXPECT_TRUE(guards_intact(y));
  }
}

TEST(RmsNormGemma, RunsInPlaceAndRejectsBadArguments) {
  const int rows = 3, d = 300;
  const uint64_t seed = test_seed(6250);
  const auto x = random_normal(static_cast<size_t>(rows) * d, seed);
  const auto w = to_bf16(random_normal(d, seed + 1, 0.3f));
  DeviceBuffer<float> d_x("x", {rows, d});
  DeviceBuffer<__nv_bfloat16> d_w("w", {d});
  d_x.upload(x);
  d_w.upload(w);
  kernels::rmsnorm_gemma(d_x.data(), d_w.data(), d_x.data(), rows, d, 1e-6f);
  EXPECT_TRUE(matches_reference(
      d_x, to_vector(ref::rms_norm_gemma(to_tensor(x, {rows, d}), to_tensor(w, {d}), 1e-6)),
      tol::rms_norm(d)));
  EXPECT_THROW(kernels::rmsnorm_gemma(d_x.data(), d_w.data(), d_x.data(), rows, 0, 1e-6f),
               std::invalid_argument);
  EXPECT_THROW(kernels::rmsnorm_gemma(d_x.data(), d_w.data(), d_x.data(), rows, d, 0.f),
               std::invalid_argument);
}

std::vector<PitfallCandidate> qk_norm_pitfalls(const torch::Tensor& x, const torch::Tensor& w,
                                               double eps, int64_t n_heads) {
  const int64_t hd = w.size(0);
  return {
      {"qk_norm_whole_row",
       "the whole row of h·h_d values is normalised at once; QK-norm normalises each head's h_d "
       "values on its own",
       to_vector(ref::rms_norm_gemma(x, w.repeat({n_heads}), eps))},
      {"qk_norm_scale_w", "each head is scaled by w instead of (1 + w)",
       to_vector(ref::rms_norm(x.reshape({-1, hd}), w, eps))},
  };
}

TEST(QkNorm, NormalisesEveryHeadInPlace) {
  struct Case {
    int s, n, hd;
    const char* why;
  } cases[] = {{5, 4, 256, "Gemma 3 1B's queries: 4 heads of 256"},
               {5, 1, 256, "Gemma 3 1B's keys: one KV head"},
               {7, 8, 48, "head_dim not a power of two"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.s) + " rows of " + std::to_string(c.n) + " heads of " +
                 std::to_string(c.hd) + " (" + c.why + ")");
    const uint64_t seed = test_seed(6300 + c.n * 7 + c.hd);
    // Heads of different sizes, so a norm over the whole row differs from one per head.
    std::vector<float> x = random_normal(static_cast<size_t>(c.s) * c.n * c.hd, seed);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= 1.f + static_cast<float>((i / c.hd) % c.n);
    const auto w = to_bf16(random_normal(c.hd, seed + 1, 0.3f));
    DeviceBuffer<float> d_x("q_proj", {c.s, c.n, c.hd});
    DeviceBuffer<__nv_bfloat16> d_w("self_attn.q_norm.weight", {c.hd});
    d_x.upload(x);
    d_w.upload(w);
    kernels::qk_norm(d_x.data(), d_w.data(), c.s, c.n, c.hd, 1e-6f);
    const auto tx = to_tensor(x, {c.s, c.n * c.hd});
    const auto tw = to_tensor(w, {c.hd});
    EXPECT_TRUE(matches_reference(d_x, to_vector(ref::head_rms_norm(tx, tw, 1e-6, c.n)),
                                  tol::rms_norm(c.hd),
                                  c.n > 1 ? qk_norm_pitfalls(tx, tw, 1e-6, c.n)
                                          : std::vector<PitfallCandidate>{},
                                  {"row", "head", "dim"}));
    EXPECT_TRUE(guards_intact(d_x));
  }
}

TEST(QkNorm, RecognisesItsMistakes) {
  const int64_t s = 3, n = 4, hd = 32;
  const uint64_t seed = test_seed(6350);
  std::vector<float> x = random_normal(static_cast<size_t>(s * n * hd), seed);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= 1.f + static_cast<float>((i / hd) % n);
  const auto tx = to_tensor(x, {s, n * hd});
  const auto tw = to_tensor(to_bf16(random_normal(hd, seed + 1, 0.3f)), {hd});
  const std::vector<float> expected = to_vector(ref::head_rms_norm(tx, tw, 1e-6, n));
  const auto pitfalls = qk_norm_pitfalls(tx, tw, 1e-6, n);
  for (const PitfallCandidate& p : pitfalls) {
    EXPECT_TRUE(names_mistake(p.output, expected, {s, n, hd}, tol::rms_norm(hd), pitfalls, p))
        << p.name;
  }
}

// ---------------------------------------------------------------------------------------------
// Sliding-window attention
// ---------------------------------------------------------------------------------------------

struct AttentionCase {
  int s, h, h_k, h_d, window;
  double scalar;  // query_pre_attn_scalar
  const char* why;
};

std::string describe(const AttentionCase& c) {
  return "s=" + std::to_string(c.s) + " h=" + std::to_string(c.h) + " h_k=" +
         std::to_string(c.h_k) + " h_d=" + std::to_string(c.h_d) + " window=" +
         std::to_string(c.window) + " (" + c.why + ")";
}

std::vector<PitfallCandidate> window_pitfalls(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const AttentionCase& c) {
  const double scale = 1.0 / std::sqrt(c.scalar);
  auto run = [&](double sc, int64_t window) {
    return to_vector(ref::windowed_gqa_attention(q, k, v, c.h, c.h_k, {sc, window}));
  };
  std::vector<PitfallCandidate> out{
      {"attention_scale_head_dim",
       "scores scaled by 1/sqrt(h_d); Gemma scales them by query_pre_attn_scalar^(-1/2)",
       run(1.0 / std::sqrt(static_cast<double>(c.h_d)), c.window)},
  };
  if (c.window > 0) {
    out.push_back({"window_ignored",
                   "a local layer attends to every earlier position; it must see only the last "
                   "sliding_window positions",
                   run(scale, 0)});
    out.push_back({"window_one_too_wide",
                   "the window holds sliding_window + 1 keys; position p sees "
                   "p - sliding_window + 1 .. p, its own included",
                   run(scale, c.window + 1)});
    if (c.window > 1) {
      out.push_back({"window_one_too_narrow",
                     "the window holds sliding_window - 1 keys; position p sees "
                     "p - sliding_window + 1 .. p, its own included",
                     run(scale, c.window - 1)});
    }
  }
  return out;
}

TEST(SlidingWindowAttention, MatchesReference) {
  const AttentionCase cases[] = {
      {1, 2, 1, 16, 4, 16.0, "one token"},
      {11, 4, 1, 32, 4, 32.0, "window shorter than the sequence, MQA"},
      {11, 4, 2, 48, 1, 48.0, "a window of one: each row sees only itself"},
      {40, 8, 2, 32, 16, 64.0, "GQA groups of 4, scalar != h_d"},
      {40, 2, 2, 32, 0, 32.0, "a global layer: no window"},
      {300, 4, 1, 256, 128, 256.0, "Gemma 3 1B's heads, more rows than the window"},
      {130, 4, 1, 64, 512, 64.0, "a window longer than the sequence: plain causal attention"},
  };
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const uint64_t seed = test_seed(6400 + c.s * 13 + c.h_d + c.window);
    const auto q = random_normal(static_cast<size_t>(c.s) * c.h * c.h_d, seed);
    const auto k = random_normal(static_cast<size_t>(c.s) * c.h_k * c.h_d, seed + 1);
    const auto v = random_normal(static_cast<size_t>(c.s) * c.h_k * c.h_d, seed + 2);
    DeviceBuffer<float> dq("q", {c.s, c.h * c.h_d}), dk("k", {c.s, c.h_k * c.h_d}),
        dv("v", {c.s, c.h_k * c.h_d}), out("attention output", {c.s, c.h, c.h_d});
    dq.upload(q);
    dk.upload(k);
    dv.upload(v);
    const double scale = 1.0 / std::sqrt(c.scalar);
    kernels::sliding_window_attention(dq.data(), dk.data(), dv.data(), out.data(), c.s, c.h, c.h_k,
                                      c.h_d, static_cast<float>(scale), c.window);
    const auto tq = to_tensor(q, {c.s, c.h * c.h_d}), tk = to_tensor(k, {c.s, c.h_k * c.h_d}),
               tv = to_tensor(v, {c.s, c.h_k * c.h_d});
    const int seen = c.window > 0 && c.window < c.s ? c.window : c.s;
    EXPECT_TRUE(matches_reference(
        out, to_vector(ref::windowed_gqa_attention(tq, tk, tv, c.h, c.h_k, {scale, c.window})),
        tol::attention(c.h_d, seen), window_pitfalls(tq, tk, tv, c), {"row", "head", "dim"}));
    EXPECT_TRUE(guards_intact(out));
  }
}

TEST(SlidingWindowAttention, RecognisesItsMistakes) {
  const AttentionCase c{24, 4, 2, 32, 6, 64.0, "recogniser inputs"};
  const uint64_t seed = test_seed(6450);
  const auto tq = to_tensor(random_normal(static_cast<size_t>(c.s * c.h * c.h_d), seed),
                            {c.s, c.h * c.h_d});
  const auto tk = to_tensor(random_normal(static_cast<size_t>(c.s * c.h_k * c.h_d), seed + 1),
                            {c.s, c.h_k * c.h_d});
  const auto tv = to_tensor(random_normal(static_cast<size_t>(c.s * c.h_k * c.h_d), seed + 2),
                            {c.s, c.h_k * c.h_d});
  const std::vector<float> expected = to_vector(
      ref::windowed_gqa_attention(tq, tk, tv, c.h, c.h_k, {1.0 / std::sqrt(c.scalar), c.window}));
  const auto pitfalls = window_pitfalls(tq, tk, tv, c);
  for (const PitfallCandidate& p : pitfalls) {
    EXPECT_TRUE(names_mistake(p.output, expected, {c.s, c.h, c.h_d},
                              tol::attention(c.h_d, c.window), pitfalls, p))
        << p.name;
  }
}

TEST(SlidingWindowAttention, RejectsBadArguments) {
  DeviceBuffer<float> q("q", {4, 64}), k("k", {4, 32}), v("v", {4, 32}), out("out", {4, 64});
  EXPECT_THROW(kernels::sliding_window_attention(q.data(), k.data(), v.data(), out.data(), 4, 2,
                                                 1, 32, 0.f, 2),
               std::invalid_argument);  // scale 0
  EXPECT_THROW(kernels::sliding_window_attention(q.data(), k.data(), v.data(), out.data(), 4, 3,
                                                 2, 32, 0.1f, 2),
               std::invalid_argument);  // 3 heads on 2 KV heads
  EXPECT_THROW(kernels::sliding_window_attention(q.data(), k.data(), v.data(), out.data(), 4, 2,
                                                 1, 32, 0.1f, -1),
               std::invalid_argument);  // negative window
  EXPECT_THROW(kernels::sliding_window_attention(q.data(), k.data(), v.data(), q.data(), 4, 2, 1,
                                                 32, 0.1f, 2),
               std::invalid_argument);  // out aliases q
}

// A block keeps one row's scores (s floats) beside its 512-byte reduction array, within the
// 48 KB a block gets: s = 12160 fits, 12161 does not, though its scores alone (48,644 bytes)
// would. A GPU refuses that launch; the kernel says why first.
TEST(SlidingWindowAttention, SharedMemoryLimitCountsTheReductionArray) {
  const int longest = 12160;
  DeviceBuffer<float> q("q", {longest + 1, 16}), k("k", {longest + 1, 16}),
      v("v", {longest + 1, 16}), out("out", {longest + 1, 16});
  try {
    kernels::sliding_window_attention(q.data(), k.data(), v.data(), out.data(), longest + 1, 1, 1,
                                      16, 0.25f, 2);
    ADD_FAILURE() << "s = " << longest + 1 << " needs 49,156 bytes of shared memory per block";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("at most " + std::to_string(longest)), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(kernels::sliding_window_attention_shared_bytes(longest) + 512, size_t{48} * 1024);
  // Exactly 48 KB: the launch runs (on the CPU backend, which checks the same sum).
  kernels::sliding_window_attention(q.data(), k.data(), v.data(), out.data(), longest, 1, 1, 16,
                                    0.25f, 2);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// Sliding-window decode attention: one query against a ring-buffer cache
// ---------------------------------------------------------------------------------------------

struct DecodeWindowCase {
  int h, h_k, h_d, len, window;
  int ring;       // slots of the cache (kv_cache_capacity): the ring's length
  int page_size;  // 0: contiguous
  double scalar;  // query_pre_attn_scalar
  const char* why;
};

std::string describe(const DecodeWindowCase& c) {
  return "h=" + std::to_string(c.h) + " h_k=" + std::to_string(c.h_k) + " h_d=" +
         std::to_string(c.h_d) + " len=" + std::to_string(c.len) + " window=" +
         std::to_string(c.window) + " ring=" + std::to_string(c.ring) +
         (c.page_size ? " page_size=" + std::to_string(c.page_size) : std::string(" contiguous")) +
         " (" + c.why + ")";
}

// A ring cache after positions 0 .. len − 1 were written in order, position p into slot
// p mod ring (later positions overwrite earlier ones, as decode steps do). Slots no position
// reached hold decoys (other random rows), so a kernel reading them gets a finite wrong answer.
struct RingFilled {
  DeviceCache cache;
  int width;
  std::vector<float> q;                     // [h·h_d]
  std::vector<float> k, v;                  // [len, h_k·h_d] every position's row, in order
  std::vector<float> storage_k, storage_v;  // [slots, h_k·h_d] as uploaded

  explicit RingFilled(const DecodeWindowCase& c)
      : cache(c.h_k, c.h_d, c.ring, c.page_size), width(c.h_k * c.h_d) {
    const uint64_t seed = test_seed(6600 + c.len * 11 + c.window * 7 + c.ring + c.h_d);
    q = random_normal(static_cast<size_t>(c.h) * c.h_d, seed);
    k = random_normal(static_cast<size_t>(c.len) * width, seed + 1);
    v = random_normal(static_cast<size_t>(c.len) * width, seed + 2);
    const size_t n = static_cast<size_t>(cache.slots()) * width;
    storage_k = random_normal(n, seed + 3);
    storage_v = random_normal(n, seed + 4);
    for (int p = 0; p < c.len; ++p) {
      const size_t slot = static_cast<size_t>(cache.slot_of(p % c.ring));
      std::copy_n(k.begin() + static_cast<long>(p) * width, width,
                  storage_k.begin() + static_cast<long>(slot * width));
      std::copy_n(v.begin() + static_cast<long>(p) * width, width,
                  storage_v.begin() + static_cast<long>(slot * width));
    }
    cache.k.upload(storage_k);
    cache.v.upload(storage_v);
  }

  // Storage slot of a logical slot r (before the page table), or −1 outside the cache.
  long physical(long r) const {
    if (r < 0 || r >= static_cast<long>(cache.slots())) return -1;
    if (cache.table.empty()) return r;
    if (r / cache.page_size >= static_cast<long>(cache.table.size())) return -1;
    return cache.slot_of(static_cast<int>(r));
  }

  // Attention of q over the storage rows of logical slots slot(0 .. n−1), or empty when one of
  // them is outside the cache.
  std::vector<float> attend(const DecodeWindowCase& c, double scale, int n,
                            const std::function<long(int)>& slot) const {
    std::vector<float> rk, rv;
    for (int i = 0; i < n; ++i) {
      const long s = physical(slot(i));
      if (s < 0) return {};
      rk.insert(rk.end(), storage_k.begin() + s * width, storage_k.begin() + (s + 1) * width);
      rv.insert(rv.end(), storage_v.begin() + s * width, storage_v.begin() + (s + 1) * width);
    }
    return to_vector(ref::windowed_gqa_attention(to_tensor(q, {1, c.h * c.h_d}),
                                                 to_tensor(rk, {n, width}),
                                                 to_tensor(rv, {n, width}), c.h, c.h_k,
                                                 {scale, 0}));
  }
};

// The known mistakes of the decode form, as outputs for this query and cache; each is kept only
// where it differs from the right answer (a ring exactly as long as the window holds nothing
// else, so reading all of it is right once it is full). Reading position p from slot p without
// the modulo leaves the ring once p >= C: the report shows those reads as values from outside
// the cache (or the kernel faults), not as a candidate.
std::vector<PitfallCandidate> decode_window_pitfalls(const DecodeWindowCase& c,
                                                     const RingFilled& f,
                                                     const std::vector<float>& expected) {
  const double scale = 1.0 / std::sqrt(c.scalar);
  const int first = c.window > 0 && c.len > c.window ? c.len - c.window : 0;
  auto positions = [&](int from, int to, double sc) {  // positions from .. to − 1 via the ring
    from = std::max(0, from);
    return f.attend(c, sc, to - from,
                    [&](int i) { return static_cast<long>((from + i) % c.ring); });
  };
  std::vector<PitfallCandidate> all{
      {"decode_scale_head_dim",
       "scores scaled by 1/sqrt(h_d); Gemma scales them by query_pre_attn_scalar^(-1/2)",
       positions(first, c.len, 1.0 / std::sqrt(static_cast<double>(c.h_d)))},
      {"decode_excludes_current",
       "the query left out its own position len - 1: append the new k and v first, then attend "
       "to them too",
       c.len - first >= 2 ? positions(first, c.len - 1, scale) : std::vector<float>{}},
  };
  if (c.window > 0) {
    all.push_back({"decode_window_ignored",
                   "a local layer read its whole cache; it must see only the last "
                   "sliding_window positions, len - sliding_window .. len - 1",
                   positions(c.len - std::min(c.len, c.ring), c.len, scale)});
    all.push_back({"decode_window_one_too_wide",
                   "the window holds sliding_window + 1 keys; the query at len - 1 sees "
                   "len - sliding_window .. len - 1, its own included",
                   positions(c.len - c.window - 1, c.len, scale)});
    if (c.window > 1) {
      all.push_back({"decode_window_one_too_narrow",
                     "the window holds sliding_window - 1 keys; the query at len - 1 sees "
                     "len - sliding_window .. len - 1, its own included",
                     positions(c.len - c.window + 1, c.len, scale)});
    }
    all.push_back({"decode_ring_read_from_slot_zero",
                   "the window was read from slots 0 .. n - 1 as if the oldest visible position "
                   "sat in slot 0; position p lives in slot p mod C",
                   f.attend(c, scale, c.len - first, [&](int i) { return static_cast<long>(i); })});
  }
  std::vector<PitfallCandidate> kept;
  double rms = 0;
  for (float e : expected) rms += static_cast<double>(e) * e;
  rms = std::sqrt(rms / static_cast<double>(expected.size()));
  for (PitfallCandidate& p : all) {
    if (p.output.size() != expected.size()) continue;
    double worst = 0;
    for (size_t i = 0; i < expected.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(p.output[i]) - expected[i]));
    if (worst > 1e-3 * rms) kept.push_back(std::move(p));
  }
  return kept;
}

std::vector<float> decode_window_expected(const DecodeWindowCase& c, const RingFilled& f) {
  const int first = c.window > 0 && c.len > c.window ? c.len - c.window : 0;
  const int n = c.len - first;
  const auto rows = [&](const std::vector<float>& x) {
    return to_tensor(std::vector<float>(x.begin() + static_cast<long>(first) * f.width,
                                        x.begin() + static_cast<long>(c.len) * f.width),
                     {n, f.width});
  };
  // The positions themselves (not the ring's storage): what a query at len − 1 sees.
  return to_vector(ref::windowed_gqa_attention(to_tensor(f.q, {1, c.h * c.h_d}), rows(f.k),
                                               rows(f.v), c.h, c.h_k,
                                               {1.0 / std::sqrt(c.scalar), 0}));
}

TEST(SlidingWindowDecode, MatchesReference) {
  const DecodeWindowCase cases[] = {
      {2, 1, 48, 11, 4, 4, 0, 32.0, "the fixture's shapes: a ring of 4 that wrapped twice"},
      {2, 1, 48, 3, 4, 4, 0, 32.0, "the ring not yet full"},
      {4, 2, 32, 4, 4, 4, 0, 64.0, "the ring just full: len = window"},
      {4, 1, 32, 9, 1, 1, 0, 32.0, "a window of one: the token sees only itself"},
      {8, 2, 32, 40, 16, 19, 0, 64.0, "a ring longer than the window: stale positions in it"},
      {4, 1, 64, 70, 0, 73, 0, 64.0, "a global layer: every position, over three tiles"},
      {4, 2, 32, 50, 20, 24, 8, 16.0, "paged: the ring's slots through a page table"},
      {4, 1, 256, 300, 128, 128, 0, 256.0, "Gemma 3 1B's heads, a window of four tiles"},
  };
  for (const DecodeWindowCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const RingFilled f(c);
    DeviceBuffer<float> dq("q", {c.h * c.h_d}), out("decode attention output", {c.h, c.h_d});
    dq.upload(f.q);
    kernels::sliding_window_decode_attention(dq.data(), f.cache.view(), c.len, out.data(), c.h,
                                             static_cast<float>(1.0 / std::sqrt(c.scalar)),
                                             c.window);
    const std::vector<float> expected = decode_window_expected(c, f);
    const int seen = c.len - kernels::sliding_window_first_position(c.len, c.window);
    EXPECT_TRUE(matches_reference(out, expected, tol::attention(c.h_d, seen),
                                  decode_window_pitfalls(c, f, expected), {"head", "dim"}));
    EXPECT_TRUE(guards_intact(out));
  }
}

TEST(SlidingWindowDecode, RecognisesItsMistakes) {
  // A ring longer than the window (stale positions in it) that has wrapped, GQA, scalar != h_d:
  // every mistake gives its own output here.
  const DecodeWindowCase c{4, 2, 32, 29, 6, 8, 0, 64.0, "recogniser inputs"};
  const RingFilled f(c);
  const std::vector<float> expected = decode_window_expected(c, f);
  const auto pitfalls = decode_window_pitfalls(c, f, expected);
  EXPECT_EQ(pitfalls.size(), 6u) << "every mistake should differ from the right answer here";
  for (const PitfallCandidate& p : pitfalls) {
    EXPECT_TRUE(names_mistake(p.output, expected, {c.h, c.h_d}, tol::attention(c.h_d, c.window),
                              pitfalls, p))
        << p.name;
  }
}

TEST(SlidingWindowDecode, RejectsBadArguments) {
  DeviceCache cache(1, 32, 4, 0);
  DeviceBuffer<float> q("q", {64}), out("out", {64});
  const auto view = cache.view();
  EXPECT_THROW(kernels::sliding_window_decode_attention(q.data(), view, 5, out.data(), 2, 0.1f, 0),
               std::out_of_range);  // a global layer needs every position: 5 > 4 slots
  EXPECT_THROW(kernels::sliding_window_decode_attention(q.data(), view, 9, out.data(), 2, 0.1f, 5),
               std::out_of_range);  // a window of 5 in a ring of 4
  EXPECT_NO_THROW(
      kernels::sliding_window_decode_attention(q.data(), view, 9, out.data(), 2, 0.1f, 4));
  EXPECT_THROW(kernels::sliding_window_decode_attention(q.data(), view, 0, out.data(), 2, 0.1f, 4),
               std::invalid_argument);  // len 0
  EXPECT_THROW(kernels::sliding_window_decode_attention(q.data(), view, 3, out.data(), 2, 0.f, 4),
               std::invalid_argument);  // scale 0
  EXPECT_THROW(kernels::sliding_window_decode_attention(q.data(), view, 3, out.data(), 2, 0.1f, -1),
               std::invalid_argument);  // negative window
  EXPECT_THROW(kernels::sliding_window_decode_attention(q.data(), view, 3, q.data(), 2, 0.1f, 4),
               std::invalid_argument);  // out aliases q
}

}  // namespace
}  // namespace clockwork
