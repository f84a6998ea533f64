// `clockwork verify` hands over to the companion binary that links libtorch (see commands.h).
// Loading libtorch costs a second or two at start-up, which every other command is spared.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/clockwork/commands.h"

namespace clockwork::cli {

namespace fs = std::filesystem;

namespace {

const char* helper_name() {
  return std::string(backend_name()) == "cuda" ? "clockwork-cuda-verify" : "clockwork-verify";
}

// Where the companion binary should be: next to this program.
fs::path helper_path(std::error_code& ec) {
  return fs::read_symlink("/proc/self/exe", ec).parent_path() / helper_name();
}

}  // namespace

bool verify_available() {
  std::error_code ec;
  const fs::path helper = helper_path(ec);
  return !ec && fs::exists(helper, ec);
}

int cmd_verify(const std::vector<std::string>& args) {
  const std::string name = helper_name();
  std::error_code ec;
  const fs::path helper = helper_path(ec);
  if (!verify_available()) {
    throw std::runtime_error(name + " was not found next to this program" +
                             (ec ? std::string() : " (in " + helper.parent_path().string() + ")") +
                             "; it is built when libtorch is available (CLOCKWORK_TORCH=ON)");
  }

  std::vector<std::string> words{name};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("cannot start ") + name + ": " + std::strerror(errno));
  }
  if (pid == 0) {
    execv(helper.c_str(), argv.data());
    std::fprintf(stderr, "clockwork verify: error: cannot run %s: %s\n", helper.c_str(),
                 std::strerror(errno));
    _exit(1);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waiting for ") + name + " failed");
  }
  if (WIFSIGNALED(status)) {
    throw std::runtime_error(name + " was killed by signal " + std::to_string(WTERMSIG(status)) +
                             " (" + strsignal(WTERMSIG(status)) + ")");
  }
  return WEXITSTATUS(status);
}

}  // namespace clockwork::cli
