/// @file process.h
/// Running a program with a time limit, as the autograder and the handout checks need it: the
/// program gets its own process group so that a timeout stops it and everything it started
/// (compilers under a build, death-test children under a test), its output goes to a file (a
/// program that prints without end cannot fill the grader's memory), and the result says
/// whether it exited, crashed or ran out of time.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace clockwork::handout {

struct RunOptions {
  std::vector<std::string> argv;  ///< program and arguments; the program is looked up in PATH
  std::filesystem::path cwd;      ///< working directory (empty: the current one)
  /// Environment changes: a value sets the variable, nullopt removes it.
  std::map<std::string, std::optional<std::string>> env;
  double timeout_s = 0;  ///< 0: no limit
  /// Where stdout and stderr go (together, in order). Empty: a temporary file, removed after.
  std::filesystem::path output_file;
  /// How much of the output RunResult::output keeps: the first and last halves of this budget.
  size_t max_output = 64 * 1024;
  /// Largest file the program may write (RLIMIT_FSIZE), 0 for no limit: stops a runaway printer.
  unsigned long long max_file_bytes = 0;
  /// Descriptors of the caller that the program inherits under the same numbers (all others are
  /// closed on exec): open them with O_CLOEXEC, so that programs run side by side from other
  /// threads never get them.
  std::vector<int> keep_fds;
};

struct RunResult {
  bool started = false;  ///< false: the program could not be run (see `error`)
  std::string error;     ///< why it could not be run
  int exit_code = -1;    ///< exit status when it exited normally, else -1
  int signal = 0;        ///< the signal that ended it, else 0
  bool timed_out = false;
  double seconds = 0;
  std::string output;          ///< stdout and stderr, shortened to RunOptions::max_output
  size_t output_bytes = 0;     ///< size of the whole output

  bool succeeded() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  /// "exit status 1", "killed by signal 11 (Segmentation fault)", "stopped after 30 s", ...
  std::string describe() const;
};

/// Runs the program and waits for it (or for the time limit, after which its whole process group
/// is killed). The program is killed too if the calling thread ends first (a caller stopped by a
/// signal). Never throws for failures of the program itself.
RunResult run_process(const RunOptions& options);

/// `text` cut to at most `max` bytes at UTF-8 character boundaries, keeping its beginning and end
/// (`head_fraction` of the budget for the beginning) with a note of what was left out.
std::string shorten(const std::string& text, size_t max, double head_fraction = 0.5);

/// Finds `name` in PATH (or returns it when it contains a slash and exists); empty when absent.
std::string find_program(const std::string& name);

}  // namespace clockwork::handout
