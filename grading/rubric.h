/// @file rubric.h
/// The grading rubric: which GoogleTest cases earn how many points in each milestone.
///
/// ```json
/// {
///   "timeout_s": 300,
///   "leaderboard": [{"property": "leaderboard_matmul_gflops", "name": "matmul GFLOP/s", "order": "desc"}],
///   "benchmark": {"target": "clockwork-cuda", "args": ["bench", "--op", "matmul"], "timeout_s": 600},
///   "milestones": [
///     {"milestone": 1, "title": "Embedding and matmul",
///      "tests": [{"name": "Tiled matmul", "binary": "milestone1_kernels",
///                 "filter": "Matmul.Tiled*", "points": 4, "visibility": "visible"}]}
///   ]
/// }
/// ```
///
/// An item of a later milestone may say how much of the student's chain it runs.
/// `"isolated": true`: the grader runs it on `<binary>_isolated`, the same test program linked
/// with known-good versions (harness/known_good) of the steps the item is not about, so that a
/// mistake in an earlier step costs that step's items and not this one too
/// (clockwork_add_isolated_test in cmake/ClockworkTesting.cmake says which steps each program
/// replaces). `"end_to_end": true`: the item deliberately runs the student's whole chain (the
/// model's next token, cached generation) on the program students run; the rubric says so, so
/// that the double charge is a choice. An item with neither tests one kernel or step that calls
/// no other student step.
///
/// `binary` is a test registered with ctest: `<binary>.sim` / `<binary>.cuda` for kernel tests
/// (the backend the grader uses), or `<binary>` for plain host tests. `filter` is a GoogleTest
/// filter (`Suite.*`, several patterns separated by `:`, exclusions after `-`). A test earns its
/// points when every case it selects passes. A hidden rubric (grading/rubric-hidden.json, instructor
/// only) has the same form; its tests run with the secret seed and default to visibility
/// "after_due_date".
///
/// Which files are the students' is not the rubric's to say: they are the files with solution
/// regions (handout::Tree::student_files), and the grader fills Rubric::student_files from the
/// framework's markers. A rubric that still names "student_files" is refused.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace clockwork::grading {

/// One graded item: a set of GoogleTest cases of one binary.
struct RubricTest {
  std::string name;
  std::string binary;
  std::string filter;
  double points = 0;
  std::string visibility = "visible";  ///< visible, hidden, after_due_date or after_published
  std::vector<std::string> tags;
  double timeout_s = 0;  ///< 0: the rubric's default
  int milestone = 0;
  bool hidden = false;  ///< from the hidden rubric: runs with the secret seed
  bool isolated = false;    ///< runs on <binary>_isolated (known-good earlier steps)
  bool end_to_end = false;  ///< deliberately runs the student's whole chain

  /// The ctest test (without the backend suffix) the grader runs: `binary`, or its isolated
  /// variant.
  std::string program() const { return isolated ? binary + "_isolated" : binary; }
};

struct LeaderboardColumn {
  std::string property;  ///< RecordProperty() key reported by a test
  std::string name;      ///< column title
  std::string order;     ///< "asc", "desc" or "" (Gradescope's default)
};

/// The benchmark whose figures fill Gradescope's leaderboard: a program of the framework copy
/// (built with the submission's kernels) that writes `clockwork bench --json` output. It runs
/// only on a GPU, and only for a submission that passed every test.
struct RubricBenchmark {
  std::string target;             ///< CMake target of the program, e.g. "clockwork-cuda"
  std::vector<std::string> args;  ///< its arguments; the grader appends `--json FILE`
  double timeout_s = 600;
};

struct Rubric {
  /// The files a submission may replace (relative, '/' separators): the solution tree's files
  /// with solution regions, set by the grader from the markers.
  std::set<std::string> student_files;
  double timeout_s = 300;
  std::vector<LeaderboardColumn> leaderboard;
  RubricBenchmark benchmark;  ///< empty target: no benchmark
  std::vector<RubricTest> tests;  ///< in rubric order, milestone by milestone

  /// True when `path` (relative, '/' separators) is one of the student files.
  bool is_student_file(const std::string& path) const;
  double total_points() const;
  /// Points of the tests of milestones in [from, to].
  double points_of_milestones(int from, int to) const;
};

/// Parses a rubric; `hidden` marks every test as hidden. Throws std::runtime_error naming the
/// problem (missing field, bad visibility, bad points).
Rubric parse_rubric(const std::string& json_text, bool hidden = false);

/// Reads a rubric file. Throws std::runtime_error.
Rubric load_rubric(const std::filesystem::path& file, bool hidden = false);

/// Appends the tests of `extra` (e.g. the hidden rubric) to `base`.
void merge_rubric(Rubric& base, const Rubric& extra);

}  // namespace clockwork::grading
