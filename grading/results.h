/// @file results.h
/// Turning test runs into Gradescope's results.json: the verdict and message of each rubric test,
/// the size limits of every text field, and the leaderboard.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "grading/rubric.h"
#include "tools/handout/process.h"
#include "tools/handout/test_reports.h"

namespace clockwork::grading {

/// Size limits of the text fields (bytes).
struct OutputLimits {
  size_t per_test = 10 * 1024;
  size_t top_level = 16 * 1024;
  size_t total = 64 * 1024;  ///< all text fields together
};

/// The verdict on one rubric test.
struct TestOutcome {
  bool passed = false;
  std::string output;
  std::vector<std::pair<std::string, double>> figures;  ///< leaderboard properties reported
};

/// Judges one run of a test binary restricted to a rubric test's cases: it passes only when the
/// program exited normally with status 0 and its report lists at least one case, all passed.
/// Crashes, time limits and exits without a report fail with an explanation, the test case that
/// was running, and the end of the program's output.
TestOutcome judge_run(const RubricTest& test, const handout::RunResult& run, const handout::GtestReport& report);

/// The same verdict for a test that could not run at all (`why`).
/// Names of the test cases that GoogleTest's own output in the file `log` shows passing
/// ("[       OK ] Suite.Case (12 ms)").
std::set<std::string> cases_passed_in_output(const std::filesystem::path& log);

/// Cross-checks the report of a run that passed against what the grader saw of the run: every
/// case was started by GoogleTest (a global test environment that skips leaves them listed as run
/// but never started), and the program's own output shows each passing case (a report written by
/// other code, which then ends the program, does not). "" when they agree, else the failure
/// message for the student.
std::string report_disagreement(const handout::GtestReport& report, const std::set<std::string>& passed_in_output);

/// The test cases a GoogleTest program lists with --gtest_list_tests ("Suite." lines, each
/// followed by indented "Case" lines; value-parameterised cases carry a "# GetParam() = ..."
/// comment, which is dropped), as "Suite.Case" names in listing order. Lines of other output are
/// ignored.
std::vector<std::string> parse_test_listing(const std::string& listing);

/// Whether GoogleTest's --gtest_filter=`filter` selects the case `name` ("Suite.Case"): positive
/// patterns separated by ':', then optionally '-' and negative ones; '*' matches any text and
/// '?' one character; an empty positive part selects everything.
bool filter_selects(const std::string& filter, const std::string& name);

/// Cross-checks the report of a run that passed against the cases its rubric test selects, as a
/// build without student code lists them (`expected`): every one must be in the report, run and
/// passed. A submission that changes which tests run (rewriting the filter, registering tests of
/// its own) leaves some out. "" when none is missing, else the failure message for the student,
/// naming the first missing case.
std::string missing_cases(const handout::GtestReport& report, const std::vector<std::string>& expected);

TestOutcome not_run(const std::string& why);

/// The GoogleTest case that started last and never finished in `output` (the text GoogleTest
/// prints), or "" when there is none.
std::string unfinished_case(const std::string& output);

/// Gradescope's results.json. `outcomes` is parallel to `rubric.tests`; `top_output` is the
/// overall message. Every text field is cut to `limits`, and the leaderboard appears only when
/// a test reported a figure.
nlohmann::json make_results(const Rubric& rubric, const std::vector<TestOutcome>& outcomes,
                            const std::string& top_output, double execution_time_s,
                            const OutputLimits& limits = {});

/// A results.json for a grading that could not get as far as running tests: score 0, `message`
/// as the output, and every rubric test (when known) failed with `test_message`.
nlohmann::json make_failed_results(const Rubric* rubric, const std::string& message, const std::string& test_message,
                                   double execution_time_s, const OutputLimits& limits = {});

/// The text of results.json (valid UTF-8 whatever the tests printed).
std::string dump_results(const nlohmann::json& results);

}  // namespace clockwork::grading
