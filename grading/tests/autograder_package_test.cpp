// The Gradescope package, used as Gradescope uses it: `cmake --build <build> --target autograder`
// writes autograder.zip; it is unpacked into <root>/source of a folder laid out like /autograder,
// run_autograder is copied to <root>/run_autograder, setup.sh's build step builds the grader from
// the unpacked tree, and run_autograder grades a submission (the student files of milestone 1,
// solved, with later milestones' stubs) into <root>/results/results.json, which must be valid for
// Gradescope and score exactly milestone 1's public and hidden points.
//
// The framework the grading reuses must be built from the stubbed tree (<root>/framework), never
// from the solution: no solution text and no object compiled from it is there.
//
// Every path reaches the scripts through their variables (AUTOGRADER_ROOT, CLOCKWORK_BUILD, ...).
// To stay fast, setup.sh reuses the framework objects of this build (CLOCKWORK_FRAMEWORK_BUILD)
// for every file the stubbed tree shares with it, compiling only the stubs, and the stubbed tree,
// its build and the grading's work folder are kept between runs.
#include <unistd.h>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grading/sandbox.h"
#include "grading/rubric.h"
#include "grading/tests/gradescope_format.h"
#include "tools/handout/process.h"
#include "tools/handout/tree.h"

namespace clockwork::grading {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool executable(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXUSR) != 0;
}

// Every file below `dir`, relative to it, sorted.
std::vector<std::string> files_below(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_directory()) files.push_back(fs::relative(e.path(), dir).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class AutograderPackage : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = env("CLOCKWORK_SOURCE_DIR");
    build_ = env("CLOCKWORK_BUILD_DIR");
    work_ = env("CLOCKWORK_PACKAGE_WORK");
    cmake_ = env("CLOCKWORK_CMAKE");
    if (source_.empty() || build_.empty() || work_.empty() || cmake_.empty()) {
      GTEST_SKIP() << "the CLOCKWORK_* variables are set by ctest";
    }
    fs::create_directories(work_);
    work_ = fs::canonical(work_);
    root_ = work_ / "root";
    // The scripts find cmake in PATH, as they would on Gradescope: the one this build uses first.
    path_ = fs::path(cmake_).parent_path().string() + ":" + env("PATH");
  }

  // Runs a command with the autograder's variables, printing how long it took.
  handout::RunResult run(const std::string& what, std::vector<std::string> argv,
                         std::map<std::string, std::optional<std::string>> vars, const fs::path& cwd) {
    handout::RunOptions o;
    o.argv = std::move(argv);
    o.cwd = cwd;
    o.env = std::move(vars);
    o.env["PATH"] = path_;
    o.timeout_s = 1800;
    o.max_output = 1 << 20;
    o.output_file = work_ / (what + ".log");
    const handout::RunResult r = handout::run_process(o);
    std::cout << what << ": " << r.describe() << " in " << static_cast<int>(r.seconds + 0.5) << " s (log: "
              << o.output_file.string() << ")\n"
              << std::flush;
    return r;
  }

  // Packs autograder.zip; `framework_too` also brings this build's framework up to date, so that
  // setup.sh finds every object it reuses.
  handout::RunResult pack(bool framework_too) {
    std::vector<std::string> argv = {cmake_, "--build", build_.string(), "--target", "autograder"};
    if (framework_too) argv.insert(argv.end(), {"clockwork_framework", "-j", "2"});
    return run(framework_too ? "pack-and-framework" : "pack", argv, {}, build_);
  }

  fs::path source_, build_, work_, root_;
  std::string cmake_, path_;
};

TEST_F(AutograderPackage, GradesASubmissionAsGradescopeWould) {
  // 1. The package, twice: the same entries in the same order, with the same sizes, modes and times.
  const fs::path zip = build_ / "autograder.zip";
  handout::RunResult r = pack(true);
  ASSERT_TRUE(r.succeeded()) << r.output;
  ASSERT_TRUE(fs::exists(zip));
  const fs::path first = work_ / "autograder-first.zip";
  fs::copy_file(zip, first, fs::copy_options::overwrite_existing);
  r = pack(false);
  ASSERT_TRUE(r.succeeded()) << r.output;
  r = run("list", {cmake_, "-E", "tar", "tvf", first.string()}, {{"TZ", "UTC"}}, work_);
  const std::string first_listing = r.output;
  r = run("list-again", {cmake_, "-E", "tar", "tvf", zip.string()}, {{"TZ", "UTC"}}, work_);
  EXPECT_EQ(r.output, first_listing) << "two packings of the same tree differ";

  // 2. Unpacked as Gradescope does: the zip's content in <root>/source, run_autograder copied to
  // <root>. What earlier runs left is removed, except the grading's work folder.
  for (const char* old : {"source", "submission", "results", "run_autograder", "setup-build"}) {
    fs::remove_all(root_ / old);
  }
  fs::create_directories(root_ / "source");
  r = run("unpack", {cmake_, "-E", "tar", "xf", zip.string()}, {}, root_ / "source");
  ASSERT_TRUE(r.succeeded()) << r.output;
  EXPECT_TRUE(executable(root_ / "source/setup.sh")) << "setup.sh lost its executable bit";
  EXPECT_TRUE(executable(root_ / "source/run_autograder")) << "run_autograder lost its executable bit";
  fs::copy_file(root_ / "source/run_autograder", root_ / "run_autograder");

  // The solution tree is exactly the files git tracks: hidden tests in, build output and .git out.
  const fs::path tree = root_ / "source/source";
  std::vector<std::string> tracked;
  for (const std::string& f : handout::list_project_files(source_, false)) {
    if (fs::exists(source_ / f)) tracked.push_back(f);
  }
  std::sort(tracked.begin(), tracked.end());
  const std::vector<std::string> packed = files_below(tree);
  EXPECT_EQ(packed, tracked) << "source/ should hold the tracked files of the solution tree";
  for (const char* instructor : {"grading/rubric-hidden.json", "grading/hidden/CMakeLists.txt"}) {
    EXPECT_TRUE(fs::exists(tree / instructor)) << instructor << " is missing from the package";
  }
  EXPECT_FALSE(fs::exists(tree / ".git"));
  EXPECT_EQ(handout::read_file(tree / "grading/rubric.json"), handout::read_file(source_ / "grading/rubric.json"));

  // 3. setup.sh's build step, reusing this build's framework objects.
  const std::map<std::string, std::optional<std::string>> vars = {
      {"AUTOGRADER_ROOT", root_.string()},
      {"CLOCKWORK_BUILD", (root_ / "setup-build").string()},
      {"CLOCKWORK_FRAMEWORK_BUILD", build_.string()},
      {"CLOCKWORK_JOBS", "2"},
      {"CLOCKWORK_BACKEND", "sim"},
      {"CLOCKWORK_HIDDEN_SEED", "20240611"},
      {"CLOCKWORK_SOURCE", std::nullopt},
      {"CLOCKWORK_PRESET", std::nullopt},
  };
  r = run("setup", {(root_ / "source/setup.sh").string(), "--build-only"}, vars, root_ / "source");
  ASSERT_TRUE(r.succeeded()) << r.output;
  EXPECT_NE(r.output.find("Reusing"), std::string::npos) << "setup.sh did not reuse the framework build:\n"
                                                          << r.output;
  ASSERT_TRUE(executable(root_ / "setup-build/bin/clockwork-grade"));

  // The framework setup.sh built: the stubbed tree, hidden tests in and for root only, with a
  // build whose manifest names that tree and whose student-file objects are the stubs'.
  const fs::path framework = root_ / "framework";
  handout::TreeOptions stubbed;
  stubbed.source = tree;
  stubbed.stub_from = 1;
  stubbed.instructor = true;
  const handout::Tree expected_framework = handout::generate_tree(stubbed);
  ASSERT_TRUE(expected_framework.errors.empty());
  size_t student_files = 0;
  for (const handout::StudentFile& f : expected_framework.student_files()) {
    ++student_files;
    ASSERT_TRUE(fs::exists(framework / f.path)) << f.path;
    const std::string text = handout::read_file(framework / f.path);
    EXPECT_EQ(text, expected_framework.find(f.path)->content) << f.path << " is not the stub";
    EXPECT_EQ(text.find("BEGIN SOLUTION"), std::string::npos) << f.path;
  }
  EXPECT_GT(student_files, 0u);
  for (const char* instructor : {"grading/rubric-hidden.json", "grading/hidden/CMakeLists.txt"}) {
    struct stat st {};
    ASSERT_EQ(::stat((framework / instructor).c_str(), &st), 0) << instructor << " is not in the framework tree";
    EXPECT_EQ(st.st_mode & 077, 0u) << instructor << " is readable by other users";
  }
  std::string manifest = handout::read_file(framework / "build/clockwork-framework.cmake");
  for (size_t at = manifest.find("/./"); at != std::string::npos; at = manifest.find("/./", at)) {
    manifest.replace(at, 3, "/");
  }
  EXPECT_NE(manifest.find("set(CLOCKWORK_PREBUILT_SOURCE_DIR \"" + framework.string() + "\")"), std::string::npos)
      << manifest.substr(0, 2000);
  // The kernels' objects the grading links were compiled from the stubs, in the framework's build.
  const fs::path embedding_object =
      framework / "build/kernels/CMakeFiles/clockwork_kernels_sim.dir/__/cudasim-gen/kernels/embedding.cu.cpp.o";
  EXPECT_TRUE(fs::exists(embedding_object)) << embedding_object;
  EXPECT_NE(manifest.find(embedding_object.string()), std::string::npos)
      << "the manifest does not name the stub's object " << embedding_object;

  // 4. The submission: milestone 1 solved, the later milestones as handed out.
  handout::TreeOptions to;
  to.source = tree;
  to.stub_from = 2;
  const handout::Tree handout = handout::generate_tree(to);
  ASSERT_TRUE(handout.errors.empty());
  size_t submitted = 0;
  for (const handout::StudentFile& f : handout.student_files()) {
    const handout::TreeFile* file = handout.find(f.path);
    ASSERT_NE(file, nullptr) << f.path;
    fs::create_directories((root_ / "submission" / f.path).parent_path());
    std::ofstream(root_ / "submission" / f.path, std::ios::binary) << file->content;
    ++submitted;
  }
  ASSERT_GT(submitted, 0u);

  // 5. run_autograder, from <root> as Gradescope runs it.
  r = run("run_autograder", {(root_ / "run_autograder").string()}, vars, root_);
  EXPECT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.output;
  const fs::path results_file = root_ / "results/results.json";
  ASSERT_TRUE(fs::exists(results_file)) << r.output;
  const json results = json::parse(handout::read_file(results_file));

  // 6. Valid for Gradescope, and exactly milestone 1's points, public and hidden.
  std::string problems;
  for (const std::string& p : gradescope_format_problems(results)) problems += p + "\n";
  EXPECT_EQ(problems, "") << results.dump(2);

  Rubric rubric = load_rubric(tree / "grading/rubric.json");
  const Rubric hidden = load_rubric(tree / "grading/rubric-hidden.json", true);
  merge_rubric(rubric, hidden);
  const double expected = rubric.points_of_milestones(1, 1);
  ASSERT_GT(expected, 0);
  EXPECT_DOUBLE_EQ(results.value("score", -1.0), expected) << results.value("output", "");
  ASSERT_TRUE(results["tests"].is_array());
  EXPECT_EQ(results["tests"].size(), rubric.tests.size());
  size_t hidden_graded = 0;
  for (const json& t : results["tests"]) {
    const std::string name = t.value("name", "");
    const bool milestone1 = name.rfind("Milestone 1:", 0) == 0;
    EXPECT_EQ(t.value("status", ""), milestone1 ? "passed" : "failed") << name << "\n" << t.value("output", "");
    const std::vector<std::string> tags = t.value("tags", std::vector<std::string>{});
    if (std::find(tags.begin(), tags.end(), "hidden") != tags.end()) ++hidden_graded;
  }
  EXPECT_EQ(hidden_graded, hidden.tests.size()) << "the hidden tests were not all graded";
  std::cout << "score " << results.value("score", -1.0) << " of " << rubric.total_points() << " (expected "
            << expected << "), graded in " << results.value("execution_time", -1.0) << " s\n";
}

}  // namespace
}  // namespace clockwork::grading
