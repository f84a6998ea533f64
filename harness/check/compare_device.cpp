// matches_reference() for an output still on the device. Kept apart from compare.cpp so that a
// host-only test of the comparison links without a CUDA runtime.
#include <string>

#include "harness/check/compare.h"

namespace clockwork {

::testing::AssertionResult matches_reference(const DeviceBuffer<float>& got,
                                             const std::vector<float>& expected, Tolerance tol,
                                             const std::vector<PitfallCandidate>& pitfalls,
                                             const std::vector<std::string>& dim_names) {
  const std::string damage = got.check_guards();
  ::testing::AssertionResult values = matches_reference(got.name(), got.download(), expected,
                                                        got.shape(), tol, pitfalls, dim_names);
  if (damage.empty()) return values;
  return ::testing::AssertionFailure()
         << damage << ": check the kernel's bounds test and the index it writes.\n"
         << values.message();
}

}  // namespace clockwork
