// The whole model on checkpoints written by HuggingFace transformers (reference/tests/transformers:
// tiny Llama models whose config.json and safetensors files are as transformers saves them). The
// reference matches transformers' own logits on them (reference_transformers_test); here the
// pipeline is checked against the reference layer by layer, so a student's model meets options
// the generated checkpoints do not all use: head_dim other than hidden_size / heads, llama3 RoPE
// scaling with a short original context, rms_norm_eps 1e-6, tied embeddings without lm_head.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "milestones/milestone3/tests/end_to_end.h"

namespace clockwork {
namespace {

namespace fs = std::filesystem;

void check_fixture(const std::string& name, const std::string& what) {
  const fs::path dir = fs::path(CLOCKWORK_TRANSFORMERS_FIXTURES) / name;
  std::ifstream in(dir / "expected.json");
  ASSERT_TRUE(in) << "cannot read " << (dir / "expected.json");
  const std::vector<int32_t> prompt =
      nlohmann::json::parse(in).at("prompt").get<std::vector<int32_t>>();
  EndToEndOptions options;
  options.label = name + " (" + what + ")";
  options.gate_steps = 3;
  options.name_pitfalls = true;
  check_end_to_end(dir, prompt, options);
}

TEST(TransformersCheckpoints, ScaledRopeAndWideHeads) {
  check_fixture("llama3-scaled-rope",
                "GQA 4/2, head_dim 32 with hidden_size 64, llama3 RoPE scaling, eps 1e-6");
}

TEST(TransformersCheckpoints, TiedEmbeddings) {
  check_fixture("llama-tied", "6 heads of 16, tied embeddings, no lm_head.weight");
}

}  // namespace
}  // namespace clockwork
