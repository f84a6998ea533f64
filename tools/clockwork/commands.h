// The `clockwork` subcommands. Each takes the arguments after its name, handles --help itself,
// and returns the exit code; errors are thrown (see cli.h) and reported by main().
#pragma once

#include <string>
#include <vector>

namespace clockwork::cli {

int cmd_tiny_model(const std::vector<std::string>& args);
int cmd_tokenize(const std::vector<std::string>& args);
int cmd_inspect(const std::vector<std::string>& args);
int cmd_generate(const std::vector<std::string>& args);
/// Runs run_verify() in the companion binary clockwork-verify (clockwork-cuda-verify for the GPU
/// build), which alone links libtorch: every other command starts without loading it.
int cmd_verify(const std::vector<std::string>& args);
/// False when this build has no companion verify binary (configured with CLOCKWORK_TORCH=OFF).
bool verify_available();
int cmd_demo(const std::vector<std::string>& args);
/// Times every kernel on Llama-3-8B shapes (bench.cpp; groups register themselves, see bench.h).
int cmd_bench(const std::vector<std::string>& args);

/// The verify command itself (the model against the libtorch reference), in the companion binary.
int run_verify(const std::vector<std::string>& args);

/// The backend this binary's kernels run on: "sim" (the CPU backend) or "cuda".
const char* backend_name();
/// The name of the binary built for the other backend.
const char* other_binary_name();
/// Checks --backend against the backend this binary was linked with (UsageError naming the
/// binary to use instead).
void check_backend(const std::string& requested);
/// On the CUDA build, throws unless a CUDA device is present; nothing to check on the CPU build.
void require_device();

}  // namespace clockwork::cli
