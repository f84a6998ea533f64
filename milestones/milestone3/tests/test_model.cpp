// Milestone 3: the whole model. Tiny random Llama checkpoints are written in the real format
// (config.json and bf16 safetensors, one file or shards), loaded with Model::load, and run
// against the reference model: every layer's output, the final norm, the logits, the next token
// and a greedy generation. Then the errors: bad ids, and broken checkpoints.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/temp_dir.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "harness/profiling/nvtx_recorder.h"
#include "harness/pipeline/model.h"
#include "milestones/milestone3/tests/chain.h"
#include "milestones/milestone3/tests/end_to_end.h"
#include "milestones/milestone3/tests/tiny_checkpoint.h"
#include "milestones/milestone3/tests/tiny_config.h"
#include "reference/model.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

namespace fs = std::filesystem;

struct ModelCase {
  int64_t n_kv_heads;
  bool tied, sharded;
  std::optional<RopeScaling> scaling;
  const char* why;
  int64_t head_dim = 16;  // 16 = d / h; anything else makes Q and attn h·h_d wide, not d
};

// Two layers of the tiny shape (tiny_config.h), with the case's KV heads, tying and scaling.
ModelConfig tiny_config(const ModelCase& m) {
  ModelConfig c = tiny_test_config(m.n_kv_heads, 2, 40);
  c.tie_word_embeddings = m.tied;
  c.rope_scaling = m.scaling;
  c.head_dim = m.head_dim;
  return c;
}

std::vector<int64_t> widen(const std::vector<int32_t>& ids) {
  return {ids.begin(), ids.end()};
}

void check_model(const ModelCase& m) {
  const ModelConfig c = tiny_config(m);
  SCOPED_TRACE(std::string("tiny Llama, h_d=") + std::to_string(c.head_dim) +
               ", h_k=" + std::to_string(c.num_kv_heads) +
               (m.tied ? ", tied" : ", untied") + (m.sharded ? ", 3 shards" : ", one file") + " (" +
               m.why + ")");
  const uint64_t seed =
      test_seed(2200 + m.n_kv_heads * 4 + m.tied * 2 + m.sharded + (m.head_dim != 16) * 100);
  const Weights weights = ref::random_weights(c, seed);
  TempDir dir;
  write_checkpoint(dir.path(), c, weights, m.sharded);

  uint64_t last_done = 0, total = 0, calls = 0;
  Model model = Model::load(dir.path(), [&](uint64_t done, uint64_t all, const std::string&) {
    EXPECT_GE(done, last_done) << "progress went backwards";
    last_done = done;
    total = all;
    ++calls;
  });
  EXPECT_EQ(model.config(), c);
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(last_done, total) << "the progress callback did not reach the total";

  const ref::WeightLookup lookup = ref::lookup_from_map(weights);
  const ref::Model reference(c, lookup);
  const std::vector<int32_t> ids = random_ids(9, c.vocab_size, seed + 1);
  const int64_t s = static_cast<int64_t>(ids.size()), d = c.hidden_size;
  const ref::ForwardResult r = reference.forward(widen(ids));

  ForwardCapture capture;
  const std::vector<float> logits = model.forward(ids, &capture);
  const torch::Tensor x0 = r.embeddings;
  ASSERT_EQ(capture.layer_outputs.size(), static_cast<size_t>(c.num_layers));
  // Candidates: the same output with one known mistake in every layer (see chain.h).
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::vector<float>& got = capture.layer_outputs[l];
    EXPECT_TRUE(matches_reference(
        "output of layer " + std::to_string(l), got, to_vector(r.hidden[l]), {s, d},
        after_layers(c, s, l + 1),
        explaining(
            chain_pitfalls(c, lookup, x0, -1, [l](const Chain& ch) { return ch.hidden.at(l); }),
            got)));
  }
  const Tolerance t_logits = logits_tolerance(c, s);
  EXPECT_TRUE(matches_reference(
      "final_norm_last", capture.final_norm_last, to_vector(r.final_norm_last), {d}, t_logits,
      explaining(
          chain_pitfalls(c, lookup, x0, -1, [s](const Chain& ch) { return ch.final_norm[s - 1]; }),
          capture.final_norm_last)));
  // lm_head over every row gives [s, V]: named by its size, or by its first row when only V
  // values came back.
  std::vector<PitfallCandidate> logit_pitfalls = explaining(
      chain_pitfalls(c, lookup, x0, -1, [](const Chain& ch) { return ch.logits; }), logits);
  add_first_row_views(logit_pitfalls, static_cast<size_t>(c.vocab_size));
  EXPECT_TRUE(matches_reference("logits", logits, to_vector(r.logits), {c.vocab_size}, t_logits,
                                logit_pitfalls));
  expect_same_choice(model.next_token(ids), r.next_token, r.logits, t_logits, "next token");

  // Greedy generation, re-running the whole sequence for every new token.
  const int64_t n_new = 6;
  const ref::GenerateResult g = reference.generate_greedy(widen(ids), n_new);
  std::vector<int32_t> seq = ids;
  for (int64_t step = 0; step < n_new; ++step) {
    const int32_t next = model.next_token(seq);
    if (next != g.tokens[step]) {
      expect_same_choice(next, g.tokens[step], g.logits[step],
                         logits_tolerance(c, static_cast<int64_t>(seq.size())),
                         "generation step " + std::to_string(step));
      break;  // after a legitimate near-tie the two sequences differ: nothing more to compare
    }
    seq.push_back(next);
  }
}

TEST(Model, GqaRatioOneUntiedOneFile) {
  check_model({4, false, false, std::nullopt, "Llama-3-8B's layout"});
}

TEST(Model, GqaRatioTwoTiedShards) {
  check_model(
      {2, true, true, std::nullopt, "tied like Llama 3.2 1B/3B: lm_head is the embedding table"});
}

TEST(Model, GqaRatioFourUntiedShards) {
  check_model({1, false, true, std::nullopt, "one KV head"});
}

TEST(Model, Llama3RopeScaling) {
  check_model(
      {2, false, false, RopeScaling{"llama3", 8.0, 1.0, 4.0, 16}, "Llama 3.1 style rope_scaling"});
}

// Heads wider than d / h, as in Gemma 3 (d = 1152, 4 heads of 256): Q and the attention output
// are h·h_d = 80 wide, K and V h_k·h_d = 40, and the O projection maps 80 back to d = 64. A
// pipeline that sizes any of them by d reads past a buffer or drops columns. 20 also differs from
// every other size of the tiny shape.
TEST(Model, HeadDimOtherThanHiddenOverHeads) {
  check_model({2, false, false, std::nullopt, "h·h_d = 80 != d = 64, like Gemma 3", 20});
}

TEST(Model, HeadDimOtherThanHiddenOverHeadsTiedScaled) {
  check_model({1, true, true, RopeScaling{"llama3", 8.0, 1.0, 4.0, 16},
               "h·h_d = 32 < d = 64, tied, rope scaling", 8});
}

// The forward pass names its pieces for profilers (harness/profiling/nvtx.h): every layer, and
// inside it every step in the order the layer runs them, so an nsys timeline reads by name. The
// ranges sit outside the parts students write, so this holds for every submission.
TEST(NvtxRanges, ForwardPassNamesEveryLayerAndStep) {
  const ModelConfig c = tiny_config({2, false, false, std::nullopt, ""});
  TempDir dir;
  write_checkpoint(dir.path(), c, ref::random_weights(c, test_seed(2400)), false);
  Model model = Model::load(dir.path());
  model.forward({5, 6, 7});  // sizes the activations, so the next call allocates nothing
  if (!nvtx_recorder::recorder_installed()) {
    GTEST_SKIP() << "a profiler's NVTX tool is attached; the test's recorder sees no ranges";
  }
  nvtx_recorder::clear();
  model.next_token({5, 6, 7, 8});

  const std::string fwd = "forward s=4";
  std::vector<std::string> want{fwd, fwd + " > embedding"};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string layer = fwd + " > layer " + std::to_string(l);
    want.push_back(layer);
    for (const char* step : {"qkv", "qkv > attn_norm", "qkv > q_proj", "qkv > k_proj",
                             "qkv > v_proj", "rope", "attention", "o_proj", "residual", "ffn_norm",
                             "gate_proj", "up_proj", "swiglu", "down_proj", "residual"}) {
      want.push_back(layer + " > " + step);
    }
  }
  for (const char* step : {" > final_norm", " > lm_head"}) want.push_back(fwd + step);
  want.push_back("argmax");

  std::vector<std::string> got;
  for (const nvtx_recorder::RecordedRange& r : nvtx_recorder::ranges()) {
    got.push_back(r.path);
    EXPECT_EQ(r.domain, "clockwork") << "range '" << r.path << "'";
  }
  EXPECT_EQ(got, want) << "the NVTX ranges of one next_token() call";
  EXPECT_EQ(nvtx_recorder::open_ranges(), 0) << "a range was left open";
}

// A fixture with one small checkpoint, shared by the tests below.
class ModelErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = tiny_config({2, false, false, std::nullopt, ""});
    weights_ = ref::random_weights(config_, test_seed(2300));
  }
  ModelConfig config_;
  Weights weights_;
};

TEST_F(ModelErrors, SequencesUpToTheContextRunAndLongerOnesThrow) {
  TempDir dir;
  write_checkpoint(dir.path(), config_, weights_, false);
  Model model = Model::load(dir.path());
  const int64_t n = config_.max_position_embeddings;
  const std::vector<int32_t> full =
      random_ids(static_cast<size_t>(n), config_.vocab_size, test_seed(2301));
  const ref::ForwardResult r =
      ref::Model(config_, ref::lookup_from_map(weights_)).forward(widen(full));
  EXPECT_TRUE(matches_reference("logits at the full context", model.forward(full),
                                to_vector(r.logits), {config_.vocab_size},
                                logits_tolerance(config_, n)));
  std::vector<int32_t> longer = full;
  longer.push_back(3);
  try {
    model.forward(longer);
    ADD_FAILURE() << "a sequence longer than max_position_embeddings was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos) << e.what();
  }
}

TEST_F(ModelErrors, BadIdsThrowClearly) {
  TempDir dir;
  write_checkpoint(dir.path(), config_, weights_, false);
  Model model = Model::load(dir.path());
  EXPECT_THROW(model.forward({}), std::invalid_argument);
  EXPECT_THROW(model.next_token({}), std::invalid_argument);
  for (int32_t bad : {-1, 97, 128000}) {
    try {
      model.forward({5, 6, bad, 7});
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("position 2"), std::string::npos) << msg;
    }
  }
  // The model still works after rejecting input.
  EXPECT_EQ(model.forward({5, 6, 7}).size(), 97u);
}

// Model::load must fail with a message naming the tensor (and, for a wrong shape or dtype, what
// was expected), before copying anything.
void expect_load_error(const fs::path& dir, const std::vector<std::string>& fragments) {
  try {
    Model::load(dir);
    ADD_FAILURE() << "the broken checkpoint loaded";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    for (const std::string& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

TEST_F(ModelErrors, MissingTensorIsNamed) {
  Weights w = weights_;
  w.erase("model.layers.1.mlp.up_proj.weight");
  TempDir dir;
  write_checkpoint(dir.path(), config_, w, true);
  expect_load_error(dir.path(), {"model.layers.1.mlp.up_proj.weight"});
}

TEST_F(ModelErrors, UntiedCheckpointWithoutLmHeadIsNamed) {
  Weights w = weights_;
  w.erase("lm_head.weight");
  TempDir dir;
  write_checkpoint(dir.path(), config_, w, false);
  expect_load_error(dir.path(), {"lm_head.weight"});
}

TEST_F(ModelErrors, WrongShapeIsNamedWithExpectedAndActual) {
  Weights w = weights_;
  w["model.layers.0.self_attn.k_proj.weight"] = torch::zeros({64, 64}, torch::kBFloat16);
  TempDir dir;
  write_checkpoint(dir.path(), config_, w, false);
  expect_load_error(dir.path(), {"model.layers.0.self_attn.k_proj.weight",
                                 "Expected: BF16 [32, 64]", "[64, 64]"});
}

TEST_F(ModelErrors, WrongDtypeIsNamed) {
  Weights w = weights_;
  w["model.norm.weight"] = w.at("model.norm.weight").to(torch::kFloat);
  TempDir dir;
  write_checkpoint(dir.path(), config_, w, false);
  expect_load_error(dir.path(), {"model.norm.weight", "BF16"});
}

TEST_F(ModelErrors, MissingConfigIsNamed) {
  TempDir dir;
  write_checkpoint(dir.path(), config_, weights_, false);
  fs::remove(dir.path() / "config.json");
  try {
    Model::load(dir.path());
    ADD_FAILURE() << "loaded without config.json";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace clockwork
