// What the tests of cudasim's diagnostics share. These .cu files are also built by nvcc (the
// .cuda variants), where cudasim.h is not included: hence a literal and the #ifdef.
#pragma once

namespace cudasim_tests {

/// The exit status of a process cudasim stopped with a diagnostic (cudasim::kDiagnosticExitStatus).
inline constexpr int kDiagnostic = 70;

/// Whether this binary runs its kernels checked (the _check build with CUDASIM_CHECK set).
inline bool checked() {
#ifdef __CUDASIM__
  return cudasim::checking();
#else
  return false;
#endif
}

}  // namespace cudasim_tests
