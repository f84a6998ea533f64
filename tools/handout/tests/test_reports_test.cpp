// Reading ctest's listing: which build target makes each test's program.
#include "tools/handout/test_reports.h"

#include <gtest/gtest.h>

namespace clockwork::handout {
namespace {

TEST(CtestListing, TargetOfATestWhoseProgramIsNotBuiltYetComesFromItsName) {
  // ctest lists no command for a program that does not exist yet (a fresh handout build): the
  // target is then derived from the test's name, one per backend's suffix.
  const std::vector<CtestTest> tests = parse_ctest_listing(R"({"tests": [
      {"name": "milestone1_kernels.sim"}, {"name": "milestone1_kernels.check"},
      {"name": "milestone1_kernels.cuda"}, {"name": "layout_tests"},
      {"name": "milestone2_kernels.sim", "command": ["/b/bin/milestone2_kernels_sim", "--gtest_color=no"]}]})");
  ASSERT_EQ(tests.size(), 5u);
  EXPECT_EQ(tests[0].target(), "milestone1_kernels_sim");
  EXPECT_EQ(tests[1].target(), "milestone1_kernels_check");
  EXPECT_EQ(tests[2].target(), "milestone1_kernels_cuda");
  EXPECT_EQ(tests[3].target(), "layout_tests");
  EXPECT_EQ(tests[4].target(), "milestone2_kernels_sim");
}

}  // namespace
}  // namespace clockwork::handout
