#include "grading/grader.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "grading/results.h"
#include "grading/sandbox.h"
#include "grading/symbols.h"
#include "tools/handout/process.h"
#include "tools/handout/test_reports.h"

namespace clockwork::grading {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxSubmissionFile = 4 * 1024 * 1024;  // no student source is anywhere near this
constexpr size_t kMaxSubmissionEntries = 50000;
constexpr unsigned long long kMaxTestOutputFile = 256ull * 1024 * 1024;
constexpr size_t kListed = 25;  // names listed per category in the overall output
// Kept free before --deadline for the checked reports to be read and results.json written.
constexpr double kDeadlineMargin_s = 20;
// A test run is not started with less time than this left before the deadline.
constexpr double kMinimumRun_s = 5;

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

bool skipped_name(const std::string& name) {
  return name.empty() || name[0] == '.' || starts_with(name, "build") || name == "__MACOSX";
}

// An upload often wraps the project in one folder (a zip of the checkout): grade what is inside.
fs::path submission_root(fs::path root) {
  for (int depth = 0; depth < 3; ++depth) {
    std::vector<fs::path> dirs;
    size_t files = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (skipped_name(e.path().filename().string())) continue;
      if (e.is_directory() && !e.is_symlink()) {
        dirs.push_back(e.path());
      } else {
        ++files;
      }
    }
    if (files != 0 || dirs.size() != 1 || fs::exists(root / "kernels")) break;
    root = dirs[0];
  }
  return root;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < kListed; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > kListed) s += ", and " + std::to_string(items.size() - kListed) + " more";
  return s;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

bool gpu_present() {
  handout::RunOptions o;
  o.argv = {"nvidia-smi", "-L"};
  o.timeout_s = 30;
  const handout::RunResult r = run_process(o);
  return r.succeeded() && r.output.find("GPU") != std::string::npos;
}

std::string nvcc_path() {
  std::string p = handout::find_program("nvcc");
  if (p.empty() && access("/usr/local/cuda/bin/nvcc", X_OK) == 0) p = "/usr/local/cuda/bin/nvcc";
  return p;
}

}  // namespace

bool valid_hidden_seed(const std::string& seed) {
  if (seed.empty() || seed.size() > 20 || !std::isdigit(static_cast<unsigned char>(seed[0]))) return false;
  errno = 0;
  char* end = nullptr;
  std::strtoull(seed.c_str(), &end, 0);
  return errno == 0 && end == seed.c_str() + seed.size();
}

namespace {

std::string random_seed() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return std::to_string(v);
}

}  // namespace

std::string hide_hidden_test_source(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  bool hiding = false;
  size_t hidden = 0;
  // A diagnostic starts with a location ("path:line:col: ..." or "In file included from path");
  // the lines after it that echo source ("  12 |   code", "     |   ^~~") belong to it.
  const auto is_echo = [](const std::string& l) {
    size_t i = l.find_first_not_of(' ');
    if (i == std::string::npos) return false;
    while (i < l.size() && std::isdigit(static_cast<unsigned char>(l[i]))) ++i;
    while (i < l.size() && l[i] == ' ') ++i;
    return i < l.size() && l[i] == '|';
  };
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    const bool located = colon != std::string::npos && !is_echo(line) && line.rfind("FAILED: ", 0) != 0;
    const bool in_hidden = located && line.substr(0, colon + 1).find("grading/hidden/") != std::string::npos;
    const bool included_from_hidden =
        line.find("included from ") != std::string::npos && line.find("grading/hidden/") != std::string::npos;
    if (in_hidden || included_from_hidden) {
      if (!hiding) out += "[an error reported in a hidden test's source, not shown]\n";
      hiding = true;
      ++hidden;
      continue;
    }
    if (hiding && (is_echo(line) || line.rfind("  ", 0) == 0)) continue;
    hiding = false;
    out += line + "\n";
  }
  if (hidden > 0) {
    out += "\nA hidden test does not compile against your code: its source is not shown. Check that your "
           "files keep the functions and signatures the handout gives (names, argument types, return types).\n";
  }
  return out;
}

namespace {

// The build's error messages: from the first failed step on, where the compiler's first error is.
std::string build_errors(const std::string& log) {
  size_t start = log.find("FAILED: ");
  if (start == std::string::npos) start = log.find("error:");
  if (start == std::string::npos) return handout::shorten(log, 8000, 0.2);
  start = log.rfind('\n', start);
  start = start == std::string::npos ? 0 : start + 1;
  // Ninja prints each failed command in full after its FAILED line: long and of no use to a
  // student, who cannot change it.
  std::istringstream in(log.substr(start));
  std::string line, text;
  bool after_failed = false;
  while (std::getline(in, line)) {
    const bool command = after_failed && line.find(" -c ") != std::string::npos && line.find(" -o ") != std::string::npos;
    after_failed = line.rfind("FAILED: ", 0) == 0;
    if (!command) text += line + "\n";
  }
  return handout::shorten(hide_hidden_test_source(text), 8000, 0.8);
}

// Holds an exclusive lock on the work folder so that two gradings never share a build.
class WorkLock {
 public:
  explicit WorkLock(const fs::path& dir) {
    fd_ = open((dir / ".grade.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0 || flock(fd_, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + dir.string());
  }
  ~WorkLock() {
    if (fd_ >= 0) close(fd_);
  }
  WorkLock(const WorkLock&) = delete;
  WorkLock& operator=(const WorkLock&) = delete;

 private:
  int fd_ = -1;
};

// A temporary work folder that goes away with the grading.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "clockwork-grade-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary folder");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Raised for failures of the grader or the framework (not of the submission).
struct GraderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- the checked run (CPU backend) ---------------------------------------------------------------
// On the CPU backend a rubric test runs twice: as <binary>.sim, and as <binary>.check, the same
// tests built for checking, which ctest runs with CUDASIM_CHECK=all in warp-by-warp reverse order
// (cmake/ClockworkTesting.cmake). A kernel with a race, an out-of-bounds access or a read of
// memory nothing wrote, or one that is right only in the default thread order, passes the first
// and fails the second, as it would fail on a GPU. The test earns its points only when both pass.

// The ctest name of the checked variant of a rubric test's binary ("" when not on the CPU backend).
std::string checked_test_name(const std::string& binary, const std::string& backend) {
  return backend == "sim" ? binary + ".check" : "";
}

// The verdict of a rubric test from its normal and its checked run.
TestOutcome with_checked_run(TestOutcome normal, const TestOutcome& checked) {
  if (!normal.passed) return normal;  // the first failure is the one to fix
  if (checked.passed) return normal;
  TestOutcome o;
  o.passed = false;
  o.output = "These tests pass as they are, but not when the CPU backend checks every memory access and runs "
             "the threads in another order (warp by warp, last first), which is what a GPU may do. On a GPU "
             "this kernel would give wrong results, or fail now and then. The checked run says:\n\n" +
             checked.output;
  o.figures = normal.figures;
  return o;
}

}  // namespace

std::string SubmissionPlan::describe() const {
  std::ostringstream o;
  o << "Student files graded (" << used.size() << "): " << (used.empty() ? "none" : join_list(used)) << "\n";
  for (const auto& [from, to] : placed) o << "  " << from << " was used as " << to << " (matched by name)\n";
  if (!missing.empty()) {
    o << "Not in the submission, so the handout's unfinished version was used (" << missing.size()
      << "): " << join_list(missing) << "\n";
  }
  if (!ignored.empty()) {
    std::vector<std::string> items;
    for (const auto& [path, why] : ignored) items.push_back(path + " (" + why + ")");
    o << "Ignored (" << ignored.size() << "): only student files are graded; the framework's own tests, harness, "
      << "build files and rubric are always used: " << join_list(items) << "\n";
  }
  return o.str();
}

SubmissionPlan overlay_submission(handout::Tree& framework, const Rubric& rubric, const fs::path& submission_dir) {
  SubmissionPlan plan;
  if (!fs::is_directory(submission_dir)) throw GraderError("the submission folder does not exist: " + submission_dir.string());
  const fs::path root = submission_root(submission_dir);

  std::map<std::string, std::string> submitted;   // student file -> content
  std::vector<std::pair<std::string, fs::path>> loose;  // top-level files, for matching by name
  size_t entries = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (++entries > kMaxSubmissionEntries) {
      plan.ignored.emplace_back("...", "the submission has too many files; the rest were not looked at");
      break;
    }
    const std::string name = it->path().filename().string();
    const std::string rel = it->path().lexically_relative(root).generic_string();
    if (it->is_symlink()) {
      if (!skipped_name(name)) plan.ignored.emplace_back(rel, "a symbolic link");
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory()) {
      if (skipped_name(name)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) {
      // Never opened: reading a FIFO would wait for a writer that never comes.
      if (!skipped_name(name)) plan.ignored.emplace_back(rel, "not a regular file (a FIFO, socket or device)");
      continue;
    }
    const auto size = it->file_size(ec);
    if (ec || size > kMaxSubmissionFile) {
      plan.ignored.emplace_back(rel, "too large");
      continue;
    }
    const handout::TreeFile* f = framework.find(rel);
    if (rubric.is_student_file(rel) && f) {
      submitted[rel] = handout::read_file(it->path());
      continue;
    }
    if (it.depth() == 0) loose.emplace_back(rel, it->path());
    if (!f) {
      if (it.depth() != 0) plan.ignored.emplace_back(rel, "not part of the framework");
      continue;
    }
    if (handout::read_file(it->path()) != f->content) plan.ignored.emplace_back(rel, "modified");
  }

  // Files uploaded on their own (matmul.cu rather than kernels/matmul.cu) go where the one
  // student file of that name is.
  std::map<std::string, std::vector<std::string>> by_name;
  for (const handout::TreeFile& f : framework.files) {
    if (rubric.is_student_file(f.path)) by_name[fs::path(f.path).filename().string()].push_back(f.path);
  }
  for (const auto& [rel, path] : loose) {
    if (framework.find(rel)) continue;  // handled above
    const auto it = by_name.find(rel);
    if (it == by_name.end()) {
      plan.ignored.emplace_back(rel, "not part of the framework");
    } else if (it->second.size() != 1) {
      plan.ignored.emplace_back(rel, "several student files have this name; submit it in its folder");
    } else if (submitted.count(it->second[0])) {
      plan.ignored.emplace_back(rel, it->second[0] + " was submitted too");
    } else {
      submitted[it->second[0]] = handout::read_file(path);
      plan.placed.emplace_back(rel, it->second[0]);
    }
  }

  for (handout::TreeFile& f : framework.files) {
    if (!rubric.is_student_file(f.path)) continue;
    const auto it = submitted.find(f.path);
    if (it == submitted.end()) {
      plan.missing.push_back(f.path);
      continue;
    }
    f.content = it->second;
    plan.used.push_back(f.path);
  }
  std::sort(plan.ignored.begin(), plan.ignored.end());
  return plan;
}

namespace {

// A report file in the grader's reports folder, which the student user cannot reach, opened by
// the grader and handed to the run as an inherited descriptor: the run can write its own report
// through it and no other file, and nothing can write it before the run starts.
class ReportFile {
 public:
  ReportFile(const fs::path& path, const Sandbox& sandbox) {
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) throw GraderError("cannot create " + path.string() + ": " + std::strerror(errno));
    sandbox.hand_over(fd_);
  }
  ~ReportFile() { close(fd_); }
  ReportFile(const ReportFile&) = delete;
  ReportFile& operator=(const ReportFile&) = delete;
  int fd() const { return fd_; }
  // The name the program opens it by (GoogleTest reopens its output file by name).
  std::string path_for_child() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

// The hidden tests' secret seed on its way to one run: a pipe whose read end the run inherits
// (its number in CLOCKWORK_SEED_FD, which is no secret) and whose write end is closed once the seed
// is in it, before the run starts. The seed is never in a child's environment or arguments, where
// the submission's own code could read it (getenv, /proc/self/environ, /proc/self/cmdline); the
// hidden tests take it from the pipe before that code runs (grading/hidden/seed_channel.cpp).
class SeedPipe {
 public:
  explicit SeedPipe(const std::string& seed) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw GraderError(std::string("cannot create a pipe: ") + std::strerror(errno));
    read_fd_ = fds[0];
    // A few bytes always fit in an empty pipe: this write never blocks.
    const ssize_t n = write(fds[1], seed.data(), seed.size());
    close(fds[1]);
    if (n != static_cast<ssize_t>(seed.size())) {
      close(read_fd_);
      throw GraderError("cannot write the hidden tests' seed into its pipe");
    }
  }
  ~SeedPipe() { close(read_fd_); }
  SeedPipe(const SeedPipe&) = delete;
  SeedPipe& operator=(const SeedPipe&) = delete;
  int fd() const { return read_fd_; }

 private:
  int read_fd_ = -1;
};

struct Pipeline {
  const GradeOptions& opt;
  Rubric rubric;
  fs::path work, tree_dir, build_dir, reports_dir;
  std::string backend;  // "sim" or "cuda"
  std::string seed;
  std::ostringstream top;
  std::map<std::string, std::optional<std::string>> build_env;
  Sandbox sandbox;  // how student code is built and run

  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  explicit Pipeline(const GradeOptions& o) : opt(o) {}

  // Seconds left before the deadline, keeping a margin for the results; infinite without one.
  double time_left() const {
    if (opt.deadline_s <= 0) return std::numeric_limits<double>::infinity();
    const double used = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return opt.deadline_s - kDeadlineMargin_s - used;
  }

  // A build's time limit: its own, or what is left before the deadline.
  double build_limit() const { return std::max(1.0, std::min(opt.build_timeout_s, time_left())); }

  // `student`: the command compiles student code, so it goes through the sandbox.
  handout::RunResult run_logged(const std::vector<std::string>& argv, const fs::path& log, double timeout_s,
                                bool student = false) {
    handout::RunOptions r;
    r.argv = student ? sandbox.wrap(argv) : argv;
    r.cwd = tree_dir;
    r.env = build_env;
    r.timeout_s = timeout_s;
    r.output_file = log;
    r.max_output = 256 * 1024;
    return handout::run_process(r);
  }

  fs::path framework;  // the built solution tree whose framework objects are reused, if any

  // Whether --framework-build can serve: a configured build, brought up to date (a no-op when it
  // is), so that its objects match the sources the framework copy is made from.
  void prepare_framework() {
    if (opt.framework_build.empty()) return;
    const fs::path fw = fs::weakly_canonical(opt.framework_build);
    if (!fs::exists(fw / "clockwork-framework.cmake")) {
      std::cerr << "clockwork-grade: " << fw.string() << " is not a configured Clockwork build; "
                << "compiling the whole framework instead\n";
      return;
    }
    if (opt.refresh_framework) {
      const int jobs = opt.jobs > 0 ? opt.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      const handout::RunResult r = run_logged({opt.cmake, "--build", fw.string(), "--target", "clockwork_framework",
                                               "-j", std::to_string(jobs)},
                                              work / "framework.log", build_limit());
      if (!r.succeeded()) {
        std::cerr << "clockwork-grade: the framework build " << fw.string() << " could not be brought up to date ("
                  << r.describe() << "); compiling the whole framework instead\n";
        return;
      }
    }
    framework = fw;
  }

  // The student user builds and runs in the work folder and links the framework build's objects,
  // which may be another build's in turn (a framework build that reuses one): where a folder above
  // them is closed to other users, each run of student code opens the way to them
  // (Sandbox::reach), and a first run checks that it gets there.
  void open_the_way() {
    if (sandbox.user.empty()) return;
    std::vector<fs::path> dirs = {work};
    if (!framework.empty()) {
      dirs.push_back(framework);
      if (const fs::path source = framework_source_dir(); !source.empty()) dirs.push_back(source);
      fs::path build = framework;
      for (int hop = 0; hop < 8; ++hop) {
        build = cache_value(build, "CLOCKWORK_FRAMEWORK_BUILD");
        if (build.empty()) break;
        dirs.push_back(build);
      }
    }
    try {
      sandbox.reach(dirs);
    } catch (const std::runtime_error& e) {
      throw GraderError(e.what());
    }
    if (sandbox.openings.empty()) return;
    std::string closed, held;
    for (const Sandbox::Opening& o : sandbox.openings) {
      closed += (closed.empty() ? "" : ", ") + o.closed.string();
      held += std::string(held.empty() ? "" : "; ") + o.closed.string() + " holds only " +
              join_list(o.ways);
    }
    std::vector<std::string> probe = {sandbox.sh, "-c", "for d; do cd \"$d\" || exit 1; done",
                                      "sh"};
    for (const fs::path& d : dirs) probe.push_back(d.string());
    const handout::RunResult got = run_logged(probe, work / "reach.log", 60, true);
    if (!got.succeeded()) {
      throw GraderError("the student user '" + sandbox.user + "' cannot reach the work folder: " +
                        closed + " may not be entered by other users, and opening the way in a " +
                        "mount namespace failed (" + got.describe() + "):\n" + got.output +
                        "(chmod o+x, or use a folder elsewhere)");
    }
    std::cerr << "clockwork-grade: " << closed << " may not be entered by other users: opened in "
              << "each run of student code, where " << held << "\n";
  }

  // A value of a build's CMake cache ("" when it has none).
  static fs::path cache_value(const fs::path& build, const std::string& name) {
    std::ifstream in(build / "CMakeCache.txt");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(name + ":", 0) != 0) continue;
      const size_t eq = line.find('=');
      return eq == std::string::npos ? fs::path() : fs::path(line.substr(eq + 1));
    }
    return {};
  }

  // A value the framework build's manifest sets ("" when it sets none).
  std::string manifest_value(const std::string& name) const {
    std::error_code ec;
    if (!fs::is_regular_file(framework / "clockwork-framework.cmake", ec)) return "";
    const std::string manifest = handout::read_file(framework / "clockwork-framework.cmake");
    const std::string key = "set(" + name + " \"";
    const size_t at = manifest.find(key);
    if (at == std::string::npos) return "";
    const size_t end = manifest.find('"', at + key.size());
    return end == std::string::npos ? "" : manifest.substr(at + key.size(), end - at - key.size());
  }

  // The tree the framework build was configured from, as its manifest says ("" when unknown).
  fs::path framework_source_dir() const {
    const std::string dir = manifest_value("CLOCKWORK_PREBUILT_SOURCE_DIR");
    std::error_code ec;
    return dir.empty() ? fs::path() : fs::weakly_canonical(dir, ec);
  }

  // With a student user, what a submission must not read is made unreadable to it (the owner,
  // root, keeps every right): in the solution tree, the solution versions of the student files and
  // the instructor-only files (hidden tests, their rubric), also in the framework build's own tree
  // when that is a stubbed copy; in the framework build, the rewritten sources and the objects
  // compiled from student files, unless the submitted file is what that build compiled (the
  // solution, or the stub when the framework was built from a stubbed tree: the grading build then
  // reuses its object, and the student already has the file);
  // in the tree copy, the hidden tests' sources and rubric (the student build never compiles them),
  // and the known-good steps' sources when the framework build's objects of them are reused. The
  // framework's own objects and programs, which the student build links, stay readable; those of
  // the hidden tests are shielded separately (shield_framework_hidden_objects).
  void protect_secrets(const handout::Tree& tree, const fs::path& source) {
    if (sandbox.user.empty()) return;
    auto hide = [](const fs::path& path) {
      struct stat st{};
      if (lstat(path.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) chmod(path.c_str(), st.st_mode & 0700);
    };
    // Permissions are left as they are after a grading: what an earlier grading hid, this one may
    // need to read.
    auto reveal = [](const fs::path& path) {
      struct stat st{};
      if (lstat(path.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) chmod(path.c_str(), (st.st_mode & 07777) | 0044);
    };
    std::set<std::string> filenames_elsewhere;  // file names of framework files
    std::vector<std::string> instructor;
    for (const handout::TreeFile& f : tree.files) {
      if (handout::is_instructor_only(f.path, f.content)) instructor.push_back(f.path);
      // The known-good steps share file names with student files (qkv.cpp, decoder.cpp, ...):
      // they must not shield the student files' objects from the rule below.
      if (!rubric.is_student_file(f.path) && !handout::is_known_good(f.path)) {
        filenames_elsewhere.insert(fs::path(f.path).filename().string());
      }
    }
    // The tree the framework build compiled: the solution tree, or a copy with every region stubbed.
    const fs::path framework_source = framework.empty() ? fs::path() : framework_source_dir();
    const fs::path built_from = framework_source.empty() ? source : framework_source;
    // Student files submitted exactly as the framework build compiled them: their objects are
    // reused, and hold nothing the student does not have.
    std::set<std::string> submitted_as_built;
    for (const std::string& path : rubric.student_files) {
      const handout::TreeFile* f = tree.find(path);
      std::error_code ec;
      if (f && fs::is_regular_file(built_from / path, ec) && handout::read_file(built_from / path) == f->content) {
        submitted_as_built.insert(path);
      }
      hide(source / path);
    }
    for (const std::string& path : instructor) {
      hide(source / path);
      // The framework build's own tree (a stubbed copy with the hidden tests) keeps them too.
      if (!framework_source.empty() && framework_source != source) hide(framework_source / path);
      // The student user never compiles the hidden tests (the grader does, see link_hidden_programs),
      // and compiles the known-good steps only when there is no framework build to reuse.
      if ((!framework.empty() || !handout::is_known_good(path)) && fs::path(path).filename() != "CMakeLists.txt") {
        hide(tree_dir / path);
      }
    }
    if (framework.empty()) return;
    // The framework build's files that come from a student file: "<dir>/<file>." in their path
    // (cudasim-gen/kernels/rmsnorm.cu.cpp, .../milestone2/qkv.cpp.o), or a name that starts with
    // "<file>." when no framework file has that name (.../clockwork_kernels_cuda.dir/rmsnorm.cu.o).
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(framework, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) {
        // Another build or work folder inside this one (a grading's, a test's): not the framework's.
        if (fs::exists(it->path() / "CMakeCache.txt") || fs::exists(it->path() / ".grade.lock")) {
          it.disable_recursion_pending();
        }
        continue;
      }
      const std::string rel = it->path().lexically_relative(framework).generic_string();
      const std::string name = it->path().filename().string();
      // The known-good steps' objects: every grading links them into its isolated programs.
      if (handout::is_known_good(rel)) continue;
      for (const std::string& student : rubric.student_files) {
        const std::string file = fs::path(student).filename().string();
        if (rel.find(student + ".") != std::string::npos ||
            (name.rfind(file + ".", 0) == 0 && filenames_elsewhere.count(file) == 0)) {
          if (submitted_as_built.count(student)) {
            reveal(it->path());
          } else {
            hide(it->path());
          }
          break;
        }
      }
    }
  }

  // ---- the hidden tests' programs, linked by the grader ------------------------------------------
  // The student user builds the submission's code and the visible programs, and never reads an
  // object of the hidden tests: the programs that hold them are linked afterwards by the grader,
  // from those objects (the grader's, mode 0600) and the libraries the student build made, with
  // the link commands the build system gave before the student user touched the build folder. They
  // are then executable by the student user but not readable (mode 0711). Nothing of the
  // submission is compiled or run by the grader's user: the linker only reads its objects.

  // One build step of the build system (ninja -t query): its rule and inputs.
  struct NinjaEdge {
    std::string rule;
    std::vector<std::string> explicit_inputs, implicit_inputs, outputs;
  };

  struct HiddenProgram {
    std::string target;               // the build target the rubric names
    std::string output;               // the program, relative to the build folder
    std::string command;              // its link command, run in the build folder
    std::vector<std::string> inputs;  // what the student build makes for it, relative to the build folder
    std::string failure;              // why it could not be linked (shown to the student); "" when linked
  };
  struct HiddenObject {
    std::string output, command;  // compiled by the grader when no framework build holds it
  };
  std::vector<HiddenProgram> hidden_programs;
  std::vector<HiddenObject> hidden_objects;

  // Runs `ninja <args>` in the build folder as the grader (the build folder is the grader's then).
  std::string ninja_tool(std::vector<std::string> args, const fs::path& dir) const {
    const std::string ninja = handout::find_program("ninja");
    if (ninja.empty()) throw GraderError("ninja is not installed, but " + dir.string() + " is a Ninja build");
    handout::RunOptions r;
    r.argv = {ninja, "-C", dir.string()};
    r.argv.insert(r.argv.end(), args.begin(), args.end());
    r.timeout_s = 300;
    r.max_output = 16 * 1024 * 1024;
    const handout::RunResult run = handout::run_process(r);
    if (!run.succeeded() || run.output_bytes > r.max_output) {
      throw GraderError("ninja " + (args.empty() ? std::string() : args[0] + " " + args[1]) + " failed in " +
                        dir.string() + " (" + run.describe() + "):\n" + handout::shorten(run.output, 3000, 0.5));
    }
    return run.output;
  }

  // The build steps of `outputs` (paths or target names of the build in `dir`).
  std::map<std::string, NinjaEdge> ninja_query(const std::vector<std::string>& outputs, const fs::path& dir) const {
    std::map<std::string, NinjaEdge> edges;
    if (outputs.empty()) return edges;
    std::vector<std::string> args = {"-t", "query"};
    args.insert(args.end(), outputs.begin(), outputs.end());
    std::istringstream in(ninja_tool(args, dir));
    std::string line, current;
    enum { kNone, kInputs, kOutputs } section = kNone;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (line[0] != ' ' && line.back() == ':') {
        current = line.substr(0, line.size() - 1);
        edges[current];
        section = kNone;
      } else if (line.rfind("  input: ", 0) == 0) {
        edges[current].rule = line.substr(9);
        section = kInputs;
      } else if (line == "  outputs:") {
        section = kOutputs;
      } else if (line.rfind("    ", 0) == 0 && !current.empty()) {
        std::string item = line.substr(4);
        NinjaEdge& e = edges[current];
        if (section == kOutputs) {
          e.outputs.push_back(item);
        } else if (section == kInputs && item.rfind("|| ", 0) != 0) {  // order-only inputs: not read
          if (item.rfind("| ", 0) == 0) {
            e.implicit_inputs.push_back(item.substr(2));
          } else {
            e.explicit_inputs.push_back(item);
          }
        }
      }
    }
    return edges;
  }

  // The command the build system runs to make `output` (and nothing before it).
  std::string ninja_command(const std::string& output) const {
    std::istringstream in(ninja_tool({"-t", "commands", "-s", output}, build_dir));
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    if (last.empty()) throw GraderError("the build system gives no command for " + output);
    return last;
  }

  // The builds whose objects a grading links: its own, the framework build, and the build that one
  // reuses in turn.
  std::vector<fs::path> build_roots() const {
    std::vector<fs::path> roots = {build_dir};
    if (!framework.empty()) {
      roots.push_back(framework);
      const std::string base = manifest_value("CLOCKWORK_PREBUILT_BASE");
      std::error_code ec;
      if (!base.empty()) roots.push_back(fs::weakly_canonical(base, ec));
    }
    return roots;
  }

  // Whether `object` (a path as the build system writes it: relative to the build folder, or
  // absolute) was compiled from a source of the hidden tests: CMake puts the object of
  // <dir>/<file> in <dir>/CMakeFiles/<target>.dir/<file>.o of the build (a .cu rewritten for the
  // CPU backend, under cudasim-gen/, counts as that .cu). `root` is set to the build it lies in.
  bool hidden_object(const std::string& object, const handout::Tree& tree, fs::path* root = nullptr) const {
    if (object.size() < 2 || object.compare(object.size() - 2, 2, ".o") != 0) return false;
    std::string rel;
    fs::path in;
    if (fs::path(object).is_relative()) {
      rel = object;
      in = build_dir;
    } else {
      for (const fs::path& r : build_roots()) {
        const std::string prefix = r.string() + "/";
        if (object.rfind(prefix, 0) == 0) {
          rel = object.substr(prefix.size());
          in = r;
          break;
        }
      }
    }
    if (rel.empty()) return false;
    const size_t at = rel.rfind("CMakeFiles/", std::string::npos);
    if (at == std::string::npos || (at != 0 && rel[at - 1] != '/')) return false;
    const std::string dir = rel.substr(0, at);
    const size_t dot_dir = rel.find(".dir/", at);
    if (dot_dir == std::string::npos) return false;
    std::string source = replace_all(rel.substr(dot_dir + 5, rel.size() - 2 - (dot_dir + 5)), "__/", "../");
    source = (fs::path(dir) / source).lexically_normal().generic_string();
    if (const size_t gen = source.find("cudasim-gen/"); gen != std::string::npos) {
      source = source.substr(gen + 12);
      for (const char* suffix : {".check.cpp", ".cpp"}) {
        const std::string s = suffix;
        if (source.size() > s.size() && source.compare(source.size() - s.size(), s.size(), s) == 0) {
          source.resize(source.size() - s.size());
          break;
        }
      }
    }
    if (handout::is_known_good(source)) return false;  // known-good steps: linked by every grading, readable
    const handout::TreeFile* f = tree.find(source);
    if (!(f ? handout::is_instructor_only(f->path, f->content) : handout::is_instructor_only(source, ""))) return false;
    if (root) *root = in;
    return true;
  }

  // Makes an object of the hidden tests outside the grading build, and every program of its build
  // that links it, unreadable to the student user (the owner, root, keeps its rights).
  void shield_hidden_object(const fs::path& object, const fs::path& root) const {
    auto keep_to_owner = [](const fs::path& path) {
      struct stat st{};
      if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) chmod(path.c_str(), st.st_mode & 0700);
    };
    keep_to_owner(object);
    if (!fs::exists(root / "build.ninja")) return;
    const std::string rel = object.lexically_relative(root).generic_string();
    for (const auto& [name, edge] : ninja_query({rel}, root)) {
      for (const std::string& out : edge.outputs) keep_to_owner(fs::path(out).is_relative() ? root / out : fs::path(out));
    }
  }

  // Shields every object of the hidden tests in the builds a grading links from (the framework
  // build and the one it reuses), and their programs there, whatever the rubric: the student user
  // never needs them.
  void shield_framework_hidden_objects(const handout::Tree& tree) const {
    std::set<std::string> dirs;  // folders of the hidden tests' sources
    for (const handout::TreeFile& f : tree.files) {
      if (handout::is_instructor_only(f.path, f.content) && !handout::is_known_good(f.path)) {
        dirs.insert(fs::path(f.path).parent_path().generic_string());
      }
    }
    const std::vector<fs::path> roots = build_roots();
    for (size_t r = 1; r < roots.size(); ++r) {
      std::vector<std::string> objects;
      for (const std::string& dir : dirs) {
        std::error_code ec;
        const fs::path cmake_files = roots[r] / dir / "CMakeFiles";
        if (!fs::is_directory(cmake_files, ec)) continue;
        for (auto it = fs::recursive_directory_iterator(cmake_files, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec)) {
          if (it->is_regular_file(ec) && hidden_object(it->path().string(), tree)) objects.push_back(it->path().string());
        }
      }
      for (const std::string& o : objects) shield_hidden_object(o, roots[r]);
    }
  }

  // Splits the build's targets into those the student user builds and the programs of the hidden
  // tests, which the grader links (their link commands and inputs are taken now, while the build
  // folder is the grader's). Returns what the student user builds: the other targets, and what
  // the hidden programs link that the build makes (the libraries holding the submission).
  std::vector<std::string> plan_hidden_programs(const std::vector<std::string>& targets, const handout::Tree& tree) {
    hidden_programs.clear();
    hidden_objects.clear();
    if (!fs::exists(build_dir / "build.ninja")) {
      if (opt.hidden) {
        throw GraderError("grading the hidden tests needs the Ninja build system (package ninja-build): the grader "
                          "links their programs itself, with the commands Ninja gives");
      }
      return targets;
    }
    // A target's name stands for the file it makes.
    std::map<std::string, NinjaEdge> named = ninja_query(targets, build_dir);
    std::vector<std::string> files;
    for (const std::string& t : targets) {
      const NinjaEdge& e = named[t];
      files.push_back(e.rule == "phony" && e.explicit_inputs.size() == 1 ? e.explicit_inputs[0] : t);
    }
    std::map<std::string, NinjaEdge> edges = ninja_query(files, build_dir);
    std::vector<std::string> student;
    std::set<std::string> objects_here;
    auto add_student = [&](const std::string& t) {
      if (std::find(student.begin(), student.end(), t) == student.end()) student.push_back(t);
    };
    for (size_t i = 0; i < targets.size(); ++i) {
      const NinjaEdge& e = edges[files[i]];
      const bool hidden = std::any_of(e.explicit_inputs.begin(), e.explicit_inputs.end(),
                                      [&](const std::string& in) { return hidden_object(in, tree); });
      if (!hidden) {
        add_student(targets[i]);
        continue;
      }
      HiddenProgram h;
      h.target = targets[i];
      h.output = files[i];
      h.command = ninja_command(files[i]);
      std::vector<std::string> inputs = e.explicit_inputs;
      inputs.insert(inputs.end(), e.implicit_inputs.begin(), e.implicit_inputs.end());
      for (const std::string& in : inputs) {
        fs::path root;
        if (hidden_object(in, tree, &root)) {
          if (root == build_dir) {
            objects_here.insert(fs::path(in).is_relative() ? in : fs::path(in).lexically_relative(build_dir).string());
          } else {
            shield_hidden_object(in, root);
          }
        } else if (fs::path(in).is_relative()) {
          h.inputs.push_back(in);
          add_student(in);
        }
      }
      hidden_programs.push_back(std::move(h));
    }
    for (const std::string& o : objects_here) hidden_objects.push_back({o, ninja_command(o)});
    // Left by an earlier grading: gone before the build folder is the student user's.
    std::error_code ec;
    for (const HiddenProgram& h : hidden_programs) fs::remove(build_dir / h.output, ec);
    for (const HiddenObject& o : hidden_objects) fs::remove(build_dir / o.output, ec);
    return student;
  }

  // Runs a command of the build system (from plan_hidden_programs) as the grader, in the build folder.
  handout::RunResult run_build_command(const std::string& command, const fs::path& log) {
    handout::RunOptions r;
    r.argv = {"/bin/sh", "-c", command};
    r.cwd = build_dir;
    r.env = build_env;
    r.env["LC_ALL"] = "C";  // the linker's messages quote names with ` and ', which link_failure reads
    r.timeout_s = build_limit();
    r.output_file = log;
    r.max_output = 256 * 1024;
    return handout::run_process(r);
  }

  // After the student build: compiles the hidden tests' objects that no framework build holds and
  // links the hidden programs, as the grader. A program that does not link fails its items only.
  void link_hidden_programs() {
    for (const HiddenObject& o : hidden_objects) {
      const fs::path log = reports_dir / "hidden-compile.log";
      const handout::RunResult r = run_build_command(o.command, log);
      if (!r.succeeded()) {
        // The hidden tests compile from framework files only: the grader's problem. The log, which
        // quotes their source, stays in the work folder.
        std::cerr << "clockwork-grade: a hidden test did not compile:\n" << handout::read_file(log) << "\n";
        throw GraderError("a hidden test of the framework does not compile (" + r.describe() + "; see " +
                          log.string() + ")");
      }
      chmod((build_dir / o.output).c_str(), 0600);
    }
    for (HiddenProgram& h : hidden_programs) {
      // What the link reads from the build folder must be what the build made there: files, not
      // links to something else.
      for (const std::string& in : h.inputs) {
        const fs::path path = (build_dir / in).lexically_normal();
        struct stat st{};
        std::error_code ec;
        if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || fs::canonical(path, ec) != path) {
          h.failure = "The build did not make " + in + " as a plain file, so the hidden tests' program " + h.target +
                      " was not linked and its tests did not run.";
          break;
        }
        // Link-time-optimisation code would be compiled by the linker's plugin, as root: refused.
        if (handout::read_file(path).find(".gnu.lto_") != std::string::npos) {
          h.failure = in + " holds link-time-optimisation sections (.gnu.lto_*), which the grader does not link, so "
                      "the hidden tests' program " + h.target + " was not linked and its tests did not run.";
          break;
        }
      }
      if (!h.failure.empty()) continue;
      // In the reports folder, which only the grader reads: the linker names the hidden tests' functions.
      const fs::path log = reports_dir / ("link-" + fs::path(h.output).filename().string() + ".log");
      const handout::RunResult r = run_build_command(h.command, log);
      const fs::path program = build_dir / h.output;
      if (r.succeeded()) {
        chmod(program.c_str(), 0711);
        continue;
      }
      std::error_code ec;
      fs::remove(program, ec);
      h.failure = link_failure(handout::read_file(log), r);
    }
  }

  // What a student is shown of a failed link of a hidden program: the functions it lacks, never
  // the linker's lines about the hidden tests' objects.
  std::string link_failure(const std::string& log, const handout::RunResult& run) const {
    std::set<std::string> missing, doubled;
    std::istringstream in(log);
    std::string line;
    auto symbol_after = [&](const std::string& l, const std::string& what) {
      const size_t at = l.find(what);
      if (at == std::string::npos) return std::string();
      std::string s = l.substr(at + what.size());
      s.erase(0, s.find_first_not_of("`'"));
      const size_t end = s.find_last_of('\'');
      return end == std::string::npos ? s : s.substr(0, end);
    };
    while (std::getline(in, line)) {
      if (std::string s = symbol_after(line, "undefined reference to "); !s.empty()) missing.insert(s);
      if (std::string s = symbol_after(line, "multiple definition of "); !s.empty()) doubled.insert(s);
    }
    std::ostringstream o;
    o << "The hidden tests' program could not be linked with your code, so its tests did not run";
    if (run.timed_out) o << " (the link ran out of time)";
    o << ".\n";
    auto list = [&](const std::set<std::string>& names, const char* what) {
      if (names.empty()) return;
      o << what << "\n";
      size_t n = 0;
      for (const std::string& s : names) {
        if (++n > 10) {
          o << "  and " << names.size() - 10 << " more\n";
          break;
        }
        o << "  " << s << "\n";
      }
    };
    list(missing, "Functions the hidden tests call that your code does not define (or defines with another signature):");
    list(doubled, "Functions your code defines more than once, or that the framework already defines:");
    o << "Check that your files keep the functions and signatures the handout gives (names, argument types, return "
         "types).\n";
    return o.str();
  }

  // Why the program `target` is missing, when it is a hidden program that could not be linked.
  std::string hidden_link_failure(const std::string& target) const {
    for (const HiddenProgram& h : hidden_programs) {
      if (h.target == target) return h.failure;
    }
    return "";
  }

  // ---- what student code may name (symbols.h) -----------------------------------------------------
  // The objects compiled from student files that `targets` link: with Ninja, the compile steps
  // (ninja -t compdb) whose output `targets` need (ninja -t inputs); otherwise every object of a
  // student file in compile_commands.json. A student file compiles from the tree, or on the CPU
  // backend from its rewritten copy in cudasim-gen/ (<file>.cpp, and <file>.check.cpp for the
  // checked run).
  std::vector<StudentObject> student_objects(const std::vector<std::string>& targets) const {
    json steps;
    std::set<std::string> needed;
    const bool ninja = fs::exists(build_dir / "build.ninja");
    try {
      if (ninja) {
        steps = json::parse(ninja_tool({"-t", "compdb"}, build_dir));
        std::vector<std::string> args = {"-t", "inputs"};
        args.insert(args.end(), targets.begin(), targets.end());
        std::istringstream in(ninja_tool(args, build_dir));
        for (std::string line; std::getline(in, line);) needed.insert(line);
      } else {
        steps = json::parse(handout::read_file(build_dir / "compile_commands.json"));
      }
    } catch (const json::exception& e) {
      throw GraderError(std::string("the build's list of compile commands is unreadable: ") + e.what());
    }
    const fs::path generated = build_dir / "cudasim-gen";
    auto student_file = [&](const fs::path& source, bool& checked) -> std::string {
      std::string rel = source.lexically_relative(generated).generic_string();
      if (!rel.empty() && !starts_with(rel, "..")) {
        checked = rel.ends_with(".check.cpp");
        rel.resize(rel.size() - (checked ? 10 : rel.ends_with(".cpp") ? 4 : 0));
      } else {
        checked = false;
        rel = source.lexically_relative(tree_dir).generic_string();
      }
      return rubric.student_files.count(rel) ? rel : "";
    };
    std::vector<StudentObject> objects;
    std::set<std::string> listed;
    for (const json& step : steps) {
      if (!step.is_object() || !step.contains("file") || !step.contains("directory")) continue;
      const fs::path dir = step["directory"].get<std::string>();
      const fs::path source = (dir / step["file"].get<std::string>()).lexically_normal();
      bool checked = false;
      const std::string file = student_file(source, checked);
      if (file.empty()) continue;
      std::string output = step.value("output", "");
      if (output.empty()) {  // compile_commands.json: the argument of -o
        std::istringstream words(step.value("command", ""));
        for (std::string w, last; words >> w; last = w) {
          if (last == "-o") output = w;
        }
      }
      if (output.empty() || (ninja && !needed.count(output))) continue;
      const fs::path path = (dir / output).lexically_normal();
      if (!fs::is_regular_file(path) || !listed.insert(path.string()).second) continue;
      objects.push_back({path.string(), file, checked});
    }
    return objects;
  }

  // Reads the symbols of the student objects that `targets` link and returns what the student is
  // told when one of them names what it may not (symbols.h), or "" when none does. nm runs as the
  // student user: it parses files the submission made.
  std::string refused_symbols(const std::vector<std::string>& targets) {
    const std::vector<StudentObject> objects = student_objects(targets);
    if (objects.empty()) return "";
    const std::string nm = handout::find_program("nm");
    if (nm.empty()) throw GraderError("nm (binutils) is not installed: the grader reads the submission's symbols with it");
    handout::RunOptions r;
    r.argv = {nm, "-P", "-g", "-A"};
    for (const StudentObject& o : objects) r.argv.push_back(o.object);
    r.argv = sandbox.wrap(r.argv);
    r.cwd = build_dir;
    r.env["LC_ALL"] = "C";
    r.timeout_s = std::min(300.0, std::max(1.0, time_left()));
    r.output_file = reports_dir / "symbols.txt";
    r.max_output = 4096;
    r.max_file_bytes = 1ull << 30;
    const handout::RunResult run = handout::run_process(r);
    try {
      if (!run.succeeded()) throw std::runtime_error("nm failed (" + run.describe() + "): " + run.output);
      const std::vector<ForbiddenSymbol> found = forbidden_symbols(handout::read_file(r.output_file), objects);
      return found.empty() ? "" : describe_forbidden(found);
    } catch (const std::runtime_error& e) {
      // Nothing is graded unchecked: an object whose symbols cannot be read is refused.
      return "The grader could not read the symbols of the objects compiled from your files, so they were not "
             "graded (" + handout::shorten(e.what(), 600, 0.5) + ").\n";
    }
  }

  // Configures the framework copy (always: cheap next to a build, and it follows any change of
  // the tree such as the hidden tests coming or going). With a framework build to reuse, a
  // configure that refuses it (different framework files, compiler or flags) is repeated without.
  void configure() {
    if (!framework.empty()) {
      if (configure_with(framework)) return;
      const std::string log = handout::read_file(work / "configure.log");
      const size_t error = log.find("CMake Error");
      std::cerr << "clockwork-grade: the framework build " << framework.string() << " cannot be reused:\n"
                << handout::shorten(error == std::string::npos ? log : log.substr(error), 3000, 0.8)
                << "\nclockwork-grade: compiling the whole framework instead\n";
      framework.clear();
    }
    if (!configure_with({})) {
      throw GraderError("The framework could not be configured:\n" +
                        handout::shorten(handout::read_file(work / "configure.log"), 6000, 0.2));
    }
  }

  bool configure_with(const fs::path& fw) {
    // Builds compile student code, which may read the environment of the compiler (an #include of
    // /proc/self/environ shows it in the error messages): no seed is ever in it.
    for (const char* v : {"CLOCKWORK_HIDDEN_SEED", "CLOCKWORK_SEED", "CLOCKWORK_SEED_FD"}) build_env[v] = std::nullopt;
    std::vector<std::string> argv = {opt.cmake, "-S", tree_dir.string(), "-B", build_dir.string(),
                                     "-DCLOCKWORK_FRAMEWORK_BUILD=" + fw.string()};
    // Reused objects fix the build type (the framework's); otherwise the project's default.
    argv.push_back(fw.empty() ? "-DCMAKE_BUILD_TYPE=RelWithDebInfo" : "-UCMAKE_BUILD_TYPE");
    if (!handout::find_program("ninja").empty()) {
      argv.push_back("-G");
      argv.push_back("Ninja");
      // A folder configured with another generator cannot switch: start it afresh.
      std::error_code ec;
      if (fs::exists(build_dir / "CMakeCache.txt") && !fs::exists(build_dir / "build.ninja")) {
        fs::remove_all(build_dir, ec);
      }
    }
    argv.push_back(backend == "cuda" ? "-DCLOCKWORK_CUDA=ON" : "-DCLOCKWORK_CUDA=OFF");
    if (backend == "cuda") argv.push_back("-DCMAKE_CUDA_ARCHITECTURES=native");
    const std::string ccache = opt.ccache ? handout::find_program("ccache") : std::string();
    if (!ccache.empty()) {
      argv.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=" + ccache);
      if (backend == "cuda") argv.push_back("-DCMAKE_CUDA_COMPILER_LAUNCHER=" + ccache);
      // Paths inside the tree are hashed relative to it, so that identical files compiled in
      // another copy of the project (the instructor's build, an earlier grading) are reused.
      if (!std::getenv("CCACHE_BASEDIR")) build_env["CCACHE_BASEDIR"] = tree_dir.string();
      if (!std::getenv("CCACHE_NOHASHDIR")) build_env["CCACHE_NOHASHDIR"] = "1";
    } else {
      argv.push_back("-UCMAKE_CXX_COMPILER_LAUNCHER");
      argv.push_back("-UCMAKE_CUDA_COMPILER_LAUNCHER");
    }
    return run_logged(argv, work / "configure.log", 1800).succeeded();
  }

  void build(const std::vector<std::string>& targets, std::string& errors, bool& ok, double& seconds) {
    std::vector<std::string> argv = {opt.cmake, "--build", build_dir.string(), "--target"};
    argv.insert(argv.end(), targets.begin(), targets.end());
    const int jobs = opt.jobs > 0 ? opt.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    argv.push_back("-j");
    argv.push_back(std::to_string(jobs));
    // The student user owns the build folder (and a compiler cache of its own) while it builds,
    // and nothing of the grader's; afterwards the grader takes both back, so that the test runs
    // cannot replace the programs still to run.
    const fs::path home = work / "student-build", cache = work / "student-ccache";
    sandbox.private_folder(home);
    fs::create_directories(cache);
    sandbox.give(build_dir);
    sandbox.give(cache);
    auto env = build_env;
    if (!sandbox.user.empty()) {
      build_env["HOME"] = home.string();
      build_env["TMPDIR"] = home.string();
      build_env["CCACHE_DIR"] = cache.string();
    }
    handout::RunResult r;
    try {
      r = run_logged(argv, work / "build.log", build_limit(), true);
    } catch (...) {
      build_env = env;
      throw;
    }
    build_env = env;
    sandbox.take_back(build_dir);
    sandbox.take_back(cache);
    std::error_code ec;
    fs::remove_all(home, ec);
    seconds = r.seconds;
    ok = r.succeeded();
    if (!ok) {
      errors = (r.timed_out ? "The build did not finish in time.\n" : "") +
               build_errors(handout::read_file(work / "build.log"));
    }
  }

  // Paths inside the work tree, shown relative to the project root as the student knows them.
  // Runs the rubric's benchmark and returns its leaderboard entries (Gradescope's {name, value,
  // order}). A wrong kernel does not enter the leaderboard however fast it is, and a failing
  // benchmark costs nothing but the entry.
  json run_benchmark(bool all_passed) {
    if (!all_passed) {
      top << "Leaderboard: not entered, because not every test passed (a fast wrong kernel does not count).\n";
      return json::array();
    }
    const fs::path report = reports_dir / "benchmark.json";
    const ReportFile report_fd(report, sandbox);
    handout::RunOptions r;
    r.argv = {(build_dir / "bin" / rubric.benchmark.target).string()};
    r.argv.insert(r.argv.end(), rubric.benchmark.args.begin(), rubric.benchmark.args.end());
    r.argv.push_back("--json");
    r.argv.push_back(report_fd.path_for_child());
    r.argv = sandbox.wrap(r.argv);
    r.keep_fds = {report_fd.fd()};
    const fs::path home = work / "student-benchmark";
    sandbox.private_folder(home);
    r.env["HOME"] = home.string();
    r.env["TMPDIR"] = home.string();
    r.cwd = build_dir;
    r.timeout_s = rubric.benchmark.timeout_s;
    r.output_file = reports_dir / "benchmark.log";
    r.max_output = 16 * 1024;
    const handout::RunResult run = handout::run_process(r);
    std::error_code ec;
    fs::remove_all(home, ec);
    json board = json::array();
    try {
      const json doc = json::parse(handout::read_file(report));
      for (const json& e : doc.at("leaderboard")) {
        json entry = {{"name", e.at("name").get<std::string>()}, {"value", e.at("value").get<double>()}};
        if (e.contains("order")) entry["order"] = e["order"].get<std::string>();
        board.push_back(std::move(entry));
      }
    } catch (const std::exception& e) {
      top << "Leaderboard: the benchmark did not produce figures (" << run.describe() << ").\n";
      std::cerr << "clockwork-grade: benchmark: " << e.what() << "\n" << handout::shorten(run.output, 4000, 0.2) << "\n";
      return json::array();
    }
    top << "Leaderboard: " << board.size() << " figures from the benchmark (" << static_cast<long>(run.seconds + 0.5)
        << " s).\n";
    return board;
  }

  // The cases each rubric test selects, as the framework build's own test programs list them:
  // those hold no student code, whereas a program of the grading build runs the submission's
  // static initialisers first, which could make it list anything. nullopt where no list could be
  // had (no framework build to reuse, or its program is missing or failed to list).
  std::vector<std::optional<std::vector<std::string>>> expected_cases(const std::vector<std::string>& test_of) {
    std::vector<std::optional<std::vector<std::string>>> expected(rubric.tests.size());
    if (framework.empty()) {
      std::cerr << "clockwork-grade: no framework build to list the rubric's test cases from; a run is not "
                   "checked for cases left out\n";
      return expected;
    }
    std::vector<handout::CtestTest> listed = handout::list_ctest_tests(opt.ctest, framework);
    // A framework build made on top of another one builds its libraries only, and its programs
    // are not linked: that other build's programs, compiled from the same test sources, list the
    // same cases (framework builds both, without student code).
    const bool unlinked = std::any_of(test_of.begin(), test_of.end(), [&](const std::string& name) {
      return !name.empty() && std::none_of(listed.begin(), listed.end(), [&](const handout::CtestTest& c) {
        return c.name == name && !c.command.empty();
      });
    });
    if (unlinked) {
      const std::string base = manifest_value("CLOCKWORK_PREBUILT_BASE");
      if (!base.empty() && fs::exists(fs::path(base) / "CTestTestfile.cmake")) {
        for (handout::CtestTest& c : handout::list_ctest_tests(opt.ctest, base)) {
          auto it = std::find_if(listed.begin(), listed.end(), [&](const handout::CtestTest& l) { return l.name == c.name; });
          if (it == listed.end()) {
            listed.push_back(std::move(c));
          } else if (it->command.empty()) {
            *it = std::move(c);
          }
        }
      }
    }
    // One listing of every case per program (loading a program that links libtorch takes a
    // second or two); each rubric test's filter is then applied to it.
    std::map<std::string, std::optional<std::vector<std::string>>> known;
    for (size_t i = 0; i < rubric.tests.size(); ++i) {
      const RubricTest& t = rubric.tests[i];
      if (test_of[i].empty()) continue;  // no program at all: the run reports it
      auto k = known.find(test_of[i]);
      if (k == known.end()) k = known.emplace(test_of[i], list_cases(listed, test_of[i])).first;
      if (!k->second) continue;
      std::vector<std::string> selected;
      for (const std::string& name : *k->second) {
        // The listing includes disabled cases, which never run.
        const bool disabled = name.rfind("DISABLED_", 0) == 0 || name.find(".DISABLED_") != std::string::npos;
        if (!disabled && filter_selects(t.filter, name)) selected.push_back(name);
      }
      expected[i] = std::move(selected);
    }
    return expected;
  }

  // Every case of the framework build's program for the ctest test `test`, or nullopt.
  std::optional<std::vector<std::string>> list_cases(const std::vector<handout::CtestTest>& listed,
                                                     const std::string& test) {
    auto it = std::find_if(listed.begin(), listed.end(),
                           [&](const handout::CtestTest& c) { return c.name == test && !c.command.empty(); });
    std::optional<std::vector<std::string>> names;
    if (it != listed.end()) {
      handout::RunOptions r;
      r.argv = it->command;
      r.argv.push_back("--gtest_filter=*");  // overrides a filter of the ctest command itself
      r.argv.push_back("--gtest_list_tests");
      r.cwd = it->working_directory.empty() ? framework : it->working_directory;
      for (const char* v : {"GTEST_FILTER", "GTEST_ALSO_RUN_DISABLED_TESTS", "CLOCKWORK_SEED", "CLOCKWORK_SEED_FD"}) {
        r.env[v] = std::nullopt;
      }
      r.timeout_s = std::min(120.0, std::max(1.0, time_left()));
      r.max_output = 4 * 1024 * 1024;
      const handout::RunResult run = handout::run_process(r);
      if (run.succeeded() && run.output_bytes <= r.max_output) names = parse_test_listing(run.output);
      if (!names) {
        std::cerr << "clockwork-grade: " << it->name << " of the framework build could not list its tests ("
                  << run.describe() << "); its runs are not checked for cases left out\n";
      }
    } else {
      std::cerr << "clockwork-grade: the framework build has no program for " << test
                << "; its runs are not checked for cases left out\n";
    }
    return names;
  }

  // Reused test objects were compiled in the solution tree, whose paths they print the same way.
  std::string clean(const std::string& s) const {
    std::string out = replace_all(replace_all(s, tree_dir.string() + "/", ""), tree_dir.string(), ".");
    const std::string source = fs::weakly_canonical(opt.source).string();
    out = replace_all(out, source + "/", "");
    // Student code in a hidden test's process can read the seed there and print it; the output
    // never shows it as it is.
    return seed.empty() ? out : replace_all(out, seed, "[the hidden tests' seed]");
  }
};

json grade_or_throw(const GradeOptions& opt, Pipeline& p, const std::chrono::steady_clock::time_point start,
                    std::unique_ptr<TempDir>& temp) {
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const fs::path source = fs::weakly_canonical(opt.source);

  // The rubric (with the hidden one when asked).
  try {
    p.rubric = load_rubric(opt.rubric.empty() ? source / "grading/rubric.json" : opt.rubric);
    if (opt.hidden) {
      const fs::path hidden = opt.hidden_rubric.empty() ? source / "grading/rubric-hidden.json" : opt.hidden_rubric;
      merge_rubric(p.rubric, load_rubric(hidden, true));
    }
  } catch (const std::exception& e) {
    throw GraderError(std::string("The rubric is unusable: ") + e.what());
  }
  if (opt.timeout_s > 0) p.rubric.timeout_s = opt.timeout_s;

  // The backend.
  if (opt.backend == "sim" || opt.backend == "cuda") {
    p.backend = opt.backend;
  } else if (opt.backend == "auto") {
    p.backend = !nvcc_path().empty() && gpu_present() ? "cuda" : "sim";
  } else {
    throw GraderError("unknown backend '" + opt.backend + "' (auto, sim or cuda)");
  }
  if (opt.hidden) p.seed = opt.seed.empty() ? random_seed() : opt.seed;
  if (opt.hidden && !valid_hidden_seed(p.seed)) {
    // The seed itself is secret: say what is wrong with it, not what it is.
    throw GraderError("the hidden tests' seed (--seed or CLOCKWORK_HIDDEN_SEED) is not a number: it must be an "
                      "unsigned 64-bit integer, decimal or 0x-hex, with nothing around it");
  }

  // The framework: every solution region replaced by its stub, instructor material only when
  // the hidden tests run, apart from the known-good steps that isolated items link (hidden from
  // the student user like the rest, see protect_secrets). The student's files go on top.
  handout::TreeOptions to;
  to.source = source;
  to.stub_from = 1;
  to.instructor = opt.hidden;
  to.known_good = true;
  to.untracked = opt.untracked;
  handout::Tree framework = handout::generate_tree(to);
  if (!framework.errors.empty()) {
    std::string msg = "The framework's solution markers are malformed:\n";
    for (const auto& e : framework.errors) msg += e.str() + "\n";
    throw GraderError(msg);
  }
  // The student files are the files with solution regions, and only those.
  for (const handout::StudentFile& f : framework.student_files()) p.rubric.student_files.insert(f.path);
  const SubmissionPlan plan = overlay_submission(framework, p.rubric, opt.submission);

  // The work folder: the tree and its build, kept between gradings when --work is given.
  if (opt.work.empty()) {
    temp = std::make_unique<TempDir>();
    p.work = temp->path();
  } else {
    fs::create_directories(opt.work);
    p.work = fs::weakly_canonical(opt.work);
  }
  WorkLock lock(p.work);
  p.tree_dir = p.work / "tree";
  p.build_dir = p.tree_dir / "build";
  p.reports_dir = p.work / "reports";
  p.sandbox = make_sandbox(opt.student_user);
  handout::sync_tree(framework, p.tree_dir);
  fs::remove_all(p.reports_dir);
  fs::create_directories(p.reports_dir);
  // The student user reads the tree and runs its programs, and writes nothing of it: the reports
  // (and the logs of every run) are the grader's alone. A build folder left by an earlier grading
  // is taken back first, whatever state it was left in.
  if (!p.sandbox.user.empty()) {
    fs::permissions(p.work, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(p.reports_dir, fs::perms::owner_all);
    if (fs::exists(p.build_dir)) p.sandbox.take_back(p.build_dir);
  }

  p.top << "Clockwork autograder: " << (p.backend == "cuda" ? "GPU (nvcc)" : "CPU backend (cudasim)")
        << (opt.hidden ? ", public and hidden tests" : ", public tests") << ".\n"
        << p.sandbox.describe() << plan.describe();

  // Where the time goes, for the staff (stderr): a grading should take well under a minute once
  // the framework is built.
  auto phase_start = std::chrono::steady_clock::now();
  std::ostringstream phases;
  auto phase = [&](const char* name) {
    const auto now = std::chrono::steady_clock::now();
    phases << (phases.tellp() > 0 ? ", " : "") << name << " "
           << static_cast<long>(std::chrono::duration<double>(now - phase_start).count() + 0.5) << " s";
    phase_start = now;
  };
  phase("preparing the tree");
  p.prepare_framework();
  p.open_the_way();
  phase("framework up to date");
  p.configure();
  p.protect_secrets(framework, source);
  p.shield_framework_hidden_objects(framework);
  phase(p.framework.empty() ? "configure" : "configure (reusing the framework's objects)");
  const std::vector<handout::CtestTest> ctests = handout::list_ctest_tests(opt.ctest, p.build_dir);

  // Each rubric test's binary: the ctest test of that name for this backend (kernel tests), or
  // of exactly that name (host tests); for an isolated item, of its binary's isolated variant.
  std::vector<std::string> test_of(p.rubric.tests.size()), checked_test_of(p.rubric.tests.size());
  std::vector<std::string> target_of(p.rubric.tests.size()), checked_target_of(p.rubric.tests.size());
  std::vector<std::string> targets;
  std::set<std::string> missing_binaries;
  for (size_t i = 0; i < p.rubric.tests.size(); ++i) {
    const RubricTest& t = p.rubric.tests[i];
    for (const std::string& name : {t.program() + "." + p.backend, t.program()}) {
      auto it = std::find_if(ctests.begin(), ctests.end(), [&](const handout::CtestTest& c) { return c.name == name; });
      if (it == ctests.end()) continue;
      test_of[i] = name;
      target_of[i] = it->target();
      if (std::find(targets.begin(), targets.end(), it->target()) == targets.end()) targets.push_back(it->target());
      break;
    }
    if (test_of[i].empty()) missing_binaries.insert(t.program());
    const std::string checked = checked_test_name(t.program(), p.backend);
    if (!checked.empty() && std::any_of(ctests.begin(), ctests.end(), [&](const handout::CtestTest& c) { return c.name == checked; })) {
      checked_test_of[i] = checked;
      const std::string target = t.program() + "_check";  // the program of <binary>.check
      checked_target_of[i] = target;
      if (std::find(targets.begin(), targets.end(), target) == targets.end()) targets.push_back(target);
    }
  }
  if (!missing_binaries.empty()) {
    std::vector<std::string> names(missing_binaries.begin(), missing_binaries.end());
    std::cerr << "clockwork-grade: the framework has no test named " << join_list(names) << "\n";
  }

  // The leaderboard's benchmark: built with the tests, on a GPU only (CPU-backend timings say
  // nothing about a kernel's speed on a GPU).
  const bool benchmark = p.backend == "cuda" && !p.rubric.benchmark.target.empty();
  if (benchmark) targets.push_back(p.rubric.benchmark.target);

  // What a grader killed from outside leaves behind: every test not yet run says so.
  const TestOutcome pending = not_run(
      "Not run: the grading stopped before this test ran (it was stopped from outside or ran out of time).");
  std::vector<TestOutcome> outcomes(p.rubric.tests.size(), pending);
  std::mutex progress_mutex;
  auto progress = [&] {  // called with progress_mutex held, or before the test runs start
    if (opt.on_progress) opt.on_progress(make_results(p.rubric, outcomes, p.top.str(), elapsed()));
  };
  // The hidden tests' programs are the grader's to link; the student user builds the rest.
  const std::vector<std::string> student_targets = p.plan_hidden_programs(targets, framework);
  progress();
  if (!student_targets.empty()) {
    std::string errors;
    bool ok = false;
    double seconds = 0;
    p.build(student_targets, errors, ok, seconds);
    phase("build");
    if (!ok) {
      p.top << "\nThe build failed, so no test could run (score 0). The compiler said:\n\n" << p.clean(errors) << "\n";
      return make_failed_results(&p.rubric, p.top.str(), "Not run: the build failed (see the overall output).",
                                 elapsed());
    }
    p.top << "Build: " << static_cast<long>(seconds + 0.5) << " s.\n";
    const std::string refused = p.refused_symbols(student_targets);
    phase("reading the submission's symbols");
    if (!refused.empty()) {
      p.top << "\n" << refused;
      return make_failed_results(&p.rubric, p.top.str(),
                                 "Not run: your code names parts of the framework it may not use (see the overall "
                                 "output).",
                                 elapsed());
    }
  }
  if (!p.hidden_programs.empty()) {
    p.link_hidden_programs();
    phase("linking the hidden tests");
  }
  const auto expected = p.expected_cases(test_of);
  phase("listing the rubric's test cases");
  // Listed again: ctest gives the command of a test only once its program exists.
  const std::vector<handout::CtestTest> built = handout::list_ctest_tests(opt.ctest, p.build_dir);
  std::vector<const handout::CtestTest*> binary_of(p.rubric.tests.size(), nullptr);
  std::vector<const handout::CtestTest*> checked_binary_of(p.rubric.tests.size(), nullptr);
  for (size_t i = 0; i < p.rubric.tests.size(); ++i) {
    auto it = std::find_if(built.begin(), built.end(),
                           [&](const handout::CtestTest& c) { return c.name == test_of[i] && !c.command.empty(); });
    if (it != built.end()) binary_of[i] = &*it;
    auto ct = std::find_if(built.begin(), built.end(), [&](const handout::CtestTest& c) {
      return !checked_test_of[i].empty() && c.name == checked_test_of[i] && !c.command.empty();
    });
    if (ct != built.end()) checked_binary_of[i] = &*ct;
  }

  // One run per rubric test, so that a crash or a hang costs that test only. Runs go side by side
  // (one per CPU, or --jobs): each is its own process group with its own report and time limit.
  // `suffix` tells the reports of a test's checked run from those of its normal run.
  auto run_test = [&](size_t i, const handout::CtestTest* c, const std::string& suffix) {
    const RubricTest& t = p.rubric.tests[i];
    const fs::path report = p.reports_dir / (std::to_string(i) + suffix + ".json");
    const ReportFile report_fd(report, p.sandbox);
    handout::RunOptions r;
    r.argv = c->command;
    r.argv.push_back("--gtest_filter=" + t.filter);
    r.argv.push_back("--gtest_output=json:" + report_fd.path_for_child());
    r.argv = p.sandbox.wrap(r.argv);
    r.keep_fds = {report_fd.fd()};
    r.cwd = c->working_directory.empty() ? p.build_dir : c->working_directory;
    // The grader's own environment must not steer the tests (the test's own does: a checked run
    // sets CUDASIM_CHECK and CUDASIM_ORDER), and no seed goes through it.
    for (const char* v : {"GTEST_FILTER", "GTEST_OUTPUT", "GTEST_REPEAT", "GTEST_SHUFFLE", "GTEST_BREAK_ON_FAILURE",
                          "GTEST_ALSO_RUN_DISABLED_TESTS", "CLOCKWORK_HIDDEN_SEED", "CUDASIM_CHECK", "CUDASIM_ORDER"}) {
      r.env[v] = std::nullopt;
    }
    for (const std::string& e : c->environment) {
      const size_t eq = e.find('=');
      if (eq != std::string::npos) r.env[e.substr(0, eq)] = e.substr(eq + 1);
    }
    r.env["CLOCKWORK_SEED"] = std::nullopt;
    r.env["CLOCKWORK_SEED_FD"] = std::nullopt;
    std::optional<SeedPipe> seed_pipe;
    if (t.hidden) {
      seed_pipe.emplace(p.seed);
      r.keep_fds.push_back(seed_pipe->fd());
      r.env["CLOCKWORK_SEED_FD"] = std::to_string(seed_pipe->fd());
    }
    r.timeout_s = t.timeout_s > 0 && opt.timeout_s <= 0 ? t.timeout_s : p.rubric.timeout_s;
    r.timeout_s = std::min(r.timeout_s, std::max(1.0, p.time_left()));
    r.output_file = p.reports_dir / (std::to_string(i) + suffix + ".log");
    r.max_output = 64 * 1024;
    r.max_file_bytes = kMaxTestOutputFile;
    // A private home and temporary folder, the only places the run may write.
    const fs::path home = p.work / "student-runs" / (std::to_string(i) + suffix);
    p.sandbox.private_folder(home);
    r.env["HOME"] = home.string();
    r.env["TMPDIR"] = home.string();
    const handout::RunResult run = handout::run_process(r);
    std::error_code ec;
    fs::remove_all(home, ec);
    const handout::GtestReport parsed = handout::read_gtest_report(report);
    TestOutcome o = judge_run(t, run, parsed);
    if (o.passed) {
      // The report is believed only where it agrees with what the grader saw of the run, and
      // holds every case the rubric test selects.
      std::string disagreement = report_disagreement(parsed, cases_passed_in_output(r.output_file));
      if (disagreement.empty() && expected[i]) disagreement = missing_cases(parsed, *expected[i]);
      if (!disagreement.empty()) {
        o.passed = false;
        o.output = disagreement + "\n" + o.output;
      }
    }
    o.output = p.clean(o.output);
    return o;
  };
  auto finish = [&](size_t i, TestOutcome o) {
    std::lock_guard lk(progress_mutex);
    outcomes[i] = std::move(o);
    progress();
  };
  auto out_of_time = [&] {
    std::ostringstream o;
    o << "Not run: the grading reached its overall time limit (" << opt.deadline_s
      << " s) before this test could start; tests before it used the time (look for one that hung).";
    return not_run(o.str());
  };
  auto run_one = [&](size_t i) {
    const RubricTest& t = p.rubric.tests[i];
    if (!binary_of[i]) {
      if (const std::string why = p.hidden_link_failure(target_of[i]); !why.empty()) {
        TestOutcome o;
        o.output = p.clean(why);
        return finish(i, std::move(o));
      }
      finish(i, not_run("The framework has no test program '" + t.program() +
                        "' for this backend: the rubric and the framework disagree. Please tell the course staff."));
      return;
    }
    if (p.time_left() < kMinimumRun_s) return finish(i, out_of_time());
    TestOutcome o = run_test(i, binary_of[i], "");
    if (const std::string why = p.hidden_link_failure(checked_target_of[i]); o.passed && !why.empty()) {
      o.passed = false;
      o.output = p.clean(why);
    } else if (o.passed && checked_binary_of[i]) {
      if (p.time_left() < kMinimumRun_s) {
        o = out_of_time();
        o.output += " (its normal run passed; the checked run did not start)";
      } else {
        o = with_checked_run(o, run_test(i, checked_binary_of[i], ".check"));
      }
    }
    finish(i, std::move(o));
  };
  {
    const size_t jobs = opt.jobs > 0 ? static_cast<size_t>(opt.jobs) : std::max(1u, std::thread::hardware_concurrency());
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    for (size_t w = 0; w < std::min(jobs, p.rubric.tests.size()); ++w) {
      workers.emplace_back([&] {
        for (size_t i = next++; i < p.rubric.tests.size(); i = next++) run_one(i);
      });
    }
    for (std::thread& w : workers) w.join();
  }

  phase("tests");
  std::cerr << "clockwork-grade: " << phases.str() << "; " << static_cast<long>(elapsed() + 0.5) << " s in all\n";
  double score = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) score += outcomes[i].passed ? p.rubric.tests[i].points : 0;
  std::ostringstream total;
  total << "Score: " << score << " / " << p.rubric.total_points() << ".\n";
  p.top << total.str();
  json board = json::array();
  if (benchmark) board = p.run_benchmark(score >= p.rubric.total_points());
  json results = make_results(p.rubric, outcomes, p.top.str(), elapsed());
  if (!board.empty()) {
    if (!results.contains("leaderboard")) results["leaderboard"] = json::array();
    for (json& entry : board) results["leaderboard"].push_back(std::move(entry));
  }
  return results;
}

}  // namespace

nlohmann::json grade(const GradeOptions& options, int& status) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  Pipeline p(options);
  p.start = start;
  std::unique_ptr<TempDir> temp;
  status = 0;
  try {
    return grade_or_throw(options, p, start, temp);
  } catch (const std::exception& e) {
    // A failure of the grader, the framework or the machine: still a valid results.json, with
    // the reason, and every rubric test (when the rubric was read) marked as not run.
    status = 2;
    const std::string before = p.top.str();
    const std::string message = (before.empty() ? "" : before + "\n") +
                                "The autograder could not grade this submission: " + e.what() +
                                "\nThis is not a problem with your code; please tell the course staff.\n";
    return make_failed_results(p.rubric.tests.empty() ? nullptr : &p.rubric, message,
                               "Not run: the autograder failed (see the overall output).", elapsed());
  }
}

}  // namespace clockwork::grading
