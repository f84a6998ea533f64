/// @file test_reports.h
/// Reading what the test tools say, in their machine formats rather than their text: the JSON
/// report of a GoogleTest binary (--gtest_output=json:FILE) and the list of tests of a build
/// directory (ctest --show-only=json-v1).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace clockwork::handout {

/// One GoogleTest test case of a report.
struct CaseResult {
  std::string name;  ///< Suite.Case
  bool ran = false;  ///< status RUN (not disabled or filtered out)
  bool skipped = false;
  std::vector<std::string> failures;  ///< failure messages, in order
  std::map<std::string, std::string> properties;  ///< values recorded with RecordProperty()
  double seconds = 0;
  /// GoogleTest stamped the case with the time it started: false for a case listed as run that
  /// never started (a global test environment that skipped or stopped everything).
  bool started = false;

  bool passed() const { return ran && !skipped && failures.empty(); }
};

/// A GoogleTest JSON report.
struct GtestReport {
  bool valid = false;  ///< false: missing or unreadable (the binary did not get to write it)
  std::string error;   ///< why it is not valid
  std::vector<CaseResult> cases;

  size_t passed() const;
  size_t failed() const;  ///< cases that ran and did not pass (skipped ones excluded)
};

/// Reads a report written by --gtest_output=json:FILE. Never throws.
GtestReport read_gtest_report(const std::filesystem::path& file);
/// The same from the report's text.
GtestReport parse_gtest_report(const std::string& json);

/// One test of a build directory, as ctest would run it.
struct CtestTest {
  std::string name;
  std::vector<std::string> command;  ///< program and arguments
  std::vector<std::string> labels;
  std::filesystem::path working_directory;  ///< empty: the build directory
  double timeout_s = 0;                     ///< 0: ctest's default
  std::vector<std::string> environment;     ///< NAME=value entries of the ENVIRONMENT property

  bool has_label(const std::string& label) const;
  /// The build target of the test's program: the file name of its command, or, before the
  /// program is built (ctest then lists no command), the name the project's test registration
  /// gives it: `<name>.sim` and `<name>.cuda` are built by `<name>_sim` and `<name>_cuda`, a
  /// host test by its own name.
  std::string target() const;
};

/// Parses the output of `ctest --show-only=json-v1`. Throws std::runtime_error on malformed input.
std::vector<CtestTest> parse_ctest_listing(const std::string& json);

/// Runs `ctest --show-only=json-v1` in `build_dir` and parses it. Throws std::runtime_error.
std::vector<CtestTest> list_ctest_tests(const std::string& ctest, const std::filesystem::path& build_dir);

}  // namespace clockwork::handout
