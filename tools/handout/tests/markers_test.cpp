// The marker engine on small inline files: staging across milestones, stubs, indentation, line
// endings, and every malformed marker reported with its file and line.
//
// Inputs are written one quoted line at a time so that this file itself holds no marker lines (the
// handout generator reads it like every other source).
#include <gtest/gtest.h>

#include <string>

#include "tools/handout/markers.h"

namespace clockwork::handout {
namespace {

// A kernel with a milestone-1 and a milestone-2 region.
const std::string kTwoRegions =
    "void f(int* y, int n) {\n"
    "  // BEGIN SOLUTION(m1): Write 1 to every element of y.\n"
    "  // Mind the last element.\n"
    "  for (int i = 0; i < n; ++i) y[i] = 1;\n"
    "  // STUB: (void)y;\n"
    "  // STUB: (void)n;\n"
    "  // END SOLUTION\n"
    "}\n"
    "int g(int x) {\n"
    "    // BEGIN SOLUTION(m2): Return twice x.\n"
    "    return 2 * x;\n"
    "    // STUB: return 0;\n"
    "    // END SOLUTION\n"
    "}\n";

TEST(Markers, KeepsSolutionsBeforeTheMilestoneAndStubsTheRest) {
  const StripResult r = strip_solutions(kTwoRegions, "k.cu", 2);
  ASSERT_TRUE(r.ok()) << r.errors[0].str();
  EXPECT_EQ(r.text,
            "void f(int* y, int n) {\n"
            "  for (int i = 0; i < n; ++i) y[i] = 1;\n"
            "}\n"
            "int g(int x) {\n"
            "    // TODO(m2): Return twice x.\n"
            "    return 0;\n"
            "}\n");
  ASSERT_EQ(r.regions.size(), 2u);
  EXPECT_EQ(r.regions[0].milestone, 1);
  EXPECT_FALSE(r.regions[0].stubbed);
  EXPECT_EQ(r.regions[1].milestone, 2);
  EXPECT_TRUE(r.regions[1].stubbed);
  EXPECT_EQ(r.regions[1].begin_line, 10);
  EXPECT_EQ(r.regions[1].end_line, 13);
  EXPECT_TRUE(r.stubbed());
}

TEST(Markers, MilestoneOneStubsEverythingWithMultiLineTasks) {
  const StripResult r = strip_solutions(kTwoRegions, "k.cu", 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.text,
            "void f(int* y, int n) {\n"
            "  // TODO(m1): Write 1 to every element of y.\n"
            "  // Mind the last element.\n"
            "  (void)y;\n"
            "  (void)n;\n"
            "}\n"
            "int g(int x) {\n"
            "    // TODO(m2): Return twice x.\n"
            "    return 0;\n"
            "}\n");
}

TEST(Markers, LaterMilestoneKeepsEverySolution) {
  const StripResult r = strip_solutions(kTwoRegions, "k.cu", 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.text,
            "void f(int* y, int n) {\n"
            "  for (int i = 0; i < n; ++i) y[i] = 1;\n"
            "}\n"
            "int g(int x) {\n"
            "    return 2 * x;\n"
            "}\n");
  EXPECT_FALSE(r.stubbed());
}

TEST(Markers, FilesWithoutMarkersAreUnchanged) {
  const std::string text = "int main() {\n  // an ordinary comment\n  return 0;\n}";
  const StripResult r = strip_solutions(text, "main.cpp", 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.text, text);
  EXPECT_TRUE(r.regions.empty());
}

TEST(Markers, TaskTextEndsAtTheFirstLineThatIsNotAComment) {
  // The blank line ends the task; the comment after it belongs to the solution.
  const std::string text =
      "  // BEGIN SOLUTION(m1): Task.\n"
      "  //   - indented item\n"
      "  //\n"
      "  // last task line\n"
      "\n"
      "  // a comment of the solution\n"
      "  int a = 1;\n"
      "  // STUB: int a = 0;\n"
      "  // END SOLUTION\n";
  const StripResult stub = strip_solutions(text, "t.cpp", 1);
  ASSERT_TRUE(stub.ok());
  EXPECT_EQ(stub.text,
            "  // TODO(m1): Task.\n"
            "  //   - indented item\n"
            "  //\n"
            "  // last task line\n"
            "  int a = 0;\n");
  const StripResult keep = strip_solutions(text, "t.cpp", 2);
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep.text,
            "\n"
            "  // a comment of the solution\n"
            "  int a = 1;\n");
}

TEST(Markers, StubIndentationFollowsTheOpeningLine) {
  // The STUB lines are less indented than the opening marker; their code keeps its own inner
  // indentation after the one space of the prefix.
  const std::string text =
      "\t\t// BEGIN SOLUTION(m1): Do it.\n"
      "\t\tx = 1;\n"
      "// STUB: if (x) {\n"
      "// STUB:   x = 0;\n"
      "// STUB: }\n"
      "// STUB:\n"
      "\t\t// END SOLUTION\n";
  const StripResult r = strip_solutions(text, "t.cpp", 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.text,
            "\t\t// TODO(m1): Do it.\n"
            "\t\tif (x) {\n"
            "\t\t  x = 0;\n"
            "\t\t}\n"
            "\n");
}

TEST(Markers, BlankLinesBetweenStubsAndEndAreDropped) {
  const std::string text =
      "  // BEGIN SOLUTION(m1): Task.\n"
      "  a();\n"
      "  // STUB: b();\n"
      "\n"
      "  // END SOLUTION\n";
  const StripResult r = strip_solutions(text, "t.cpp", 1);
  ASSERT_TRUE(r.ok()) << r.errors[0].str();
  EXPECT_EQ(r.text, "  // TODO(m1): Task.\n  b();\n");
}

TEST(Markers, RegionWithoutStubLeavesOnlyTheTodo) {
  const std::string text =
      "  // BEGIN SOLUTION(m4)\n"
      "  helper();\n"
      "  // END SOLUTION\n";
  const StripResult r = strip_solutions(text, "t.cpp", 4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.text, "  // TODO(m4)\n");
}

TEST(Markers, MultiDigitMilestones) {
  const std::string text =
      "// BEGIN SOLUTION(m12): Late work.\n"
      "x();\n"
      "// END SOLUTION\n";
  EXPECT_EQ(strip_solutions(text, "t.cpp", 12).text, "// TODO(m12): Late work.\n");
  EXPECT_EQ(strip_solutions(text, "t.cpp", 13).text, "x();\n");
}

TEST(Markers, KeepsWindowsLineEndingsAndAMissingLastNewline) {
  const std::string text =
      "a\r\n"
      "  // BEGIN SOLUTION(m1): Task.\r\n"
      "  b();\r\n"
      "  // STUB: c();\r\n"
      "  // END SOLUTION";
  const StripResult stub = strip_solutions(text, "t.cpp", 1);
  ASSERT_TRUE(stub.ok());
  EXPECT_EQ(stub.text, "a\r\n  // TODO(m1): Task.\r\n  c();");
  const StripResult keep = strip_solutions(text, "t.cpp", 2);
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep.text, "a\r\n  b();\r\n");
}

TEST(Markers, HashCommentsForCMakeAndScripts) {
  const std::string text =
      "set(A 1)\n"
      "# BEGIN SOLUTION(m2): Add the library.\n"
      "add_library(x x.cpp)\n"
      "# STUB: # nothing yet\n"
      "# END SOLUTION\n";
  const StripResult r = strip_solutions(text, "CMakeLists.txt", 1, comment_leader_for("CMakeLists.txt"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.text, "set(A 1)\n# TODO(m2): Add the library.\n# nothing yet\n");
}

TEST(Markers, CommentLeaderByFileName) {
  EXPECT_EQ(comment_leader_for("kernels/matmul.cu"), "//");
  EXPECT_EQ(comment_leader_for("a/b.cuh"), "//");
  EXPECT_EQ(comment_leader_for("milestones/milestone2/qkv.cpp"), "//");
  EXPECT_EQ(comment_leader_for("kernels/kernels.h"), "//");
  EXPECT_EQ(comment_leader_for("x/CMakeLists.txt"), "#");
  EXPECT_EQ(comment_leader_for("cmake/Cudasim.cmake"), "#");
  EXPECT_EQ(comment_leader_for(".ci/run.sh"), "#");
  // Documentation keeps its examples of the markers.
  EXPECT_EQ(comment_leader_for("handouts/solution-markers.md"), "");
  EXPECT_EQ(comment_leader_for("grading/rubric.json"), "");
  const std::string doc = "```cpp\n  // BEGIN SOLUTION(m2): text\n  // END SOLUTION\n```\n";
  EXPECT_EQ(strip_solutions(doc, "x.md", 1, comment_leader_for("x.md")).text, doc);
}

// ---- errors: reported with file:line, and no text ------------------------------------------

MarkerError only_error(const std::string& text) {
  const StripResult r = strip_solutions(text, "kernels/bad.cu", 1);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.text.empty());
  EXPECT_EQ(r.errors.size(), 1u);
  return r.errors.empty() ? MarkerError{} : r.errors[0];
}

TEST(MarkerErrors, NestedRegion) {
  const MarkerError e = only_error(
      "int x;\n"
      "// BEGIN SOLUTION(m1): outer\n"
      "a();\n"
      "// BEGIN SOLUTION(m2): inner\n"
      "b();\n"
      "// END SOLUTION\n"
      "// END SOLUTION\n");
  EXPECT_EQ(e.line, 4);
  EXPECT_NE(e.message.find("nested"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("line 2"), std::string::npos) << e.message;
  EXPECT_EQ(e.str().rfind("kernels/bad.cu:4: error: ", 0), 0u) << e.str();
}

TEST(MarkerErrors, UnclosedRegionPointsAtItsOpeningLine) {
  const MarkerError e = only_error(
      "int x;\n"
      "\n"
      "  // BEGIN SOLUTION(m3): never closed\n"
      "  a();\n"
      "  // STUB: b();\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_NE(e.message.find("never closed"), std::string::npos) << e.message;
}

TEST(MarkerErrors, UnknownMarker) {
  const MarkerError e = only_error(
      "// BEGIN SOLUTION(x): what milestone?\n"
      "a();\n"
      "// END SOLUTION\n");
  EXPECT_EQ(e.line, 1);
  EXPECT_NE(e.message.find("unknown marker 'BEGIN SOLUTION(x)'"), std::string::npos) << e.message;
  EXPECT_EQ(only_error("// BEGIN SOLUTION: no milestone\n// END SOLUTION\n").line, 1);
  EXPECT_EQ(only_error("// BEGIN SOLUTION(m)\n// END SOLUTION\n").line, 1);
  EXPECT_EQ(only_error("// BEGIN SOLUTION(m2 ): x\n// END SOLUTION\n").line, 1);
  EXPECT_EQ(only_error("// BEGIN SOLUTION(m0): x\n// END SOLUTION\n").line, 1);
  EXPECT_EQ(only_error("// BEGIN SOLUTION(m2) text without a colon\n// END SOLUTION\n").line, 1);
}

TEST(MarkerErrors, EndWithoutBegin) {
  const MarkerError e = only_error(
      "int x;\n"
      "int y;\n"
      "    // END SOLUTION\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_NE(e.message.find("END SOLUTION without"), std::string::npos) << e.message;
}

TEST(MarkerErrors, StubOutsideARegionAndCodeAfterStubs) {
  EXPECT_EQ(only_error("int x;\n// STUB: return 0;\n").line, 2);
  const MarkerError e = only_error(
      "// BEGIN SOLUTION(m1): t\n"
      "a();\n"
      "// STUB: b();\n"
      "c();\n"
      "// END SOLUTION\n");
  EXPECT_EQ(e.line, 4);
  EXPECT_NE(e.message.find("STUB lines must come just before END SOLUTION"), std::string::npos) << e.message;
}

TEST(MarkerErrors, TextAfterEnd) {
  EXPECT_EQ(only_error("// BEGIN SOLUTION(m1): t\na();\n// END SOLUTION(m1)\n").line, 3);
}

TEST(MarkerErrors, AreReportedWhateverTheMilestone) {
  // A malformed region of milestone 1 is an error in every handout, including the ones that keep it.
  const StripResult r = strip_solutions("// BEGIN SOLUTION(m1): t\na();\n", "f.cpp", 5);
  EXPECT_FALSE(r.ok());
}

TEST(InstructorOnly, LineNearTheTop) {
  EXPECT_TRUE(has_instructor_only_line("// INSTRUCTOR-ONLY\nint x;\n"));
  EXPECT_TRUE(has_instructor_only_line("#!/bin/sh\n# INSTRUCTOR-ONLY: answer script\necho\n"));
  EXPECT_TRUE(has_instructor_only_line("/// @file a.h\n\n  //   INSTRUCTOR-ONLY\n"));
  EXPECT_FALSE(has_instructor_only_line("int x;  // INSTRUCTOR-ONLY\n"));
  EXPECT_FALSE(has_instructor_only_line("// INSTRUCTOR-ONLYISH\n"));
  EXPECT_FALSE(has_instructor_only_line("// Files marked INSTRUCTOR-ONLY are left out.\n"));
  std::string late;
  for (int i = 0; i < 40; ++i) late += "// line\n";
  EXPECT_FALSE(has_instructor_only_line(late + "// INSTRUCTOR-ONLY\n"));
}

}  // namespace
}  // namespace clockwork::handout
