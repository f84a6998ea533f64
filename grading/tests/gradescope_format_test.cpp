// The Gradescope format check itself: documents Gradescope accepts pass, and each kind of mistake
// is reported with the field it concerns. The grader's own documents (a grading, a failed one)
// pass too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grading/results.h"
#include "grading/rubric.h"
#include "grading/tests/gradescope_format.h"

namespace clockwork::grading {
namespace {

using nlohmann::json;

// Every field the format has, in use.
json full_document() {
  return json::parse(R"({
    "score": 7.5,
    "execution_time": 136,
    "output": "Graded on the CPU backend.",
    "output_format": "text",
    "test_output_format": "md",
    "test_name_format": "text",
    "visibility": "after_due_date",
    "stdout_visibility": "hidden",
    "extra_data": {"seed": "1234"},
    "tests": [
      {"score": 5, "max_score": 5, "status": "passed", "name": "Milestone 1: matmul", "name_format": "text",
       "number": "1.1", "output": "5 of 5 cases passed", "output_format": "ansi", "tags": ["milestone1"],
       "visibility": "visible", "extra_data": {}},
      {"score": 2.5, "max_score": 4, "status": "failed", "name": "Milestone 2: rmsnorm", "output": "",
       "visibility": "after_published"},
      {"score": 0, "max_score": 3, "status": "failed", "name": "Milestone 2: hidden shapes", "output": "crashed",
       "visibility": "hidden", "tags": []}
    ],
    "leaderboard": [
      {"name": "matmul TFLOP/s", "value": 12.5, "order": "desc"},
      {"name": "team", "value": "clockwork"}
    ]
  })");
}

// The problems of `doc` that mention `field`.
std::vector<std::string> problems_about(const json& doc, const std::string& field) {
  std::vector<std::string> found;
  for (const std::string& p : gradescope_format_problems(doc)) {
    if (p.find(field) != std::string::npos) found.push_back(p);
  }
  return found;
}

std::string all(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

TEST(GradescopeFormat, AcceptsEveryFieldOfTheFormat) {
  EXPECT_EQ(all(gradescope_format_problems(full_document())), "");
}

TEST(GradescopeFormat, AcceptsAMinimalDocument) {
  EXPECT_EQ(all(gradescope_format_problems(json::parse(R"({"score": 0, "tests": []})"))), "");
}

TEST(GradescopeFormat, AcceptsTheGradersOwnDocuments) {
  const Rubric rubric = parse_rubric(R"({"timeout_s": 60, "milestones": [
    {"milestone": 1, "tests": [
      {"name": "a", "binary": "milestone1_kernels", "filter": "A.*", "points": 3},
      {"name": "b", "binary": "milestone1_kernels", "filter": "B.*", "points": 1.5, "visibility": "after_published"}]}]})");
  std::vector<TestOutcome> outcomes(2);
  outcomes[0].passed = true;
  outcomes[0].output = "passed";
  outcomes[1].output = "FAILED B.Case";
  const json graded = make_results(rubric, outcomes, "Clockwork autograder", 12.34);
  EXPECT_EQ(all(gradescope_format_problems(graded)), "") << graded.dump(2);
  const json failed = make_failed_results(&rubric, "The build failed", "not run", 3);
  EXPECT_EQ(all(gradescope_format_problems(failed)), "") << failed.dump(2);
  EXPECT_EQ(all(gradescope_format_problems(make_failed_results(nullptr, "no rubric", "", 0))), "");
}

TEST(GradescopeFormat, RejectsWhatIsNotADocument) {
  EXPECT_FALSE(gradescope_format_problems(json::array()).empty());
  EXPECT_FALSE(gradescope_format_problems(json("results")).empty());
  EXPECT_EQ(problems_about(json::object(), "score").size(), 1u);
  EXPECT_EQ(problems_about(json::object(), "tests").size(), 1u);
}

TEST(GradescopeFormat, RejectsTopLevelMistakes) {
  struct Case {
    const char* field;
    json value;
  };
  const std::vector<Case> cases = {
      {"score", "7.5"},
      {"execution_time", "136 s"},
      {"output", json::array({"a"})},
      {"output_format", "markdown"},
      {"visibility", "public"},
      {"stdout_visibility", true},
      {"extra_data", "x"},
      {"tests", json::object()},
      {"leaderboard", json::object()},
  };
  for (const Case& c : cases) {
    json doc = full_document();
    doc[c.field] = c.value;
    EXPECT_FALSE(problems_about(doc, c.field).empty()) << c.field << " = " << c.value.dump();
  }
  json doc = full_document();
  doc["scores"] = 7.5;  // a misspelt field would be ignored by Gradescope
  EXPECT_EQ(problems_about(doc, "scores").size(), 1u) << all(gradescope_format_problems(doc));
}

TEST(GradescopeFormat, RejectsTestMistakesNamingTheTest) {
  struct Case {
    const char* field;
    json value;  // null: the field is removed
  };
  const std::vector<Case> cases = {
      {"score", nullptr},       {"score", "5"},          {"max_score", nullptr},
      {"max_score", -1},        {"status", nullptr},     {"status", "ok"},
      {"status", "PASSED"},     {"name", nullptr},       {"name", ""},
      {"output", nullptr},      {"output", 3},           {"visibility", nullptr},
      {"visibility", "always"}, {"tags", "milestone1"}, {"tags", json::array({1, 2})},
      {"number", 1.1},          {"output_format", "rtf"}, {"extra_data", json::array()},
  };
  for (const Case& c : cases) {
    json doc = full_document();
    if (c.value.is_null()) {
      doc["tests"][0].erase(c.field);
    } else {
      doc["tests"][0][c.field] = c.value;
    }
    if (std::string(c.field) == "score" && !c.value.is_null()) doc["score"] = 2.5;  // only the type is wrong
    const std::string where = std::string("tests[0].") + c.field;
    EXPECT_FALSE(problems_about(doc, where).empty())
        << where << " = " << c.value.dump() << "\n" << all(gradescope_format_problems(doc));
  }
  json doc = full_document();
  doc["tests"][1]["points"] = 4;
  EXPECT_EQ(problems_about(doc, "tests[1].points").size(), 1u);
  doc = full_document();
  doc["tests"][2] = "a test";
  EXPECT_EQ(problems_about(doc, "tests[2]").size(), 1u);
}

TEST(GradescopeFormat, RejectsAScoreThatIsNotTheSumOfTheTests) {
  json doc = full_document();
  doc["score"] = 12.5;  // the tests add up to 7.5
  const std::vector<std::string> found = problems_about(doc, "score");
  ASSERT_EQ(found.size(), 1u) << all(gradescope_format_problems(doc));
  EXPECT_NE(found[0].find("7.5"), std::string::npos) << found[0];
  // Rounding noise is not a mistake.
  doc["score"] = 7.5 + 1e-9;
  EXPECT_TRUE(problems_about(doc, "score").empty());
}

TEST(GradescopeFormat, RejectsLeaderboardMistakes) {
  json doc = full_document();
  doc["leaderboard"][0].erase("value");
  EXPECT_EQ(problems_about(doc, "leaderboard[0].value").size(), 1u);
  doc = full_document();
  doc["leaderboard"][1]["order"] = "up";
  EXPECT_EQ(problems_about(doc, "leaderboard[1].order").size(), 1u);
  doc = full_document();
  doc["leaderboard"][0]["value"] = json::array({1});
  EXPECT_EQ(problems_about(doc, "leaderboard[0].value").size(), 1u);
  doc = full_document();
  doc["leaderboard"][0].erase("name");
  EXPECT_EQ(problems_about(doc, "leaderboard[0].name").size(), 1u);
}

}  // namespace
}  // namespace clockwork::grading
