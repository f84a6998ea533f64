// Milestone 3 at Llama-3-8B's real sizes, end to end (labels milestone3 and slow).
//
// `clockwork tiny-model --preset llama3-8b --layers 2` writes a checkpoint in the released
// model's format with its exact per-layer shapes (d = 4096, h = 32, h_k = 8, h_d = 128,
// d_ff = 14336, V = 128256, special tokens at 128000..128255) but only two of its 32 layers:
// 3.0 GB of random bf16 weights. The student pipeline (Model) and the reference run the same
// tokenized prompt on it; both layers' outputs, the final norm, the logits and the next token
// must agree within the tolerances of end_to_end.h.
//
// The small models of test_model.cpp find the same mistakes in a fraction of the time; this test
// adds what only the real sizes exercise: head_dim 128, rows of 4096 and 14336, a 1 GB lm_head
// GEMV over 128256 rows, and a tokenizer whose special ids are the release's.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/check/random.h"
#include "harness/check/temp_dir.h"
#include "milestones/milestone3/tests/end_to_end.h"
#include "harness/model/model_dir.h"
#include "harness/testing/cli_runner.h"

namespace clockwork {
namespace {

TEST(LlamaThreeEightBSizes, TwoLayersEndToEnd) {
  // tiny-model takes a seed in [0, 2^63).
  const uint64_t seed = test_seed(2500) & 0x7fffffffffffffffULL;
  TempDir tmp("clockwork-llama3-8b-sizes");
  const std::filesystem::path dir = tmp / "model";
  const cli_test::RunResult written =
      cli_test::run_cli({"tiny-model", "--out", dir.string(), "--preset", "llama3-8b", "--layers",
                         "2", "--context", "64", "--seed", std::to_string(seed)});
  ASSERT_EQ(written.code, 0) << "clockwork tiny-model failed:\n" << written.err;

  // A short prompt (9 tokens with this tokenizer): every shape but s is the real one. On the CPU
  // backend the projections cost the same for any s up to the matmul's 32-row tile, so the
  // forward pass takes about as long as for one token.
  const Tokenizer tokenizer = load_tokenizer(dir);
  const std::vector<int32_t> ids =
      encode_prompt(tokenizer, "The capital of France is", /*chat=*/false, "");
  ASSERT_GE(ids.size(), 4u) << "the prompt should span several positions (RoPE, the mask)";

  EndToEndOptions options;
  options.label =
      "2 layers with Llama-3-8B's sizes (random weights, seed " + std::to_string(seed) + ")";
  options.tokenizer = &tokenizer;
  options.name_pitfalls = true;
  // The host argmax of the checked logits: the argmax kernel has its own tests, and one more
  // forward pass would add a third to the run time.
  options.device_argmax = false;
  check_end_to_end(dir, ids, options);
}

}  // namespace
}  // namespace clockwork
