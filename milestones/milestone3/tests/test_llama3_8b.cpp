// Milestone 3 on the real Llama-3-8B-Instruct (labels milestone3 and llama3-8b).
//
// Runs only when CLOCKWORK_LLAMA3_8B names a local checkpoint directory (config.json, the
// safetensors shards, tokenizer.json or original/tokenizer.model); otherwise it reports itself
// skipped. A chat prompt is tokenized with the checkpoint's own tokenizer and the Llama 3
// Instruct template, then the student pipeline (Model) and the reference run it: every layer's
// output, the final norm, the logits and the next token within the tolerances of end_to_end.h,
// then a few greedy steps of the top-5 inclusion gate (the check `clockwork verify` makes).
//
// Memory: the weights twice (16 GB on the device, or in RAM on the CPU backend, plus the mapped
// checkpoint the reference reads). Time: on a GPU the CPU reference dominates; on the CPU backend
// each forward pass of the course's kernels takes about five minutes (16 times the two-layer
// test_full_size.cpp), and the test makes four.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/model/safetensors.h"
#include "milestones/milestone3/tests/end_to_end.h"
#include "harness/model/model_dir.h"

namespace clockwork {
namespace {

constexpr const char* kPrompt = "What is the capital of France? Answer in one word.";
constexpr int kGateSteps = 4;

TEST(LlamaThreeEightBCheckpoint, MatchesReferenceLayerByLayerAndPassesTheTopFiveGate) {
  const char* env = std::getenv("CLOCKWORK_LLAMA3_8B");
  if (env == nullptr || *env == '\0') {
    GTEST_SKIP() << "CLOCKWORK-SKIP: CLOCKWORK_LLAMA3_8B is not set; point it at a local "
                    "Llama-3-8B-Instruct checkpoint directory to run this test";
  }
  // The checks `clockwork verify` makes before it loads anything, each naming the file at fault.
  const std::filesystem::path dir = require_model_dir(env);
  const ModelConfig config = load_config(dir);
  const Tokenizer tokenizer = load_tokenizer(dir);
  check_tokenizer_fits(tokenizer, config);
  check_tensors(Checkpoint::open(dir), config, /*any_float=*/false);
  const std::vector<int32_t> ids = encode_prompt(tokenizer, kPrompt, /*chat=*/true, "");
  check_prompt_fits(ids.size(), config);
  std::printf("checkpoint: %s\nprompt (chat template): %zu tokens\n", dir.string().c_str(),
              ids.size());

  EndToEndOptions options;
  options.label = "Llama-3-8B-Instruct";
  options.tokenizer = &tokenizer;
  options.gate_steps = kGateSteps;
  check_end_to_end(dir, ids, options);
}

}  // namespace
}  // namespace clockwork
