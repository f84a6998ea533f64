// `clockwork generate` and `clockwork verify` against the libtorch reference: greedy generation
// on a tiny model must produce exactly ref::Model::generate_greedy's tokens, and verify must pass
// on it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <torch/types.h>

#include "kernels/model_config.h"
#include "harness/model/safetensors.h"
#include "harness/model/tokenizer.h"
#include "reference/model.h"
#include "harness/testing/cli_runner.h"

namespace clockwork::cli_test {
namespace {

namespace fs = std::filesystem;

class CliReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(make_temp_dir("cli-reference"));
    const RunResult r = run_cli({"tiny-model", "--out", model().string(), "--seed", "5"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
  }
  static fs::path model() { return *root_ / "tiny"; }

  void SetUp() override {
    const RunResult r = run_cli(
        {"generate", "--model", model().string(), "--prompt", "Hi", "--max-new-tokens", "1"});
    if (model_backend_missing(r)) {
      std::printf("CLOCKWORK-SKIP: %s", r.err.c_str());
      GTEST_SKIP() << "no device for this binary";
    }
  }

 private:
  static fs::path* root_;
};

fs::path* CliReference::root_ = nullptr;

// The reference model on the checkpoint's bf16 weights, as the test reads them itself.
ref::Model reference_model(const fs::path& dir) {
  const ModelConfig config = ModelConfig::from_file(dir / "config.json");
  const Checkpoint ckpt = Checkpoint::open(dir);
  std::map<std::string, torch::Tensor> weights;
  for (const ref::WeightSpec& spec : ref::weight_specs(config)) {
    const TensorInfo& t = ckpt.get(spec.name, DType::BF16, spec.shape);
    torch::Tensor w = torch::empty(spec.shape, torch::kBFloat16);
    std::memcpy(w.data_ptr(), t.data, t.nbytes);
    weights.emplace(spec.name, w);
  }
  return ref::Model(config, ref::lookup_from_map(std::move(weights)));
}

std::vector<int64_t> generated_ids(const std::string& out) {
  const size_t at = out.rfind("ids:");
  std::vector<int64_t> ids;
  if (at == std::string::npos) return ids;
  std::istringstream line(out.substr(at + 4));
  int64_t id;
  while (line >> id) ids.push_back(id);
  return ids;
}

TEST_F(CliReference, GreedyGenerationMatchesTheReference) {
  const ModelConfig config = ModelConfig::from_file(model() / "config.json");
  const Tokenizer tok = Tokenizer::from_file(model());
  const ref::Model reference = reference_model(model());
  const std::vector<int64_t> stops{tok.eos_id(), tok.eot_id()};
  struct Case {
    std::string prompt;
    bool chat;
  };
  for (const Case& c : {Case{"The clock in the hall", false}, Case{"What time is it?", true}}) {
    const std::vector<int32_t> prompt =
        c.chat ? tok.encode_chat({{"user", c.prompt}}) : tok.encode(c.prompt, false, true);
    const ref::GenerateResult expected =
        reference.generate_greedy(std::vector<int64_t>(prompt.begin(), prompt.end()), 12, stops);

    std::vector<std::string> args{"generate", "--model",    model().string(),
                                  "--prompt", c.prompt,     "--max-new-tokens",
                                  "12",       "--print-ids"};
    if (c.chat) args.push_back("--chat");
    const RunResult r = run_cli(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(generated_ids(r.out), expected.tokens) << "prompt: " << c.prompt << "\n" << r.out;

    // The text printed is the decoded tokens, without the stop token.
    std::vector<int32_t> shown(expected.tokens.begin(), expected.tokens.end());
    if (!shown.empty() && (shown.back() == tok.eos_id() || shown.back() == tok.eot_id())) {
      shown.pop_back();
    }
    EXPECT_EQ(r.out.substr(0, r.out.rfind("ids:")), tok.decode(shown) + "\n");
  }
}

TEST_F(CliReference, VerifyPassesOnACorrectModel) {
  const RunResult r = run_cli({"verify", "--model", model().string(), "--steps", "3"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("verify: PASS"), std::string::npos) << r.out;
  for (const char* row : {"layer 0", "layer 1", "final norm", "logits", "KV-cache check"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
}

// verify compares cached with uncached generation step by step, with either cache, and skips
// the comparison with --kv-cache none.
TEST_F(CliReference, VerifyComparesCachedWithUncachedSteps) {
  const RunResult paged = run_cli({"verify", "--model", model().string(), "--steps", "18",
                                   "--kv-cache", "paged", "--page-size", "4"});
  EXPECT_EQ(paged.code, 0) << paged.err << paged.out;
  const size_t section = paged.out.find("KV-cache check (paged KV cache");
  ASSERT_NE(section, std::string::npos) << paged.out;
  EXPECT_NE(paged.out.find("\n    18  ", section), std::string::npos)
      << "the cache check should cover all 18 steps\n" << paged.out;
  EXPECT_NE(paged.out.find("verify: PASS"), std::string::npos) << paged.out;
  const RunResult none =
      run_cli({"verify", "--model", model().string(), "--steps", "2", "--kv-cache", "none"});
  EXPECT_EQ(none.code, 0) << none.err << none.out;
  EXPECT_EQ(none.out.find("KV-cache check"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace clockwork::cli_test
