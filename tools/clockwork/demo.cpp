// `clockwork demo`: the whole tool chain on a model written for the occasion. It writes a tiny
// random checkpoint to a temporary directory, generates from a chat prompt with the course's
// kernels, and verifies them against the libtorch reference, saying what each step does.
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/pipeline/cached_model.h"
#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"
#include "harness/check/temp_dir.h"

namespace clockwork::cli {

namespace fs = std::filesystem;

namespace {

const CommandSpec kSpec{
    "demo",
    "[--keep] [--max-new-tokens N]",
    "Writes a tiny random Llama-3-format model to a temporary directory, generates text from a\n"
    "chat prompt with it (on this binary's backend), then verifies the model layer by layer\n"
    "against the libtorch reference.",
    {
        {"keep", "", "keep the temporary model directory and print its path"},
        {"max-new-tokens", "N", "tokens to generate (default 24)"},
    },
    "",
    ""};

std::string shell_line(const std::string& command, const std::vector<std::string>& args) {
  std::string line = "$ clockwork " + command;
  for (const std::string& a : args) {
    const bool plain = a.find_first_of(" '\"!?$\\") == std::string::npos && !a.empty();
    line += " " + (plain ? a : "'" + a + "'");
  }
  return line;
}

int run_step(const std::string& command, int (*fn)(const std::vector<std::string>&),
             const std::vector<std::string>& args) {
  std::cout << "\n" << shell_line(command, args) << "\n" << std::flush;
  const int rc = fn(args);
  std::cout << std::flush;
  if (rc != 0)
    throw std::runtime_error("step 'clockwork " + command + "' exited with " + std::to_string(rc));
  return rc;
}

struct RemoveOnExit {
  fs::path path;
  ~RemoveOnExit() {
    if (!path.empty()) remove_tree(path);
  }
};

}  // namespace

int cmd_demo(const std::vector<std::string>& argv) {
  const Args args = parse_args(kSpec, argv);
  if (args.help) {
    std::cout << help_text(kSpec);
    return 0;
  }
  const int64_t max_new = args.get_int("max-new-tokens", 24, 1, 4096);

  std::string pattern = (fs::temp_directory_path() / "clockwork-demo-XXXXXX").string();
  if (!mkdtemp(pattern.data())) {
    throw std::runtime_error("cannot create a temporary directory: " +
                             std::string(std::strerror(errno)));
  }
  RemoveOnExit cleanup{pattern};
  const std::string model = (fs::path(pattern) / "tiny-llama").string();

  std::cout
      << "Clockwork demo (" << backend_name() << " backend)\n\n"
      << "1. Write a tiny Llama-3-format model: 2 layers, d = 64, 4 query heads sharing 2 KV\n"
      << "   heads, a 1024-token byte-level BPE vocabulary, bf16 safetensors. Its weights are\n"
      << "   RANDOM, so the text it generates below is gibberish: the point is that your kernels\n"
      << "   run the real model's computation, token by token, on the same files a real\n"
      << "   checkpoint uses.\n";
  run_step("tiny-model", cmd_tiny_model, {"--out", model});

  std::cout << "\n2. Generate from a chat prompt: the prompt goes through the Llama 3 chat\n"
            << "   template and the tokenizer, one forward pass of your model over the prompt fills\n"
            << "   the KV cache, then one decode step per new token, greedy, stopping at <|eot_id|>.\n";
  const std::vector<std::string> generate_args = {"--model", model, "--chat", "--prompt", "What time is it?",
                                                  "--max-new-tokens", std::to_string(max_new)};
  std::vector<std::string> cache_args;
  try {
    run_step("generate", cmd_generate, generate_args);
  } catch (const KvCacheNotWritten&) {
    // A tree before milestone 4 is done: the model itself still runs, one full pass per token.
    std::cout << "   The KV cache of milestone 4 is not written yet, so the demo generates without it:\n"
              << "   one full forward pass per new token.\n";
    cache_args = {"--kv-cache", "none"};
    std::vector<std::string> uncached = generate_args;
    uncached.insert(uncached.end(), cache_args.begin(), cache_args.end());
    run_step("generate", cmd_generate, uncached);
  }

  std::cout << "\n3. Verify against the libtorch reference: per-layer cosine and max |Δ|, the\n"
            << "   logits, the top-5 gate over a few greedy steps, and cached against uncached\n"
            << "   generation.\n";
  if (verify_available()) {
    std::vector<std::string> verify_args = {"--model", model, "--steps", "4"};
    verify_args.insert(verify_args.end(), cache_args.begin(), cache_args.end());
    run_step("verify", cmd_verify, verify_args);
  } else {
    std::cout << "   (skipped: this build has no libtorch reference, CLOCKWORK_TORCH=OFF)\n";
  }

  std::cout
      << "\nThe same commands run the real model: point --model at a local\n"
      << "Meta-Llama-3-8B-Instruct directory (config.json, the four safetensors shards,\n"
      << "tokenizer.json), e.g.\n"
      << "  clockwork-cuda generate --model Meta-Llama-3-8B-Instruct --chat \\\n"
      << "      --prompt 'What time is it?'\n"
      << "(an 8B model wants a GPU: the CPU backend runs the same kernels, far too slowly).\n";
  if (args.has("keep")) {
    std::cout << "\nThe tiny model is kept in " << model << "\n";
    cleanup.path.clear();
  }
  return 0;
}

}  // namespace clockwork::cli
