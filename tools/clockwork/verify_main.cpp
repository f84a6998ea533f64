// clockwork-verify (and clockwork-cuda-verify): the `verify` command in a binary of its own, the
// only one that links libtorch, so that the other commands start without loading it.
// `clockwork verify ...` runs it with the same arguments.
#include <string>
#include <vector>

#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return clockwork::cli::run_command("verify", clockwork::cli::run_verify, args);
}
