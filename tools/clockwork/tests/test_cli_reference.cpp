// `clockwork generate` and `clockwork verify` against the libtorch reference: greedy generation
// on a tiny model must produce exactly ref::Model::generate_greedy's tokens, and verify must pass
// on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
#include "tools/clockwork/tests/npy_reader.h"
#include "harness/check/temp_dir.h"

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
    remove_tree(*root_);
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

// How far a dumped row may be from the reference's logits. Both sides compute in fp32 from the
// same bf16 weights, so they differ only in the order sums are taken: about 1e-6 of the largest
// logit on these tiny models. The bound is 100 times that and still thousands of times below what
// a wrong row, a shifted step or a bf16 round trip of the logits would give (1e-2 and up).
constexpr double kDumpRelative = 1e-4;

// Empty when `row` (V values) matches `want` within kDumpRelative of max |want|; else the worst
// element.
std::string compare_row(const float* row, const torch::Tensor& want, const std::string& what) {
  const torch::Tensor w = want.to(torch::kFloat).contiguous();
  const float* ref = w.data_ptr<float>();
  const int64_t n = w.numel();
  double max_ref = 0, worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::fabs(double(ref[i])));
  for (int64_t i = 0; i < n; ++i) {
    const double diff = std::fabs(double(row[i]) - double(ref[i]));
    if (!(diff <= worst)) {
      worst = diff;
      at = i;
    }
  }
  if (worst <= kDumpRelative * max_ref) return "";
  return what + ": logit " + std::to_string(at) + " is " + std::to_string(row[at]) +
         ", the reference has " + std::to_string(ref[at]) + " (|Δ| " + std::to_string(worst) +
         " > " + std::to_string(kDumpRelative) + " x max |ref| " + std::to_string(max_ref) + ")";
}

// generate --dump-logits: row i is the logits the model computed at step i, which the reference
// reproduces from the same ids.
TEST_F(CliReference, GenerateDumpedLogitsMatchTheReference) {
  const ModelConfig config = ModelConfig::from_file(model() / "config.json");
  const Tokenizer tok = Tokenizer::from_file(model());
  const ref::Model reference = reference_model(model());
  const std::string prompt = "The clock in the hall";
  const std::vector<int32_t> ids = tok.encode(prompt, false, true);
  const ref::GenerateResult expected = reference.generate_greedy(
      std::vector<int64_t>(ids.begin(), ids.end()), 6, {tok.eos_id(), tok.eot_id()});

  const fs::path file = model().parent_path() / "generate-logits.npy";
  const RunResult r = run_cli({"generate", "--model", model().string(), "--prompt", prompt,
                               "--max-new-tokens", "6", "--print-ids", "--dump-logits",
                               file.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const Npy n = read_npy(file);
  ASSERT_EQ(n.problem, "");
  ASSERT_EQ(n.shape, (std::vector<uint64_t>{expected.logits.size(),
                                            static_cast<uint64_t>(config.vocab_size)}));
  for (size_t step = 0; step < expected.logits.size(); ++step) {
    EXPECT_EQ(compare_row(n.values.data() + step * config.vocab_size, expected.logits[step],
                          "step " + std::to_string(step)),
              "");
  }
}

// verify --dump-logits and --dump-reference-logits: one row per gate step for each side, on the
// same ids, and the reference's first row is exactly what ref::Model computes for the prompt.
TEST_F(CliReference, VerifyDumpsBothSidesLogits) {
  const ModelConfig config = ModelConfig::from_file(model() / "config.json");
  const fs::path mine = model().parent_path() / "verify-model.npy";
  const fs::path theirs = model().parent_path() / "verify-reference.npy";
  const RunResult r = run_cli({"verify", "--model", model().string(), "--steps", "3",
                               "--kv-cache", "none", "--dump-logits", mine.string(),
                               "--dump-reference-logits", theirs.string()});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const Npy a = read_npy(mine), b = read_npy(theirs);
  ASSERT_EQ(a.problem, "");
  ASSERT_EQ(b.problem, "");
  const uint64_t V = static_cast<uint64_t>(config.vocab_size);
  ASSERT_EQ(a.shape, (std::vector<uint64_t>{3, V}));
  ASSERT_EQ(b.shape, (std::vector<uint64_t>{3, V}));
  for (size_t step = 0; step < 3; ++step) {
    const torch::Tensor want =
        torch::from_blob(const_cast<float*>(b.values.data() + step * V),
                         {static_cast<int64_t>(V)}, torch::kFloat);
    EXPECT_EQ(compare_row(a.values.data() + step * V, want, "step " + std::to_string(step)), "");
  }
  const Tokenizer tok = Tokenizer::from_file(model());
  const std::vector<int32_t> ids = tok.encode("The capital of France is", false, true);
  const ref::ForwardResult first =
      reference_model(model()).forward(std::vector<int64_t>(ids.begin(), ids.end()));
  const torch::Tensor row0 = torch::from_blob(const_cast<float*>(b.values.data()),
                                              {static_cast<int64_t>(V)}, torch::kFloat);
  // The same libtorch ops on the same weights and ids: equal up to float noise.
  EXPECT_TRUE(torch::allclose(row0, first.logits.to(torch::kFloat), 1e-5, 1e-6))
      << "the reference file's first row is not the reference's logits of the prompt";

  EXPECT_EQ(check_error(run_cli({"verify", "--model", model().string(), "--dump-logits",
                                 mine.string(), "--dump-reference-logits", mine.string()}),
                        "verify", 2, {"the same file"}),
            "");
}

// Heads wider than d / h (Gemma 3's shapes: d = 1152, 4 heads of 256): tiny-model --head-dim
// writes such a checkpoint, generate matches the reference token for token, and verify passes,
// its KV-cache check included.
TEST_F(CliReference, HeadDimOtherThanHiddenOverHeads) {
  const fs::path dir = model().parent_path() / "wide-heads";
  const RunResult w = run_cli({"tiny-model", "--out", dir.string(), "--hidden", "64", "--heads",
                               "4", "--kv-heads", "2", "--head-dim", "20", "--seed", "7"});
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_NE(w.out.find("h_d=20"), std::string::npos) << w.out;
  const ModelConfig config = ModelConfig::from_file(dir / "config.json");
  ASSERT_EQ(config.head_dim, 20);
  ASSERT_NE(config.num_heads * config.head_dim, config.hidden_size);

  const Tokenizer tok = Tokenizer::from_file(dir);
  const ref::Model reference = reference_model(dir);
  const std::string prompt = "The clock in the hall";
  const std::vector<int32_t> ids = tok.encode(prompt, false, true);
  const ref::GenerateResult expected = reference.generate_greedy(
      std::vector<int64_t>(ids.begin(), ids.end()), 10, {tok.eos_id(), tok.eot_id()});
  const RunResult g = run_cli({"generate", "--model", dir.string(), "--prompt", prompt,
                               "--max-new-tokens", "10", "--print-ids"});
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(generated_ids(g.out), expected.tokens) << g.out;

  const RunResult v = run_cli({"verify", "--model", dir.string(), "--steps", "4"});
  EXPECT_EQ(v.code, 0) << v.err << v.out;
  EXPECT_NE(v.out.find("verify: PASS"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("KV-cache check"), std::string::npos) << v.out;

  // --head-dim must be even; --preset fixes it.
  EXPECT_EQ(check_error(run_cli({"tiny-model", "--out", (dir.string() + "-odd"), "--head-dim",
                                 "15"}),
                        "tiny-model", 2, {"--head-dim 15", "odd"}),
            "");
}

}  // namespace
}  // namespace clockwork::cli_test
