// Shared between the two halves of the runtime: execution (exec.cpp) and the CUDA API (api.cpp).
#pragma once

#include <cstddef>
#include <string>

#include "cudasim/cudasim.h"

namespace cudasim::detail {

// The device the CPU backend presents itself as: an Ampere-class GPU (compute capability 8.0).
inline constexpr size_t kMaxStaticSharedBytes = 48 * 1024;    // __shared__ declarations per block
inline constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;
inline constexpr size_t kMaxSharedBytes = 163 * 1024;         // with cudaFuncSetAttribute opt-in

/// Prints a diagnostic and ends the process with kDiagnosticExitStatus.
[[noreturn]] void fatal(const std::string& message);

/// Validates a launch like the CUDA runtime; on failure sets the last error, explains on stderr
/// and returns false.
bool check_launch(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line);

/// OS threads that run blocks (reported as the multiprocessor count).
unsigned simulated_multiprocessors();

/// Whether fresh memory is poisoned (CUDASIM_POISON, default on; see reload_options()).
bool poison_enabled();

}  // namespace cudasim::detail
