// Tests of the config.json reader: the real Llama-3-8B and Llama-3.2-1B configs, the round trip
// through to_json(), and one case per invalid field, each checking the message names the file,
// the field and the problem.
#include "kernels/model_config.h"

#include "harness/check/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using clockwork::ConfigError;
using clockwork::ModelConfig;
using json = nlohmann::json;

const char* const kOrigin = "Meta-Llama-3-8B/config.json";

// config.json of Meta-Llama-3-8B as published (the base model: one end-of-text token).
const char* const kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

// A Llama-3.2-1B style config: tied embeddings, explicit head_dim and llama3 rope scaling.
const char* const kLlama32_1B = R"({
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
})";

std::string config_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<wrong exception type: ") + e.what() + ">";
  }
  return "<no exception thrown>";
}

::testing::AssertionResult Mentions(const std::string& message,
                                    const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "the error message does not mention \"" << part << "\"\n  message: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

ModelConfig parse(const json& j) {
  return ModelConfig::from_json_text(j.dump(), kOrigin);
}

TEST(Config, ReadsLlama3_8B) {
  const ModelConfig c = ModelConfig::from_json_text(kLlama3_8B, kOrigin);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128) << "no head_dim in the file: d / h";
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_FALSE(c.tie_word_embeddings) << "Llama-3-8B keeps a separate lm_head";
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{128001});
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(Config, ReadsAListOfEndTokens) {
  // Instruct generation stops on <|end_of_text|> or <|eot_id|>.
  json j = json::parse(kLlama3_8B);
  j["eos_token_id"] = {128001, 128009};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128009}));
}

TEST(Config, ReadsLlama32_1B) {
  const ModelConfig c = ModelConfig::from_json_text(kLlama32_1B, "Llama-3.2-1B/config.json");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.tie_word_embeddings) << "Llama 3.2 1B ties lm_head to embed_tokens";
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
}

// Gemma 3 1B's attention shapes: d = 1152 but 4 heads of 256, so Q is 1024 wide and d / h (288)
// is not the head size. The key is read as written, not checked against d / h.
TEST(Config, HeadDimNeedNotBeHiddenOverHeads) {
  json j = json::parse(kLlama32_1B);
  j["hidden_size"] = 1152;
  j["num_attention_heads"] = 4;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = 256;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.hidden_size, 1152);
  EXPECT_EQ(c.head_dim, 256) << "head_dim is read from the file, not derived as d / h = 288";
  EXPECT_EQ(c.num_heads * c.head_dim, 1024);
  EXPECT_TRUE(parse(json::parse(c.to_json())) == c) << "to_json() must keep head_dim";

  // With the key, d need not even be a multiple of h (d / h would be undefined).
  j["hidden_size"] = 1150;
  EXPECT_EQ(parse(j).head_dim, 256);
  // A null head_dim means "use the default", d / h, like every other optional field.
  j["hidden_size"] = 1152;
  j["head_dim"] = nullptr;
  EXPECT_EQ(parse(j).head_dim, 288);
  j["hidden_size"] = 1150;
  EXPECT_TRUE(Mentions(config_error_of([&] { parse(j); }),
                       {"'hidden_size' (1150) is not divisible by 'num_attention_heads' (4)"}));
}

TEST(Config, OptionalFieldsTakeTheirDefaults) {
  json j = json::parse(kLlama3_8B);
  j.erase("num_key_value_heads");
  j.erase("tie_word_embeddings");
  j.erase("rope_scaling");
  j.erase("torch_dtype");
  ModelConfig c = parse(j);
  EXPECT_EQ(c.num_kv_heads, 32) << "without num_key_value_heads every head has its own K and V";
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.torch_dtype, "bfloat16");

  j["num_key_value_heads"] = nullptr;  // HuggingFace treats null like absent
  j["dtype"] = "float32";              // the newer spelling of torch_dtype
  c = parse(j);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.torch_dtype, "float32");
}

TEST(Config, AcceptsTheOlderRopeScalingTypeKey) {
  json j = json::parse(kLlama32_1B);
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";
  const ModelConfig c = parse(j);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
}

// transformers 5 moves rope_theta and the scaling fields into one "rope_parameters" object.
TEST(Config, ReadsTransformersFiveRopeParameters) {
  json j = json::parse(kLlama32_1B);
  json params = j["rope_scaling"];
  params["rope_theta"] = j["rope_theta"];
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = params;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);

  // Plain RoPE: rope_type "default", nothing else but the base.
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  const ModelConfig plain = parse(j);
  EXPECT_EQ(plain.rope_theta, 10000.0);
  EXPECT_FALSE(plain.rope_scaling.has_value());

  j["rope_parameters"] = {{"rope_type", "default"}};
  try {
    parse(j);
    ADD_FAILURE() << "a rope_parameters object without rope_theta was accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Mentions(e.what(), {kOrigin, "rope_parameters.rope_theta"}));
  }
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}};
  try {
    parse(j);
    ADD_FAILURE() << "yarn scaling was accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Mentions(e.what(), {"rope_parameters.rope_type", "yarn", "llama3"}));
  }
}

TEST(Config, ToJsonRoundTrips) {
  json instruct = json::parse(kLlama3_8B);
  instruct["eos_token_id"] = {128001, 128009};
  for (const std::string& text :
       {std::string(kLlama3_8B), instruct.dump(), std::string(kLlama32_1B)}) {
    const ModelConfig c = ModelConfig::from_json_text(text, kOrigin);
    const std::string written = c.to_json();
    const ModelConfig back = ModelConfig::from_json_text(written, "to_json()");
    EXPECT_TRUE(back == c) << "round trip changed the config:\n" << written;
  }
  // A synthetic config with values that print awkwardly still round-trips exactly.
  ModelConfig tiny = ModelConfig::from_json_text(kLlama32_1B, kOrigin);
  tiny.hidden_size = 64;
  tiny.num_heads = 4;
  tiny.num_kv_heads = 2;
  tiny.head_dim = 16;
  tiny.vocab_size = 300;
  tiny.bos_token_id = 1;
  tiny.eos_token_ids = {2, 3};
  tiny.rms_norm_eps = 1.0 / 3.0;
  tiny.rope_theta = 12345.678901234567;
  EXPECT_TRUE(ModelConfig::from_json_text(tiny.to_json(), "tiny") == tiny) << tiny.to_json();
}

TEST(Config, ToJsonUsesHuggingFaceFieldNames) {
  const ModelConfig c = ModelConfig::from_json_text(kLlama3_8B, kOrigin);
  const json j = json::parse(c.to_json());
  EXPECT_EQ(j["architectures"], json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["num_hidden_layers"], 32);
  EXPECT_EQ(j["num_attention_heads"], 32);
  EXPECT_EQ(j["num_key_value_heads"], 8);
  EXPECT_EQ(j["head_dim"], 128);
  EXPECT_TRUE(j["rope_scaling"].is_null());
  EXPECT_EQ(j["eos_token_id"], 128001) << "a single end token is written as an integer";
  EXPECT_EQ(j["tie_word_embeddings"], false);
}

TEST(Config, FromFileReadsAndNamesTheFile) {
  const clockwork::TempDir tmp("clockwork-config");
  const fs::path& dir = tmp.path();
  const fs::path file = dir / "config.json";
  {
    std::ofstream out(file);
    out << kLlama32_1B;
  }
  EXPECT_EQ(ModelConfig::from_file(file).hidden_size, 2048);
  {
    json j = json::parse(kLlama32_1B);
    j.erase("vocab_size");
    std::ofstream out(file);
    out << j.dump();
  }
  EXPECT_TRUE(Mentions(config_error_of([&] { ModelConfig::from_file(file); }),
                       {file.string(), "field 'vocab_size' is missing"}));
  EXPECT_TRUE(Mentions(config_error_of([&] { ModelConfig::from_file(dir / "absent.json"); }),
                       {(dir / "absent.json").string(), "not found"}));
}

// Untrusted text: refused with the file and the key, before anything recursive runs.
TEST(Config, HostileJsonIsRefusedNamingTheFileAndKey) {
  auto error = [](const std::string& text) {
    return config_error_of([&] { ModelConfig::from_json_text(text, kOrigin); });
  };
  const std::string bomb = R"({"rope_scaling": )" + std::string(100'000, '[') +
                           std::string(100'000, ']') + "}";
  EXPECT_TRUE(Mentions(error(bomb), {kOrigin, "key 'rope_scaling[0][0]",
                                     "nested deeper than 16 levels"}));
  EXPECT_TRUE(Mentions(error(std::string("{\"hidden_size\": 64}\0garbage", 27)),
                       {kOrigin, "NUL byte at offset 19 (line 1, column 20)"}));
  EXPECT_TRUE(Mentions(error(std::string(kLlama3_8B) + "\n{}"),
                       {kOrigin, "unexpected text after the JSON value"}));
  EXPECT_TRUE(Mentions(error(R"({"hidden_size": 64, "rms_norm_eps": 1e999})"),
                       {kOrigin, "key 'rms_norm_eps'", "1e999", "too large for a double"}));
  EXPECT_TRUE(Mentions(error(R"({"hidden_size": 64, "hidden_size": 128})"),
                       {kOrigin, "key 'hidden_size': appears twice"}));
  // Whitespace after the value is JSON; a config.json ends with a newline.
  EXPECT_EQ(ModelConfig::from_json_text(std::string(kLlama3_8B) + "\n \t\r\n", kOrigin).hidden_size,
            4096);
}

TEST(Config, OversizedFileIsRefusedBeforeReading) {
  clockwork::TempDir dir;
  const fs::path file = dir / "config.json";
  {
    std::ofstream out(file, std::ios::binary);
    out << kLlama3_8B;
    out.seekp((std::streamoff{1} << 20));  // sparse: 1 MiB + 1 byte
    out.put(' ');
  }
  EXPECT_TRUE(Mentions(config_error_of([&] { ModelConfig::from_file(file); }),
                       {file.string(), "1048577 bytes", "more than the 1048576-byte limit"}));
}

TEST(Config, NotJsonOrNotAnObject) {
  EXPECT_TRUE(
      Mentions(config_error_of([] { ModelConfig::from_json_text("{\"hidden_size\": ", kOrigin); }),
               {kOrigin, "not valid JSON"}));
  EXPECT_TRUE(Mentions(config_error_of([] { ModelConfig::from_json_text("[4096]", kOrigin); }),
                       {kOrigin, "is a JSON array", "expected an object"}));
}

TEST(Config, ValidateRejectsADefaultConstructedConfig) {
  // The struct's zero sizes must never pass for a real model.
  EXPECT_TRUE(Mentions(config_error_of([] { ModelConfig{}.validate("defaults"); }),
                       {"defaults", "field 'hidden_size' is 0"}));
}

// ------------------------------------------------------------------------------------------------
// Invalid configs: each case edits the Llama-3-8B config and names the text the error must carry.
// ------------------------------------------------------------------------------------------------

struct InvalidConfig {
  const char* name;
  std::function<void(json&)> edit;
  std::vector<std::string> expected;  // kOrigin is checked as well
};

// Names the case in failure output instead of dumping its bytes.
void PrintTo(const InvalidConfig& c, std::ostream* os) {
  *os << c.name;
}

class InvalidConfigTest : public ::testing::TestWithParam<InvalidConfig> {};

TEST_P(InvalidConfigTest, IsRejectedWithAClearMessage) {
  const InvalidConfig& c = GetParam();
  json j = json::parse(kLlama3_8B);
  c.edit(j);
  const std::string message = config_error_of([&] { parse(j); });
  EXPECT_TRUE(Mentions(message, {kOrigin}));
  EXPECT_TRUE(Mentions(message, c.expected));
}

json llama3_rope_scaling() {
  return {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 8192}};
}

const InvalidConfig kInvalidConfigs[] = {
    {"MissingHiddenSize",
     [](json& j) { j.erase("hidden_size"); },
     {"field 'hidden_size' is missing", "expected an integer"}},
    {"MissingNumLayers",
     [](json& j) { j.erase("num_hidden_layers"); },
     {"field 'num_hidden_layers' is missing"}},
    {"MissingHeads",
     [](json& j) { j.erase("num_attention_heads"); },
     {"field 'num_attention_heads' is missing"}},
    {"MissingIntermediateSize",
     [](json& j) { j.erase("intermediate_size"); },
     {"field 'intermediate_size' is missing"}},
    {"MissingVocabSize", [](json& j) { j.erase("vocab_size"); }, {"field 'vocab_size' is missing"}},
    {"MissingMaxPositions",
     [](json& j) { j.erase("max_position_embeddings"); },
     {"field 'max_position_embeddings' is missing"}},
    {"MissingRmsNormEps",
     [](json& j) { j.erase("rms_norm_eps"); },
     {"field 'rms_norm_eps' is missing", "expected a number"}},
    {"MissingRopeTheta", [](json& j) { j.erase("rope_theta"); }, {"field 'rope_theta' is missing"}},
    {"MissingBos", [](json& j) { j.erase("bos_token_id"); }, {"field 'bos_token_id' is missing"}},
    {"MissingEos", [](json& j) { j.erase("eos_token_id"); }, {"field 'eos_token_id' is missing"}},
    {"HiddenSizeNull",
     [](json& j) { j["hidden_size"] = nullptr; },
     {"field 'hidden_size' is null"}},
    {"HiddenSizeString",
     [](json& j) { j["hidden_size"] = "4096"; },
     {"field 'hidden_size' is the string \"4096\", expected an integer"}},
    {"HiddenSizeFractional",
     [](json& j) { j["hidden_size"] = 4096.5; },
     {"field 'hidden_size' is the number 4096.5, expected an integer"}},
    {"LayersZero",
     [](json& j) { j["num_hidden_layers"] = 0; },
     {"field 'num_hidden_layers' is 0, expected a positive integer"}},
    {"NegativeIntermediateSize",
     [](json& j) { j["intermediate_size"] = -14336; },
     {"field 'intermediate_size' is -14336, expected a positive integer"}},
    {"VocabZero", [](json& j) { j["vocab_size"] = 0; }, {"field 'vocab_size' is 0"}},
    {"MaxPositionsNegative",
     [](json& j) { j["max_position_embeddings"] = -1; },
     {"field 'max_position_embeddings' is -1"}},
    {"HeadsZero",
     [](json& j) { j["num_attention_heads"] = 0; },
     {"field 'num_attention_heads' is 0"}},
    {"HeadsDoNotDivideHidden",
     [](json& j) { j["num_attention_heads"] = 30; },
     {"'hidden_size' (4096) is not divisible by 'num_attention_heads' (30)"}},
    {"HeadDimZero", [](json& j) { j["head_dim"] = 0; }, {"field 'head_dim' is 0"}},
    {"HeadDimNegative", [](json& j) { j["head_dim"] = -128; }, {"field 'head_dim' is -128"}},
    {"HeadDimString",
     [](json& j) { j["head_dim"] = "128"; },
     {"field 'head_dim' is the string \"128\", expected an integer"}},
    {"HeadDimFractional",
     [](json& j) { j["head_dim"] = 127.5; },
     {"field 'head_dim' is the number 127.5, expected an integer"}},
    {"HeadDimKeyOdd", [](json& j) { j["head_dim"] = 127; }, {"head_dim 127 is odd"}},
    {"HeadDimOdd",
     [](json& j) {
       j["hidden_size"] = 32 * 127;
       j["num_attention_heads"] = 32;
     },
     {"head_dim 127 is odd"}},
    {"KvHeadsDoNotDivideHeads",
     [](json& j) { j["num_key_value_heads"] = 5; },
     {"num_attention_heads 32 is not divisible by num_key_value_heads 5"}},
    {"KvHeadsZero",
     [](json& j) { j["num_key_value_heads"] = 0; },
     {"field 'num_key_value_heads' is 0"}},
    {"EpsZero",
     [](json& j) { j["rms_norm_eps"] = 0.0; },
     {"field 'rms_norm_eps' is 0, expected a finite number > 0"}},
    {"EpsNegative", [](json& j) { j["rms_norm_eps"] = -1e-5; }, {"field 'rms_norm_eps' is -1e-05"}},
    {"EpsString",
     [](json& j) { j["rms_norm_eps"] = "1e-5"; },
     {"field 'rms_norm_eps' is the string \"1e-5\", expected a number"}},
    {"ThetaZero", [](json& j) { j["rope_theta"] = 0; }, {"field 'rope_theta' is 0"}},
    {"ThetaNegative",
     [](json& j) { j["rope_theta"] = -500000.0; },
     {"field 'rope_theta' is -500000"}},
    {"TieNotBoolean",
     [](json& j) { j["tie_word_embeddings"] = 1; },
     {"field 'tie_word_embeddings' is the number 1, expected true or false"}},
    {"RopeScalingNotAnObject",
     [](json& j) { j["rope_scaling"] = 8.0; },
     {"field 'rope_scaling' is the number 8.0, expected null or an object"}},
    {"RopeScalingLinear",
     [](json& j) {
       j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
     },
     {"field 'rope_scaling.type' is 'linear'", "only \"llama3\""}},
    {"RopeScalingDynamic",
     [](json& j) {
       j["rope_scaling"] = llama3_rope_scaling();
       j["rope_scaling"]["rope_type"] = "dynamic";
     },
     {"field 'rope_scaling.rope_type' is 'dynamic'", "only \"llama3\""}},
    {"RopeScalingWithoutType",
     [](json& j) {
       j["rope_scaling"] = llama3_rope_scaling();
       j["rope_scaling"].erase("rope_type");
     },
     {"field 'rope_scaling.rope_type' is missing"}},
    {"RopeScalingTypesDisagree",
     [](json& j) {
       j["rope_scaling"] = llama3_rope_scaling();
       j["rope_scaling"]["type"] = "linear";
     },
     {"'rope_scaling.rope_type' is 'llama3' but 'type' is 'linear'"}},
    {"RopeScalingMissingFactor",
     [](json& j) {
       j["rope_scaling"] = llama3_rope_scaling();
       j["rope_scaling"].erase("factor");
     },
     {"field 'rope_scaling.factor' is missing"}},
    {"RopeScalingMissingOriginalLength",
     [](json& j) {
       j["rope_scaling"] = llama3_rope_scaling();
       j["rope_scaling"].erase("original_max_position_embeddings");
     },
     {"field 'rope_scaling.original_max_position_embeddings' is missing"}},
    {"RopeScalingFactorZero",
     [](json& j) {
       j["rope_scaling"] = llama3_rope_scaling();
       j["rope_scaling"]["factor"] = 0.0;
     },
     {"field 'rope_scaling.factor' is 0"}},
    {"RopeScalingHighNotAboveLow",
     [](json& j) {
       j["rope_scaling"] = llama3_rope_scaling();
       j["rope_scaling"]["high_freq_factor"] = 1.0;
     },
     {"'rope_scaling.high_freq_factor' (1) must be greater than 'rope_scaling.low_freq_factor' "
      "(1)"}},
    {"EosString",
     [](json& j) { j["eos_token_id"] = "128001"; },
     {"field 'eos_token_id' is the string \"128001\", expected an integer or a list of integers"}},
    {"EosEmptyList",
     [](json& j) { j["eos_token_id"] = json::array(); },
     {"field 'eos_token_id' is an empty list"}},
    {"EosListWithAString",
     [](json& j) {
       j["eos_token_id"] = {128001, "eot"};
     },
     {"field 'eos_token_id' is the string \"eot\", expected an integer"}},
    {"EosOutsideVocab",
     [](json& j) {
       j["eos_token_id"] = {128001, 200000};
     },
     {"field 'eos_token_id' has token id 200000, outside the vocabulary [0, 128256)"}},
    {"BosNegative",
     [](json& j) { j["bos_token_id"] = -1; },
     {"field 'bos_token_id' has token id -1"}},
    {"HiddenSizeTooLarge",
     [](json& j) { j["hidden_size"] = 18446744073709551615ull; },
     {"field 'hidden_size' is 18446744073709551615, too large"}},
    // Sizes are bounded before anything is built from them.
    {"LayerCountBillion",
     [](json& j) { j["num_hidden_layers"] = 1'000'000'000; },
     {"field 'num_hidden_layers' is 1000000000, more than 1024"}},
    {"LayerCountBillionAsAFloat",
     [](json& j) { j["num_hidden_layers"] = 1e9; },
     {"field 'num_hidden_layers' is the number 1000000000.0, expected an integer"}},
    {"HeadsTimesHeadDimWrapsAround",
     // 4294967297 x 4294967296 is 4294967296 modulo 2^64: equal to hidden_size if unchecked.
     [](json& j) {
       j["hidden_size"] = 4294967296;
       j["num_attention_heads"] = 4294967297;
       j["num_key_value_heads"] = 4294967297;
       j["head_dim"] = 4294967296;
     },
     {"field 'hidden_size' is 4294967296, more than 1048576"}},
    {"HeadCountHuge",
     [](json& j) {
       j["num_attention_heads"] = 1 << 20;
       j["head_dim"] = 128;
     },
     {"field 'num_attention_heads' is 1048576, more than 16384"}},
    {"VocabHuge",
     [](json& j) { j["vocab_size"] = int64_t{1} << 40; },
     {"field 'vocab_size' is 1099511627776, more than 16777216"}},
    {"MaxPositionsBeyond32Bits",
     [](json& j) { j["max_position_embeddings"] = 2147483648; },
     {"field 'max_position_embeddings' is 2147483648, more than 2147483647",
      "32-bit"}},
};

INSTANTIATE_TEST_SUITE_P(Config, InvalidConfigTest, ::testing::ValuesIn(kInvalidConfigs),
                         [](const ::testing::TestParamInfo<InvalidConfig>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace

// ------------------------------------------------------------------------------------------------
// Gemma 3
// ------------------------------------------------------------------------------------------------

namespace gemma {

using clockwork::LayerType;
using clockwork::ModelFamily;

const char* const kGemmaOrigin = "gemma-3-1b-it/config.json";

// config.json of gemma-3-1b-it as published (transformers 4 layout: sliding_window_pattern, no
// layer_types; rope_theta for the global layers, rope_local_base_freq for the local ones).
const char* const kGemma3_1B = R"({
  "architectures": ["Gemma3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attn_logit_softcapping": null,
  "bos_token_id": 2,
  "cache_implementation": "hybrid",
  "eos_token_id": [1, 106],
  "final_logit_softcapping": null,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 1152,
  "initializer_range": 0.02,
  "intermediate_size": 6912,
  "max_position_embeddings": 32768,
  "model_type": "gemma3_text",
  "num_attention_heads": 4,
  "num_hidden_layers": 26,
  "num_key_value_heads": 1,
  "pad_token_id": 0,
  "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": 512,
  "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.50.0.dev0",
  "use_cache": true,
  "vocab_size": 262144
})";

// The multimodal gemma-3-4b-it: the text model under text_config, which names only what differs
// from transformers' defaults; the token ids and the dtype sit at the top level.
const char* const kGemma3_4B = R"({
  "architectures": ["Gemma3ForConditionalGeneration"],
  "boi_token_index": 255999,
  "eoi_token_index": 256000,
  "eos_token_id": [1, 106],
  "image_token_index": 262144,
  "mm_tokens_per_image": 256,
  "model_type": "gemma3",
  "text_config": {
    "hidden_size": 2560,
    "intermediate_size": 10240,
    "model_type": "gemma3_text",
    "num_hidden_layers": 34,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "sliding_window": 1024
  },
  "torch_dtype": "bfloat16",
  "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}
})";

std::string gemma_error(const json& j) {
  return config_error_of([&] { ModelConfig::from_json_text(j.dump(), kGemmaOrigin); });
}

TEST(GemmaConfig, ReadsGemma3_1B) {
  const ModelConfig c = ModelConfig::from_json_text(kGemma3_1B, kGemmaOrigin);
  EXPECT_EQ(c.family, ModelFamily::gemma3);
  EXPECT_EQ(c.hidden_size, 1152);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 256) << "hidden 1152 != 4 x 256 is allowed";
  EXPECT_EQ(c.intermediate_size, 6912);
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_DOUBLE_EQ(c.attention_scale(), 1.0 / 16.0);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 1e4);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 106}));
  ASSERT_EQ(c.layer_types.size(), 26u);
  // sliding_window_pattern 6: layers 5, 11, 17 and 23 are global, the other 22 local.
  for (int64_t i = 0; i < 26; ++i) {
    const bool global = i == 5 || i == 11 || i == 17 || i == 23;
    EXPECT_EQ(c.is_sliding(i), !global) << "layer " << i;
    EXPECT_EQ(c.layer_rope_theta(i), global ? 1e6 : 1e4) << "layer " << i;
  }
}

TEST(GemmaConfig, ReadsTheMultimodalTextConfigWithTransformersDefaults) {
  const ModelConfig c = ModelConfig::from_json_text(kGemma3_4B, "gemma-3-4b-it/config.json");
  EXPECT_EQ(c.family, ModelFamily::gemma3);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_layers, 34);
  EXPECT_EQ(c.intermediate_size, 10240);
  EXPECT_EQ(c.sliding_window, 1024);
  // Not in text_config: Gemma3TextConfig's defaults, which are the 4B's values.
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  // Top level: the end tokens of the instruction-tuned model.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(c.bos_token_id, 2);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "linear");
  EXPECT_EQ(c.rope_scaling->factor, 8.0);
  // The scaling belongs to the global layers only.
  EXPECT_TRUE(c.layer_rope_scaling(5).has_value());
  EXPECT_FALSE(c.layer_rope_scaling(0).has_value());
}

TEST(GemmaConfig, ReadsTransformersFiveLayerTypesAndRopeParameters) {
  json j = json::parse(kGemma3_1B);
  for (const char* key : {"rope_theta", "rope_local_base_freq", "rope_scaling",
                          "sliding_window_pattern"}) {
    j.erase(key);
  }
  j["num_hidden_layers"] = 4;
  // A pattern the older key cannot express: layer_types wins.
  j["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  j["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 200000.0}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 5000.0}}}};
  const ModelConfig c = ModelConfig::from_json_text(j.dump(), kGemmaOrigin);
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::full_attention,
                                                   LayerType::sliding_attention,
                                                   LayerType::sliding_attention,
                                                   LayerType::full_attention}));
  EXPECT_EQ(c.rope_theta, 200000.0);
  EXPECT_EQ(c.rope_local_theta, 5000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 4.0);
  EXPECT_EQ(c.layer_rope_theta(0), 200000.0);
  EXPECT_EQ(c.layer_rope_theta(1), 5000.0);
}

TEST(GemmaConfig, ToJsonRoundTrips) {
  for (const char* text : {kGemma3_1B, kGemma3_4B}) {
    const ModelConfig c = ModelConfig::from_json_text(text, kGemmaOrigin);
    const std::string written = c.to_json();
    EXPECT_TRUE(ModelConfig::from_json_text(written, "to_json()") == c) << written;
    const json j = json::parse(written);
    EXPECT_EQ(j["model_type"], "gemma3_text");
    EXPECT_EQ(j["architectures"], json::array({"Gemma3ForCausalLM"}));
    EXPECT_EQ(j["layer_types"].size(), static_cast<size_t>(c.num_layers));
  }
}

TEST(GemmaConfig, LlamaConfigsHaveNoGemmaSettings) {
  const ModelConfig c = ModelConfig::from_json_text(kLlama3_8B, kOrigin);
  EXPECT_EQ(c.family, ModelFamily::llama);
  EXPECT_TRUE(c.layer_types.empty());
  EXPECT_FALSE(c.is_sliding(0));
  EXPECT_DOUBLE_EQ(c.attention_scale(), 1.0 / std::sqrt(128.0));
  ModelConfig mixed = c;
  mixed.sliding_window = 512;
  EXPECT_TRUE(Mentions(config_error_of([&] { mixed.validate("mixed"); }),
                       {"mixed", "Gemma 3 settings"}));
}

struct InvalidGemma {
  const char* name;
  std::function<void(json&)> edit;
  std::vector<std::string> expected;
};
void PrintTo(const InvalidGemma& c, std::ostream* os) {
  *os << c.name;
}
class InvalidGemmaConfig : public ::testing::TestWithParam<InvalidGemma> {};

TEST_P(InvalidGemmaConfig, IsRejectedNamingTheField) {
  json j = json::parse(kGemma3_1B);
  GetParam().edit(j);
  const std::string message = gemma_error(j);
  EXPECT_TRUE(Mentions(message, {kGemmaOrigin}));
  EXPECT_TRUE(Mentions(message, GetParam().expected));
}

const InvalidGemma kInvalidGemma[] = {
    {"ExactGelu", [](json& j) { j["hidden_activation"] = "gelu"; },
     {"field 'hidden_activation' is 'gelu'", "tanh approximation"}},
    {"FinalSoftcap", [](json& j) { j["final_logit_softcapping"] = 30.0; },
     {"field 'final_logit_softcapping' is the number 30.0", "soft-capping"}},
    {"AttnSoftcap", [](json& j) { j["attn_logit_softcapping"] = 50.0; },
     {"field 'attn_logit_softcapping'", "not supported"}},
    {"LayerTypesTooShort",
     [](json& j) { j["layer_types"] = {"sliding_attention", "full_attention"}; },
     {"field 'layer_types' has 2 entries but num_hidden_layers is 26"}},
    {"LayerTypeUnknown",
     [](json& j) {
       json types = json::array();
       for (int i = 0; i < 26; ++i) types.push_back(i == 3 ? "chunked_attention" : "full_attention");
       j["layer_types"] = types;
     },
     {"field 'layer_types[3]' is the string \"chunked_attention\"", "\"sliding_attention\""}},
    {"PatternZero", [](json& j) { j["sliding_window_pattern"] = 0; },
     {"field 'sliding_window_pattern' is 0"}},
    {"WindowZero", [](json& j) { j["sliding_window"] = 0; }, {"field 'sliding_window' is 0"}},
    {"WindowString", [](json& j) { j["sliding_window"] = "512"; },
     {"field 'sliding_window' is the string \"512\", expected an integer"}},
    {"ScalarNegative", [](json& j) { j["query_pre_attn_scalar"] = -256; },
     {"field 'query_pre_attn_scalar' is -256"}},
    {"LocalThetaZero", [](json& j) { j["rope_local_base_freq"] = 0; },
     {"field 'rope_local_base_freq' is 0"}},
    {"Llama3ScalingOnGemma",
     [](json& j) {
       j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
     },
     {"field 'rope_scaling.rope_type' is 'llama3'", "only \"linear\""}},
    {"ScalingOfLocalLayers",
     [](json& j) {
       j.erase("rope_theta");
       j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
     },
     {"field 'rope_parameters.sliding_attention.rope_type' is 'linear'", "global"}},
    {"Bidirectional", [](json& j) { j["use_bidirectional_attention"] = true; },
     {"field 'use_bidirectional_attention' is true"}},
    {"Gemma2", [](json& j) { j["model_type"] = "gemma2"; },
     {"field 'model_type' is 'gemma2'", "only Gemma 3"}},
    {"TextConfigNotObject",
     [](json& j) {
       j["model_type"] = "gemma3";
       j["text_config"] = json::array();
     },
     {"field 'text_config' is", "expected an object"}},
    {"TextConfigMissing", [](json& j) { j["model_type"] = "gemma3"; },
     {"field 'text_config' is missing"}},
    {"NestedFieldNamed",
     [](json& j) {
       j = json::parse(kGemma3_4B);
       j["text_config"]["head_dim"] = 255;
     },
     {"head_dim 255 is odd"}},
    {"NestedWrongType",
     [](json& j) {
       j = json::parse(kGemma3_4B);
       j["text_config"]["num_hidden_layers"] = "34";
     },
     {"field 'text_config.num_hidden_layers' is the string \"34\""}},
};

INSTANTIATE_TEST_SUITE_P(Gemma, InvalidGemmaConfig, ::testing::ValuesIn(kInvalidGemma),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace gemma
