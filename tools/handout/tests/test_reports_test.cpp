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
// GoogleTest 1.12 escapes each byte of a UTF-8 character on its own: FAIL() << "γ ᵀ ε" is
// written as below (taken from a real report). The grader shows students these messages.
TEST(GtestReport, MessagesKeepTheirUtf8) {
  const std::string report = R"({"testsuites": [{"name": "Rope", "testsuite": [{"name": "Tables", "status": "RUN",
    "result": "COMPLETED", "time": "0.01s", "failures": [{"failure": "rope.cpp:2\nFailed\n\u00CE\u00B3 \u00E1\u00B5\u0080 \u00CE\u00B5 = 1e-5", "type": ""}],
    "note": "\u00CE\u00B8 \u00E2\u0089\u00A4 2"}]}]})";
  const GtestReport r = parse_gtest_report(report);
  ASSERT_TRUE(r.valid) << r.error;
  ASSERT_EQ(r.cases.size(), 1u);
  ASSERT_EQ(r.cases[0].failures.size(), 1u);
  EXPECT_EQ(r.cases[0].failures[0], "rope.cpp:2\nFailed\nγ ᵀ ε = 1e-5");
  EXPECT_EQ(r.cases[0].properties.at("note"), "θ ≤ 2");
}

// Text that was escaped properly (characters past U+00FF), and Latin-1 characters whose bytes are
// not UTF-8, are left as they are.
TEST(GtestReport, ProperlyEscapedTextIsLeftAlone) {
  const std::string report = R"({"testsuites": [{"name": "S", "testsuite": [{"name": "T", "status": "RUN",
    "result": "COMPLETED", "time": "0s", "failures": [{"failure": "\u03B3 and \u00CE\u00B3", "type": ""},
    {"failure": "caf\u00E9", "type": ""}]}]}]})";
  const GtestReport r = parse_gtest_report(report);
  ASSERT_TRUE(r.valid) << r.error;
  ASSERT_EQ(r.cases.at(0).failures.size(), 2u);
  EXPECT_EQ(r.cases[0].failures[0], "γ and Î³");
  EXPECT_EQ(r.cases[0].failures[1], "café");
}

}  // namespace clockwork::handout
