// Tests of a model directory's parts opened together (model_dir.h): a multimodal Gemma 3
// checkpoint opened as its text model, in both of the layouts transformers has written, and the
// tokenizer of each family with its prompt and stop tokens.
#include "harness/model/model_dir.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "harness/check/temp_dir.h"
#include "harness/model/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace clockwork;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no exception thrown>";
}

// A Gemma3ForConditionalGeneration config with a tiny text model (2 layers, d = 8, 2 heads of 4)
// under text_config, as the multimodal checkpoints nest it.
constexpr const char* kTinyMultimodalConfig = R"({
  "architectures": ["Gemma3ForConditionalGeneration"],
  "model_type": "gemma3",
  "eos_token_id": [1, 7],
  "text_config": {
    "model_type": "gemma3_text",
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "vocab_size": 40,
    "sliding_window": 4,
    "max_position_embeddings": 64
  },
  "vision_config": {"hidden_size": 6, "model_type": "siglip_vision_model"}
})";

// Every tensor of the text model under the given prefixes, with values that identify it (the
// index of the tensor and of the element), then two vision tensors.
std::vector<TensorData> multimodal_tensors(const ModelConfig& c, const std::string& model_prefix,
                                           const std::string& vision_prefix) {
  std::vector<TensorData> out;
  float tag = 1.0f;
  for (const ExpectedTensor& e : expected_tensors(c)) {
    const std::string name = e.name.starts_with("model.") ? model_prefix + e.name.substr(6) : e.name;
    int64_t n = 1;
    for (int64_t s : e.shape) n *= s;
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[i] = tag + 0.125f * static_cast<float>(i % 8);
    tag += 1.0f;
    out.push_back(TensorData::from_floats(name, DType::BF16, e.shape, values));
  }
  out.push_back(TensorData::from_floats(vision_prefix + "vision_tower.vision_model.post_layernorm.weight",
                                        DType::BF16, {6}, {1, 2, 3, 4, 5, 6}));
  out.push_back(TensorData::from_floats(vision_prefix + "multi_modal_projector.mm_soft_emb_norm.weight",
                                        DType::BF16, {6}, {6, 5, 4, 3, 2, 1}));
  return out;
}

class MultimodalCheckpoint : public ::testing::TestWithParam<std::pair<const char*, const char*>> {
 protected:
  ModelConfig config = ModelConfig::from_json_text(kTinyMultimodalConfig, "config.json");
};

// Google's released files (and transformers before 4.52) write "language_model.model." and a
// top-level vision tower; transformers 4.52 and later write "model.language_model." and put the
// vision tower under "model.".
INSTANTIATE_TEST_SUITE_P(Layouts, MultimodalCheckpoint,
                         ::testing::Values(std::make_pair("language_model.model.", ""),
                                           std::make_pair("model.language_model.", "model.")),
                         [](const auto& info) {
                           return std::string(info.param.second).empty() ? "Released" : "Newer";
                         });

TEST_P(MultimodalCheckpoint, OpensAsTheTextModelAndSetsTheVisionTowerAside) {
  TempDir dir("clockwork-mm");
  const auto [model_prefix, vision_prefix] = GetParam();
  const std::vector<TensorData> tensors = multimodal_tensors(config, model_prefix, vision_prefix);
  write_safetensors(dir.path() / "model.safetensors", tensors);

  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_NO_THROW(check_tensors(ckpt, config, /*any_float=*/false));
  EXPECT_EQ(ckpt.size(), tensors.size() - 2) << "the two vision tensors are not part of the model";
  EXPECT_EQ(ckpt.set_aside(),
            (std::vector<std::string>{
                std::string(vision_prefix) + "multi_modal_projector.mm_soft_emb_norm.weight",
                std::string(vision_prefix) + "vision_tower.vision_model.post_layernorm.weight"}));
  for (const std::string& name : ckpt.names()) {
    EXPECT_TRUE(name.starts_with("model.")) << name;
  }
  // Each canonical name holds the bytes written under the prefixed name.
  for (const TensorData& written : tensors) {
    if (!written.name.starts_with(model_prefix)) continue;
    const std::string name = "model." + written.name.substr(std::string(model_prefix).size());
    const TensorInfo& t = ckpt.get(name);
    EXPECT_EQ(t.stored_name, written.name);
    ASSERT_EQ(t.nbytes, written.bytes.size()) << name;
    EXPECT_EQ(0, std::memcmp(t.data, written.bytes.data(), t.nbytes)) << name;
  }
  uint64_t text_bytes = 0;
  for (const TensorData& t : tensors) text_bytes += t.bytes.size();
  EXPECT_EQ(ckpt.total_bytes(), text_bytes - 2 * 6 * 2) << "vision tensors are not counted";

  // A wrong shape names the tensor both ways, so it can be found in the file.
  const std::string message = error_of([&] {
    ckpt.get("model.norm.weight", DType::BF16, {9});
  });
  EXPECT_NE(message.find("'model.norm.weight' (stored as '" + std::string(model_prefix) +
                         "norm.weight')"),
            std::string::npos)
      << message;
}

TEST(MultimodalCheckpointLayout, ShardedReleasedLayoutWithAnUntiedHead) {
  ModelConfig config = ModelConfig::from_json_text(kTinyMultimodalConfig, "config.json");
  config.tie_word_embeddings = false;
  std::vector<TensorData> tensors = multimodal_tensors(config, "language_model.model.", "");
  for (TensorData& t : tensors) {
    if (t.name == "lm_head.weight") t.name = "language_model.lm_head.weight";
  }
  TempDir dir("clockwork-mm");
  write_sharded(dir.path(), tensors, ShardingOptions{.num_shards = 3});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_NO_THROW(check_tensors(ckpt, config, /*any_float=*/false));
  EXPECT_EQ(ckpt.get("lm_head.weight").stored_name, "language_model.lm_head.weight");
  EXPECT_EQ(ckpt.set_aside().size(), 2u);
}

TEST(MultimodalCheckpointLayout, TwoCopiesOfATextTensorAreRefused) {
  ModelConfig config = ModelConfig::from_json_text(kTinyMultimodalConfig, "config.json");
  std::vector<TensorData> tensors = multimodal_tensors(config, "language_model.model.", "");
  tensors.push_back(TensorData::from_floats("model.norm.weight", DType::BF16, {8},
                                            {1, 1, 1, 1, 1, 1, 1, 1}));
  TempDir dir("clockwork-mm");
  write_safetensors(dir.path() / "model.safetensors", tensors);
  const std::string message = error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  EXPECT_NE(message.find("'language_model.model.norm.weight' and 'model.norm.weight'"),
            std::string::npos)
      << message;
}

TEST(MultimodalCheckpointLayout, TextOnlyCheckpointsAreUntouched) {
  TempDir dir("clockwork-mm");
  // A text-only checkpoint may hold a tensor that merely looks like a vision tower.
  write_safetensors(dir.path() / "model.safetensors",
                    {TensorData::from_floats("model.norm.weight", DType::F32, {2}, {1, 2}),
                     TensorData::from_floats("vision_tower.w", DType::F32, {1}, {3})});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"model.norm.weight", "vision_tower.w"}));
  EXPECT_TRUE(ckpt.set_aside().empty());
  EXPECT_TRUE(ckpt.get("model.norm.weight").stored_name.empty());
}

// ---------------------------------------------------------------------------------------------
// The tokenizer by family
// ---------------------------------------------------------------------------------------------
const fs::path kGemmaTokenizerDir = CLOCKWORK_GEMMA_TOKENIZER_DATA;

TEST(TokenizerByFamily, GemmaPromptsUseGemmasTemplateAndStopTokens) {
  const Tokenizer tok = load_tokenizer(kGemmaTokenizerDir, ModelFamily::gemma3);
  EXPECT_EQ(tok.style(), Tokenizer::Style::kSentencePiece);
  const std::vector<int32_t> chat = encode_prompt(tok, "Who jumps?", /*chat=*/true, "Be brief.");
  EXPECT_EQ(chat, tok.encode(format_gemma_chat({{"system", "Be brief."}, {"user", "Who jumps?"}}),
                             /*allow_special=*/true));
  std::vector<int32_t> plain{tok.bos_id()};
  for (int32_t id : tok.encode("Who jumps?")) plain.push_back(id);
  EXPECT_EQ(encode_prompt(tok, "Who jumps?", /*chat=*/false, ""), plain);

  // config.json's end tokens, plus the tokenizer's <eos> (1) and <end_of_turn> (6).
  ModelConfig config = ModelConfig::from_json_text(kTinyMultimodalConfig, "config.json");
  config.eos_token_ids = {7};
  EXPECT_EQ(stop_ids(config, tok), (std::vector<int32_t>{1, 6, 7}));
}

TEST(TokenizerByFamily, ATokenizerOfTheOtherFamilyIsRefused) {
  const std::string gemma_as_llama =
      error_of([] { load_tokenizer(kGemmaTokenizerDir, ModelFamily::llama); });
  EXPECT_NE(gemma_as_llama.find(kGemmaTokenizerDir.string() + ": config.json describes a llama"),
            std::string::npos)
      << gemma_as_llama;
  EXPECT_NE(gemma_as_llama.find("SentencePiece-style"), std::string::npos) << gemma_as_llama;

  TempDir dir("clockwork-tok");
  train_small_bpe("the fox and the dog and the fox", 5).write_tokenizer_json(dir.path() /
                                                                               "tokenizer.json");
  EXPECT_EQ(load_tokenizer(dir.path(), ModelFamily::llama).style(), Tokenizer::Style::kByteLevel);
  const std::string llama_as_gemma =
      error_of([&] { load_tokenizer(dir.path(), ModelFamily::gemma3); });
  EXPECT_NE(llama_as_gemma.find("byte-level one (Llama 3's)"), std::string::npos)
      << llama_as_gemma;
}

}  // namespace
