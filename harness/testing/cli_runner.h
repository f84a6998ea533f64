// Running the `clockwork` binary from a test, as a user would, and checking its error lines.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace clockwork::cli_test {

struct RunResult {
  int code = -1;    ///< exit code (128 + signal number when killed by a signal)
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// The binary under test: $CLOCKWORK_CLI when set (clockwork-cuda), else the CPU build.
std::string cli_binary();

/// Runs the binary with `args` and waits for it.
RunResult run_cli(const std::vector<std::string>& args);

/// A fresh empty directory under the system's temporary directory, removed by the caller.
std::filesystem::path make_temp_dir(const std::string& tag);

/// Empty when `r` is the one-line error the program promises for `command` (exit code `code`,
/// exactly one stderr line starting "clockwork <command>: error: " and containing every string
/// of `mentions`); otherwise what is wrong with it, and the output, for the failure message.
std::string check_error(const RunResult& r, const std::string& command, int code,
                        const std::vector<std::string>& mentions);

/// True when the binary is the GPU build and the machine has no GPU (the model cannot run).
bool model_backend_missing(const RunResult& r);

}  // namespace clockwork::cli_test
