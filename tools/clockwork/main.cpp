// `clockwork`: the command-line front end of the course's Llama-3 inference.
//
//   clockwork tiny-model --out DIR      write a small random checkpoint in Llama-3 format
//   clockwork tokenize   --model DIR    text <-> token ids
//   clockwork inspect    --model DIR    config, tensors, parameter count
//   clockwork generate   --model DIR    run the student model on a prompt
//   clockwork verify     --model DIR    compare the student model with the libtorch reference
//   clockwork demo                      all of the above on a tiny model
//   clockwork bench [--op NAMES]        time the kernels on Llama-3-8B shapes
//
// Every failure ends as one line on stderr, "clockwork <command>: error: ...", with exit code 2
// for a wrong command line and 1 for anything else.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* summary;
};

const Command kCommands[] = {
    {"tiny-model", clockwork::cli::cmd_tiny_model,
     "write a random-weight checkpoint and tokenizer in Llama-3 format"},
    {"tokenize", clockwork::cli::cmd_tokenize, "encode text to token ids, or decode ids"},
    {"inspect", clockwork::cli::cmd_inspect, "show a model's config, tensors and size"},
    {"generate", clockwork::cli::cmd_generate, "generate text with the model (your kernels)"},
    {"verify", clockwork::cli::cmd_verify,
     "compare the model layer by layer with the libtorch reference"},
    {"demo", clockwork::cli::cmd_demo, "tiny-model, generate and verify on a temporary model"},
    {"bench", clockwork::cli::cmd_bench,
     "time every kernel on Llama-3-8B shapes (GB/s, TFLOP/s, % of peak)"},
};

void print_usage(std::FILE* to) {
  std::fprintf(to, "usage: clockwork <command> [options]   (backend: %s)\n\ncommands:\n",
               clockwork::cli::backend_name());
  for (const Command& c : kCommands) std::fprintf(to, "  %-11s %s\n", c.name, c.summary);
  std::fprintf(to, "\nRun 'clockwork <command> --help' for the options of a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(stderr);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(stdout);
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& c : kCommands) {
    if (args[0] == c.name) command = &c;
  }
  if (!command) {
    std::string names;
    for (const Command& c : kCommands) names += std::string(names.empty() ? "" : ", ") + c.name;
    std::fprintf(stderr, "clockwork: error: unknown command '%s' (commands: %s)\n", args[0].c_str(),
                 names.c_str());
    return 2;
  }
  args.erase(args.begin());

  return clockwork::cli::run_command(command->name, command->run, args);
}
