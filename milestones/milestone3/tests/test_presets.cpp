// Milestone 3 at the real sizes of the smaller Llama 3 checkpoints, end to end (labels milestone3
// and slow). One ctest entry per preset (milestone3_presets.<preset>.sim).
//
// `clockwork tiny-model --preset NAME --layers N` writes a checkpoint with the released model's
// exact per-layer shapes and configuration but only N of its layers and random weights:
//   llama3.2-1b   d = 2048, h = 32, h_k = 8, h_d = 64, d_ff = 8192, tied lm_head,
//                 llama3 rope scaling (factor 32); 2 layers                     0.8 GB
//   llama3.2-3b   d = 3072, h = 24, h_k = 8, h_d = 128, d_ff = 8192, tied lm_head,
//                 llama3 rope scaling (factor 32); 2 layers                     1.2 GB
//   llama3.1-8b   Llama-3-8B's shapes, untied, llama3 rope scaling (factor 8);
//                 1 layer                                                       2.5 GB
// (milestone3_full_size already runs two layers of these shapes without scaling; one layer
// keeps this test near a minute.) The student pipeline (Model) and the reference run the same
// tokenized prompt on it; every layer's output, the final norm, the logits and the next token
// must agree within the tolerances of end_to_end.h. What the tiny models of test_model.cpp cannot show: head_dim 64
// next to 128, 24 heads (not a power of two), a tied 128256-row lm_head, and rope scaling at the
// real head sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/check/random.h"
#include "harness/check/temp_dir.h"
#include "harness/model/model_dir.h"
#include "harness/testing/cli_runner.h"
#include "milestones/milestone3/tests/end_to_end.h"

namespace clockwork {
namespace {

struct Expected {
  int64_t d, h, h_k, h_d, d_ff;
  bool tied;
  double rope_factor;
};

void check_preset(const std::string& preset, int64_t layers, const Expected& want,
                  uint64_t seed_base) {
  // tiny-model takes a seed in [0, 2^63).
  const uint64_t seed = test_seed(seed_base) & 0x7fffffffffffffffULL;
  TempDir tmp("clockwork-" + preset);
  const std::filesystem::path dir = tmp / "model";
  const cli_test::RunResult written =
      cli_test::run_cli({"tiny-model", "--out", dir.string(), "--preset", preset, "--layers",
                         std::to_string(layers),
                         "--context", "64", "--seed", std::to_string(seed)});
  ASSERT_EQ(written.code, 0) << "clockwork tiny-model failed:\n" << written.err;

  // The written config is the release's, apart from the layer count and the context.
  const ModelConfig c = load_config(dir);
  EXPECT_EQ(c.hidden_size, want.d);
  EXPECT_EQ(c.num_heads, want.h);
  EXPECT_EQ(c.num_kv_heads, want.h_k);
  EXPECT_EQ(c.head_dim, want.h_d);
  EXPECT_EQ(c.intermediate_size, want.d_ff);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.num_layers, layers);
  EXPECT_EQ(c.tie_word_embeddings, want.tied);
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value()) << "Llama 3.1 and 3.2 scale RoPE";
  EXPECT_EQ(c.rope_scaling->factor, want.rope_factor);
  EXPECT_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);

  // A short prompt: every shape but s is the real one.
  const Tokenizer tokenizer = load_tokenizer(dir);
  const std::vector<int32_t> ids =
      encode_prompt(tokenizer, "The capital of France is", /*chat=*/false, "");
  ASSERT_GE(ids.size(), 4u) << "the prompt should span several positions (RoPE, the mask)";

  EndToEndOptions options;
  options.label = std::to_string(layers) + " layer(s) with " + preset + "'s sizes (random weights, seed " +
                  std::to_string(seed) + ")";
  options.tokenizer = &tokenizer;
  options.name_pitfalls = true;
  // The host argmax of the checked logits: the argmax kernel has its own tests.
  options.device_argmax = false;
  check_end_to_end(dir, ids, options);
}

TEST(Presets, Llama32_1B) {
  check_preset("llama3.2-1b", 2, {2048, 32, 8, 64, 8192, true, 32.0}, 2600);
}

TEST(Presets, Llama32_3B) {
  check_preset("llama3.2-3b", 2, {3072, 24, 8, 128, 8192, true, 32.0}, 2610);
}

TEST(Presets, Llama31_8B) {
  check_preset("llama3.1-8b", 1, {4096, 32, 8, 128, 14336, false, 8.0}, 2620);
}

}  // namespace
}  // namespace clockwork
