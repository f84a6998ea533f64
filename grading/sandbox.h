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

  /// A folder that other users may not enter (no o+x) above a folder the student user must reach,
  /// with the names of its entries on the way there (see reach()).
  struct Opening {
    std::filesystem::path closed;
    std::vector<std::string> ways;
  };
  std::vector<Opening> openings;  ///< outermost first
  std::string sh, mount, mkdir;   ///< the programs that make the openings, when there are any

  /// Lets the student user reach the folders `paths` although a folder above one of them is closed
  /// to other users: a tree under /root, or a clone in a private temporary folder. Each run then
  /// sees, in a mount namespace of its own, an empty folder that anyone may enter (a small tmpfs)
  /// over each closed folder, with only the entries on the way to `paths` bound back into it. The
  /// student user gains the way to `paths` and nothing else of the closed folder, and nothing
  /// changes outside the run. Throws std::runtime_error, naming the closed folder, when this
  /// sandbox cannot do it (no student user, or no mount namespace or mount(8) to do it with).
  void reach(const std::vector<std::filesystem::path>& paths);

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

/// The sandbox this machine allows. `user` is the account student code runs as when the grader
/// is root; it is created (a system account with no login) when missing. Never throws: what
/// cannot be had is left out and said in `why_weaker`.
Sandbox make_sandbox(const std::string& user);

}  // namespace clockwork::grading
