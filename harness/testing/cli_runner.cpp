// Running the `clockwork` binary from tests (see cli_runner.h).
#include "harness/testing/cli_runner.h"
#include "harness/check/temp_dir.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <fstream>
#include <sstream>

namespace clockwork::cli_test {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string cli_binary() {
  if (const char* env = std::getenv("CLOCKWORK_CLI"); env && *env) return env;
  return CLOCKWORK_CLI_BINARY;
}

fs::path make_temp_dir(const std::string& tag) {
  std::string pattern = (fs::temp_directory_path() / ("clockwork-" + tag + "-XXXXXX")).string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  return pattern;
}

RunResult run_cli(const std::vector<std::string>& args) {
  // Where the output is captured; removed when the test binary exits.
  struct Scratch {
    fs::path path = make_temp_dir("cli-output");
    ~Scratch() { remove_tree(path); }
  };
  static const Scratch scratch;
  const fs::path out = scratch.path / "stdout", err = scratch.path / "stderr";
  std::string command = shell_quote(cli_binary());
  for (const std::string& a : args) command += " " + shell_quote(a);
  command += " </dev/null >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string());
  const int status = std::system(command.c_str());
  RunResult r;
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.code = 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string check_error(const RunResult& r, const std::string& command, int code,
                        const std::vector<std::string>& mentions) {
  std::string problems;
  if (r.code != code) {
    problems += "exit code " + std::to_string(r.code) + ", expected " + std::to_string(code) + "; ";
  }
  const std::string prefix = "clockwork " + command + ": error: ";
  const size_t lines = static_cast<size_t>(std::count(r.err.begin(), r.err.end(), '\n'));
  if (lines != 1 || r.err.empty() || r.err.back() != '\n')
    problems += "stderr is not exactly one line; ";
  if (r.err.rfind(prefix, 0) != 0) problems += "stderr does not start with '" + prefix + "'; ";
  for (const std::string& m : mentions) {
    if (r.err.find(m) == std::string::npos) problems += "stderr does not mention '" + m + "'; ";
  }
  if (problems.empty()) return "";
  return problems + "\n--- stderr ---\n" + r.err + "--- stdout ---\n" + r.out;
}

bool model_backend_missing(const RunResult& r) {
  return r.err.find("no CUDA device is available") != std::string::npos;
}

}  // namespace clockwork::cli_test
