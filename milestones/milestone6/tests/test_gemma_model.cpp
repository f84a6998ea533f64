// Milestone 6: the whole Gemma 3 model on the device (GemmaModel: the embedding times sqrt(d),
// gemma_decoder_layer on every layer, the final norm and the tied or untied lm_head) on the two
// Gemma checkpoints transformers wrote (reference/tests/transformers), against the logits
// transformers computed on them and against the reference, step by step along transformers'
// greedy continuation.
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

// The kernels and transformers both compute in fp32 from the same bf16 weights; they differ in
// the order of every sum and in fast exp, which the layer test bounds op by op. Through the layers
// and the lm_head those roundings measure up to 3.3e-6 of the logits' rms (printed per step); a
// misread setting or a wiring mistake moves the logits by 0.3 of rms or more (the reference's
// transformers test). 2e-4 of rms leaves 60 times the measured error for other BLAS orders and
// GPUs and still separates mistakes by three orders of magnitude.
const Tolerance kLogits{0, 0,
                        "fp32 sums in another order and fast exp through every layer and the "
                        "lm_head; a wrong setting moves the logits by 0.3 of their rms or more",
                        2e-4};

class GemmaModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GemmaModelTest, GreedyStepsMatchTransformersAndTheReference) {
  const fs::path dir = kFixtures / GetParam();
  std::ifstream in(dir / "expected.json");
  ASSERT_TRUE(in) << "cannot read " << (dir / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);

  GemmaModel model = GemmaModel::load(dir);
  const ModelConfig& c = model.config();
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const ref::Model reference(c, ref::checkpoint_lookup(checkpoint));
  torch::NoGradGuard no_grad;

  std::vector<int32_t> ids;
  for (int64_t id : expected.at("prompt").get<std::vector<int64_t>>()) ids.push_back(static_cast<int32_t>(id));
  for (const nlohmann::json& step : expected.at("steps")) {
    SCOPED_TRACE("sequence length " + std::to_string(ids.size()));
    const std::vector<float> logits = model.forward(ids);
    const std::vector<float> want = step.at("logits").get<std::vector<float>>();
    const int64_t V = c.vocab_size;
    EXPECT_TRUE(matches_reference("logits vs transformers", logits, want, {V}, kLogits));
    const std::vector<int64_t> ids64(ids.begin(), ids.end());
    EXPECT_TRUE(matches_reference("logits vs the reference", logits,
                                  to_vector(reference.forward(ids64).logits), {V}, kLogits));
    int32_t best = 0;
    for (int32_t j = 1; j < static_cast<int32_t>(logits.size()); ++j) {
      if (logits[j] > logits[best]) best = j;
    }
    const int32_t token = step.at("token").get<int32_t>();
    EXPECT_EQ(best, token) << "transformers' top-2 margin is " << step.at("margin").get<double>();
    double worst = 0, rms = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      worst = std::max(worst, std::abs(static_cast<double>(logits[j]) - want[j]));
      rms += static_cast<double>(want[j]) * want[j];
    }
    rms = std::sqrt(rms / want.size());
    std::printf("%s at %zu tokens: max |logit - transformers| = %.3g (%.2g of rms)\n", GetParam(),
                ids.size(), worst, worst / rms);
    ids.push_back(token);
  }
}

INSTANTIATE_TEST_SUITE_P(Transformers, GemmaModelTest,
                         ::testing::Values("gemma3-local-global", "gemma3-scaled-untied"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(GemmaModel, RefusesALlamaCheckpointNamingItsFamily) {
  const fs::path dir = kFixtures / "llama-tied";
  try {
    GemmaModel::load(dir);
    ADD_FAILURE() << "a Llama checkpoint was loaded as Gemma";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("describes a llama model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

// The other way round: milestone 3's Llama pipeline would run a Gemma checkpoint without its
// extra norms and windows; it refuses it instead.
TEST(GemmaModel, TheLlamaPipelineRefusesAGemmaCheckpoint) {
  const fs::path dir = kFixtures / "gemma3-local-global";
  try {
    Model::load(dir);
    ADD_FAILURE() << "the Llama pipeline loaded a Gemma checkpoint";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("describes a gemma3 model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Llama family only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace clockwork
