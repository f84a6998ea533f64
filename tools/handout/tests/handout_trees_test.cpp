// Every milestone's handout, from the real solution tree, end to end: generate it with
// clockwork-handout, configure and build it for the CPU backend (the milestone test binaries
// only), run each milestone test binary with a JSON report, and check that
//   - tests of earlier milestones pass,
//   - tests of the milestone and later ones fail cleanly: the binary runs to the end and reports
//     GoogleTest failures (no build error, crash or timeout), or, for a checked run, stops at
//     the CPU backend's first diagnostic,
//   - except test binaries that use no file with a stubbed region (they test only a part the
//     framework gives students): those still pass.
//
// The trees are built one after the other in the same folder, so each build only recompiles the
// files that differ from the previous milestone's tree (and ccache, when installed, shares the
// rest with other builds of the project).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tools/handout/process.h"
#include "tools/handout/test_reports.h"
#include "tools/handout/tree.h"

namespace clockwork::handout {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Milestone K of a test's "milestoneK" label, or 0. Tests labelled `slow` (the real-size and
// real-checkpoint runs, which need minutes each) are left out: the fast tests of the same
// milestone use the same student files.
int milestone_of(const CtestTest& t) {
  if (std::find(t.labels.begin(), t.labels.end(), "slow") != t.labels.end()) return 0;
  for (const std::string& l : t.labels) {
    if (l.rfind("milestone", 0) == 0 && l.size() > 9 && std::all_of(l.begin() + 9, l.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return std::stoi(l.substr(9));
    }
  }
  return 0;
}

// The files a built target was made from: its inputs in the build graph (sources, the .cu files
// behind the rewritten ones) and the headers its objects included (ninja's dependency log).
class BuildGraph {
 public:
  BuildGraph(std::string ninja, fs::path build_dir) : ninja_(std::move(ninja)), build_(std::move(build_dir)) {
    const RunResult deps = ninja_tool({"-t", "deps"});
    std::istringstream in(deps.output);
    std::string line, object;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (line[0] != ' ') {
        object = normal(line.substr(0, line.find(':')));
      } else {
        headers_[object].push_back(normal(line.substr(line.find_first_not_of(' '))));
      }
    }
  }

  std::set<std::string> files_of(const std::string& target) const {
    std::set<std::string> files;
    std::istringstream in(ninja_tool({"-t", "inputs", target}).output);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const std::string p = normal(line);
      files.insert(p);
      auto it = headers_.find(p);
      if (it != headers_.end()) files.insert(it->second.begin(), it->second.end());
    }
    return files;
  }

 private:
  RunResult ninja_tool(std::vector<std::string> args) const {
    RunOptions o;
    o.argv = {ninja_, "-C", build_.string()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_s = 120;
    o.max_output = 256 * 1024 * 1024;
    return run_process(o);
  }
  std::string normal(const std::string& p) const {
    fs::path path(p);
    if (path.is_relative()) path = build_ / path;
    return path.lexically_normal().string();
  }

  std::string ninja_;
  fs::path build_;
  std::map<std::string, std::vector<std::string>> headers_;
};

class HandoutTrees : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = env("CLOCKWORK_SOURCE_DIR");
    handout_ = env("CLOCKWORK_HANDOUT_EXE");
    work_ = env("CLOCKWORK_TREES_WORK");
    cmake_ = env("CLOCKWORK_CMAKE").empty() ? "cmake" : env("CLOCKWORK_CMAKE");
    ctest_ = env("CLOCKWORK_CTEST").empty() ? "ctest" : env("CLOCKWORK_CTEST");
    ninja_ = env("CLOCKWORK_NINJA").empty() ? find_program("ninja") : env("CLOCKWORK_NINJA");
    if (source_.empty() || handout_.empty() || work_.empty()) {
      GTEST_SKIP() << "CLOCKWORK_SOURCE_DIR, CLOCKWORK_HANDOUT_EXE and CLOCKWORK_TREES_WORK are set by ctest";
    }
    fs::create_directories(work_);
    work_ = fs::canonical(work_);
    tree_ = work_ / "tree";
    build_ = tree_ / "build";
  }

  RunResult run(std::vector<std::string> argv, const fs::path& log, double timeout_s) {
    RunOptions o;
    o.argv = std::move(argv);
    o.output_file = log;
    o.timeout_s = timeout_s;
    o.max_output = 12000;
    const std::string ccache = find_program("ccache");
    if (!ccache.empty()) {
      // Paths inside the tree are hashed relative to it: objects built from identical files in
      // another copy of the project are reused.
      if (env("CCACHE_BASEDIR").empty()) o.env["CCACHE_BASEDIR"] = tree_.string();
      if (env("CCACHE_NOHASHDIR").empty()) o.env["CCACHE_NOHASHDIR"] = "1";
    }
    return run_process(o);
  }

  // Generates milestone N's handout with the command-line tool and brings the build tree up to
  // date with it. Returns false (with a test failure) when the tool fails.
  bool generate(int n) {
    const fs::path stage = work_ / "stage";
    const RunResult r = run({handout_, "--milestone", std::to_string(n), "--source", source_.string(), "--out",
                             stage.string(), "--untracked", "--force", "--quiet"},
                            work_ / "handout.log", 300);
    EXPECT_TRUE(r.succeeded()) << "clockwork-handout --milestone " << n << ": " << r.describe() << "\n" << r.output;
    if (!r.succeeded()) return false;
    TreeOptions o;
    o.source = stage;
    o.instructor = true;  // take the stage as it is, to see what it holds
    const Tree tree = generate_tree(o);
    // A handout holds no markers and no instructor material.
    EXPECT_TRUE(tree.errors.empty());
    EXPECT_TRUE(tree.milestones().empty()) << "milestone " << n << "'s handout still has solution markers";
    for (const TreeFile& f : tree.files) {
      EXPECT_FALSE(is_instructor_only(f.path, f.content)) << f.path << " is instructor-only but in the handout";
    }
    sync_tree(tree, tree_);
    return true;
  }

  std::vector<CtestTest> configure() {
    std::vector<std::string> argv = {cmake_, "-S", tree_.string(), "-B", build_.string(), "-DCLOCKWORK_CUDA=OFF"};
    // The framework's objects come from the solution tree's build: only student files compile.
    const std::string framework = env("CLOCKWORK_FRAMEWORK_BUILD");
    argv.push_back("-DCLOCKWORK_FRAMEWORK_BUILD=" + framework);
    argv.push_back(framework.empty() ? "-DCMAKE_BUILD_TYPE=RelWithDebInfo" : "-UCMAKE_BUILD_TYPE");
    if (!ninja_.empty()) {
      argv.push_back("-G");
      argv.push_back("Ninja");
      argv.push_back("-DCMAKE_MAKE_PROGRAM=" + ninja_);
    }
    const std::string ccache = find_program("ccache");
    if (!ccache.empty()) argv.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=" + ccache);
    const RunResult r = run(argv, work_ / "configure.log", 1200);
    EXPECT_TRUE(r.succeeded()) << "configure: " << r.describe() << "\n" << r.output;
    if (!r.succeeded()) return {};
    return list_ctest_tests(ctest_, build_);
  }

  fs::path source_, work_, tree_, build_;
  std::string handout_, cmake_, ctest_, ninja_;
};

TEST_F(HandoutTrees, EarlierMilestonesPassLaterOnesFailCleanly) {
  // The milestones: those with solution regions, and those with tests.
  TreeOptions so;
  so.source = source_;
  so.untracked = true;
  const Tree solution = generate_tree(so);
  ASSERT_TRUE(solution.errors.empty()) << solution.errors[0].str();
  std::set<int> milestones;
  for (int m : solution.milestones()) milestones.insert(m);

  const int jobs = std::max(1, std::min(2, static_cast<int>(std::thread::hardware_concurrency())));
  for (int n = 1; n <= (milestones.empty() ? 1 : *milestones.rbegin()); ++n) {
    SCOPED_TRACE("milestone " + std::to_string(n) + "'s handout");
    ASSERT_TRUE(generate(n));
    const std::vector<CtestTest> tests = configure();
    ASSERT_FALSE(tests.empty());

    std::vector<std::string> targets;
    for (const CtestTest& t : tests) {
      const int k = milestone_of(t);
      if (k == 0) continue;
      milestones.insert(k);
      targets.push_back(t.target());
    }
    ASSERT_FALSE(targets.empty()) << "no test is labelled milestoneK";

    std::vector<std::string> build = {cmake_, "--build", build_.string(), "-j", std::to_string(jobs), "--target"};
    build.insert(build.end(), targets.begin(), targets.end());
    const RunResult b = run(build, work_ / ("build-m" + std::to_string(n) + ".log"), 3600);
    ASSERT_TRUE(b.succeeded()) << "the handout does not build (" << b.describe() << "):\n" << b.output;

    // Listed again now that the programs exist: ctest only gives the command of a built one.
    const std::vector<CtestTest> built = list_ctest_tests(ctest_, build_);
    std::vector<const CtestTest*> selected;
    for (const CtestTest& t : built) {
      if (milestone_of(t) == 0) continue;
      EXPECT_FALSE(t.command.empty()) << t.name << ": its program was not built by target " << t.target();
      if (!t.command.empty()) selected.push_back(&t);
    }

    // Files whose regions this handout stubbed, as paths in the build tree.
    TreeOptions ho = so;
    ho.stub_from = n;
    std::set<std::string> stubbed;
    for (const TreeFile& f : generate_tree(ho).files) {
      if (f.stubbed) stubbed.insert((tree_ / f.path).lexically_normal().string());
    }
    std::unique_ptr<BuildGraph> graph;
    if (!ninja_.empty()) graph = std::make_unique<BuildGraph>(ninja_, build_);

    std::ostringstream summary;
    for (const CtestTest* t : selected) {
      const int k = milestone_of(*t);
      const std::string target = t->target();
      bool uses_stub = true;  // without the build graph, assume every binary does
      if (graph) {
        const std::set<std::string> files = graph->files_of(target);
        uses_stub = std::any_of(stubbed.begin(), stubbed.end(), [&](const std::string& s) { return files.count(s); });
      }
      const fs::path report = work_ / "reports" / ("m" + std::to_string(n) + "-" + t->name + ".json");
      fs::create_directories(report.parent_path());
      fs::remove(report);
      std::vector<std::string> argv = t->command;
      argv.push_back("--gtest_output=json:" + report.string());
      RunOptions o;
      o.argv = argv;
      o.cwd = t->working_directory.empty() ? build_ : t->working_directory;
      o.timeout_s = t->timeout_s > 0 ? t->timeout_s : 1500;
      o.output_file = work_ / "reports" / ("m" + std::to_string(n) + "-" + t->name + ".log");
      o.max_output = 6000;
      o.env["CLOCKWORK_SEED"] = std::nullopt;
      o.env["CLOCKWORK_LLAMA3_8B"] = std::nullopt;  // a real checkpoint would cost minutes per tree
      const RunResult r = run_process(o);
      const GtestReport rep = read_gtest_report(report);
      summary << "  " << t->name << " (milestone " << k << "): " << r.describe() << ", " << rep.passed()
              << " passed, " << rep.failed() << " failed, " << static_cast<int>(r.seconds) << " s\n";

      const bool must_fail = k >= n && uses_stub;
      // A binary whose every case skipped itself (a test that needs a real checkpoint, say)
      // neither passes nor fails; it must still run cleanly.
      const bool all_skipped = rep.valid && !rep.cases.empty() &&
                               std::all_of(rep.cases.begin(), rep.cases.end(), [](const CaseResult& c) { return c.skipped; });
      const std::string details = t->name + " (milestone " + std::to_string(k) + "): " + r.describe() + "\n" +
                                  (rep.valid ? "" : rep.error + "\n") + r.output;
      // A checked run (.check) stops at the CPU backend's first diagnostic, exit status 70 with the
      // kernel, thread and line named: with stubs that is a read of memory a stub never wrote (the
      // next kernel reads the stub's output), before any GoogleTest comparison is reached. A
      // deliberate stop with a message, not a crash, so it counts as failing cleanly. Except a
      // report of a host pointer used by a kernel: the framework gives its kernels device memory
      // only, so in a handout that report is the checker mistaking code a kernel called (the C++
      // library building a message, say) for the kernel's own access.
      const bool ends_check = t->name.size() > 6 && t->name.compare(t->name.size() - 6, 6, ".check") == 0;
      const bool diagnostic = r.started && !r.timed_out && r.signal == 0 && r.exit_code == 70 &&
                              r.output.find("cudasim: error in kernel") != std::string::npos;
      if (must_fail && ends_check && diagnostic) {
        EXPECT_EQ(r.output.find("which is not device memory"), std::string::npos)
            << "the checked run blames a kernel for a host pointer the framework never passes: " << details;
        continue;
      }
      EXPECT_TRUE(r.started && !r.timed_out && r.signal == 0) << "did not run cleanly: " << details;
      EXPECT_TRUE(rep.valid) << "no GoogleTest report: " << details;
      if (all_skipped) {
        EXPECT_EQ(r.exit_code, 0) << "skipped, but did not exit cleanly: " << details;
      } else if (must_fail) {
        EXPECT_EQ(r.exit_code, 1) << "should fail with GoogleTest failures: " << details;
        EXPECT_GE(rep.failed(), 1u) << "passes although it uses stubbed regions (does a stub compute the answer?): "
                                    << details;
      } else {
        EXPECT_EQ(r.exit_code, 0) << "should pass: " << details;
        EXPECT_EQ(rep.failed(), 0u) << "should pass: " << details;
        EXPECT_GE(rep.passed(), 1u) << details;
      }
    }
    std::cout << "milestone " << n << "'s handout (build " << static_cast<int>(b.seconds) << " s):\n"
              << summary.str() << std::flush;
  }
}

}  // namespace
}  // namespace clockwork::handout
