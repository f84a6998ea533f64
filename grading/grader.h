/// @file grader.h
/// The autograder's pipeline: a pristine copy of the framework, the student's files on top of
/// it, one build, one time-limited run per rubric test, and results.json.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "grading/rubric.h"
#include "tools/handout/tree.h"

namespace clockwork::grading {

struct GradeOptions {
  std::filesystem::path submission;
  std::filesystem::path source;         ///< the solution tree the framework copy comes from
  std::filesystem::path rubric;         ///< default: <source>/grading/rubric.json
  std::filesystem::path hidden_rubric;  ///< default: <source>/grading/rubric-hidden.json
  bool hidden = false;                  ///< also run the hidden tests
  std::string seed;                     ///< the secret seed of the hidden tests ("" = random)
  double timeout_s = 0;                 ///< per test run; 0: the rubric's
  std::filesystem::path work;           ///< build folder, reused between gradings; empty: temporary
  /// A built solution tree whose framework objects the grading build reuses, so that only the
  /// student files compile (cmake/ClockworkPrebuilt.cmake); empty: compile everything.
  std::filesystem::path framework_build;
  bool refresh_framework = true;        ///< bring `framework_build` up to date first
  std::string backend = "auto";         ///< auto, sim or cuda
  int jobs = 0;                         ///< build parallelism; 0: one per CPU
  std::string cmake = "cmake";
  std::string ctest = "ctest";
  bool ccache = true;                   ///< use ccache as the compiler launcher when installed
  bool untracked = false;               ///< take untracked files of a git checkout <source> too
  double build_timeout_s = 3600;
  /// The whole grading's time limit, from the grader's start; 0: none. Builds and test runs are
  /// cut short so that results.json is complete before it: a test that cannot start in time is
  /// reported as not run. Keep it below the autograder platform's own limit.
  double deadline_s = 0;
  /// Called with a complete results.json after the build and after every test run (tests still to
  /// run marked as such), so that a grader killed from outside still leaves a valid document.
  /// Calls are serialised.
  std::function<void(const nlohmann::json&)> on_progress;
  /// When the grader runs as root, the unprivileged user every build and run of student code uses
  /// (created when missing); see grading/sandbox.h. Empty: student code runs as the grader.
  std::string student_user = "clockwork-student";
};

/// Which of the submission's files are used, and why the others are not.
struct SubmissionPlan {
  std::vector<std::string> used;                              ///< student files taken
  std::vector<std::pair<std::string, std::string>> placed;    ///< (submitted name, student file)
  std::vector<std::string> missing;                           ///< student files not submitted
  std::vector<std::pair<std::string, std::string>> ignored;   ///< (path, reason)

  /// The paragraph of the overall output that tells the student what was graded.
  std::string describe() const;
};

/// Replaces the student files of `framework` by the submission's versions. Only files that
/// match the rubric's student patterns and exist in the framework are taken; everything else is
/// ignored and listed (modified tests, harness, CMake or rubric files included).
SubmissionPlan overlay_submission(handout::Tree& framework, const Rubric& rubric,
                                  const std::filesystem::path& submission);

/// Whether `seed` is what the hidden tests accept as CLOCKWORK_SEED: an unsigned 64-bit number in
/// decimal or 0x-hex, nothing else. A seed they would refuse fails every hidden item with the
/// same message, so the grader refuses it up front instead.
bool valid_hidden_seed(const std::string& seed);

/// The compiler's messages as a student may see them: every diagnostic located in a hidden test
/// (grading/hidden/), with the source lines the compiler echoes, becomes one line saying that
/// something there failed, and a closing paragraph says what that usually means.
std::string hide_hidden_test_source(const std::string& compiler_output);

/// Grades a submission. Always returns a valid results.json document; `status` is 0 after a
/// grading (whatever the score) and 2 when the grader itself could not do its job (the document
/// then says why, with score 0).
nlohmann::json grade(const GradeOptions& options, int& status);

}  // namespace clockwork::grading
