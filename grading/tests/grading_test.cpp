// The autograder's pieces without a build: the rubric, the verdict on a test run (pass, failure,
// crash, time limit, no report), results.json's fields and size limits, the leaderboard, and
// which files of a submission are graded.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <thread>

#include "grading/grader.h"
#include "grading/results.h"
#include "grading/rubric.h"
#include "grading/sandbox.h"

namespace clockwork::grading {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kRubric = R"({
  "timeout_s": 60,
  "leaderboard": [{"property": "leaderboard_gflops", "name": "GFLOP/s", "order": "desc"}],
  "benchmark": {"target": "clockwork-cuda", "args": ["bench", "--op", "matmul"], "timeout_s": 120},
  "milestones": [
    {"milestone": 1, "tests": [
      {"name": "Tiled", "binary": "milestone1_kernels", "filter": "Matmul.Tiled*", "points": 3},
      {"name": "Embedding", "binary": "milestone1_kernels", "filter": "Embedding.*", "points": 1,
       "visibility": "after_published", "tags": ["kernels"]}]},
    {"milestone": 2, "tests": [
      {"name": "RMSNorm", "binary": "milestone2_kernels", "filter": "RmsNorm.*", "points": 2.5}]}
  ]})";

TEST(Rubric, Parses) {
  const Rubric r = parse_rubric(kRubric);
  ASSERT_EQ(r.tests.size(), 3u);
  EXPECT_EQ(r.tests[0].milestone, 1);
  EXPECT_EQ(r.tests[0].visibility, "visible");
  EXPECT_EQ(r.tests[1].visibility, "after_published");
  EXPECT_EQ(r.tests[1].tags, std::vector<std::string>{"kernels"});
  EXPECT_EQ(r.tests[2].milestone, 2);
  EXPECT_DOUBLE_EQ(r.total_points(), 6.5);
  EXPECT_DOUBLE_EQ(r.points_of_milestones(1, 1), 4);
  EXPECT_DOUBLE_EQ(r.points_of_milestones(1, 0), 0);
  EXPECT_DOUBLE_EQ(r.timeout_s, 60);
  ASSERT_EQ(r.leaderboard.size(), 1u);
  EXPECT_EQ(r.leaderboard[0].order, "desc");
  EXPECT_EQ(r.benchmark.target, "clockwork-cuda");
  EXPECT_EQ(r.benchmark.args, (std::vector<std::string>{"bench", "--op", "matmul"}));
  EXPECT_DOUBLE_EQ(r.benchmark.timeout_s, 120);

  const Rubric hidden = parse_rubric(kRubric, true);
  EXPECT_TRUE(hidden.tests[0].hidden);
  EXPECT_EQ(hidden.tests[0].visibility, "after_due_date");
  Rubric merged = parse_rubric(kRubric);
  merge_rubric(merged, hidden);
  ASSERT_EQ(merged.tests.size(), 6u);
  // Milestone by milestone: the hidden milestone-1 tests come before milestone 2.
  EXPECT_EQ(merged.tests[2].milestone, 1);
  EXPECT_TRUE(merged.tests[2].hidden);
  EXPECT_EQ(merged.tests[5].milestone, 2);
}

TEST(Rubric, RejectsMistakesWithTheirPlace) {
  auto error_of = [](const std::string& text) {
    try {
      parse_rubric(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("{}").find("milestones"), std::string::npos);
  const std::string bad_visibility =
      R"({"milestones": [{"milestone": 1, "tests": [{"name": "a", "binary": "b", "points": 1, "visibility": "soon"}]}]})";
  EXPECT_NE(error_of(bad_visibility).find("visibility \"soon\""), std::string::npos) << error_of(bad_visibility);
  const std::string no_points = R"({"milestones": [{"milestone": 2, "tests": [{"name": "a", "binary": "b"}]}]})";
  EXPECT_NE(error_of(no_points).find("milestone 2, test 1"), std::string::npos) << error_of(no_points);
  const std::string negative =
      R"({"milestones": [{"milestone": 1, "tests": [{"name": "a", "binary": "b", "points": -1}]}]})";
  EXPECT_NE(error_of(negative).find("points"), std::string::npos);
  const std::string no_target = R"({"benchmark": {"args": []}, "milestones": []})";
  EXPECT_NE(error_of(no_target).find("target"), std::string::npos) << error_of(no_target);
}

TEST(Rubric, StudentFilesAreNotTheRubricsToSay) {
  const std::string with_globs = R"({"student_files": ["kernels/*.cu"], "milestones": []})";
  try {
    parse_rubric(with_globs);
    ADD_FAILURE() << "a rubric naming student_files was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("solution regions"), std::string::npos) << e.what();
  }
  Rubric r = parse_rubric(kRubric);
  EXPECT_FALSE(r.is_student_file("kernels/matmul.cu"));  // nothing until the grader sets them
  r.student_files = {"kernels/matmul.cu", "milestones/milestone2/qkv.cpp"};
  EXPECT_TRUE(r.is_student_file("kernels/matmul.cu"));
  EXPECT_TRUE(r.is_student_file("milestones/milestone2/qkv.cpp"));
  EXPECT_FALSE(r.is_student_file("kernels/kernels.h"));
  EXPECT_FALSE(r.is_student_file("kernels/sub/matmul.cu"));
  EXPECT_FALSE(r.is_student_file("./kernels/matmul.cu"));
}

TEST(Rubric, IsolatedAndEndToEndItems) {
  const Rubric r = parse_rubric(R"({"milestones": [{"milestone": 2, "tests": [
      {"name": "qkv", "binary": "milestone2_kernels", "filter": "QkvStep.*", "points": 2, "isolated": true},
      {"name": "rmsnorm", "binary": "milestone2_kernels", "filter": "RmsNorm.*", "points": 2},
      {"name": "model", "binary": "milestone3_model", "filter": "Model.*", "points": 2, "end_to_end": true}]}]})");
  ASSERT_EQ(r.tests.size(), 3u);
  // The isolated item runs on the variant with known-good earlier steps; the others on the program
  // students run.
  EXPECT_TRUE(r.tests[0].isolated);
  EXPECT_EQ(r.tests[0].program(), "milestone2_kernels_isolated");
  EXPECT_EQ(r.tests[1].program(), "milestone2_kernels");
  EXPECT_TRUE(r.tests[2].end_to_end);
  EXPECT_EQ(r.tests[2].program(), "milestone3_model");
  try {
    parse_rubric(R"({"milestones": [{"milestone": 3, "tests": [
        {"name": "both", "binary": "b", "points": 1, "isolated": true, "end_to_end": true}]}]})");
    ADD_FAILURE() << "an item both isolated and end-to-end was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("milestone 3, test 1 (both)"), std::string::npos) << e.what();
  }
}

TEST(Rubric, ShippedRubricsAreValid) {
  const fs::path root = CLOCKWORK_SOURCE_DIR;
  const Rubric pub = load_rubric(root / "grading/rubric.json");
  EXPECT_GT(pub.total_points(), 0);
  for (const RubricTest& t : pub.tests) EXPECT_FALSE(t.hidden);
  // Every item of a later milestone says whether it runs the student's whole chain; the ones that
  // do not call earlier steps run isolated (their own binary calls no other student step).
  int isolated = 0, end_to_end = 0;
  for (const RubricTest& t : pub.tests) {
    isolated += t.isolated;
    end_to_end += t.end_to_end;
    if (t.milestone == 1) EXPECT_FALSE(t.isolated || t.end_to_end) << t.name << ": milestone 1 has no earlier steps";
  }
  EXPECT_GT(isolated, 0);
  EXPECT_GT(end_to_end, 0);
  if (fs::exists(root / "grading/rubric-hidden.json")) {
    const Rubric hidden = load_rubric(root / "grading/rubric-hidden.json", true);
    EXPECT_GT(hidden.total_points(), 0);
  }
}

// ---- verdicts ----------------------------------------------------------------------------------

RubricTest a_test() {
  RubricTest t;
  t.name = "Tiled";
  t.binary = "milestone1_kernels";
  t.filter = "Matmul.Tiled*";
  t.points = 3;
  t.milestone = 1;
  return t;
}

handout::RunResult exited(int code, std::string output = "") {
  handout::RunResult r;
  r.started = true;
  r.exit_code = code;
  r.output = std::move(output);
  r.seconds = 1.5;
  return r;
}

const char* kPassReport = R"({"tests": 1, "testsuites": [{"name": "Matmul", "testsuite": [
  {"name": "TiledA", "status": "RUN", "result": "COMPLETED", "time": "0.5s", "leaderboard_gflops": "12.5"}]}]})";

const char* kFailReport = R"({"tests": 2, "testsuites": [{"name": "Matmul", "testsuite": [
  {"name": "TiledA", "status": "RUN", "result": "COMPLETED", "time": "0.5s"},
  {"name": "TiledB", "status": "RUN", "result": "COMPLETED", "time": "0.5s",
   "failures": [{"failure": "y differs from the reference in 12 of 64 elements", "type": ""}]}]}]})";

TEST(Verdict, PassAndFailure) {
  const TestOutcome pass = judge_run(a_test(), exited(0), handout::parse_gtest_report(kPassReport));
  EXPECT_TRUE(pass.passed);
  EXPECT_NE(pass.output.find("1 of 1 test case passed"), std::string::npos) << pass.output;
  ASSERT_EQ(pass.figures.size(), 1u);
  EXPECT_EQ(pass.figures[0].first, "leaderboard_gflops");
  EXPECT_DOUBLE_EQ(pass.figures[0].second, 12.5);

  const TestOutcome fail = judge_run(a_test(), exited(1), handout::parse_gtest_report(kFailReport));
  EXPECT_FALSE(fail.passed);
  EXPECT_NE(fail.output.find("1 of 2 test cases passed"), std::string::npos) << fail.output;
  EXPECT_NE(fail.output.find("FAILED Matmul.TiledB"), std::string::npos);
  EXPECT_NE(fail.output.find("12 of 64 elements"), std::string::npos);
}

// A failure message as GoogleTest writes it into its JSON report (each UTF-8 byte escaped on its
// own) reaches the student's results.json as the text the test printed.
TEST(Verdict, FailureMessagesKeepTheirUtf8InResultsJson) {
  const char* report = R"({"tests": 1, "testsuites": [{"name": "RmsNorm", "testsuite": [
    {"name": "Eps", "status": "RUN", "result": "COMPLETED", "time": "0.1s",
     "failures": [{"failure": "\u00CE\u00B3 \u00E1\u00B5\u0080 \u00CE\u00B5: epsilon is not the one passed in", "type": ""}]}]}]})";
  const TestOutcome fail = judge_run(a_test(), exited(1), handout::parse_gtest_report(report));
  EXPECT_FALSE(fail.passed);
  EXPECT_NE(fail.output.find("γ ᵀ ε: epsilon"), std::string::npos) << fail.output;
  Rubric rubric;
  rubric.tests.push_back(a_test());
  const std::string doc = dump_results(make_results(rubric, {fail}, "", 1.0));
  EXPECT_EQ(nlohmann::json::parse(doc)["tests"][0]["output"].get<std::string>().find("γ ᵀ ε"),
            fail.output.find("γ ᵀ ε"));
}

TEST(Verdict, CrashNamesTheRunningCaseAndShowsTheOutput) {
  handout::RunResult r = exited(-1,
                                "[ RUN      ] Matmul.TiledA\n[       OK ] Matmul.TiledA (5 ms)\n"
                                "[ RUN      ] Matmul.TiledB\nlast words\n");
  r.signal = SIGSEGV;
  const TestOutcome o = judge_run(a_test(), r, handout::parse_gtest_report("not json"));
  EXPECT_FALSE(o.passed);
  EXPECT_NE(o.output.find("crashed"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("signal 11"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("It was running Matmul.TiledB"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("last words"), std::string::npos) << o.output;
}

TEST(Verdict, TimeLimitAndMissingReport) {
  handout::RunResult r = exited(-1, "[ RUN      ] Matmul.TiledA\n");
  r.timed_out = true;
  r.seconds = 30;
  const TestOutcome o = judge_run(a_test(), r, {});
  EXPECT_FALSE(o.passed);
  EXPECT_NE(o.output.find("did not finish within its time limit"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("Matmul.TiledA"), std::string::npos);

  const TestOutcome none = judge_run(a_test(), exited(70, "cudasim: divergent barrier"), {});
  EXPECT_FALSE(none.passed);
  EXPECT_NE(none.output.find("exit status 70"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("divergent barrier"), std::string::npos);
}

TEST(Verdict, NoMatchingCaseOrABadExitFail) {
  const TestOutcome empty = judge_run(a_test(), exited(0), handout::parse_gtest_report(R"({"testsuites": []})"));
  EXPECT_FALSE(empty.passed);
  EXPECT_NE(empty.output.find("No test case matches"), std::string::npos);
  // Every case passed, then the program died: not a pass.
  handout::RunResult r = exited(-1);
  r.signal = SIGABRT;
  EXPECT_FALSE(judge_run(a_test(), r, handout::parse_gtest_report(kPassReport)).passed);
  EXPECT_FALSE(judge_run(a_test(), exited(3), handout::parse_gtest_report(kPassReport)).passed);
}

// What the grader believes of a passing report: only what agrees with what it saw of the run.
TEST(Verdict, ReportMustAgreeWithTheRun) {
  const handout::GtestReport report = handout::parse_gtest_report(R"({"testsuites": [{"name": "Matmul", "testsuite": [
    {"name": "TiledA", "status": "RUN", "result": "COMPLETED", "timestamp": "2026-03-02T10:00:00Z", "time": "0s"}]}]})");
  EXPECT_EQ(report_disagreement(report, {"Matmul.TiledA"}), "");
  // Written by something other than the tests: GoogleTest never printed the case.
  const std::string forged = report_disagreement(report, {"Matmul.Other"});
  EXPECT_NE(forged.find("never shows GoogleTest running"), std::string::npos) << forged;
  EXPECT_NE(forged.find("Matmul.TiledA"), std::string::npos) << forged;
  // Listed as run and completed, but never started (a global environment that skipped).
  const handout::GtestReport skipped = handout::parse_gtest_report(R"({"testsuites": [{"name": "Matmul", "testsuite": [
    {"name": "TiledA", "status": "RUN", "result": "COMPLETED", "timestamp": "1970-01-01T00:00:00Z", "time": "0s"},
    {"name": "TiledB", "status": "RUN", "result": "COMPLETED", "timestamp": "1970-01-01T00:00:00Z", "time": "0s"}]}]})");
  const std::string never = report_disagreement(skipped, {"Matmul.TiledA", "Matmul.TiledB"});
  EXPECT_NE(never.find("never started them"), std::string::npos) << never;
  // Failing cases need no cross-check: they cost points anyway.
  EXPECT_EQ(report_disagreement(handout::parse_gtest_report(kFailReport), {}).find("TiledB"), std::string::npos);
}

TEST(Verdict, ListedCases) {
  // What --gtest_list_tests prints, with a line of other output before it, typed and
  // value-parameterised suites included.
  const std::string listing =
      "cudasim: 8 worker threads\n"
      "Matmul.\n"
      "  TiledA\n"
      "  TiledB\n"
      "Typed/0.  # TypeParam = float\n"
      "  Works\n"
      "Shapes/Param.\n"
      "  Case/0  # GetParam() = (1, 2)\n"
      "  Case/1  # GetParam() = (3, 4)\n";
  EXPECT_EQ(parse_test_listing(listing),
            (std::vector<std::string>{"Matmul.TiledA", "Matmul.TiledB", "Typed/0.Works", "Shapes/Param.Case/0",
                                      "Shapes/Param.Case/1"}));
  EXPECT_TRUE(parse_test_listing("").empty());
}

TEST(Verdict, FilterSelectsAsGoogleTestDoes) {
  EXPECT_TRUE(filter_selects("Matmul.TiledA", "Matmul.TiledA"));
  EXPECT_FALSE(filter_selects("Matmul.TiledA", "Matmul.TiledAB"));
  EXPECT_TRUE(filter_selects("Matmul.*", "Matmul.TiledB"));
  EXPECT_FALSE(filter_selects("Matmul.*", "MatmulF32.Tiled"));
  EXPECT_TRUE(filter_selects("Embedding.*:Matmul.Tiled?", "Matmul.TiledB"));
  EXPECT_TRUE(filter_selects("*Shapes*", "Shapes/Param.Case/1"));
  EXPECT_FALSE(filter_selects("Matmul.*-Matmul.TiledB", "Matmul.TiledB"));
  EXPECT_TRUE(filter_selects("Matmul.*-Matmul.TiledB:Other.*", "Matmul.TiledA"));
  EXPECT_TRUE(filter_selects("-*Slow*", "Matmul.TiledA"));
  EXPECT_FALSE(filter_selects("-*Slow*", "Matmul.SlowOne"));
  EXPECT_TRUE(filter_selects("", "Anything.At"));
  EXPECT_TRUE(filter_selects("A*B*C", "AxxBxxBxxC"));
  EXPECT_FALSE(filter_selects("A*B*C", "AxxBxxBxxD"));
}

TEST(Verdict, EverySelectedCaseMustPass) {
  const handout::GtestReport report = handout::parse_gtest_report(kPassReport);
  EXPECT_EQ(missing_cases(report, {"Matmul.TiledA"}), "");
  // A case the item selects is not in the report: the tests that ran were not the item's.
  const std::string missing = missing_cases(report, {"Matmul.TiledA", "Matmul.TiledB"});
  EXPECT_NE(missing.find("runs 2 test cases, but the report shows Matmul.TiledB never passing"), std::string::npos)
      << missing;
  const std::string other = missing_cases(report, {"Embedding.MatchesReference"});
  EXPECT_NE(other.find("Embedding.MatchesReference"), std::string::npos) << other;
  EXPECT_NE(other.find("other cases instead: Matmul.TiledA"), std::string::npos) << other;
  // Failed or skipped cases count as missing too (the verdict fails them first anyway).
  EXPECT_NE(missing_cases(handout::parse_gtest_report(kFailReport), {"Matmul.TiledB"}), "");
}

TEST(Verdict, CasesPassedInOutput) {
  const fs::path log = fs::temp_directory_path() / ("clockwork-grading-log-" + std::to_string(getpid()));
  std::ofstream(log) << "[ RUN      ] Matmul.TiledA\n[       OK ] Matmul.TiledA (12 ms)\n[ RUN      ] Matmul.TiledB\n"
                        "[  FAILED  ] Matmul.TiledB (3 ms)\nnoise [       OK ] Inst/Param.Case/0 (0 ms)\n";
  EXPECT_EQ(cases_passed_in_output(log), (std::set<std::string>{"Matmul.TiledA", "Inst/Param.Case/0"}));
  fs::remove(log);
}

TEST(Verdict, UnfinishedCase) {
  EXPECT_EQ(unfinished_case("[ RUN      ] A.b\n[  FAILED  ] A.b (1 ms)\n"), "");
  EXPECT_EQ(unfinished_case("[ RUN      ] A.b\n[       OK ] A.b\n[ RUN      ] A.c\n"), "A.c");
  EXPECT_EQ(unfinished_case("nothing"), "");
}

// ---- results.json -------------------------------------------------------------------------------

TEST(Results, GradescopeFields) {
  const Rubric r = parse_rubric(kRubric);
  std::vector<TestOutcome> outcomes(3);
  outcomes[0].passed = true;
  outcomes[0].output = "ok";
  outcomes[1].output = "failed";
  outcomes[2].passed = true;
  const json j = make_results(r, outcomes, "overall", 12.34);
  EXPECT_DOUBLE_EQ(j["score"].get<double>(), 5.5);
  EXPECT_DOUBLE_EQ(j["execution_time"].get<double>(), 12.3);
  EXPECT_EQ(j["output"], "overall");
  ASSERT_EQ(j["tests"].size(), 3u);
  const json& t0 = j["tests"][0];
  EXPECT_EQ(t0["name"], "Milestone 1: Tiled");
  EXPECT_EQ(t0["score"], 3);
  EXPECT_EQ(t0["max_score"], 3);
  EXPECT_EQ(t0["status"], "passed");
  EXPECT_EQ(t0["visibility"], "visible");
  EXPECT_EQ(t0["tags"], json({"milestone1", "milestone1_kernels"}));
  EXPECT_EQ(j["tests"][1]["status"], "failed");
  EXPECT_EQ(j["tests"][1]["score"], 0);
  EXPECT_EQ(j["tests"][1]["visibility"], "after_published");
  EXPECT_EQ(j["tests"][2]["max_score"], 2.5);
  EXPECT_FALSE(j.contains("leaderboard"));  // no test reported a figure
}

TEST(Results, LeaderboardWhenFiguresExist) {
  const Rubric r = parse_rubric(kRubric);
  std::vector<TestOutcome> outcomes(3);
  outcomes[0].passed = true;
  outcomes[0].figures = {{"leaderboard_gflops", 12.5}, {"leaderboard_other", 3}};
  const json j = make_results(r, outcomes, "", 1);
  ASSERT_TRUE(j.contains("leaderboard"));
  ASSERT_EQ(j["leaderboard"].size(), 2u);
  EXPECT_EQ(j["leaderboard"][0]["name"], "GFLOP/s");
  EXPECT_EQ(j["leaderboard"][0]["order"], "desc");
  EXPECT_EQ(j["leaderboard"][0]["value"], 12.5);
  EXPECT_EQ(j["leaderboard"][1]["name"], "other");
  EXPECT_FALSE(j["leaderboard"][1].contains("order"));
}

TEST(Results, EveryTextFieldIsLimited) {
  Rubric r;
  for (int i = 0; i < 40; ++i) {
    RubricTest t = a_test();
    t.name = "t" + std::to_string(i);
    r.tests.push_back(t);
  }
  std::vector<TestOutcome> outcomes(r.tests.size());
  for (TestOutcome& o : outcomes) o.output = std::string(50000, 'x') + "END";
  const OutputLimits limits;
  const json j = make_results(r, outcomes, std::string(100000, 'y'), 1, limits);
  size_t total = j["output"].get<std::string>().size();
  EXPECT_LE(total, limits.top_level);
  for (const json& t : j["tests"]) {
    const std::string out = t["output"];
    EXPECT_LE(out.size(), limits.per_test);
    EXPECT_NE(out.find("END"), std::string::npos);  // the end of a long output survives
    total += out.size();
  }
  EXPECT_LE(total, limits.total);
}

TEST(Results, InvalidUtf8StillMakesValidJson) {
  const Rubric r = parse_rubric(kRubric);
  std::vector<TestOutcome> outcomes(3);
  outcomes[0].output = std::string("bad \xff\xfe bytes and a \x01 control");
  const std::string text = dump_results(make_results(r, outcomes, "top \xc3", 1));
  const json back = json::parse(text);
  EXPECT_NE(back["tests"][0]["output"].get<std::string>().find("bytes"), std::string::npos);
}

TEST(Results, FailedGradingListsEveryTest) {
  const Rubric r = parse_rubric(kRubric);
  const json j = make_failed_results(&r, "The build failed", "not run", 3);
  EXPECT_EQ(j["score"], 0);
  ASSERT_EQ(j["tests"].size(), 3u);
  for (const json& t : j["tests"]) {
    EXPECT_EQ(t["status"], "failed");
    EXPECT_EQ(t["output"], "not run");
  }
  const json bare = make_failed_results(nullptr, "no rubric", "", 0);
  EXPECT_EQ(bare["score"], 0);
  EXPECT_TRUE(bare["tests"].empty());
}

// ---- the submission's files ----------------------------------------------------------------------

void put(const fs::path& file, const std::string& content) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
}

class Submission : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("clockwork-grading-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* p : {"kernels/matmul.cu", "kernels/rmsnorm.cu", "kernels/kernels.h", "kernels/CMakeLists.txt",
                          "milestones/milestone2/qkv.cpp", "milestones/milestone1/tests/test_matmul.cpp"}) {
      handout::TreeFile f;
      f.path = p;
      f.content = std::string("framework ") + p;
      framework_.files.push_back(f);
    }
    std::sort(framework_.files.begin(), framework_.files.end(),
              [](const handout::TreeFile& a, const handout::TreeFile& b) { return a.path < b.path; });
    rubric_ = parse_rubric(kRubric);
    rubric_.student_files = {"kernels/matmul.cu", "kernels/rmsnorm.cu", "milestones/milestone2/qkv.cpp"};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string content(const std::string& path) const { return framework_.find(path)->content; }

  fs::path dir_;
  handout::Tree framework_;
  Rubric rubric_;
};

TEST_F(Submission, TakesStudentFilesAndIgnoresTheRest) {
  const fs::path s = dir_ / "sub";
  put(s / "kernels/matmul.cu", "student matmul");
  put(s / "kernels/kernels.h", "student header");                               // modified framework file
  put(s / "kernels/CMakeLists.txt", "framework kernels/CMakeLists.txt");         // unchanged: not reported
  put(s / "milestones/milestone1/tests/test_matmul.cpp", "TEST(Matmul, X) {}");  // tampered test
  put(s / "kernels/extra.cu", "helper");                                        // not in the framework
  put(s / "grading/rubric.json", "{}");                                         // not in the framework here
  put(s / "build/kernels/matmul.cu", "a build folder is never looked at");
  put(s / ".git/config", "neither is git's");
  fs::create_symlink("/etc/passwd", s / "kernels/rmsnorm.cu");

  const SubmissionPlan plan = overlay_submission(framework_, rubric_, s);
  EXPECT_EQ(plan.used, std::vector<std::string>{"kernels/matmul.cu"});
  EXPECT_EQ(content("kernels/matmul.cu"), "student matmul");
  EXPECT_EQ(content("kernels/kernels.h"), "framework kernels/kernels.h");
  EXPECT_EQ(content("kernels/rmsnorm.cu"), "framework kernels/rmsnorm.cu");
  EXPECT_EQ(content("milestones/milestone1/tests/test_matmul.cpp"),
            "framework milestones/milestone1/tests/test_matmul.cpp");
  EXPECT_EQ(plan.missing, (std::vector<std::string>{"kernels/rmsnorm.cu", "milestones/milestone2/qkv.cpp"}));
  const std::vector<std::pair<std::string, std::string>> ignored = {
      {"grading/rubric.json", "not part of the framework"},
      {"kernels/extra.cu", "not part of the framework"},
      {"kernels/kernels.h", "modified"},
      {"kernels/rmsnorm.cu", "a symbolic link"},
      {"milestones/milestone1/tests/test_matmul.cpp", "modified"}};
  EXPECT_EQ(plan.ignored, ignored);
  const std::string text = plan.describe();
  EXPECT_NE(text.find("milestones/milestone1/tests/test_matmul.cpp (modified)"), std::string::npos) << text;
  EXPECT_NE(text.find("only student files are graded"), std::string::npos) << text;
}

TEST_F(Submission, FifoIsListedAndNeverOpened) {
  const fs::path s = dir_ / "sub";
  put(s / "kernels/matmul.cu", "student matmul");
  fs::create_directories(s / "kernels");
  ASSERT_EQ(mkfifo((s / "kernels/rmsnorm.cu").c_str(), 0644), 0);  // opening it would wait forever
  const SubmissionPlan plan = overlay_submission(framework_, rubric_, s);
  EXPECT_EQ(plan.used, std::vector<std::string>{"kernels/matmul.cu"});
  EXPECT_EQ(plan.ignored, (std::vector<std::pair<std::string, std::string>>{
                              {"kernels/rmsnorm.cu", "not a regular file (a FIFO, socket or device)"}}));
}

TEST_F(Submission, LooseFilesAndAWrappingFolder) {
  // A zip of the project folder, plus a file uploaded on its own.
  const fs::path s = dir_ / "sub";
  put(s / "my-clockwork/kernels/rmsnorm.cu", "student rmsnorm");
  const SubmissionPlan wrapped = overlay_submission(framework_, rubric_, s);
  EXPECT_EQ(wrapped.used, std::vector<std::string>{"kernels/rmsnorm.cu"});

  const fs::path flat = dir_ / "flat";
  put(flat / "matmul.cu", "loose matmul");
  put(flat / "qkv.cpp", "loose qkv");
  put(flat / "notes.txt", "my notes");
  const SubmissionPlan plan = overlay_submission(framework_, rubric_, flat);
  EXPECT_EQ(plan.used, (std::vector<std::string>{"kernels/matmul.cu", "milestones/milestone2/qkv.cpp"}));
  EXPECT_EQ(content("kernels/matmul.cu"), "loose matmul");
  ASSERT_EQ(plan.placed.size(), 2u);
  EXPECT_EQ(plan.ignored, (std::vector<std::pair<std::string, std::string>>{{"notes.txt", "not part of the framework"}}));
}

}  // namespace
}  // namespace clockwork::grading

TEST(HiddenSeed, OnlyNumbersTheHiddenTestsAccept) {
  using clockwork::grading::valid_hidden_seed;
  for (const char* ok : {"0", "42", "18446744073709551615", "0x1f", "0XDEADBEEF"}) EXPECT_TRUE(valid_hidden_seed(ok)) << ok;
  for (const char* bad : {"", "abc", "12abc", " 12", "12 ", "-1", "+1", "18446744073709551616", "1e9", "0x", "12; id"}) {
    EXPECT_FALSE(valid_hidden_seed(bad)) << "'" << bad << "'";
  }
}

// A seed the hidden tests would refuse stops the grading before anything is built, with a valid
// results.json that says why without repeating the seed.
TEST(HiddenSeed, NotANumberIsAGraderError) {
  clockwork::grading::GradeOptions o;
  o.source = CLOCKWORK_SOURCE_DIR;
  o.submission = std::filesystem::temp_directory_path();
  o.hidden = true;
  o.seed = "s3cret-words";
  int status = 0;
  const nlohmann::json results = clockwork::grading::grade(o, status);
  EXPECT_EQ(status, 2);
  EXPECT_EQ(results.value("score", -1.0), 0.0);
  const std::string output = results.value("output", std::string());
  EXPECT_NE(output.find("seed"), std::string::npos) << output;
  EXPECT_NE(output.find("not a number"), std::string::npos) << output;
  EXPECT_EQ(results.dump().find("s3cret-words"), std::string::npos) << results.dump();
}

// What g++ prints when a student's changed signature breaks a hidden test: the student sees
// their own file's errors, never a line of the hidden test.
TEST(BuildErrors, HiddenTestSourceIsNotShown) {
  const std::string log =
      "FAILED: grading/hidden/CMakeFiles/hidden_kernels_objs.dir/test_hidden_kernels.cpp.o\n"
      "In file included from grading/hidden/test_hidden_kernels.cpp:3:\n"
      "grading/hidden/test_hidden_kernels.cpp: In member function 'virtual void H_Secret_Test::TestBody()':\n"
      "grading/hidden/test_hidden_kernels.cpp:42:17: error: too few arguments to function 'void rmsnorm(int)'\n"
      "   42 |   rmsnorm(secret_shape_rows, 4099);\n"
      "      |   ~~~~~~~^~~~~~~~~~~~~~~~~~~~~~~~~\n"
      "kernels/rmsnorm.cu:12:6: note: declared here\n"
      "   12 | void rmsnorm(int rows) {\n"
      "      |      ^~~~~~~\n"
      "ninja: build stopped: subcommand failed.\n";
  const std::string shown = clockwork::grading::hide_hidden_test_source(log);
  EXPECT_EQ(shown.find("secret_shape_rows"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("4099"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("TestBody"), std::string::npos) << shown;
  EXPECT_NE(shown.find("kernels/rmsnorm.cu:12:6: note: declared here"), std::string::npos) << shown;
  EXPECT_NE(shown.find("void rmsnorm(int rows) {"), std::string::npos) << shown;
  EXPECT_NE(shown.find("hidden test does not compile against your code"), std::string::npos) << shown;

  const std::string own = "kernels/rmsnorm.cu:3:1: error: expected ';'\n    3 | int x\n      | ^\n";
  EXPECT_EQ(clockwork::grading::hide_hidden_test_source(own), own);
}

namespace clockwork::grading {
namespace {

namespace fs = std::filesystem;

TEST(Sandbox, WrapsOnlyWhatItHas) {
  Sandbox none;
  EXPECT_EQ(none.wrap({"prog", "a"}), (std::vector<std::string>{"prog", "a"}));
  Sandbox full;
  full.user = "student";
  full.uid = 1234;
  full.gid = 567;
  full.setpriv = "/usr/bin/setpriv";
  full.unshare = "/usr/bin/unshare";
  full.pid_namespace = true;
  EXPECT_EQ(full.wrap({"prog"}),
            (std::vector<std::string>{"/usr/bin/unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
                                      "/usr/bin/setpriv", "--reuid", "1234", "--regid", "567", "--clear-groups",
                                      "--no-new-privs", "--pdeathsig", "KILL", "--", "prog"}));
  EXPECT_NE(full.describe().find("unprivileged user 'student'"), std::string::npos) << full.describe();
  EXPECT_NE(none.describe().find("own user"), std::string::npos) << none.describe();

  // With a closed folder to open, a shell between unshare and setpriv does it. The folders are its
  // arguments, never part of its text, whatever characters they hold.
  full.sh = "/bin/sh";
  full.mount = "/bin/mount";
  full.mkdir = "/bin/mkdir";
  full.openings = {{"/home/it's \"$(here)\"", {"tree", "a b"}}};
  const std::vector<std::string> w = full.wrap({"prog"});
  ASSERT_GE(w.size(), 10u);
  EXPECT_EQ(std::vector<std::string>(w.begin(), w.begin() + 5),
            (std::vector<std::string>{"/usr/bin/unshare", "--pid", "--fork", "--kill-child",
                                      "--mount-proc"}));
  EXPECT_EQ(std::vector<std::string>(w.begin() + 5, w.begin() + 7),
            (std::vector<std::string>{"/bin/sh", "-c"}));
  const std::string script = w[7];
  EXPECT_EQ(script.find("here"), std::string::npos) << script;
  EXPECT_EQ(script.find("tree"), std::string::npos) << script;
  EXPECT_EQ(std::vector<std::string>(w.begin() + 8, w.begin() + 14),
            (std::vector<std::string>{"clockwork-sandbox", "/bin/mount", "/bin/mkdir",
                                      "/home/it's \"$(here)\"", "tree", "a b"}));
  EXPECT_EQ(w[14], "/usr/bin/setpriv");
  EXPECT_EQ(w.back(), "prog");
}

// The sandbox this machine gives: as root, another user that cannot write the grader's files; with
// a PID namespace, nothing started in a run (setsid, double fork) outlives it.
TEST(Sandbox, OnThisMachine) {
  const Sandbox box = make_sandbox("clockwork-student");
  std::cout << box.describe();
  const fs::path dir = fs::temp_directory_path() / ("clockwork-sandbox-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path mine = dir / "grader-only.txt";
  std::ofstream(mine) << "the grader's";
  fs::permissions(mine, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  const fs::path home = dir / "home";
  box.private_folder(home);
  auto run = [&](const std::string& script) {
    handout::RunOptions o;
    o.argv = box.wrap({"/bin/sh", "-c", script});
    o.cwd = home;
    o.timeout_s = 30;
    return handout::run_process(o);
  };
  if (geteuid() == 0) {
    ASSERT_FALSE(box.user.empty()) << box.why_weaker;
    const handout::RunResult id = run("id -u");
    EXPECT_EQ(id.output, std::to_string(box.uid) + "\n");
    const handout::RunResult write = run("echo forged > " + mine.string());
    EXPECT_FALSE(write.succeeded()) << write.output;
    EXPECT_EQ(handout::read_file(mine), "the grader's");
    EXPECT_TRUE(run("echo mine > " + (home / "ok").string()).succeeded());
  }
  if (box.pid_namespace) {
    // A process that escapes its group and session and would write a file 2 s later.
    const fs::path late = home / "late";
    const handout::RunResult r = run("(setsid sh -c 'sleep 2; echo alive > " + late.string() + "' &) ; exit 0");
    EXPECT_TRUE(r.succeeded()) << r.output;
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_FALSE(fs::exists(late)) << "a process outlived its run";
  }
  fs::remove_all(dir);
}

// A work folder inside a folder closed to other users (a clone in a `mktemp -d` folder, a tree
// under /root): each run sees the way to the folders it needs and nothing else of the closed
// folders, and nothing changes for anyone else.
TEST(Sandbox, OpensTheWayThroughClosedFolders) {
  Sandbox box = make_sandbox("clockwork-student");
  if (box.user.empty() || !box.pid_namespace) {
    GTEST_SKIP() << "student code runs as the grader's own user here, who reaches every folder: "
                 << box.describe();
  }
  // top (0700) / tree / work / f, top / secret / s, and tree / inner (0700) / build / g: two
  // closed folders on the way, one inside the other.
  const fs::path top =
      fs::temp_directory_path() / ("clockwork-reach-test-" + std::to_string(getpid()));
  fs::remove_all(top);
  fs::create_directories(top / "tree/work");
  fs::create_directories(top / "tree/inner/build");
  fs::create_directories(top / "secret");
  std::ofstream(top / "tree/work/f") << "work";
  std::ofstream(top / "tree/inner/build/g") << "build";
  std::ofstream(top / "secret/s") << "secret";
  fs::permissions(top, fs::perms::owner_all);
  fs::permissions(top / "tree/inner", fs::perms::owner_all);
  for (const char* f : {"tree/work/f", "tree/inner/build/g", "secret/s"}) {
    fs::permissions(top / f,
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  }
  auto run = [&](const Sandbox& b, const std::string& script) {
    handout::RunOptions o;
    o.argv = b.wrap({"/bin/sh", "-c", script});
    o.timeout_s = 30;
    return handout::run_process(o);
  };
  const std::string both =
      "cat " + (top / "tree/work/f").string() + " " + (top / "tree/inner/build/g").string();
  EXPECT_FALSE(run(box, both).succeeded())
      << "the closed folders let the student user through by themselves";

  box.reach({top / "tree/work", top / "tree/inner/build"});
  ASSERT_EQ(box.openings.size(), 2u);
  EXPECT_EQ(box.openings[0].closed, top);
  EXPECT_EQ(box.openings[0].ways, std::vector<std::string>{"tree"});
  EXPECT_EQ(box.openings[1].closed, top / "tree/inner");
  EXPECT_EQ(box.openings[1].ways, std::vector<std::string>{"build"});
  const handout::RunResult r = run(box, both);
  EXPECT_TRUE(r.succeeded()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(r.output, "workbuild");
  // Nothing else of a closed folder: not its other entries, not its listing.
  EXPECT_FALSE(run(box, "cat " + (top / "secret/s").string()).succeeded());
  EXPECT_FALSE(run(box, "ls " + top.string()).succeeded());
  // Nor a way back to what the cover hides: no descriptor left open on it, no unmounting it.
  const handout::RunResult fds = run(box, "ls -l /proc/self/fd/");
  EXPECT_TRUE(fds.succeeded()) << fds.output;
  EXPECT_EQ(fds.output.find(top.string()), std::string::npos) << fds.output;
  EXPECT_FALSE(run(box, "umount " + top.string() + " || umount -l " + top.string()).succeeded());
  EXPECT_FALSE(
      run(box, "umount -l " + top.string() + "; cat " + (top / "secret/s").string()).succeeded());
  // The runs wrote in what they reached, as before; outside them nothing changed.
  fs::permissions(top / "tree/work", fs::perms::others_all, fs::perm_options::add);
  EXPECT_TRUE(run(box, "echo run > " + (top / "tree/work/new").string()).succeeded());
  EXPECT_EQ(handout::read_file(top / "tree/work/new"), "run\n");
  EXPECT_EQ(fs::status(top).permissions(), fs::perms::owner_all);
  EXPECT_TRUE(fs::exists(top / "secret/s"));
  Sandbox plain = make_sandbox("clockwork-student");
  EXPECT_FALSE(run(plain, both).succeeded());

  // A path with nothing closed above it needs no opening.
  Sandbox open = make_sandbox("clockwork-student");
  open.reach({fs::temp_directory_path()});
  EXPECT_TRUE(open.openings.empty());
  fs::remove_all(top);
}

// The processes whose command line is exactly `argv` (zombies, already ended, left out).
std::vector<pid_t> processes_running(const std::vector<std::string>& argv) {
  std::string wanted;
  for (const std::string& a : argv) wanted += a + '\0';
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline", std::ios::binary), stat(entry.path() / "stat");
    const std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    const bool zombie = paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
    if (text == wanted && !zombie) found.push_back(std::stoi(name));
  }
  return found;
}

// A grader killed from outside (Ctrl-C, a container's time limit) takes its runs with it: a
// kernel that never returns does not go on using a CPU for ever.
TEST(Sandbox, RunsEndWithTheGrader) {
  const Sandbox box = make_sandbox("clockwork-student");
  // A command line no other process has: sleep's argument carries this test's process id.
  const std::vector<std::string> argv = {"sleep", "3600.0" + std::to_string(getpid())};
  const pid_t grader = fork();
  ASSERT_GE(grader, 0);
  if (grader == 0) {
    handout::RunOptions o;
    o.argv = box.wrap(argv);
    o.timeout_s = 3600;
    handout::run_process(o);
    _exit(0);
  }
  auto wait_until = [](const std::function<bool()>& done) {
    for (int i = 0; i < 200 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return done();
  };
  const bool started = wait_until([&] { return !processes_running(argv).empty(); });
  kill(grader, SIGKILL);
  waitpid(grader, nullptr, 0);
  ASSERT_TRUE(started) << "the run never started: " << box.describe();
  EXPECT_TRUE(wait_until([&] { return processes_running(argv).empty(); }))
      << "the run outlived its grader (" << box.describe() << ")";
  for (const pid_t p : processes_running(argv)) kill(p, SIGKILL);
}

}  // namespace
}  // namespace clockwork::grading
