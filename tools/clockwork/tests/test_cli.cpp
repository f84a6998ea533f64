// Tests of the `clockwork` program, run as a user runs it: tiny-model writes checkpoints that
// the course's readers load, tokenize and inspect report what the files hold, every bad input
// ends in one clear error line with the documented exit code, and generation is deterministic.
// The comparison of generated tokens with the libtorch reference is in test_cli_reference.cpp.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/model_config.h"
#include "harness/model/safetensors.h"
#include "harness/model/tokenizer.h"
#include "harness/testing/cli_runner.h"
#include "tools/clockwork/tests/npy_reader.h"
#include "harness/check/temp_dir.h"

namespace clockwork::cli_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Shared tiny models: d = 64, 2 layers, written once for the whole suite.
// ---------------------------------------------------------------------------------------------

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(make_temp_dir("cli-tests"));
    // A short context, so a prompt longer than it is cheap to write.
    const RunResult r = run_cli({"tiny-model", "--out", model().string(), "--context", "48"});
    ASSERT_EQ(r.code, 0) << r.err << r.out;
  }
  static void TearDownTestSuite() {
    remove_tree(*root_);
    delete root_;
  }
  static const fs::path& root() { return *root_; }
  static fs::path model() { return *root_ / "tiny"; }

  // A copy of the shared model that a test may damage.
  static fs::path copy_of_model(const std::string& name) {
    const fs::path dir = root() / name;
    fs::copy(model(), dir, fs::copy_options::recursive);
    return dir;
  }

  // Skips the calling test when the binary's backend cannot run here (clockwork-cuda without a
  // GPU); the marker makes ctest report the binary as skipped.
  static bool backend_missing() {
    const RunResult r = run_cli(
        {"generate", "--model", model().string(), "--prompt", "Hi", "--max-new-tokens", "1"});
    if (model_backend_missing(r)) {
      std::printf("CLOCKWORK-SKIP: %s", r.err.c_str());
      return true;
    }
    return false;
  }

 private:
  static fs::path* root_;
};

fs::path* Cli::root_ = nullptr;

// `verify` exists only in builds with the libtorch reference.
constexpr bool kHaveVerify = CLOCKWORK_CLI_HAVE_VERIFY;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

// The tensors a Llama checkpoint of this configuration holds, written out independently of the
// program's own list.
std::vector<std::pair<std::string, std::vector<int64_t>>> llama_tensors(const ModelConfig& c) {
  const int64_t d = c.hidden_size, hd = c.head_dim, ff = c.intermediate_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> t{
      {"model.embed_tokens.weight", {c.vocab_size, d}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {d}});
    t.push_back({p + "self_attn.q_proj.weight", {c.num_heads * hd, d}});
    t.push_back({p + "self_attn.k_proj.weight", {c.num_kv_heads * hd, d}});
    t.push_back({p + "self_attn.v_proj.weight", {c.num_kv_heads * hd, d}});
    t.push_back({p + "self_attn.o_proj.weight", {d, c.num_heads * hd}});
    t.push_back({p + "post_attention_layernorm.weight", {d}});
    t.push_back({p + "mlp.gate_proj.weight", {ff, d}});
    t.push_back({p + "mlp.up_proj.weight", {ff, d}});
    t.push_back({p + "mlp.down_proj.weight", {d, ff}});
  }
  t.push_back({"model.norm.weight", {d}});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {c.vocab_size, d}});
  return t;
}

// The ids printed by `tokenize` ("N tokens: 1 2 3").
std::vector<int32_t> printed_ids(const std::string& out) {
  std::istringstream first(out.substr(0, out.find('\n')));
  std::string word;
  first >> word >> word;  // "N" "tokens:"
  std::vector<int32_t> ids;
  int32_t id;
  while (first >> id) ids.push_back(id);
  return ids;
}

// The "ids: ..." line of `generate --print-ids`.
std::vector<int32_t> generated_ids(const std::string& out) {
  const size_t at = out.rfind("ids:");
  std::vector<int32_t> ids;
  if (at == std::string::npos) return ids;
  std::istringstream line(out.substr(at + 4));
  int32_t id;
  while (line >> id) ids.push_back(id);
  return ids;
}

// ---------------------------------------------------------------------------------------------
// tiny-model
// ---------------------------------------------------------------------------------------------

TEST_F(Cli, TinyModelWritesACheckpointTheReadersLoad) {
  const ModelConfig c = ModelConfig::from_file(model() / "config.json");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 1024);
  EXPECT_EQ(c.max_position_embeddings, 48);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.rope_scaling.has_value());

  const Checkpoint ckpt = Checkpoint::open(model());
  const auto expected = llama_tensors(c);
  EXPECT_EQ(ckpt.size(), expected.size());
  for (const auto& [name, shape] : expected) {
    EXPECT_NO_THROW(ckpt.get(name, DType::BF16, shape)) << name;
  }
  EXPECT_TRUE(fs::exists(model() / "model.safetensors"));
  EXPECT_FALSE(fs::exists(model() / "model.safetensors.index.json"));
  for (const char* f : {"generation_config.json", "tokenizer_config.json", "tokenizer.json",
                        "original/tokenizer.model"}) {
    EXPECT_TRUE(fs::exists(model() / f)) << f;
  }
  const json gen = json::parse(read_file(model() / "generation_config.json"));
  EXPECT_EQ(gen["bos_token_id"].get<int64_t>(), c.bos_token_id);
  // Nothing is left behind from the temporary directory.
  for (const auto& entry : fs::directory_iterator(root())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST_F(Cli, TinyModelWeightsHaveRealisticScales) {
  const Checkpoint ckpt = Checkpoint::open(model());
  // Mean and standard deviation of the first `count` values (all by default).
  auto stats = [&](const std::string& name, size_t count = SIZE_MAX) {
    const std::vector<float> v = to_float32(ckpt.get(name));
    count = std::min(count, v.size());
    double sum = 0, sq = 0;
    for (size_t i = 0; i < count; ++i) {
      sum += v[i];
      sq += double(v[i]) * v[i];
    }
    const double mean = sum / count;
    return std::pair<double, double>{mean, std::sqrt(sq / count - mean * mean)};
  };
  // Rows of ordinary tokens (ids below 768, the first special token).
  auto [embed_mean, embed_std] = stats("model.embed_tokens.weight", 768 * 64);
  EXPECT_NEAR(embed_mean, 0.0, 0.002);
  EXPECT_NEAR(embed_std, 0.02, 0.002);
  // Reserved special tokens were never trained in Llama 3: their rows are nearly zero.
  const Tokenizer tok = Tokenizer::from_file(model());
  const std::vector<float> lm_head = to_float32(ckpt.get("lm_head.weight"));
  const int32_t reserved = tok.special_id("<|reserved_special_token_100|>");
  const int32_t eot = tok.eot_id();
  double reserved_sq = 0, eot_sq = 0;
  for (int j = 0; j < 64; ++j) {
    reserved_sq += std::pow(lm_head[reserved * 64 + j], 2);
    eot_sq += std::pow(lm_head[eot * 64 + j], 2);
  }
  EXPECT_LT(reserved_sq, eot_sq / 100);
  // Projections: 0.02 at d = 4096, scaled by sqrt(4096 / in_features) = 8 at d = 64.
  auto [q_mean, q_std] = stats("model.layers.0.self_attn.q_proj.weight");
  EXPECT_NEAR(q_std, 0.16, 0.01);
  // Norm weights near one, but not all one (a forgotten γ must show).
  auto [n_mean, n_std] = stats("model.layers.1.post_attention_layernorm.weight");
  EXPECT_NEAR(n_mean, 1.0, 0.05);
  EXPECT_GT(n_std, 0.03);
}

TEST_F(Cli, TinyModelTokenizerFitsTheConfigAndRoundTrips) {
  const ModelConfig c = ModelConfig::from_file(model() / "config.json");
  const Tokenizer from_json = Tokenizer::from_file(model() / "tokenizer.json");
  const Tokenizer from_model = Tokenizer::from_file(model() / "original" / "tokenizer.model");
  EXPECT_EQ(from_json.vocab_size(), c.vocab_size);
  EXPECT_EQ(from_model.vocab_size(), c.vocab_size);
  EXPECT_EQ(from_json.special_base(), 768);
  EXPECT_EQ(c.bos_token_id, from_json.bos_id());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{from_json.eos_id(), from_json.eot_id()}));
  for (const std::string text :
       {"The clock in the hall struck seven.", "Grüße, 世界! 🙂 1234567",
        "  spaces\n\nand\ttabs ", "It's a test, isn't it?"}) {
    const std::vector<int32_t> ids = from_json.encode(text);
    EXPECT_EQ(ids, from_model.encode(text)) << text;
    EXPECT_EQ(from_json.decode(ids), text);
  }
  // The corpus is English: common words are single tokens.
  EXPECT_EQ(from_json.encode(" the").size(), 1u);
}

TEST_F(Cli, TinyModelShardedHoldsTheSameWeights) {
  const fs::path dir = root() / "sharded";
  const RunResult r =
      run_cli({"tiny-model", "--out", dir.string(), "--context", "48", "--shards", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(fs::exists(dir / ("model-0000" + std::to_string(i) + "-of-00003.safetensors")));
  }
  const Checkpoint sharded = Checkpoint::open(dir);
  const Checkpoint single = Checkpoint::open(model());
  EXPECT_EQ(sharded.files().size(), 3u);
  ASSERT_EQ(sharded.names(), single.names());
  for (const std::string& name : single.names()) {
    const TensorInfo& a = single.get(name);
    const TensorInfo& b = sharded.get(name);
    ASSERT_EQ(a.nbytes, b.nbytes) << name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name << " differs between layouts";
  }
  const json index = json::parse(read_file(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), sharded.total_bytes());
}

TEST_F(Cli, TinyModelTiedHasNoLmHead) {
  const fs::path dir = root() / "tied";
  ASSERT_EQ(run_cli({"tiny-model", "--out", dir.string(), "--tie", "--layers", "1"}).code, 0);
  const ModelConfig c = ModelConfig::from_file(dir / "config.json");
  EXPECT_TRUE(c.tie_word_embeddings);
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_FALSE(ckpt.contains("lm_head.weight"));
  EXPECT_EQ(ckpt.size(), llama_tensors(c).size());
  const RunResult inspect = run_cli({"inspect", "--model", dir.string()});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("tied embeddings    yes"), std::string::npos) << inspect.out;
}

TEST_F(Cli, TinyModelSeedDecidesTheWeights) {
  const fs::path a = root() / "seed-a", b = root() / "seed-b", c = root() / "seed-c";
  ASSERT_EQ(run_cli({"tiny-model", "--out", a.string(), "--layers", "1", "--seed", "7"}).code, 0);
  ASSERT_EQ(run_cli({"tiny-model", "--out", b.string(), "--layers", "1", "--seed", "7"}).code, 0);
  ASSERT_EQ(run_cli({"tiny-model", "--out", c.string(), "--layers", "1", "--seed", "8"}).code, 0);
  EXPECT_EQ(read_file(a / "model.safetensors"), read_file(b / "model.safetensors"));
  EXPECT_NE(read_file(a / "model.safetensors"), read_file(c / "model.safetensors"));
}

TEST_F(Cli, TinyModelVocabularyIsExactlyTheRequestedSize) {
  // 700 needs fewer merges than the corpus offers; 6000 needs more, filled with made-up words.
  for (int vocab : {512, 700, 6000}) {
    const fs::path dir = root() / ("vocab-" + std::to_string(vocab));
    const RunResult r = run_cli(
        {"tiny-model", "--out", dir.string(), "--layers", "1", "--vocab", std::to_string(vocab)});
    ASSERT_EQ(r.code, 0) << r.err;
    const ModelConfig c = ModelConfig::from_file(dir / "config.json");
    const Tokenizer tok = Tokenizer::from_file(dir);
    EXPECT_EQ(c.vocab_size, vocab);
    EXPECT_EQ(tok.vocab_size(), vocab);
    EXPECT_EQ(tok.special_base(), vocab - 256);
    EXPECT_EQ(c.bos_token_id, vocab - 256);
    const std::string text = "Once upon a time, the clocks ran backwards.";
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
    EXPECT_EQ(Tokenizer::from_file(dir / "original" / "tokenizer.model").encode(text),
              tok.encode(text));
  }
}

TEST_F(Cli, TinyModelRefusesToOverwrite) {
  const fs::path dir = root() / "occupied";
  fs::create_directories(dir);
  write_file(dir / "notes.txt", "mine");
  RunResult r = run_cli({"tiny-model", "--out", dir.string()});
  EXPECT_EQ(check_error(r, "tiny-model", 1, {dir.string(), "--force"}), "");
  // --force replaces only something that looks like a model.
  r = run_cli({"tiny-model", "--out", dir.string(), "--force"});
  EXPECT_EQ(check_error(r, "tiny-model", 1, {"config.json"}), "");
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));

  const fs::path again = root() / "replaced";
  ASSERT_EQ(run_cli({"tiny-model", "--out", again.string(), "--layers", "1"}).code, 0);
  r = run_cli({"tiny-model", "--out", again.string(), "--layers", "3", "--force"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ModelConfig::from_file(again / "config.json").num_layers, 3);
  // An existing empty directory is fine.
  fs::create_directories(root() / "empty");
  EXPECT_EQ(run_cli({"tiny-model", "--out", (root() / "empty").string(), "--layers", "1"}).code, 0);
}

TEST_F(Cli, TinyModelRejectsBadOptions) {
  const std::string out = (root() / "never").string();
  struct Case {
    std::vector<std::string> args;
    std::string mention;
  };
  const std::vector<Case> cases{
      {{"--vocab", "500"}, "--vocab"},
      {{"--hidden", "60", "--heads", "8"}, "--heads"},
      {{"--hidden", "64", "--heads", "64"}, "odd"},
      {{"--heads", "6", "--kv-heads", "4", "--hidden", "96"}, "--kv-heads"},
      {{"--preset", "llama2"}, "llama3-8b, llama3.1-8b, llama3.2-3b, llama3.2-1b"},
      {{"--preset", "llama3-8b", "--hidden", "128"}, "--hidden"},
      {{"--preset", "llama3.2-1b", "--head-dim", "128"}, "--head-dim"},
      {{"--preset", "llama3.2-1b", "--layers", "17"}, "--layers"},
      {{"--head-dim", "15"}, "--head-dim 15"},
      {{"--layers", "two"}, "--layers"},
      {{"--layers", "0"}, "--layers"},
      {{"--shards", "99"}, "--shards"},
      {{"--layers"}, "--layers"},
      {{"--colour", "blue"}, "--colour"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"tiny-model", "--out", out};
    args.insert(args.end(), c.args.begin(), c.args.end());
    EXPECT_EQ(check_error(run_cli(args), "tiny-model", 2, {c.mention}), "") << c.args[0];
  }
  EXPECT_EQ(check_error(run_cli({"tiny-model"}), "tiny-model", 2, {"--out"}), "");
  EXPECT_FALSE(fs::exists(out));
}

// ---------------------------------------------------------------------------------------------
// tokenize and inspect
// ---------------------------------------------------------------------------------------------

TEST_F(Cli, TokenizeEncodesLikeTheTokenizer) {
  const Tokenizer tok = Tokenizer::from_file(model());
  const std::string text = "The clock struck 12, and the bells rang.";
  const RunResult r = run_cli({"tokenize", "--model", model().string(), "--text", text});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(printed_ids(r.out), ids) << r.out;
  // One line per token after the id list, each with the token's text.
  EXPECT_EQ(static_cast<size_t>(std::count(r.out.begin(), r.out.end(), '\n')), ids.size() + 1);
  EXPECT_NE(r.out.find("\"" + tok.token_bytes(ids[0]) + "\""), std::string::npos) << r.out;

  // The rank file gives the same ids; --chat wraps the text in the template.
  const RunResult m =
      run_cli({"tokenize", "--tokenizer", (model() / "original" / "tokenizer.model").string(),
               "--text", text});
  EXPECT_EQ(printed_ids(m.out), ids);
  const RunResult chat =
      run_cli({"tokenize", "--model", model().string(), "--chat", "--text", text});
  EXPECT_EQ(printed_ids(chat.out), tok.encode_chat({{"user", text}}));
  EXPECT_NE(chat.out.find("<|eot_id|>"), std::string::npos);
  const RunResult bos = run_cli({"tokenize", "--model", model().string(), "--bos", "--text", "x"});
  EXPECT_EQ(printed_ids(bos.out).front(), tok.bos_id());
}

TEST_F(Cli, TokenizeDecodes) {
  const Tokenizer tok = Tokenizer::from_file(model());
  const std::string text = "Bread, cheese and honey.";
  std::vector<std::string> args{"tokenize", "--model", model().string(), "--decode"};
  for (int32_t id : tok.encode(text)) args.push_back(std::to_string(id));
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text + "\n");
}

TEST_F(Cli, InspectShowsConfigTensorsAndSize) {
  const RunResult r = run_cli({"inspect", "--model", model().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const Checkpoint ckpt = Checkpoint::open(model());
  for (const std::string& name : ckpt.names())
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  EXPECT_NE(r.out.find("[224, 64]"), std::string::npos);
  EXPECT_NE(r.out.find("BF16"), std::string::npos);
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos);
  EXPECT_NE(r.out.find("tied embeddings    no"), std::string::npos);
  // The parameter count, with thousands separators.
  std::string count = std::to_string(ckpt.num_parameters());
  for (int i = static_cast<int>(count.size()) - 3; i > 0; i -= 3) count.insert(i, ",");
  EXPECT_NE(r.out.find("parameters         " + count), std::string::npos) << count << "\n" << r.out;
  EXPECT_NE(r.out.find("<|eot_id|>"), std::string::npos);
}

// A Gemma 3 checkpoint written by transformers (reference/tests/transformers): inspect reads its
// config.json and finds every tensor a Gemma layer needs, none left over.
TEST(CliGemma, InspectReadsATransformersGemma3Checkpoint) {
  const fs::path dir = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "gemma3-local-global";
  const RunResult r = run_cli({"inspect", "--model", dir.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("family             gemma3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer types        LLGL (L local, G global)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sliding_window     4 positions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rope_local_theta   10000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("query_pre_attn_scalar 32^-1/2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.layers.3.self_attn.k_norm.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.layers.0.post_feedforward_layernorm.weight"), std::string::npos);
  EXPECT_EQ(r.out.find("not used by the model"), std::string::npos)
      << "every tensor of the Gemma checkpoint belongs to the model:\n" << r.out;
  const RunResult llama = run_cli(
      {"inspect", "--model", (fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "llama-tied").string()});
  ASSERT_EQ(llama.code, 0) << llama.err;
  EXPECT_NE(llama.out.find("family             llama"), std::string::npos) << llama.out;
  EXPECT_EQ(llama.out.find("layer types"), std::string::npos) << llama.out;
}

// The prompt of a transformers-written fixture (its expected.json), as verify's --ids.
std::string fixture_prompt_ids(const fs::path& dir) {
  std::ifstream in(dir / "expected.json");
  const json expected = json::parse(in);  // kept alive: the loop below walks one of its members
  std::string ids;
  for (const json& id : expected.at("prompt")) {
    ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
  }
  return ids;
}

// verify on the Gemma checkpoint transformers wrote: GemmaModel (the student's milestone-6 code)
// against the reference, then with its KV cache against itself uncached, through --ids since
// the fixture has no tokenizer; then a Llama one the same way, and a malformed --ids.
TEST(CliGemma, VerifyRunsBothFamiliesFromTokenIds) {
  if (!kHaveVerify) GTEST_SKIP() << "built without libtorch: no verify";
  const fs::path gemma = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "gemma3-local-global";
  const RunResult r = run_cli(
      {"verify", "--model", gemma.string(), "--ids", fixture_prompt_ids(gemma), "--steps", "3"});
  if (model_backend_missing(r)) GTEST_SKIP() << "no GPU for the CUDA build";
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* line : {"(Gemma 3, 4 layers", "layer 3", "final norm", "verify: PASS",
                           "KV-cache check (3 local layers x a ring of 4 slots"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  const fs::path llama = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "llama-tied";
  const RunResult l = run_cli({"verify", "--model", llama.string(), "--ids",
                               fixture_prompt_ids(llama), "--steps", "2", "--kv-cache", "none"});
  ASSERT_EQ(l.code, 0) << l.err << l.out;
  EXPECT_NE(l.out.find("(Llama, 3 layers"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("verify: PASS"), std::string::npos) << l.out;
  EXPECT_EQ(check_error(run_cli({"verify", "--model", gemma.string(), "--ids", "5,x,7"}), "verify",
                        2, {"--ids", "'x' (element 2)", "[0, 320)"}),
            "");
  EXPECT_EQ(check_error(run_cli({"verify", "--model", gemma.string(), "--ids", "5,320"}), "verify",
                        2, {"'320'"}),
            "");
}

// The same Gemma checkpoint laid out as Gemma3ForConditionalGeneration writes it (transformers
// 4.52 and later): config.json nests the text model under text_config, its tensors are under
// "model.language_model.", and a vision tower sits beside them. inspect and verify run it as
// the text model and leave the vision tower out.
TEST(CliGemma, AMultimodalCheckpointRunsAsItsTextModel) {
  const fs::path fixture = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "gemma3-local-global";
  TempDir dir("clockwork-cli-mm");
  std::ifstream in(fixture / "config.json");
  json text = json::parse(in);
  text.erase("architectures");
  const json config = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                       {"model_type", "gemma3"},
                       {"eos_token_id", text.at("eos_token_id")},
                       {"text_config", text},
                       {"vision_config", {{"model_type", "siglip_vision_model"}}}};
  std::ofstream(dir.path() / "config.json") << config.dump(1);
  const clockwork::Checkpoint ckpt = clockwork::Checkpoint::open(fixture);
  std::vector<clockwork::TensorData> tensors;
  for (const std::string& name : ckpt.names()) {
    const clockwork::TensorInfo& t = ckpt.get(name);
    clockwork::TensorData copy;
    copy.name = "model.language_model." + name.substr(std::string("model.").size());
    copy.dtype = t.dtype;
    copy.shape = t.shape;
    copy.bytes.assign(t.data, t.data + t.nbytes);
    tensors.push_back(std::move(copy));
  }
  tensors.push_back(clockwork::TensorData::from_floats(
      "model.vision_tower.vision_model.post_layernorm.weight", clockwork::DType::BF16, {3},
      {0.5f, -1.0f, 2.0f}));
  clockwork::write_safetensors(dir.path() / "model.safetensors", tensors);

  const RunResult r = run_cli({"inspect", "--model", dir.path().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("family             gemma3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.layers.3.self_attn.k_norm.weight"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not used by the model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(1 more tensor beside the text model, not read"), std::string::npos)
      << r.out;

  if (!kHaveVerify) GTEST_SKIP() << "built without libtorch: no verify";
  const RunResult v = run_cli({"verify", "--model", dir.path().string(), "--ids",
                               fixture_prompt_ids(fixture), "--steps", "2"});
  if (model_backend_missing(v)) GTEST_SKIP() << "no GPU for the CUDA build";
  ASSERT_EQ(v.code, 0) << v.err << v.out;
  EXPECT_NE(v.out.find("verify: PASS"), std::string::npos) << v.out;
}

// The greedy tokens transformers chose on a checkpoint it wrote (its expected.json), as
// generate's "ids:" line prints them.
std::string fixture_greedy_ids(const fs::path& dir) {
  std::ifstream in(dir / "expected.json");
  const json expected = json::parse(in);
  std::string ids = "ids:";
  for (const json& step : expected.at("steps"))
    ids += " " + std::to_string(step.at("token").get<int64_t>());
  return ids;
}

// generate on the Gemma 3 checkpoints transformers wrote, from token ids (they have no
// tokenizer): greedy with the KV cache (the default: a ring of sliding_window slots on local
// layers; the local-global prompt of 11 tokens is already past its window of 4) and without,
// both giving transformers' tokens. Then what GemmaModel does not offer is refused by name.
TEST(CliGemma, GenerateGivesTransformersGreedyTokens) {
  for (const char* name : {"gemma3-local-global", "gemma3-scaled-untied"}) {
    SCOPED_TRACE(name);
    const fs::path dir = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / name;
    const std::string want = fixture_greedy_ids(dir);
    for (const char* cache : {"contiguous", "none"}) {
      SCOPED_TRACE(cache);
      const RunResult r =
          run_cli({"generate", "--model", dir.string(), "--ids", fixture_prompt_ids(dir),
                   "--max-new-tokens", "6", "--print-ids", "--kv-cache", cache});
      if (model_backend_missing(r)) GTEST_SKIP() << "no GPU for the CUDA build";
      ASSERT_EQ(r.code, 0) << r.err << r.out;
      EXPECT_NE(r.out.find(want + "\n"), std::string::npos) << want << "\n" << r.out;
      EXPECT_NE(r.err.find("(Gemma 3)"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(std::string(cache) == "none" ? "KV cache: none"
                                                        : " x a ring of "),
                std::string::npos)
          << r.err;
    }
  }
  const fs::path gemma = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "gemma3-local-global";
  const std::string ids = fixture_prompt_ids(gemma);
  EXPECT_EQ(check_error(run_cli({"generate", "--model", gemma.string(), "--ids", ids,
                                 "--kv-cache", "paged"}),
                        "generate", 2, {"--kv-cache paged", "Gemma 3"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", gemma.string(), "--ids", ids,
                                 "--cuda-graphs"}),
                        "generate", 2, {"--cuda-graphs"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", gemma.string(), "--ids", ids, "--prompt",
                                 "hi"}),
                        "generate", 2, {"--ids", "--prompt"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", gemma.string(), "--ids", "5,320"}),
                        "generate", 2, {"--ids", "'320'", "[0, 320)"}),
            "");
}

// generate --prompt and --chat on Gemma 3: the transformers-written checkpoint, its vocabulary
// grown to the test Gemma tokenizer's (the new embedding rows repeat the old ones) and that
// tokenizer.json beside it. The prompt must go through Gemma's tokenizer and chat template: the
// prompt length generate reports is that of the template's ids, and generating from those ids
// by hand gives the same tokens.
TEST(CliGemma, ChatPromptGoesThroughGemmasTokenizerAndTemplate) {
  const fs::path fixture = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / "gemma3-local-global";
  const fs::path tokenizer_json = fs::path(CLOCKWORK_GEMMA_TOKENIZER) / "tokenizer.json";
  const clockwork::Tokenizer tokenizer = clockwork::Tokenizer::from_file(tokenizer_json);
  TempDir dir("clockwork-cli-gemma-chat");
  std::ifstream in(fixture / "config.json");
  json config = json::parse(in);
  ASSERT_TRUE(config.at("tie_word_embeddings").get<bool>()) << "the test grows one table only";
  const int64_t old_vocab = config.at("vocab_size").get<int64_t>();
  const int64_t vocab = tokenizer.vocab_size();
  ASSERT_GT(vocab, old_vocab);
  config["vocab_size"] = vocab;
  std::ofstream(dir.path() / "config.json") << config.dump(1);
  fs::copy_file(tokenizer_json, dir.path() / "tokenizer.json");
  const clockwork::Checkpoint ckpt = clockwork::Checkpoint::open(fixture);
  std::vector<clockwork::TensorData> tensors;
  for (const std::string& name : ckpt.names()) {
    const clockwork::TensorInfo& t = ckpt.get(name);
    clockwork::TensorData copy;
    copy.name = name;
    copy.dtype = t.dtype;
    copy.shape = t.shape;
    copy.bytes.assign(t.data, t.data + t.nbytes);
    if (name == "model.embed_tokens.weight") {
      const size_t row = t.nbytes / static_cast<size_t>(old_vocab);
      for (int64_t r = old_vocab; r < vocab; ++r) {
        const size_t from = static_cast<size_t>(r % old_vocab) * row;
        copy.bytes.insert(copy.bytes.end(), t.data + from, t.data + from + row);
      }
      copy.shape[0] = vocab;
    }
    tensors.push_back(std::move(copy));
  }
  clockwork::write_safetensors(dir.path() / "model.safetensors", tensors);

  const std::string prompt = "Tell me the time, please.";
  const std::string system = "You are a clock.";
  const std::vector<int32_t> want_ids =
      tokenizer.encode_chat({{"system", system}, {"user", prompt}});
  ASSERT_EQ(want_ids.front(), tokenizer.bos_id());
  const RunResult chat =
      run_cli({"generate", "--model", dir.path().string(), "--prompt", prompt, "--chat",
               "--system", system, "--max-new-tokens", "4", "--print-ids"});
  if (model_backend_missing(chat)) GTEST_SKIP() << "no GPU for the CUDA build";
  ASSERT_EQ(chat.code, 0) << chat.err << chat.out;
  EXPECT_NE(chat.err.find("prompt: " + std::to_string(want_ids.size()) + " tokens (chat template)"),
            std::string::npos)
      << "Gemma's template gives " << want_ids.size() << " ids\n" << chat.err;
  std::string ids_arg;
  for (int32_t id : want_ids) ids_arg += (ids_arg.empty() ? "" : ",") + std::to_string(id);
  const RunResult by_ids = run_cli({"generate", "--model", dir.path().string(), "--ids", ids_arg,
                                    "--max-new-tokens", "4", "--print-ids"});
  ASSERT_EQ(by_ids.code, 0) << by_ids.err << by_ids.out;
  const size_t at = by_ids.out.find("ids:");
  ASSERT_NE(at, std::string::npos) << by_ids.out;
  const std::string tokens = by_ids.out.substr(at, by_ids.out.find('\n', at) - at);
  EXPECT_NE(chat.out.find(tokens), std::string::npos)
      << "--chat generated other tokens than its template's ids give\n" << chat.out << "\nvs\n"
      << by_ids.out;

  // A plain prompt starts with <bos>, as Gemma's tokenizer adds it.
  const RunResult plain = run_cli({"generate", "--model", dir.path().string(), "--prompt", prompt,
                                   "--max-new-tokens", "2"});
  ASSERT_EQ(plain.code, 0) << plain.err << plain.out;
  EXPECT_NE(plain.err.find("prompt: " + std::to_string(tokenizer.encode(prompt).size() + 1) +
                           " tokens"),
            std::string::npos)
      << plain.err;
}

// ---------------------------------------------------------------------------------------------
// Bad input: one line, the right exit code, naming the problem
// ---------------------------------------------------------------------------------------------

TEST_F(Cli, MissingModelDirectory) {
  const std::string missing = (root() / "no-such-model").string();
  EXPECT_EQ(check_error(run_cli({"inspect", "--model", missing}), "inspect", 1, {missing}), "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", missing, "--prompt", "hi"}), "generate", 1,
                        {missing}),
            "");
  EXPECT_EQ(check_error(run_cli({"tokenize", "--model", missing, "--text", "hi"}), "tokenize", 1,
                        {missing}),
            "");
  if (kHaveVerify) {
    EXPECT_EQ(check_error(run_cli({"verify", "--model", missing}), "verify", 1, {missing}), "");
  }
}

TEST_F(Cli, MissingOrMalformedConfig) {
  const fs::path no_config = copy_of_model("no-config");
  fs::remove(no_config / "config.json");
  EXPECT_EQ(check_error(run_cli({"inspect", "--model", no_config.string()}), "inspect", 1,
                        {"config.json", "not found"}),
            "");

  const fs::path bad = copy_of_model("bad-config");
  write_file(bad / "config.json", "{\"hidden_size\": 64, \"num_hidden_layers\": ");
  EXPECT_EQ(check_error(run_cli({"inspect", "--model", bad.string()}), "inspect", 1,
                        {"config.json", "not valid JSON"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", bad.string(), "--prompt", "hi"}),
                        "generate", 1, {"config.json"}),
            "");

  const fs::path wrong = copy_of_model("wrong-config");
  json j = json::parse(read_file(model() / "config.json"));
  j["num_attention_heads"] = 3;
  write_file(wrong / "config.json", j.dump());
  EXPECT_EQ(check_error(run_cli({"inspect", "--model", wrong.string()}), "inspect", 1,
                        {"config.json", "num_attention_heads"}),
            "");
}

TEST_F(Cli, TruncatedSafetensors) {
  const fs::path dir = copy_of_model("truncated");
  const std::string bytes = read_file(dir / "model.safetensors");
  write_file(dir / "model.safetensors", bytes.substr(0, bytes.size() / 2));
  for (const std::string cmd : {"inspect", "generate", "verify"}) {
    if (cmd == "verify" && !kHaveVerify) continue;
    std::vector<std::string> args{cmd, "--model", dir.string()};
    if (cmd == "generate") args.insert(args.end(), {"--prompt", "hi"});
    EXPECT_EQ(check_error(run_cli(args), cmd, 1, {"model.safetensors"}), "");
  }
  // Even the header cut short.
  write_file(dir / "model.safetensors", bytes.substr(0, 20));
  EXPECT_EQ(check_error(run_cli({"inspect", "--model", dir.string()}), "inspect", 1,
                        {"model.safetensors"}),
            "");
}

// Rewrites the checkpoint in `dir` with one tensor replaced.
void replace_tensor(const fs::path& dir, const std::string& name, DType dtype,
                    std::vector<int64_t> shape) {
  std::vector<TensorData> tensors;
  {
    const Checkpoint ckpt = Checkpoint::open(dir);
    for (const std::string& n : ckpt.names()) {
      const TensorInfo& t = ckpt.get(n);
      if (n == name) {
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        std::vector<float> values(static_cast<size_t>(numel), 0.01f);
        tensors.push_back(TensorData::from_floats(n, dtype, shape, values));
      } else {
        TensorData copy{n, t.dtype, t.shape, {}};
        copy.bytes.assign(t.data, t.data + t.nbytes);
        tensors.push_back(std::move(copy));
      }
    }
  }
  write_safetensors(dir / "model.safetensors", tensors);
}

TEST_F(Cli, WrongTensorShapeOrDtype) {
  const fs::path shape = copy_of_model("wrong-shape");
  replace_tensor(shape, "model.layers.1.mlp.up_proj.weight", DType::BF16, {64, 224});
  for (const std::string cmd : {"inspect", "generate"}) {
    std::vector<std::string> args{cmd, "--model", shape.string()};
    if (cmd == "generate") args.insert(args.end(), {"--prompt", "hi"});
    EXPECT_EQ(check_error(run_cli(args), cmd, 1,
                          {"model.layers.1.mlp.up_proj.weight", "[64, 224]", "[224, 64]"}),
              "");
  }
  // --no-check shows the table anyway.
  EXPECT_EQ(run_cli({"inspect", "--model", shape.string(), "--no-check"}).code, 0);

  const fs::path dtype = copy_of_model("wrong-dtype");
  replace_tensor(dtype, "model.norm.weight", DType::F32, {64});
  EXPECT_EQ(check_error(run_cli({"generate", "--model", dtype.string(), "--prompt", "hi"}),
                        "generate", 1, {"model.norm.weight", "F32", "BF16"}),
            "");

  const fs::path missing = copy_of_model("missing-tensor");
  {
    std::vector<TensorData> tensors;
    const Checkpoint ckpt = Checkpoint::open(missing);
    for (const std::string& n : ckpt.names()) {
      if (n == "model.layers.0.self_attn.k_proj.weight") continue;
      const TensorInfo& t = ckpt.get(n);
      TensorData copy{n, t.dtype, t.shape, {}};
      copy.bytes.assign(t.data, t.data + t.nbytes);
      tensors.push_back(std::move(copy));
    }
    write_safetensors(missing / "model.safetensors", tensors);
  }
  EXPECT_EQ(check_error(run_cli({"inspect", "--model", missing.string()}), "inspect", 1,
                        {"model.layers.0.self_attn.k_proj.weight"}),
            "");
}

TEST_F(Cli, UsageErrors) {
  const std::string m = model().string();
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases{
      {{"inspect", "--model", m, "--bogus"}, {"--bogus"}},
      {{"tokenize", "--model", m, "--text", "a", "--wat"}, {"--wat"}},
      {{"generate", "--model", m, "--prompt", "hi", "--max-new-tokens"}, {"--max-new-tokens"}},
      {{"generate", "--model", m}, {"--prompt"}},
      {{"generate", "--prompt", "hi"}, {"--model"}},
      {{"generate", "--model", m, "--prompt", "hi", "--max-new-tokens", "many"},
       {"--max-new-tokens", "many"}},
      {{"generate", "--model", m, "--prompt", "hi", "--top-k", "5"}, {"--top-k", "--temperature"}},
      {{"generate", "--model", m, "--prompt", "hi", "--temperature", "-1"}, {"--temperature"}},
      {{"generate", "--model", m, "--prompt", "hi", "--backend", "tpu"}, {"--backend", "tpu"}},
      {{"generate", "--model", m, "--prompt", "hi", "--prompt", "again"}, {"--prompt", "twice"}},
      {{"tokenize", "--model", m}, {"--text"}},
      {{"tokenize", "--model", m, "--decode", "12", "x"}, {"'x'"}},
      {{"tokenize", "--model", m, "--tokenizer", "t.json", "--text", "a"}, {"--tokenizer"}},
      {{"inspect", "--model", m, "stray"}, {"stray"}},
      {{"demo", "--max-new-tokens", "0"}, {"--max-new-tokens"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(check_error(run_cli(c.args), c.args[0], 2, c.mentions), "") << c.args.back();
  }
  if (kHaveVerify) {
    EXPECT_EQ(
        check_error(run_cli({"verify", "--model", m, "--steps", "0"}), "verify", 2, {"--steps"}),
        "");
  }
  // The other backend's name is given when --backend does not match the binary.
  const bool cuda_binary = cli_binary().find("clockwork-cuda") != std::string::npos;
  const RunResult other = run_cli(
      {"generate", "--model", m, "--prompt", "hi", "--backend", cuda_binary ? "sim" : "cuda"});
  EXPECT_EQ(check_error(other, "generate", 2, {cuda_binary ? "clockwork" : "clockwork-cuda"}), "");

  const RunResult unknown = run_cli({"fly"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("unknown command 'fly'"), std::string::npos) << unknown.err;
  EXPECT_EQ(run_cli({}).code, 2);
  const RunResult help = run_cli({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("tiny-model"), std::string::npos);
}

TEST_F(Cli, EveryCommandHasHelp) {
  for (const std::string cmd :
       {"tiny-model", "tokenize", "inspect", "generate", "verify", "demo"}) {
    if (cmd == "verify" && !kHaveVerify) continue;
    const RunResult r = run_cli({cmd, "--help"});
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_EQ(r.out.rfind("usage: clockwork " + cmd, 0), 0u) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
}

TEST_F(Cli, OtherRuntimeErrors) {
  const std::string m = model().string();
  EXPECT_EQ(check_error(run_cli({"tokenize", "--model", m, "--decode", "5000"}), "tokenize", 1,
                        {"5000", "out of range"}),
            "");
  EXPECT_EQ(check_error(run_cli({"tokenize", "--model", m, "--file", "/no/such/file.txt"}),
                        "tokenize", 1, {"/no/such/file.txt"}),
            "");
  EXPECT_EQ(
      check_error(run_cli({"tokenize", "--tokenizer", "/no/such/tokenizer.json", "--text", "a"}),
                  "tokenize", 1, {"/no/such/tokenizer.json"}),
      "");
  const fs::path bad_tok = copy_of_model("bad-tokenizer");
  write_file(bad_tok / "tokenizer.json", "{\"model\": 3}");
  EXPECT_EQ(check_error(run_cli({"tokenize", "--model", bad_tok.string(), "--text", "a"}),
                        "tokenize", 1, {"tokenizer.json"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", bad_tok.string(), "--prompt", "a"}),
                        "generate", 1, {"tokenizer.json"}),
            "");
}

TEST_F(Cli, PromptLongerThanTheContext) {
  // The shared model's context is 48 tokens; each " clock" is at least one token.
  std::string prompt;
  for (int i = 0; i < 60; ++i) prompt += " clock";
  const std::string m = model().string();
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--prompt", prompt}), "generate", 1,
                        {"context", "48"}),
            "");
  if (kHaveVerify) {
    EXPECT_EQ(check_error(run_cli({"verify", "--model", m, "--prompt", prompt}), "verify", 1,
                          {"context", "48"}),
              "");
  }
}

// ---------------------------------------------------------------------------------------------
// generate
// ---------------------------------------------------------------------------------------------

TEST_F(Cli, GenerateGreedyIsDeterministic) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  const std::vector<std::string> args{"generate",         "--model",  model().string(),
                                      "--chat",           "--prompt", "What time is it?",
                                      "--max-new-tokens", "10",       "--print-ids"};
  const RunResult a = run_cli(args);
  const RunResult b = run_cli(args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const std::vector<int32_t> ids = generated_ids(a.out);
  EXPECT_FALSE(ids.empty());
  EXPECT_LE(ids.size(), 10u);
  // Timings go to stderr, the text to stdout.
  EXPECT_NE(a.err.find("ms/token"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("loaded in"), std::string::npos) << a.err;

  // Sampling restricted to the single most likely token is greedy.
  std::vector<std::string> top1 = args;
  top1.insert(top1.end(), {"--temperature", "0.8", "--top-k", "1", "--seed", "3"});
  const RunResult c = run_cli(top1);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(generated_ids(c.out), ids);
}

TEST_F(Cli, GenerateSamplingIsReproducibleWithASeed) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  const std::vector<std::string> args{"generate",
                                      "--model",
                                      model().string(),
                                      "--prompt",
                                      "Once upon a time",
                                      "--temperature",
                                      "1.0",
                                      "--top-p",
                                      "0.9",
                                      "--seed",
                                      "42",
                                      "--max-new-tokens",
                                      "8",
                                      "--print-ids"};
  const RunResult a = run_cli(args);
  const RunResult b = run_cli(args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(generated_ids(a.out), generated_ids(b.out));
  EXPECT_NE(a.err.find("seed 42"), std::string::npos) << a.err;
}

TEST_F(Cli, GenerateStopsAtTheEndOfTheContext) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  // 48 positions: a 40-token prompt leaves room for at most 8 new tokens.
  const Tokenizer tok = Tokenizer::from_file(model());
  std::string prompt;
  while (tok.encode(prompt, false, true).size() < 40) prompt += " clock";
  const size_t prompt_tokens = tok.encode(prompt, false, true).size();
  const RunResult r = run_cli({"generate", "--model", model().string(), "--prompt", prompt,
                               "--max-new-tokens", "30", "--print-ids"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LE(generated_ids(r.out).size(), 48 - prompt_tokens + 1);
}

// ---------------------------------------------------------------------------------------------
// generate --dump-logits
// ---------------------------------------------------------------------------------------------

// Files other than `keep` in `dir`: a leftover temporary file shows here.
std::vector<std::string> other_files(const fs::path& dir, const std::string& keep) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != keep) names.push_back(e.path().filename().string());
  }
  return names;
}

// Greedy generation's choice at each step is the argmax of that step's logits, so the file's
// rows must peak at exactly the printed ids: the file holds what the model computed, one row per
// step, in order.
TEST_F(Cli, GenerateDumpLogitsWritesEachStepAsNpy) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  const ModelConfig c = ModelConfig::from_file(model() / "config.json");
  const fs::path dir = root() / "dump";
  fs::create_directories(dir);
  const fs::path file = dir / "logits.npy";
  const std::vector<std::string> args{"generate",         "--model",  model().string(),
                                      "--prompt",         "The clock in the hall",
                                      "--max-new-tokens", "5",        "--print-ids",
                                      "--dump-logits",    file.string()};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<int32_t> ids = generated_ids(r.out);
  ASSERT_FALSE(ids.empty()) << r.out;
  EXPECT_NE(r.err.find("written to " + file.string()), std::string::npos) << r.err;

  const Npy n = read_npy(file);
  ASSERT_EQ(n.problem, "");
  ASSERT_EQ(n.shape, (std::vector<uint64_t>{ids.size(), static_cast<uint64_t>(c.vocab_size)}))
      << "expected [steps, V]";
  const size_t V = static_cast<size_t>(c.vocab_size);
  for (size_t step = 0; step < ids.size(); ++step) {
    const float* row = n.values.data() + step * V;
    EXPECT_TRUE(std::all_of(row, row + V, [](float v) { return std::isfinite(v); }))
        << "step " << step;
    const size_t peak = static_cast<size_t>(std::max_element(row, row + V) - row);
    EXPECT_EQ(peak, static_cast<size_t>(ids[step]))
        << "step " << step << ": the row's largest logit is not the token generated there";
    // Random weights still give spread logits; a row of one repeated value is not logits.
    EXPECT_GT(*std::max_element(row, row + V), *std::min_element(row, row + V)) << step;
  }
  EXPECT_EQ(other_files(dir, "logits.npy"), std::vector<std::string>{})
      << "a temporary file was left behind";

  // The same run again replaces the file with the same bytes (greedy is deterministic), and the
  // uncached path computes the same choices.
  const std::string first = read_file(file);
  ASSERT_EQ(run_cli(args).code, 0);
  EXPECT_EQ(read_file(file), first);
  std::vector<std::string> uncached = args;
  uncached.insert(uncached.end(), {"--kv-cache", "none"});
  ASSERT_EQ(run_cli(uncached).code, 0);
  EXPECT_EQ(read_npy(file).shape, n.shape);

  // No new tokens: a valid empty array [0, V].
  std::vector<std::string> none = args;
  none[6] = "0";  // --max-new-tokens 0
  ASSERT_EQ(run_cli(none).code, 0);
  const Npy empty = read_npy(file);
  EXPECT_EQ(empty.problem, "");
  EXPECT_EQ(empty.shape, (std::vector<uint64_t>{0, static_cast<uint64_t>(V)}));
}

// The file appears whole or not at all: a run that cannot finish writing it leaves an earlier
// file untouched and no temporary file behind. A file size limit makes the write fail partway
// (the program then sees EFBIG instead of being killed, since the signal is ignored).
TEST_F(Cli, GenerateDumpLogitsIsNeverHalfWritten) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  const fs::path dir = root() / "dump-limit";
  fs::create_directories(dir);
  const fs::path file = dir / "logits.npy";
  write_file(file, "an earlier file");
  const std::vector<std::string> args{"generate",         "--model",  model().string(),
                                      "--prompt",         "The clock in the hall",
                                      "--max-new-tokens", "4",        "--dump-logits",
                                      file.string()};
  // 4 steps of V = 1024 float32 logits are 16 KiB; the limit stops the file at 6 KiB, while
  // the captured stdout and stderr stay far below it.
  struct rlimit old_limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 6 * 1024;
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const RunResult r = run_cli(args);
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  // The run got as far as writing, so stderr holds the load report before the error line.
  EXPECT_EQ(r.code, 1) << r.err;
  const size_t error_at = r.err.find("clockwork generate: error: ");
  ASSERT_NE(error_at, std::string::npos) << r.err;
  const std::string error_line = r.err.substr(error_at);
  EXPECT_NE(error_line.find(file.string()), std::string::npos) << error_line;
  EXPECT_NE(error_line.find("write failed"), std::string::npos) << error_line;
  EXPECT_EQ(read_file(file), "an earlier file") << "the earlier file was changed";
  EXPECT_EQ(other_files(dir, "logits.npy"), std::vector<std::string>{})
      << "the temporary file was left behind";

  // Bad paths are refused before the model loads, naming the option.
  const std::string missing = (root() / "no-such-dir" / "l.npy").string();
  EXPECT_EQ(check_error(run_cli({"generate", "--model", model().string(), "--prompt", "Hi",
                                 "--dump-logits", missing}),
                        "generate", 2, {"--dump-logits", "does not exist"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", model().string(), "--prompt", "Hi",
                                 "--dump-logits", dir.string()}),
                        "generate", 2, {"--dump-logits", "is a directory"}),
            "");
}

// ---------------------------------------------------------------------------------------------
// generate --kv-cache (milestone 4)
// ---------------------------------------------------------------------------------------------

// Greedy text does not depend on how keys and values are kept: without a cache, with the
// contiguous one and with paged ones of several page sizes, the same ids come out. 20 steps pass
// page boundaries of every page size used, and a 40-token prompt fills most of the 48-position
// context, so the cache is sized to what is left.
TEST_F(Cli, GenerateKvCacheModesGiveTheSameText) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  const std::vector<std::string> base{"generate",         "--model", model().string(),
                                      "--prompt",         "The clock in the hall",
                                      "--max-new-tokens", "20",      "--print-ids"};
  auto run_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const RunResult none = run_with({"--kv-cache", "none"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_NE(none.err.find("KV cache: none"), std::string::npos) << none.err;
  const std::vector<int32_t> want = generated_ids(none.out);
  ASSERT_FALSE(want.empty());
  const RunResult by_default = run_with({});
  ASSERT_EQ(by_default.code, 0) << by_default.err;
  EXPECT_NE(by_default.err.find("contiguous KV cache"), std::string::npos)
      << "the default cache should be the contiguous one\n" << by_default.err;
  EXPECT_EQ(by_default.out, none.out);
  for (const char* page_size : {"1", "3", "16"}) {
    const RunResult paged = run_with({"--kv-cache", "paged", "--page-size", page_size});
    ASSERT_EQ(paged.code, 0) << paged.err;
    EXPECT_EQ(paged.out, none.out) << "--kv-cache paged --page-size " << page_size;
    EXPECT_NE(paged.err.find("paged KV cache"), std::string::npos) << paged.err;
  }

  // Up to the end of the context: the cache is never asked for more than it holds.
  const Tokenizer tok = Tokenizer::from_file(model());
  std::string prompt;
  while (tok.encode(prompt, false, true).size() < 40) prompt += " clock";
  std::vector<std::vector<int32_t>> ids;
  for (const char* kind : {"none", "contiguous", "paged"}) {
    const RunResult r = run_cli({"generate", "--model", model().string(), "--prompt", prompt,
                                 "--max-new-tokens", "30", "--print-ids", "--kv-cache", kind});
    ASSERT_EQ(r.code, 0) << kind << ": " << r.err;
    ids.push_back(generated_ids(r.out));
  }
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);
}

// ---------------------------------------------------------------------------------------------
// generate --batch (milestone 5)
// ---------------------------------------------------------------------------------------------

// The "[r] ids: ..." line of request r in `generate --batch --print-ids`.
std::vector<int32_t> batch_ids(const std::string& out, int r) {
  const std::string key = "[" + std::to_string(r) + "] ids:";
  const size_t at = out.find(key);
  std::vector<int32_t> ids;
  if (at == std::string::npos) return ids;
  std::istringstream line(out.substr(at + key.size(), out.find('\n', at) - at - key.size()));
  int32_t id;
  while (line >> id) ids.push_back(id);
  return ids;
}

// Eight prompts of mixed lengths, batched three at a time over pages of 4 positions, must give
// every prompt the ids it gets alone; every piece of text carries its request's number.
TEST_F(Cli, GenerateBatchGivesEachPromptItsSoloText) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  const std::vector<std::string> prompts = {
      "The clock", "Tick", "Once upon a time there was a clock in the hall", "A",
      "Hours and minutes", "The old clock in the tower struck twelve", "Bells", "Time"};
  std::string file_text;
  for (const std::string& p : prompts) file_text += p + "\n\n";  // empty lines are skipped
  const fs::path file = root() / "prompts.txt";
  write_file(file, file_text);
  const RunResult batched =
      run_cli({"generate", "--model", model().string(), "--batch", file.string(), "--max-batch",
               "3", "--page-size", "4", "--max-new-tokens", "12", "--print-ids"});
  ASSERT_EQ(batched.code, 0) << batched.err;
  EXPECT_NE(batched.err.find("8 requests, at most 3 at once"), std::string::npos) << batched.err;
  EXPECT_NE(batched.err.find("free at the end"), std::string::npos) << batched.err;
  for (int r = 0; r < static_cast<int>(prompts.size()); ++r) {
    const RunResult alone =
        run_cli({"generate", "--model", model().string(), "--prompt", prompts[static_cast<size_t>(r)],
                 "--max-new-tokens", "12", "--print-ids"});
    ASSERT_EQ(alone.code, 0) << alone.err;
    const std::vector<int32_t> want = generated_ids(alone.out);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(batch_ids(batched.out, r), want) << "request " << r << " ('" << prompts[static_cast<size_t>(r)]
                                              << "')\n" << batched.out;
    EXPECT_NE(batched.out.find("[" + std::to_string(r) + "] done, "), std::string::npos)
        << batched.out;
  }
}

TEST_F(Cli, GenerateBatchUsageErrors) {
  const std::string m = model().string();
  const fs::path file = root() / "two-prompts.txt";
  write_file(file, "one\ntwo\n");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--batch", file.string(), "--prompt",
                                 "hi"}),
                        "generate", 2, {"--prompt", "--batch"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--batch", file.string(),
                                 "--temperature", "0.7"}),
                        "generate", 2, {"--temperature", "--batch"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--batch",
                                 (root() / "missing.txt").string()}),
                        "generate", 2, {"--batch", "missing.txt"}),
            "");
  const fs::path empty = root() / "empty.txt";
  write_file(empty, "\n\n");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--batch", empty.string()}),
                        "generate", 2, {"no prompt"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--prompt", "hi", "--max-batch", "4"}),
                        "generate", 2, {"--max-batch", "--batch"}),
            "");
}

// Milestone 5: each decode step as one CUDA graph gives the same tokens, and says that the steps
// ran as graph launches.
TEST_F(Cli, GenerateCudaGraphsGiveTheSameText) {
  if (backend_missing()) GTEST_SKIP() << "no device for this binary";
  const std::vector<std::vector<std::string>> caches{
      {}, {"--kv-cache", "paged", "--page-size", "3"}};
  for (const std::vector<std::string>& cache : caches) {
    std::vector<std::string> args{"generate",         "--model", model().string(),
                                  "--prompt",         "The clock in the hall",
                                  "--max-new-tokens", "12",      "--print-ids"};
    args.insert(args.end(), cache.begin(), cache.end());
    const RunResult launched = run_cli(args);
    ASSERT_EQ(launched.code, 0) << launched.err;
    EXPECT_EQ(launched.err.find("CUDA graphs"), std::string::npos) << launched.err;
    args.push_back("--cuda-graphs");
    const RunResult graphed = run_cli(args);
    ASSERT_EQ(graphed.code, 0) << graphed.err;
    ASSERT_FALSE(generated_ids(launched.out).empty());
    EXPECT_EQ(graphed.out, launched.out) << (cache.empty() ? "contiguous" : "paged");
    // 12 tokens: the first comes from the prefill, the other 11 from decode steps.
    EXPECT_NE(graphed.err.find("CUDA graphs: 11 decode steps run as graph launches"),
              std::string::npos)
        << graphed.err;
  }
  EXPECT_EQ(check_error(run_cli({"generate", "--model", model().string(), "--prompt", "hi",
                                 "--kv-cache", "none", "--cuda-graphs"}),
                        "generate", 2, {"--cuda-graphs", "KV cache"}),
            "");
}

TEST_F(Cli, GenerateKvCacheUsageErrors) {
  const std::string m = model().string();
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--prompt", "hi", "--kv-cache",
                                 "pagd"}),
                        "generate", 2, {"--kv-cache", "pagd", "none, contiguous or paged"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--prompt", "hi", "--page-size", "4"}),
                        "generate", 2, {"--page-size", "--kv-cache paged"}),
            "");
  EXPECT_EQ(check_error(run_cli({"generate", "--model", m, "--prompt", "hi", "--kv-cache",
                                 "paged", "--page-size", "0"}),
                        "generate", 2, {"--page-size"}),
            "");
  if (kHaveVerify) {
    EXPECT_EQ(check_error(run_cli({"verify", "--model", m, "--kv-cache", "big"}), "verify", 2,
                          {"--kv-cache", "big"}),
              "");
  }
}

}  // namespace
}  // namespace clockwork::cli_test
