// Which backend this binary's kernels run on. Compiled once per binary: `clockwork` links the
// CPU backend (cudasim), `clockwork-cuda` (built with CLOCKWORK_CLI_CUDA) the GPU kernels and
// libcudart. The rest of the program is the same object code in both.
#ifdef CLOCKWORK_CLI_CUDA
#include <cuda_runtime.h>
#endif

#include <stdexcept>
#include <string>

#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"

namespace clockwork::cli {

#ifdef CLOCKWORK_CLI_CUDA
const char* backend_name() {
  return "cuda";
}
const char* other_binary_name() {
  return "clockwork";
}
#else
const char* backend_name() {
  return "sim";
}
const char* other_binary_name() {
  return "clockwork-cuda";
}
#endif

void check_backend(const std::string& requested) {
  if (requested != "sim" && requested != "cuda") {
    throw UsageError("--backend is '" + requested + "', expected 'cuda' or 'sim'");
  }
  if (requested != backend_name()) {
    throw UsageError("this binary runs the kernels on the " +
                     std::string(requested == "cuda" ? "CPU backend (sim)" : "GPU (cuda)") +
                     "; for --backend " + requested + " run " + other_binary_name());
  }
}

void require_device() {
#ifdef CLOCKWORK_CLI_CUDA
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    throw std::runtime_error(std::string("no CUDA device is available (") +
                             (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") +
                             "); the CPU build, clockwork, runs the same kernels without a GPU");
  }
#endif
}

}  // namespace clockwork::cli
