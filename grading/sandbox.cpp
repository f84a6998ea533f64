#include "grading/sandbox.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "tools/handout/process.h"

namespace clockwork::grading {
namespace {

namespace fs = std::filesystem;

// `path` and everything under it (links themselves, never what they point to) owned by uid:gid,
// with the group and others' write permission removed when `private_write` is set.
void own_tree(const fs::path& path, uid_t uid, gid_t gid, bool private_write) {
  auto one = [&](const fs::path& p) {
    if (lchown(p.c_str(), uid, gid) != 0) {
      throw std::runtime_error("cannot change the owner of " + p.string() + ": " +
                               std::error_code(errno, std::generic_category()).message());
    }
    struct stat st{};
    if (private_write && lstat(p.c_str(), &st) == 0 && !S_ISLNK(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH))) {
      chmod(p.c_str(), st.st_mode & 07755);
    }
  };
  one(path);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    one(it->path());
  }
  if (ec) throw std::runtime_error("cannot list " + path.string() + ": " + ec.message());
}

bool runs(const std::vector<std::string>& argv) {
  handout::RunOptions o;
  o.argv = argv;
  o.timeout_s = 30;
  return handout::run_process(o).succeeded();
}

}  // namespace

std::vector<std::string> Sandbox::wrap(const std::vector<std::string>& argv) const {
  std::vector<std::string> w;
  if (pid_namespace) {
    w = {unshare};
    if (user_namespace) w.insert(w.end(), {"--user", "--map-root-user"});
    // --kill-child: the run ends when its first process does, and the kernel then ends every
    // other process of the namespace (setsid and double forks included).
    w.insert(w.end(), {"--pid", "--fork", "--kill-child", "--mount-proc"});
  }
  if (!openings.empty()) {
    // Between unshare and setpriv, still root, in the run's own mount namespace (--mount-proc
    // makes one, private to the run). A closed folder's entries on the way are opened first
    // (a descriptor keeps each one's original), then the closed folder is covered with an empty
    // tmpfs that anyone may enter, and each entry is bound back from its descriptor. The paths
    // are arguments, never part of the script's text.
    std::vector<std::string> args = {mount, mkdir};
    auto arg = [&](const std::string& value) {
      args.push_back(value);
      return "\"${" + std::to_string(args.size()) + "}\"";
    };
    std::string script = "set -e\n";
    for (const Opening& o : openings) {
      const std::string closed = arg(o.closed.string());
      std::vector<std::string> ways;
      script += "exec";
      for (size_t i = 0; i < o.ways.size(); ++i) {
        ways.push_back(arg(o.ways[i]));
        script += " " + std::to_string(3 + i) + "<" + closed + "/" + ways.back();
      }
      script += "\n\"$1\" -t tmpfs -o mode=0711,size=64k,nosuid,nodev,noexec clockwork-sandbox " +
                closed + "\n";
      for (size_t i = 0; i < ways.size(); ++i) {
        script += "\"$2\" " + closed + "/" + ways[i] +
                  "\n\"$1\" --no-canonicalize --rbind /proc/self/fd/" + std::to_string(3 + i) +
                  " " + closed + "/" + ways[i] + "\n";
      }
      script += "exec";
      for (size_t i = 0; i < ways.size(); ++i) script += " " + std::to_string(3 + i) + "<&-";
      script += "\n";
    }
    script += "shift " + std::to_string(args.size()) + "\nexec \"$@\"\n";
    w.insert(w.end(), {sh, "-c", script, "clockwork-sandbox"});
    w.insert(w.end(), args.begin(), args.end());
  }
  if (!user.empty()) {
    // Changing the user clears the parent-death signal that unshare --kill-child gave this
    // process: setpriv sets it again afterwards, so that the run still ends with unshare, which
    // ends with the grader (handout::run_process).
    w.insert(w.end(), {setpriv, "--reuid", std::to_string(uid), "--regid", std::to_string(gid), "--clear-groups",
                       "--no-new-privs", "--pdeathsig", "KILL", "--"});
  }
  w.insert(w.end(), argv.begin(), argv.end());
  return w;
}

void Sandbox::give(const fs::path& dir) const {
  if (!user.empty()) own_tree(dir, uid, gid, false);
}

void Sandbox::take_back(const fs::path& dir) const {
  if (!user.empty()) own_tree(dir, geteuid(), getegid(), true);
}

void Sandbox::private_folder(const fs::path& dir) const {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  if (!user.empty() && chown(dir.c_str(), uid, gid) != 0) {
    throw std::runtime_error("cannot give " + dir.string() + " to " + user);
  }
}

void Sandbox::hand_over(int fd) const {
  if (!user.empty() && fchown(fd, uid, gid) != 0) {
    throw std::runtime_error("cannot give a report file to " + user + ": " +
                             std::error_code(errno, std::generic_category()).message());
  }
}

std::string Sandbox::describe() const {
  std::ostringstream o;
  o << "Isolation: your code was built and run ";
  if (!user.empty()) {
    o << "as the unprivileged user '" << user << "'";
  } else {
    o << "as the autograder's own user (no separate user";
    if (!why_weaker.empty()) o << ": " << why_weaker;
    o << ")";
  }
  o << (pid_namespace ? ", each build and test run in a PID namespace of its own (nothing it starts outlives it)"
                      : ", each build and test run in a process group of its own (no PID namespace here)");
  o << ".\n";
  if (!user.empty() && !why_weaker.empty()) o << "  (" << why_weaker << ")\n";
  return o.str();
}

Sandbox make_sandbox(const std::string& user) {
  Sandbox s;
  s.unshare = handout::find_program("unshare");
  const bool root = geteuid() == 0;
  std::vector<std::string> notes;
  if (!root) {
    notes.push_back("the autograder does not run as root, so it cannot switch users");
  } else if (user.empty()) {
    notes.push_back("no student user was given");
  } else if ((s.setpriv = handout::find_program("setpriv")).empty()) {
    notes.push_back("setpriv (util-linux) is not installed");
  } else {
    if (!getpwnam(user.c_str())) {
      const std::string useradd = handout::find_program("useradd");
      if (!useradd.empty()) {
        runs({useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
              "/usr/sbin/nologin", user});
      }
    }
    const struct passwd* pw = getpwnam(user.c_str());
    if (!pw) {
      notes.push_back("the user '" + user + "' does not exist and could not be created");
    } else if (pw->pw_uid == 0) {
      notes.push_back("the user '" + user + "' is root");
    } else {
      s.user = user;
      s.uid = pw->pw_uid;
      s.gid = pw->pw_gid;
    }
  }
  if (!s.unshare.empty()) {
    const std::vector<std::string> probe = {"--pid", "--fork", "--kill-child", "--mount-proc", "true"};
    std::vector<std::string> argv = {s.unshare};
    if (!root) argv.insert(argv.end(), {"--user", "--map-root-user"});
    argv.insert(argv.end(), probe.begin(), probe.end());
    s.pid_namespace = runs(argv);
    s.user_namespace = s.pid_namespace && !root;
    if (!s.pid_namespace) notes.push_back("this machine does not allow PID namespaces (unshare failed)");
  } else {
    notes.push_back("unshare (util-linux) is not installed");
  }
  for (size_t i = 0; i < notes.size(); ++i) s.why_weaker += (i ? "; " : "") + notes[i];
  if (!s.why_weaker.empty()) std::cerr << "clockwork-grade: weaker isolation of student code: " << s.why_weaker << "\n";
  return s;
}

void Sandbox::reach(const std::vector<fs::path>& paths) {
  if (user.empty()) return;  // student code runs as the grader's own user, who reaches them all
  // Each closed folder above a path, with the entry below it on the way to that path. The map
  // puts a folder before the folders inside it, the order the openings are made in.
  std::map<fs::path, std::set<std::string>> ways;
  fs::path behind;  // a path behind the outermost closed folder, for the message
  for (const fs::path& path : paths) {
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(path, ec);
    if (ec || !p.is_absolute()) continue;
    for (fs::path below = p; below.has_relative_path(); below = below.parent_path()) {
      struct stat st {};
      const fs::path up = below.parent_path();
      if (::stat(up.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
        ways[up].insert(below.filename().string());
        if (ways.begin()->first == up) behind = p;
      }
    }
  }
  if (ways.empty()) return;
  const fs::path first = ways.begin()->first;
  auto cannot = [&](const std::string& why) {
    return std::runtime_error("the student user '" + user + "' cannot reach " + behind.string() +
                              ": " + first.string() + " may not be entered by other users, and " +
                              why + " (chmod o+x " + first.string() +
                              ", or use a folder elsewhere)");
  };
  if (!pid_namespace || user_namespace)
    throw cannot("this machine gives the runs no mount namespace to open it in");
  sh = handout::find_program("sh");
  mount = handout::find_program("mount");
  mkdir = handout::find_program("mkdir");
  if (sh.empty() || mount.empty() || mkdir.empty())
    throw cannot("sh, mount or mkdir is missing to open it with");
  std::vector<Opening> made;
  for (const auto& [closed, names] : ways) {
    if (!closed.has_relative_path())
      throw cannot("covering the root folder would hide the whole system");
    // One descriptor per entry, 3 to 9: the shell's redirections take a single digit.
    if (names.size() > 7) throw cannot("more than 7 of its entries lead to the folders to reach");
    made.push_back({closed, {names.begin(), names.end()}});
  }
  openings = std::move(made);
}

}  // namespace clockwork::grading
