/// @file sandbox.h
/// How the autograder runs student code: every build of a submission and every test run goes
/// through Sandbox::wrap. When the grader is root, that is an unprivileged user of its own
/// (setpriv) in a PID namespace of its own (unshare), so that a submission can write nothing of
/// the grader's (work folder, test programs, reports, results.json) and nothing it starts outlives
/// its build or test run. Without root, the strongest isolation the machine allows, and the
/// overall output says which.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace clockwork::grading {

struct Sandbox {
  std::string user;         ///< the unprivileged user student code runs as; empty: the grader's own
  uid_t uid = 0;
  gid_t gid = 0;
  bool pid_namespace = false;   ///< each run is the init process of its own PID namespace
  bool user_namespace = false;  ///< (not root) the namespace is entered through a user namespace
  std::string unshare, setpriv;  ///< the programs, when used
  std::string why_weaker;        ///< what kept the isolation from being complete ("" when complete)

  /// `argv` run as described: the program then runs as `user` in a PID namespace of its own.
  std::vector<std::string> wrap(const std::vector<std::string>& argv) const;

  /// Makes `dir` and everything in it the student user's (a build folder before the build).
  void give(const std::filesystem::path& dir) const;
  /// Makes `dir` and everything in it the grader's again, writable by nobody else (a build folder
  /// after the build: its test programs cannot be replaced by the test runs).
  void take_back(const std::filesystem::path& dir) const;
  /// An empty folder only the student user can use (its home and temporary folder in a run).
  void private_folder(const std::filesystem::path& dir) const;
  /// Lets the student user write through `fd`, a file the grader opened in a folder the student
  /// user cannot reach: the run writes its report there and nowhere else.
  void hand_over(int fd) const;

  /// One paragraph for the overall output: how student code ran.
  std::string describe() const;
};

/// The first folder above `path` that users other than its owner may not enter (no o+x), or an
/// empty path when every one may be: the student user can reach `path` only in the second case.
std::filesystem::path closed_ancestor(const std::filesystem::path& path);

/// The sandbox this machine allows. `user` is the account student code runs as when the grader
/// is root; it is created (a system account with no login) when missing. Never throws: what
/// cannot be had is left out and said in `why_weaker`.
Sandbox make_sandbox(const std::string& user);

}  // namespace clockwork::grading
