// Milestone 6: Gemma 3 with the KV cache (GemmaModel::prefill and decode, which run
// gemma_prefill_layer and gemma_decode_layer of milestones/milestone6/gemma_decode.cpp). Greedy
// generation with the cache gives transformers' tokens and logits on the checkpoints it wrote,
// and the uncached forward pass's logits at every step, also when the prompt is shorter than the
// window and generation runs past it; what each layer keeps in its cache (all positions on a
// global layer, a ring of sliding_window slots on a local one) is checked slot by slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "harness/check/compare.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "harness/model/safetensors.h"
#include "harness/pipeline/gemma_model.h"
#include "reference/model.h"

namespace clockwork {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = CLOCKWORK_TRANSFORMERS_FIXTURES;

// The same allowance as the uncached model's test (test_gemma_model.cpp): fp32 sums in another
// order and fast exp through every layer and the lm_head measure a few 1e-6 of the logits' rms;
// the decode step adds one more summation order (the online softmax over the cache instead of a
// whole row), no more than another rounding per layer. A wrong cache slot, a window off by one
// or a local layer reading past its window moves the logits by a sizeable part of their rms.
const Tolerance kLogits{0, 0,
                        "fp32 sums in another order (the decode step's online softmax included) "
                        "and fast exp through every layer and the lm_head",
                        2e-4};

// Cached K and V against the reference's K (after QK-norm and RoPE) and V of the same positions:
// a few roundings of O(1) values through the layers below; a wrong slot holds another position's
// row, different by about its rms.
const Tolerance kCacheRows{0, 0,
                           "fp32 roundings of the layers below, each row a few ulp of O(1) "
                           "values; a wrong slot holds another position's row",
                           1e-4};

std::vector<int32_t> prompt_of(const nlohmann::json& expected) {
  std::vector<int32_t> ids;
  for (int64_t id : expected.at("prompt").get<std::vector<int64_t>>())
    ids.push_back(static_cast<int32_t>(id));
  return ids;
}

nlohmann::json read_expected(const fs::path& dir) {
  std::ifstream in(dir / "expected.json");
  if (!in) throw std::runtime_error("cannot read " + (dir / "expected.json").string());
  return nlohmann::json::parse(in);
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class CachedGemmaTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CachedGemmaTest, GreedyStepsMatchTransformersAndTheUncachedModel) {
  const fs::path dir = kFixtures / GetParam();
  const nlohmann::json expected = read_expected(dir);
  GemmaModel model = GemmaModel::load(dir);
  model.enable_cache();
  const ModelConfig& c = model.config();
  const int64_t V = c.vocab_size;

  std::vector<int32_t> ids = prompt_of(expected);
  std::vector<float> logits = model.prefill(ids);
  for (const nlohmann::json& step : expected.at("steps")) {
    SCOPED_TRACE("sequence length " + std::to_string(ids.size()) +
                 (static_cast<int64_t>(ids.size()) > c.sliding_window ? " (past the window)" : ""));
    EXPECT_TRUE(matches_reference("cached logits vs transformers", logits,
                                  step.at("logits").get<std::vector<float>>(), {V}, kLogits));
    EXPECT_TRUE(matches_reference("cached logits vs the uncached forward pass", logits,
                                  model.forward(ids), {V}, kLogits));
    const int32_t token = step.at("token").get<int32_t>();
    EXPECT_EQ(argmax(logits), token)
        << "transformers' top-2 margin is " << step.at("margin").get<double>();
    ids.push_back(token);
    logits = model.decode(token);
  }
  EXPECT_EQ(model.cached_ids(), ids);
}

INSTANTIATE_TEST_SUITE_P(Transformers, CachedGemmaTest,
                         ::testing::Values("gemma3-local-global", "gemma3-scaled-untied"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

// What layer `layer`'s cache should hold after positions 0 .. len − 1: position p in slot
// p mod C, the latest position of each slot (C = slots; a global layer has C ≥ len). `rows`
// holds the reference's rows [len, width]; slots no position reached stay NaN (not compared).
std::vector<float> ring_rows(const std::vector<float>& rows, int len, int slots, int width,
                             int shift = 0) {
  std::vector<float> out(static_cast<size_t>(slots) * width, NAN);
  for (int p = 0; p < len; ++p) {
    const int slot = ((p + shift) % slots + slots) % slots;
    std::copy_n(rows.begin() + static_cast<long>(p) * width, width,
                out.begin() + static_cast<long>(slot) * width);
  }
  return out;
}

// Only the slots that hold a position: [n, width] of `all` where `like` is not NaN.
std::vector<float> held(const std::vector<float>& all, const std::vector<float>& like) {
  std::vector<float> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (!std::isnan(like[i])) out.push_back(all[i]);
  return out;
}

// A prompt shorter than the window, then generation well past it: every decode step's logits
// equal the uncached pass's, and afterwards each layer's cache holds what it should, slot by slot.
TEST(CachedGemma, GenerationPastTheWindowKeepsTheRightSlots) {
  const fs::path dir = kFixtures / "gemma3-local-global";
  const nlohmann::json expected = read_expected(dir);
  GemmaModel model = GemmaModel::load(dir);
  model.enable_cache();
  const ModelConfig& c = model.config();
  const int W = static_cast<int>(c.sliding_window);
  ASSERT_EQ(model.local_ring_slots(), W) << "a local layer's cache should be a ring of "
                                            "sliding_window slots";
  std::vector<int32_t> ids = prompt_of(expected);
  ids.resize(2);  // shorter than the window of 4
  std::vector<float> logits = model.prefill(ids);
  const int steps = 3 * W + 1;  // the ring wraps three times
  bool same = true;  // after the first wrong step, only the slots below are checked (they say why)
  for (int i = 0; i < steps; ++i) {
    SCOPED_TRACE("decode step " + std::to_string(i + 1) + ", sequence length " +
                 std::to_string(ids.size()));
    if (same) {
      const ::testing::AssertionResult r =
          matches_reference("cached logits vs the uncached forward pass", logits,
                            model.forward(ids), {c.vocab_size}, kLogits);
      same = static_cast<bool>(r);
      EXPECT_TRUE(r) << "(the cache's slots are checked below)";
    }
    ids.push_back(argmax(logits));
    logits = model.decode(ids.back());
  }
  // The cache now holds ids.size() − 1 positions (the last token's logits were not needed).
  const int len = static_cast<int>(ids.size());
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const ref::Model reference(c, ref::checkpoint_lookup(checkpoint));
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> ids64(ids.begin(), ids.end());
  const ref::ForwardResult r = reference.forward(ids64, {.capture = true});
  const int width = static_cast<int>(c.num_kv_heads * c.head_dim);
  for (int layer = 0; layer < static_cast<int>(c.num_layers); ++layer) {
    const bool local = c.is_sliding(layer);
    SCOPED_TRACE(std::string(local ? "local" : "global") + " layer " + std::to_string(layer));
    for (const bool values : {false, true}) {
      const std::vector<float> got = model.download_cache(layer, values);
      const int slots = static_cast<int>(got.size()) / width;
      if (local) {
        EXPECT_EQ(slots, W);
      } else {
        EXPECT_GE(slots, len);
      }
      const torch::Tensor& t = values ? r.layers.at(static_cast<size_t>(layer)).v
                                      : r.layers.at(static_cast<size_t>(layer)).k;
      const std::vector<float> rows = to_vector(t);
      const std::vector<float> want = ring_rows(rows, len, slots, width);
      std::vector<PitfallCandidate> pitfalls;
      if (local) {
        pitfalls.push_back({"ring_slot_one_ahead",
                            "position p went into slot (p + 1) mod C; it belongs in p mod C",
                            held(ring_rows(rows, len, slots, width, 1), want)});
        pitfalls.push_back({"ring_slot_one_behind",
                            "position p went into slot (p - 1) mod C; it belongs in p mod C",
                            held(ring_rows(rows, len, slots, width, -1), want)});
      }
      const int n = static_cast<int>(held(want, want).size()) / width;
      EXPECT_TRUE(matches_reference(values ? "V cache" : "K cache", held(got, want),
                                    held(want, want), {n, width}, kCacheRows, pitfalls,
                                    {"slot", "value"}));
    }
  }
}

// The prompt longer than the window: prefill writes only the last sliding_window positions of
// a local layer, wrapped round the ring (11 positions into 4 slots: 7 .. 10 into slots 3, 0, 1, 2).
TEST(CachedGemma, PrefillWrapsALongPromptRoundTheRing) {
  const fs::path dir = kFixtures / "gemma3-local-global";
  const nlohmann::json expected = read_expected(dir);
  GemmaModel model = GemmaModel::load(dir);
  model.enable_cache();
  const ModelConfig& c = model.config();
  const std::vector<int32_t> ids = prompt_of(expected);
  const int len = static_cast<int>(ids.size());
  ASSERT_GT(len, c.sliding_window);
  model.prefill(ids);
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const ref::Model reference(c, ref::checkpoint_lookup(checkpoint));
  torch::NoGradGuard no_grad;
  const ref::ForwardResult r =
      reference.forward(std::vector<int64_t>(ids.begin(), ids.end()), {.capture = true});
  const int width = static_cast<int>(c.num_kv_heads * c.head_dim);
  for (int layer = 0; layer < static_cast<int>(c.num_layers); ++layer) {
    if (!c.is_sliding(layer)) continue;
    SCOPED_TRACE("local layer " + std::to_string(layer));
    const std::vector<float> got = model.download_cache(layer, false);
    const int slots = static_cast<int>(got.size()) / width;
    const std::vector<float> rows = to_vector(r.layers.at(static_cast<size_t>(layer)).k);
    const std::vector<float> want = ring_rows(rows, len, slots, width);
    // The last `slots` positions written to slots 0, 1, ... in order, without the wrap.
    std::vector<float> unwrapped(rows.end() - static_cast<long>(slots) * width, rows.end());
    EXPECT_TRUE(matches_reference(
        "K cache after prefill", got, want, {slots, width}, kCacheRows,
        {{"prefill_ring_not_wrapped",
          "prefill wrote the last C positions into slots 0 .. C-1 in order; position p belongs "
          "in slot p mod C, where decode steps will look for it",
          unwrapped}},
        {"slot", "value"}));
  }
}

TEST(CachedGemma, RefusesWhatDoesNotFit) {
  const fs::path dir = kFixtures / "gemma3-local-global";
  GemmaModel model = GemmaModel::load(dir);
  EXPECT_THROW(model.prefill({1, 2}), std::logic_error);  // no cache yet
  EXPECT_THROW(model.enable_cache(-1), std::invalid_argument);
  model.enable_cache(3);
  EXPECT_EQ(model.local_ring_slots(), 3) << "a ring longer than the longest sequence is wasted";
  EXPECT_THROW(model.decode(1), std::logic_error);  // nothing prefilled
  EXPECT_THROW(model.prefill({1, 2, 3, 4}), std::length_error);
  model.prefill({1, 2});
  model.decode(3);
  EXPECT_THROW(model.decode(4), std::length_error);  // position 3 of 3
  EXPECT_EQ(model.cached_ids(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_THROW(model.decode(static_cast<int32_t>(model.config().vocab_size)),
               std::invalid_argument);
}

}  // namespace
}  // namespace clockwork
