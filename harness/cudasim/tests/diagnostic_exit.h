// What the tests of cudasim's diagnostics share. These .cu files are also built by nvcc (the
// .cuda variants), where cudasim.h is not included: hence a literal and the #ifdef.
#pragma once

#include <gtest/gtest.h>

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

/// Base of the fixtures whose tests are CPU-backend diagnostics. Their kernels hang or are
/// undefined on a GPU, so the CUDA build skips them. Their death tests re-run this program for
/// the statement alone ("threadsafe"), so the child inherits no block-running threads. A derived
/// SetUp() calls this one first and returns when IsSkipped().
class CpuBackendDiagnostics : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef __CUDASIM__
    GTEST_SKIP() << "CPU-backend diagnostics: these kernels hang or are undefined on a GPU";
#endif
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

}  // namespace cudasim_tests
