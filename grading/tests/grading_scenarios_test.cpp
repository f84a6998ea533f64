// Whole gradings with clockwork-grade, on the CPU backend, of submissions made from this tree:
//   - the reference solution scores full marks (public and hidden rubrics);
//   - each milestone's handout scores exactly the points of the milestones before it;
//   - a kernel that segfaults or aborts fails only the tests that run it;
//   - a broken matmul costs matmul's items and the end-to-end items, not the isolated items of
//     later steps that call it;
//   - a submission that does not compile scores 0 and shows the compiler's error;
//   - a kernel that never returns is stopped by the time limit and fails only its tests;
//   - modified tests, CMake files or rubric in a submission are ignored, and the output says so;
//   - cheats (Cheat*): submissions that try to get points without the work, or to read secrets,
//     score what the work deserves (0 for the stubs) and show no seed in results.json; one that
//     names the checker or the reference is not graded at all.
// Every grading shares one work folder, so a grading only recompiles what its submission changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

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

class Grading : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = env("CLOCKWORK_SOURCE_DIR");
    grade_ = env("CLOCKWORK_GRADE_EXE");
    handout_ = env("CLOCKWORK_HANDOUT_EXE");
    work_ = env("CLOCKWORK_SCENARIO_WORK");
    if (source_.empty() || grade_.empty() || handout_.empty() || work_.empty()) {
      GTEST_SKIP() << "the CLOCKWORK_* variables are set by ctest";
    }
    fs::create_directories(work_);
    work_ = fs::canonical(work_);
    rubric_ = load_rubric(source_ / "grading/rubric.json");
    hidden_rubric_ = rubric_;
    merge_rubric(hidden_rubric_, load_rubric(source_ / "grading/rubric-hidden.json", true));
    // The student files, as the grader derives them: the files with solution regions.
    handout::TreeOptions to;
    to.source = source_;
    to.untracked = true;
    for (const handout::StudentFile& f : handout::generate_tree(to).student_files()) {
      rubric_.student_files.insert(f.path);
    }
  }

  // Runs clockwork-grade and returns its results.json.
  json grade(const fs::path& submission, std::vector<std::string> extra = {}, int expected_status = 0) {
    const fs::path out = work_ / "results.json";
    fs::remove(out);
    handout::RunOptions o;
    o.argv = {grade_, "--submission", submission.string(), "--out", out.string(), "--source", source_.string(),
              "--work", (work_ / "grade").string(), "--backend", "sim", "--jobs", "2", "--untracked"};
    if (!env("CLOCKWORK_CMAKE").empty()) o.argv.insert(o.argv.end(), {"--cmake", env("CLOCKWORK_CMAKE")});
    if (!env("CLOCKWORK_CTEST").empty()) o.argv.insert(o.argv.end(), {"--ctest", env("CLOCKWORK_CTEST")});
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.timeout_s = 3000;
    o.max_output = 20000;
    const handout::RunResult r = handout::run_process(o);
    EXPECT_EQ(r.exit_code, expected_status) << r.describe() << "\n" << r.output;
    EXPECT_TRUE(fs::exists(out)) << "no results.json";
    if (!fs::exists(out)) return json::object();
    const json results = json::parse(handout::read_file(out));
    check_format(results);
    // The staff loop's figure: a grading, framework already built, should take under a minute
    // on a 2-core machine (its build step is in the first lines of the output).
    std::string build_line;
    if (results.contains("output")) {
      const std::string text = results["output"];
      const size_t at = text.find("Build: ");
      if (at != std::string::npos) build_line = ", " + text.substr(at, text.find('\n', at) - at);
    }
    std::cout << "graded " << submission.filename().string() << " in " << static_cast<int>(r.seconds + 0.5) << " s"
              << build_line << ", score " << results.value("score", 0.0) << "\n"
              << std::flush;
    return results;
  }

  // The shape Gradescope expects, whatever the grading found, and the grader's size limits.
  static void check_format(const json& results) {
    std::string problems;
    for (const std::string& p : gradescope_format_problems(results)) problems += p + "\n";
    ASSERT_EQ(problems, "") << results.dump(2);
    ASSERT_TRUE(results["execution_time"].is_number());
    ASSERT_TRUE(results["output"].is_string());
    EXPECT_LE(results["output"].get<std::string>().size(), 16u * 1024);
    size_t total = results["output"].get<std::string>().size();
    for (const json& t : results["tests"]) {
      EXPECT_TRUE(t["tags"].is_array());
      EXPECT_LE(t["output"].get<std::string>().size(), 10u * 1024);
      total += t["output"].get<std::string>().size();
    }
    EXPECT_LE(total, 64u * 1024);
  }

  // A folder holding the reference solution's student files as they are (markers included: they
  // are comments, and the failure scenarios use them to find where to break a kernel).
  fs::path reference_submission(const std::string& name) {
    const fs::path dir = work_ / "submissions" / name;
    fs::remove_all(dir);
    for (const std::string& path : handout::list_project_files(source_, true)) {
      if (!rubric_.is_student_file(path)) continue;
      fs::create_directories((dir / path).parent_path());
      fs::copy_file(source_ / path, dir / path);
    }
    return dir;
  }

  // Milestone n's handout, made by the command-line tool.
  fs::path handout_tree(int n) {
    const fs::path dir = work_ / "submissions" / ("handout-m" + std::to_string(n));
    handout::RunOptions o;
    o.argv = {handout_, "--milestone", std::to_string(n), "--source", source_.string(), "--out", dir.string(),
              "--untracked", "--force", "--quiet"};
    o.timeout_s = 300;
    const handout::RunResult r = handout::run_process(o);
    EXPECT_TRUE(r.succeeded()) << r.output;
    return dir;
  }

  // Inserts `code` as a line before the first line of `file` containing `anchor`.
  static void insert_before(const fs::path& file, const std::string& anchor, const std::string& code) {
    std::string text = handout::read_file(file);
    const size_t at = text.find(anchor);
    ASSERT_NE(at, std::string::npos) << anchor << " not found in " << file;
    const size_t line = text.rfind('\n', at) + 1;
    text.insert(line, code + "\n");
    std::ofstream(file, std::ios::binary) << text;
  }

  // A rubric with a few tests of milestones 1 and 2, for the failure scenarios: cheap to run,
  // and exact about which tests a broken kernel must cost.
  fs::path small_rubric() {
    const fs::path path = work_ / "small-rubric.json";
    std::ofstream(path) << R"({
      "timeout_s": 300,
      "milestones": [
        {"milestone": 1, "tests": [
          {"name": "embedding", "binary": "milestone1_kernels", "filter": "Embedding.MatchesReference", "points": 1},
          {"name": "matmul", "binary": "milestone1_kernels", "filter": "Matmul.TiledMatchesReferenceOnAwkwardShapes",
           "points": 2}]},
        {"milestone": 2, "tests": [
          {"name": "rmsnorm", "binary": "milestone2_kernels", "filter": "RmsNorm.MatchesReference", "points": 4},
          {"name": "rmsnorm arguments", "binary": "milestone2_kernels", "filter": "RmsNorm.RejectsBadArguments",
           "points": 8}]}
      ]})";
    return path;
  }

  static const json& test_named(const json& results, const std::string& suffix) {
    for (const json& t : results["tests"]) {
      const std::string name = t["name"];
      if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return t;
    }
    static const json none = json::object();
    ADD_FAILURE() << "no test named ..." << suffix;
    return none;
  }

  fs::path source_, work_;
  std::string grade_, handout_;
  Rubric rubric_, hidden_rubric_;
};

TEST_F(Grading, ReferenceScoresFullMarks) {
  const fs::path sub = reference_submission("reference");
  const json hidden = grade(sub, {"--hidden", "--seed", "20240611"});
  EXPECT_DOUBLE_EQ(hidden["score"].get<double>(), hidden_rubric_.total_points()) << hidden.dump(2);
  ASSERT_EQ(hidden["tests"].size(), hidden_rubric_.tests.size());
  size_t hidden_tests = 0;
  for (const json& t : hidden["tests"]) {
    EXPECT_EQ(t["status"], "passed") << t.dump(2);
    const auto tags = t["tags"].get<std::vector<std::string>>();
    if (std::find(tags.begin(), tags.end(), "hidden") != tags.end()) {
      ++hidden_tests;
      EXPECT_EQ(t["visibility"], "after_due_date");
    }
  }
  EXPECT_GT(hidden_tests, 0u);

  // Without --hidden: the public rubric only.
  const json pub = grade(sub);
  EXPECT_DOUBLE_EQ(pub["score"].get<double>(), rubric_.total_points()) << pub.dump(2);
  EXPECT_EQ(pub["tests"].size(), rubric_.tests.size());
  // The reference's own tree as the submission gives the same (everything but student files is
  // ignored silently when unchanged).
  const json whole = grade(source_);
  EXPECT_DOUBLE_EQ(whole["score"].get<double>(), rubric_.total_points()) << whole["output"];
}

TEST_F(Grading, HandoutsScoreEarlierMilestones) {
  int last = 0;
  for (const RubricTest& t : hidden_rubric_.tests) last = std::max(last, t.milestone);
  for (int n = 1; n <= last; ++n) {
    SCOPED_TRACE("milestone " + std::to_string(n) + "'s handout");
    const json results = grade(handout_tree(n), {"--hidden"});
    EXPECT_DOUBLE_EQ(results["score"].get<double>(), hidden_rubric_.points_of_milestones(1, n - 1))
        << results["output"];
    for (const json& t : results["tests"]) {
      const std::string out = t["output"];
      if (t["status"] == "failed") {
        // A stub fails cleanly: GoogleTest failures, not a crash or a hang.
        EXPECT_NE(out.find("test case"), std::string::npos) << t.dump(2);
        EXPECT_EQ(out.find("crashed"), std::string::npos) << t.dump(2);
        EXPECT_EQ(out.find("time limit"), std::string::npos) << t.dump(2);
      }
    }
  }
}

TEST_F(Grading, CrashingKernel) {
  const fs::path sub = reference_submission("crash");
  // A segfault in the RMSNorm kernel and an abort in the embedding kernel.
  insert_before(sub / "kernels/rmsnorm.cu", "BEGIN SOLUTION(m2)",
                "  if (threadIdx.x == 0) { volatile int* nowhere = nullptr; *nowhere = 1; }");
  insert_before(sub / "kernels/embedding.cu", "BEGIN SOLUTION(m1)", "  if (threadIdx.x == 0) __builtin_abort();");
  const json results = grade(sub, {"--rubric", small_rubric().string()});
  const json& embedding = test_named(results, "embedding");
  const json& rmsnorm = test_named(results, "rmsnorm");
  EXPECT_EQ(embedding["status"], "failed");
  EXPECT_NE(embedding["output"].get<std::string>().find("abort()"), std::string::npos) << embedding.dump(2);
  EXPECT_EQ(rmsnorm["status"], "failed");
  // The CPU backend names the crash: the kernel, the thread and the null pointer it wrote through.
  EXPECT_NE(rmsnorm["output"].get<std::string>().find("a null pointer"), std::string::npos) << rmsnorm.dump(2);
  EXPECT_NE(rmsnorm["output"].get<std::string>().find("kernel 'rmsnorm_kernel'"), std::string::npos) << rmsnorm.dump(2);
  EXPECT_NE(rmsnorm["output"].get<std::string>().find("RmsNorm.MatchesReference"), std::string::npos);
  // The other tests, including one in the same test binary, are unaffected.
  EXPECT_EQ(test_named(results, "matmul")["status"], "passed");
  EXPECT_EQ(test_named(results, "rmsnorm arguments")["status"], "passed");
  EXPECT_DOUBLE_EQ(results["score"].get<double>(), 10);
}

TEST_F(Grading, RacyKernel) {
  const fs::path sub = reference_submission("race");
  // No barrier between thread 0 writing the scale and the others reading it: right when thread 0
  // happens to run first (the CPU backend's default order), a race on a GPU.
  const fs::path file = sub / "kernels/rmsnorm.cu";
  std::string text = handout::read_file(file);
  const std::string barrier = "if (threadIdx.x == 0) scale = rsqrtf(partial[0] / d + eps);\n  __syncthreads();";
  const size_t at = text.find(barrier);
  ASSERT_NE(at, std::string::npos) << "the RMSNorm solution changed: update this scenario";
  text.replace(at, barrier.size(), "if (threadIdx.x == 0) scale = rsqrtf(partial[0] / d + eps);");
  std::ofstream(file, std::ios::binary) << text;
  const json results = grade(sub, {"--rubric", small_rubric().string(), "--backend", "sim"});
  const json& rmsnorm = test_named(results, "rmsnorm");
  const std::string out = rmsnorm["output"];
  EXPECT_EQ(rmsnorm["status"], "failed");
  EXPECT_NE(out.find("not when the CPU backend checks every memory access"), std::string::npos) << out;
  EXPECT_NE(out.find("shared-memory race"), std::string::npos) << out;
  EXPECT_NE(out.find("'scale'"), std::string::npos) << out;
  EXPECT_NE(out.find("kernels/rmsnorm.cu:"), std::string::npos) << out;
  EXPECT_EQ(test_named(results, "embedding")["status"], "passed");
  EXPECT_EQ(test_named(results, "matmul")["status"], "passed");
  EXPECT_EQ(test_named(results, "rmsnorm arguments")["status"], "passed");
  EXPECT_DOUBLE_EQ(results["score"].get<double>(), 11);
}

// One mistake costs the items that test it: with the milestone-1 handout's matmul (a stub that
// writes nothing) and everything else right, the items about later steps that call matmul still
// pass when the rubric runs them isolated (known-good earlier steps), and only matmul's own items
// and the end-to-end items fail. The same Q/K/V item on the student's whole chain shows the charge
// that isolation removes.
TEST_F(Grading, BrokenMatmulCostsOnlyItsOwnItems) {
  const fs::path sub = reference_submission("broken-matmul");
  fs::copy_file(handout_tree(1) / "kernels/matmul.cu", sub / "kernels/matmul.cu",
                fs::copy_options::overwrite_existing);
  json milestones = json::array();
  auto item = [&](const std::string& name) {
    for (const RubricTest& t : rubric_.tests) {
      if (t.name != name) continue;
      json j = {{"name", t.name}, {"binary", t.binary}, {"filter", t.filter}, {"points", 1}};
      if (t.isolated) j["isolated"] = true;
      if (t.end_to_end) j["end_to_end"] = true;
      if (t.timeout_s > 0) j["timeout_s"] = t.timeout_s;
      while (static_cast<int>(milestones.size()) < t.milestone) {
        milestones.push_back({{"milestone", milestones.size() + 1}, {"tests", json::array()}});
      }
      milestones[t.milestone - 1]["tests"].push_back(j);
      return j;
    }
    ADD_FAILURE() << "the rubric has no item named " << name << ": update this scenario";
    return json::object();
  };
  const json matmul = item("Tiled matmul on awkward shapes");
  const json qkv = item("Q/K/V step of a small GQA layer");
  ASSERT_TRUE(qkv.value("isolated", false));
  item("SwiGLU");
  ASSERT_TRUE(item("Decoder layer").value("isolated", false));
  ASSERT_TRUE(item("Prefill and decode write exactly their slots").value("isolated", false));
  ASSERT_TRUE(item("Checkpoints written by HuggingFace transformers").value("end_to_end", false));
  json chained = qkv;
  chained["name"] = "Q/K/V step on the whole chain";
  chained.erase("isolated");
  milestones[1]["tests"].push_back(chained);
  const fs::path rubric = work_ / "isolation-rubric.json";
  std::ofstream(rubric) << json{{"timeout_s", 300}, {"milestones", milestones}}.dump(2);

  const json results = grade(sub, {"--rubric", rubric.string()});
  EXPECT_EQ(test_named(results, matmul["name"].get<std::string>())["status"], "failed");
  EXPECT_EQ(test_named(results, "Q/K/V step on the whole chain")["status"], "failed");
  EXPECT_EQ(test_named(results, "Checkpoints written by HuggingFace transformers")["status"], "failed");
  for (const char* name : {"Q/K/V step of a small GQA layer", "SwiGLU", "Decoder layer",
                           "Prefill and decode write exactly their slots"}) {
    const json& t = test_named(results, name);
    EXPECT_EQ(t["status"], "passed") << t.dump(2);
  }
  const std::string isolated_output = test_named(results, "Decoder layer")["output"];
  EXPECT_NE(isolated_output.find("milestone3_model_isolated"), std::string::npos) << isolated_output;
  EXPECT_NE(isolated_output.find("known-good versions"), std::string::npos) << isolated_output;
  EXPECT_DOUBLE_EQ(results["score"].get<double>(), 4) << results["output"];
}

TEST_F(Grading, BuildError) {
  const fs::path sub = reference_submission("build-error");
  insert_before(sub / "kernels/matmul.cu", "BEGIN SOLUTION(m1)", "  this line is not C++;");
  const json results = grade(sub, {"--rubric", small_rubric().string()});
  EXPECT_DOUBLE_EQ(results["score"].get<double>(), 0);
  EXPECT_EQ(results["tests"].size(), 4u);
  const std::string out = results["output"];
  EXPECT_NE(out.find("The build failed"), std::string::npos) << out;
  EXPECT_NE(out.find("kernels/matmul.cu:"), std::string::npos) << out;
  EXPECT_NE(out.find("error"), std::string::npos) << out;
  for (const json& t : results["tests"]) EXPECT_EQ(t["status"], "failed");
}

TEST_F(Grading, HangingKernel) {
  const fs::path sub = reference_submission("hang");
  insert_before(sub / "kernels/rmsnorm.cu", "BEGIN SOLUTION(m2)",
                "  for (volatile int spin = 1; spin;) {}");
  const json results = grade(sub, {"--rubric", small_rubric().string(), "--timeout", "20"});
  const json& rmsnorm = test_named(results, "rmsnorm");
  EXPECT_EQ(rmsnorm["status"], "failed");
  EXPECT_NE(rmsnorm["output"].get<std::string>().find("time limit"), std::string::npos) << rmsnorm.dump(2);
  EXPECT_EQ(test_named(results, "embedding")["status"], "passed");
  EXPECT_EQ(test_named(results, "matmul")["status"], "passed");
  EXPECT_EQ(test_named(results, "rmsnorm arguments")["status"], "passed");
  EXPECT_DOUBLE_EQ(results["score"].get<double>(), 11);
  EXPECT_LT(results["execution_time"].get<double>(), 3000);

  // The same hang with a test time limit far beyond the grading's --deadline: the build is up to
  // date now (seconds), and the hanging run is cut at the deadline less the grader's 20 s margin,
  // so results.json is complete before it, with the other tests graded.
  const json cut = grade(sub, {"--rubric", small_rubric().string(), "--timeout", "3000", "--deadline", "75"});
  const json& hung = test_named(cut, "rmsnorm");
  EXPECT_EQ(hung["status"], "failed");
  EXPECT_NE(hung["output"].get<std::string>().find("time limit"), std::string::npos) << hung.dump(2);
  EXPECT_EQ(test_named(cut, "embedding")["status"], "passed");
  EXPECT_DOUBLE_EQ(cut["score"].get<double>(), 11);
  EXPECT_LT(cut["execution_time"].get<double>(), 75);
}

TEST_F(Grading, TamperedTests) {
  // Milestone 1's handout (worth nothing) with tests that always pass, a rubric that gives
  // everything, and CMake that would skip the real tests.
  const fs::path sub = handout_tree(1);
  std::ofstream(sub / "milestones/milestone1/tests/test_matmul.cpp")
      << "#include <gtest/gtest.h>\n"
         "TEST(Matmul, TiledMatchesReferenceOnAwkwardShapes) {}\n"
         "TEST(Matmul, LlamaProjectionShapes) {}\n"
         "TEST(Matmul, EmptyShapesWriteNothingAndZeroKWritesZeros) {}\n";
  std::ofstream(sub / "milestones/milestone1/tests/test_embedding.cpp")
      << "#include <gtest/gtest.h>\nTEST(Embedding, MatchesReference) {}\nTEST(Embedding, "
         "OutOfRangeIdIsAnErrorNamingIt) {}\n";
  std::ofstream(sub / "grading/rubric.json") << R"({"milestones": []})";
  std::ofstream(sub / "milestones/milestone1/tests/CMakeLists.txt", std::ios::app) << "\n# changed\n";
  std::ofstream(sub / "harness/check/compare.cpp", std::ios::app) << "\n// changed\n";
  const json results = grade(sub);
  EXPECT_DOUBLE_EQ(results["score"].get<double>(), 0);
  EXPECT_EQ(results["tests"].size(), rubric_.tests.size());
  const std::string out = results["output"];
  for (const char* path : {"milestones/milestone1/tests/test_matmul.cpp (modified)",
                           "milestones/milestone1/tests/test_embedding.cpp (modified)",
                           "grading/rubric.json (modified)", "milestones/milestone1/tests/CMakeLists.txt (modified)",
                           "harness/check/compare.cpp (modified)"}) {
    EXPECT_NE(out.find(path), std::string::npos) << path << "\n" << out;
  }
  EXPECT_NE(out.find("Ignored"), std::string::npos) << out;
}

// ---- cheats ---------------------------------------------------------------------------------------
// Each starts from milestone 1's handout (stubs: the work deserves 0) with cheating code at the end
// of a student file, graded with two tests of one test program so that a grading stays short.

// A passing GoogleTest report of both tests, as a forger would write it.
constexpr const char* kForgedReport =
    R"({"tests":2,"failures":0,"disabled":0,"errors":0,"timestamp":"2026-01-01T00:00:00Z","time":"0.4s",)"
    R"("name":"AllTests","testsuites":[{"name":"Embedding","tests":1,"failures":0,"disabled":0,"errors":0,)"
    R"("time":"0.2s","testsuite":[{"name":"MatchesReference","status":"RUN","result":"COMPLETED",)"
    R"("timestamp":"2026-01-01T00:00:00Z","time":"0.2s","classname":"Embedding"}]},{"name":"Matmul","tests":1,)"
    R"("failures":0,"disabled":0,"errors":0,"time":"0.2s","testsuite":[{"name":"TiledMatchesReferenceOnAwkwardShapes",)"
    R"("status":"RUN","result":"COMPLETED","timestamp":"2026-01-01T00:00:00Z","time":"0.2s","classname":"Matmul"}]}]})";

class Cheat : public Grading {
 protected:
  void SetUp() override {
    Grading::SetUp();
    if (IsSkipped()) return;
    if (geteuid() != 0) GTEST_SKIP() << "the grader isolates student code only when it runs as root";
  }

  fs::path cheat_rubric() {
    const fs::path path = work_ / "cheat-rubric.json";
    std::ofstream(path) << R"({
      "timeout_s": 120,
      "milestones": [
        {"milestone": 1, "tests": [
          {"name": "embedding", "binary": "milestone1_kernels", "filter": "Embedding.MatchesReference", "points": 1},
          {"name": "matmul", "binary": "milestone1_kernels", "filter": "Matmul.TiledMatchesReferenceOnAwkwardShapes",
           "points": 2}]}
      ]})";
    return path;
  }

  // Milestone 1's handout with `code` appended to kernels/embedding.cu.
  fs::path cheating_submission(const std::string& name, const std::string& code) {
    const fs::path dir = handout_tree(1);
    const fs::path copy = work_ / "submissions" / name;
    fs::remove_all(copy);
    fs::copy(dir, copy, fs::copy_options::recursive);
    std::ofstream(copy / "kernels/embedding.cu", std::ios::app) << "\n" << code << "\n";
    return copy;
  }

  // Grades with the two-test rubric; checks the score and that the grading says how it isolated.
  json grade_cheat(const fs::path& submission, double expected, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--rubric", cheat_rubric().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const json results = grade(submission, args);
    EXPECT_DOUBLE_EQ(results.value("score", -1.0), expected) << results.dump(2);
    const std::string out = results.value("output", "");
    EXPECT_NE(out.find("as the unprivileged user"), std::string::npos) << out;
    return results;
  }

  static std::string marker(const std::string& name) {
    return "/tmp/clockwork-cheat-" + name + "-" + std::to_string(getpid());
  }
};

TEST_F(Cheat, ForgedReportAndEarlyExit) {
  // Before main(): writes a passing report where --gtest_output says, and ends the program.
  const fs::path sub = cheating_submission("cheat-forged-report", std::string(R"CHEAT(
#include <unistd.h>
#include <fstream>
#include <string>
namespace {
struct Forge {
  Forge() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string arg, out;
    while (std::getline(in, arg, '\0')) {
      if (arg.rfind("--gtest_output=json:", 0) == 0) out = arg.substr(20);
    }
    if (out.empty()) return;
    std::ofstream(out) << R"FORGED()CHEAT") + kForgedReport + R"CHEAT()FORGED";
    _exit(0);
  }
} forge;
}  // namespace
)CHEAT");
  const json results = grade_cheat(sub, 0);
  for (const json& t : results["tests"]) {
    EXPECT_EQ(t["status"], "failed");
    EXPECT_NE(t["output"].get<std::string>().find("never shows GoogleTest running"), std::string::npos) << t.dump(2);
  }
}

TEST_F(Cheat, SkippingEnvironment) {
  // A global test environment that skips everything: GoogleTest then lists every test as run and
  // completed, with no failure.
  const fs::path sub = cheating_submission("cheat-skip", R"CHEAT(
#include <gtest/gtest.h>
namespace {
class SkipAll : public ::testing::Environment {
 public:
  void SetUp() override { GTEST_SKIP() << "nothing to see"; }
};
[[maybe_unused]] ::testing::Environment* const skip_all = ::testing::AddGlobalTestEnvironment(new SkipAll);
}  // namespace
)CHEAT");
  const json results = grade_cheat(sub, 0);
  for (const json& t : results["tests"]) {
    EXPECT_EQ(t["status"], "failed");
    EXPECT_NE(t["output"].get<std::string>().find("never started"), std::string::npos) << t.dump(2);
  }
}

TEST_F(Cheat, RunsTestsOfItsOwn) {
  // Registers a test of its own that passes and, before main(), rewrites the program's
  // --gtest_filter to select it alone: the report then lists nothing but passes, every one started
  // and shown in the output.
  const fs::path sub = cheating_submission("cheat-own-tests", R"CHEAT(
#include <gtest/gtest.h>
#include <cstring>
TEST(Forged, Passes) {}
namespace {
// The C library calls initialisers with the program's arguments, which are writable.
[[gnu::constructor]] void select_forged(int argc, char** argv, char**) {
  const char* flag = "--gtest_filter=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0 && std::strlen(argv[i]) >= std::strlen(flag) + 8) {
      std::strcpy(argv[i] + std::strlen(flag), "Forged.*");
    }
  }
}
}  // namespace
)CHEAT");
  const json results = grade_cheat(sub, 0);
  for (const json& t : results["tests"]) {
    EXPECT_EQ(t["status"], "failed");
    const std::string out = t["output"];
    EXPECT_NE(out.find("never passing"), std::string::npos) << t.dump(2);
    EXPECT_NE(out.find("Forged.Passes"), std::string::npos) << "the cheat did not run: " << t.dump(2);
  }
}

TEST_F(Cheat, SurvivorRewritesResults) {
  // A process that leaves its test (fork, setsid, fork) and, every half second for a minute,
  // says it is alive and tries to overwrite results.json with full marks.
  const std::string alive = marker("survivor");
  fs::remove(alive);
  const fs::path results_path = work_ / "results.json";
  const fs::path sub = cheating_submission("cheat-survivor", R"CHEAT(
#include <unistd.h>
#include <fstream>
namespace {
struct Survivor {
  Survivor() {
    if (fork() != 0) return;
    setsid();
    if (fork() != 0) _exit(0);
    for (int i = 0; i < 120; ++i) {
      std::ofstream(")CHEAT" + alive + R"CHEAT(", std::ios::trunc) << i;
      std::ofstream(")CHEAT" + results_path.string() + R"CHEAT(", std::ios::trunc)
          << R"({"score": 3, "output": "FORGED", "tests": []})";
      usleep(500000);
    }
    _exit(0);
  }
} survivor;
}  // namespace
)CHEAT");
  const json results = grade_cheat(sub, 0);
  ASSERT_TRUE(fs::exists(alive)) << "the survivor never ran";
  // Nothing of the submission is left running: the marker stops changing with the grading.
  const std::string last = handout::read_file(alive);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(handout::read_file(alive), last) << "a process of the submission outlived the grading";
  const std::string after = handout::read_file(results_path);
  EXPECT_EQ(after.find("FORGED"), std::string::npos) << after;
  EXPECT_EQ(json::parse(after)["score"], 0);
  fs::remove(alive);
}

TEST_F(Cheat, ReplacesTestPrograms) {
  // The first test run replaces every program beside its own (its own included) by a script that
  // prints GoogleTest's lines and writes a passing report; one test at a time, so that the second
  // test would run the script.
  const std::string log = marker("replace");
  fs::remove(log);
  const std::string script = std::string(R"(#!/bin/sh
for a; do case "$a" in --gtest_output=json:*) f="${a#--gtest_output=json:}";; esac; done
echo '[       OK ] Embedding.MatchesReference (5 ms)'
echo '[       OK ] Matmul.TiledMatchesReferenceOnAwkwardShapes (5 ms)'
printf '%s' ')") + kForgedReport + R"(' > "$f"
)";
  const fs::path sub = cheating_submission("cheat-replace", R"CHEAT(
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
namespace {
struct Replace {
  Replace() {
    namespace fs = std::filesystem;
    std::ofstream log(")CHEAT" + log + R"CHEAT(", std::ios::app);
    const fs::path self = fs::read_symlink("/proc/self/exe");
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(self.parent_path(), ec)) {
      if (!e.is_regular_file()) continue;
      const std::string fresh = e.path().string() + ".new";
      {
        std::ofstream script(fresh);
        script << R"SCRIPT()CHEAT" + script + R"CHEAT()SCRIPT";
        if (!script) { log << "refused " << e.path().filename().string() << "\n"; continue; }
      }
      chmod(fresh.c_str(), 0755);
      if (std::rename(fresh.c_str(), e.path().c_str()) == 0) {
        log << "replaced " << e.path().filename().string() << "\n";
      } else {
        log << "refused " << e.path().filename().string() << ": " << std::strerror(errno) << "\n";
      }
    }
  }
} replace;
}  // namespace
)CHEAT");
  grade_cheat(sub, 0, {"--jobs", "1"});
  const std::string what = fs::exists(log) ? handout::read_file(log) : std::string();
  EXPECT_NE(what.find("refused"), std::string::npos) << "the cheat did not run:\n" << what;
  EXPECT_EQ(what.find("replaced"), std::string::npos) << what;
  fs::remove(log);
}

TEST_F(Cheat, PrintsEnvironmentAndCommandLines) {
  // With the hidden tests and a known seed: prints its environment, every command line and
  // environment it can read in /proc, then aborts so that the end of its output is shown.
  const std::string seed = "987654321987";
  const fs::path sub = cheating_submission("cheat-environment", R"CHEAT(
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
extern char** environ;
namespace {
struct Snoop {
  Snoop() {
    for (char** e = environ; *e; ++e) std::cout << "env " << *e << "\n";
    std::error_code ec;
    for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
      for (const char* what : {"cmdline", "environ"}) {
        std::ifstream in(p.path() / what, std::ios::binary);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        for (char& c : text) if (c == '\0') c = ' ';
        if (!text.empty()) std::cout << p.path().string() << "/" << what << ": " << text << "\n";
      }
    }
    std::cout << std::flush;
    std::abort();
  }
} snoop;
}  // namespace
)CHEAT");
  const fs::path hidden_rubric = work_ / "cheat-hidden-rubric.json";
  std::ofstream(hidden_rubric) << R"({"milestones": [{"milestone": 1, "tests": [
      {"name": "hidden embedding", "binary": "hidden_kernels", "filter": "HiddenEmbedding.*", "points": 1,
       "visibility": "after_due_date"}]}]})";
  const json results =
      grade_cheat(sub, 0, {"--hidden", "--hidden-rubric", hidden_rubric.string(), "--seed", seed});
  const std::string text = results.dump();
  EXPECT_EQ(text.find(seed), std::string::npos) << "the seed is in results.json:\n" << results.dump(2);
  // The snooping ran and was shown (its output is the end of a crashed test's output).
  EXPECT_NE(text.find("/proc/"), std::string::npos) << results.dump(2);
}

TEST_F(Cheat, LooksForTheSeed) {
  // With the hidden tests and a known seed: a static initialiser looks everywhere a seed handed to
  // a child could be (CLOCKWORK_SEED, /proc/self/environ and cmdline, the descriptor named by
  // CLOCKWORK_SEED_FD, and every other open pipe), prints it, and writes it reversed to a file
  // outside the grading, where the grader's masking of the seed in its output cannot hide it.
  const std::string seed = "918273645546372819";
  const std::string found = marker("seed");
  fs::remove(found);
  const fs::path sub = cheating_submission("cheat-seed", R"CHEAT(
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
namespace {
std::string slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : text) if (c == '\0') c = ' ';
  return text;
}
std::string drain(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf);
  return n < 0 ? std::string("error: ") + std::strerror(errno) : std::string(buf, static_cast<size_t>(n));
}
struct Look {
  Look() {
    std::string all;
    if (const char* s = std::getenv("CLOCKWORK_SEED")) all += "CLOCKWORK_SEED=" + std::string(s) + "\n";
    all += "environ: " + slurp("/proc/self/environ") + "\n";
    all += "cmdline: " + slurp("/proc/self/cmdline") + "\n";
    if (const char* fd = std::getenv("CLOCKWORK_SEED_FD")) {
      all += "seed fd " + std::string(fd) + ": " + drain(std::atoi(fd)) + "\n";
    }
    for (int fd = 3; fd < 256; ++fd) {
      struct stat st{};
      if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) all += "pipe " + std::to_string(fd) + ": " + drain(fd) + "\n";
    }
    std::cout << all << std::flush;
    std::reverse(all.begin(), all.end());
    std::ofstream(")CHEAT" + found + R"CHEAT(", std::ios::app) << all << "\n----\n";
  }
} look;
}  // namespace
)CHEAT");
  const fs::path hidden_rubric = work_ / "cheat-hidden-rubric.json";
  std::ofstream(hidden_rubric) << R"({"milestones": [{"milestone": 1, "tests": [
      {"name": "hidden embedding", "binary": "hidden_kernels", "filter": "HiddenEmbedding.*", "points": 1,
       "visibility": "after_due_date"}]}]})";
  const json results =
      grade_cheat(sub, 0, {"--hidden", "--hidden-rubric", hidden_rubric.string(), "--seed", seed});
  const std::string text = results.dump();
  EXPECT_EQ(text.find(seed), std::string::npos) << "the seed is in results.json:\n" << results.dump(2);
  ASSERT_TRUE(fs::exists(found)) << "the cheat never ran";
  std::string what = handout::read_file(found);
  fs::remove(found);
  std::reverse(what.begin(), what.end());
  EXPECT_EQ(what.find(seed), std::string::npos) << "the submission found the seed:\n" << what;
  // It did look in the hidden tests' run, which had a channel, found it closed, and the hidden
  // tests still drew their data from the secret seed (the stub fails them with that note).
  EXPECT_NE(what.find("seed fd "), std::string::npos) << what;
  const json& hidden = test_named(results, "hidden embedding");
  EXPECT_EQ(hidden["status"], "failed");
  EXPECT_NE(hidden["output"].get<std::string>().find("drawn from the autograder's secret seed"), std::string::npos)
      << hidden.dump(2);
}

TEST_F(Cheat, IncludesSolutionFiles) {
  // The solution's own embedding kernel, and the framework build's rewritten solution of matmul,
  // included by absolute path in place of the work.
  const fs::path framework_build = fs::path(grade_).parent_path().parent_path();
  const fs::path solution = source_ / "kernels/embedding.cu";
  const fs::path rewritten = framework_build / "cudasim-gen/kernels/matmul.cu.cpp";
  ASSERT_TRUE(fs::exists(rewritten)) << rewritten;
  const fs::path sub = cheating_submission("cheat-include", "");
  std::ofstream(sub / "kernels/embedding.cu", std::ios::trunc) << "#include \"" << solution.string() << "\"\n";
  std::ofstream(sub / "kernels/matmul.cu", std::ios::trunc) << "#include \"" << rewritten.string() << "\"\n";
  const json results = grade_cheat(sub, 0);
  std::string shown = results["output"];
  for (const json& t : results["tests"]) shown += t["output"].get<std::string>();
  EXPECT_NE(shown.find("Permission denied"), std::string::npos) << shown;
  // No line of the solution region is shown.
  const std::string text = handout::read_file(solution);
  const size_t begin = text.find("BEGIN SOLUTION"), end = text.find("END SOLUTION");
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos);
  std::istringstream region(text.substr(begin, end - begin));
  std::string line;
  size_t checked = 0;
  while (std::getline(region, line)) {
    line.erase(0, line.find_first_not_of(' '));
    if (line.size() < 20 || line.find("SOLUTION") != std::string::npos) continue;
    ++checked;
    EXPECT_EQ(shown.find(line), std::string::npos) << "solution text shown: " << line;
  }
  EXPECT_GT(checked, 0u);
}

TEST_F(Cheat, ReadsHiddenObjects) {
  // The hidden tests' objects in the framework build, which the grading links into the hidden
  // programs. A submission looks for them, and for any readable file holding the hidden tests'
  // code, in two ways. The student user never reads one: the grader links the hidden programs
  // itself, after the student build, and leaves them executable but not readable.
  const fs::path framework_build = fs::path(grade_).parent_path().parent_path();
  const fs::path objects = framework_build / "grading/hidden/CMakeFiles/hidden_kernels_objs.dir";
  const fs::path hidden_object = objects / "test_hidden_kernels.cpp.o";
  ASSERT_TRUE(fs::exists(hidden_object)) << hidden_object;
  // A name only the hidden tests' source holds (a test case of theirs), written backwards in the
  // submission so that its own objects do not hold it.
  const std::string needle = "GqaLayerWithEightQueryHeads";
  ASSERT_NE(handout::read_file(source_ / "grading/hidden/test_hidden_kernels.cpp").find(needle), std::string::npos);
  const std::string backwards(needle.rbegin(), needle.rend());
  const fs::path hidden_rubric = work_ / "cheat-hidden-objects-rubric.json";
  std::ofstream(hidden_rubric) << R"({"milestones": [{"milestone": 1, "tests": [
      {"name": "hidden embedding", "binary": "hidden_kernels", "filter": "HiddenEmbedding.*", "points": 1,
       "visibility": "after_due_date"}]}]})";
  const std::vector<std::string> hidden = {"--hidden", "--hidden-rubric", hidden_rubric.string(), "--seed", "4242"};

  // At run time: a correct embedding kernel whose static initialiser, in every program that links
  // it (the hidden tests' included), opens the hidden objects and its own program, and reads every
  // file of the build folder it runs from and of the framework build's hidden tests and programs,
  // looking for the hidden tests' names. It finds nothing, and the grading scores the work: the
  // embedding items, public and hidden, and not the matmul stub.
  const std::string found = marker("hidden-objects");
  fs::remove(found);
  const fs::path sub = cheating_submission("cheat-hidden-objects", "");
  fs::copy_file(source_ / "kernels/embedding.cu", sub / "kernels/embedding.cu", fs::copy_options::overwrite_existing);
  std::ofstream(sub / "kernels/embedding.cu", std::ios::app) << R"CHEAT(
#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
namespace {
struct LookForHiddenTests {
  LookForHiddenTests() {
    try {
      look();
    } catch (const std::exception& e) {
      std::ofstream(")CHEAT" + found + R"CHEAT(", std::ios::app) << "error: " << e.what() << "\n";
    }
  }
  static void look() {
    namespace fs = std::filesystem;
    std::string needle = ")CHEAT" + backwards + R"CHEAT(";
    std::reverse(needle.begin(), needle.end());
    std::ofstream log(")CHEAT" + found + R"CHEAT(", std::ios::app);
    const fs::path exe = fs::read_symlink("/proc/self/exe");
    log << "run of " << exe.filename().string() << "\n";
    auto holds = [&](const fs::path& path) {
      std::ifstream in(path, std::ios::binary);
      if (!in) return false;
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return text.find(needle) != std::string::npos;
    };
    for (const std::string path : {std::string(")CHEAT" + hidden_object.string() + R"CHEAT("),
                                   std::string(")CHEAT" + (objects / "seed_channel.cpp.o").string() + R"CHEAT("),
                                   std::string("/proc/self/exe")}) {
      const int fd = open(path.c_str(), O_RDONLY);
      if (fd < 0) {
        log << "denied " << path << ": " << std::strerror(errno) << "\n";
        continue;
      }
      close(fd);
      log << (holds(path) ? "FOUND in " : "opened ") << path << "\n";
    }
    size_t searched = 0;
    for (const fs::path dir : {exe.parent_path().parent_path(),
                               fs::path(")CHEAT" + (framework_build / "grading/hidden").string() + R"CHEAT("),
                               fs::path(")CHEAT" + (framework_build / "bin").string() + R"CHEAT(")}) {
      std::error_code ec;
      for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code fe;
        if (it->is_symlink(fe) || !it->is_regular_file(fe) || it->file_size(fe) > (256u << 20)) continue;
        // The framework build's programs: those of the hidden tests only (the others never held them).
        if (dir.filename() == "bin" && it->path().filename().string().find("hidden") == std::string::npos) continue;
        ++searched;
        if (holds(it->path())) log << "FOUND in " << it->path().string() << "\n";
      }
    }
    log << "searched " << searched << " files\n";
  }
} look_for_hidden_tests;
}  // namespace
)CHEAT";
  // 2 points: the embedding items, public and hidden (1 each), and not matmul (2).
  const json results = grade_cheat(sub, 2, hidden);
  EXPECT_EQ(test_named(results, "hidden embedding")["status"], "passed") << results.dump(2);
  EXPECT_EQ(test_named(results, "matmul")["status"], "failed") << results.dump(2);
  ASSERT_TRUE(fs::exists(found)) << "the cheat never ran";
  const std::string what = handout::read_file(found);
  fs::remove(found);
  EXPECT_EQ(what.find("FOUND"), std::string::npos) << what;
  EXPECT_EQ(what.find("error: "), std::string::npos) << what;
  EXPECT_EQ(what.find("opened " + hidden_object.string()), std::string::npos) << what;
  EXPECT_NE(what.find("denied " + hidden_object.string() + ": Permission denied"), std::string::npos) << what;
  // It ran in the hidden tests' program, which the student user may run and not read (its own
  // /proc/self/exe included), and searched a build folder that holds files.
  EXPECT_NE(what.find("run of hidden_kernels_sim"), std::string::npos) << what;
  EXPECT_NE(what.find("denied /proc/self/exe: Permission denied"), std::string::npos) << what;
  EXPECT_EQ(what.find("searched 0 files"), std::string::npos) << what;
  // The grading left the hidden objects and programs readable to their owner alone.
  for (const fs::path& path : {hidden_object, framework_build / "bin/hidden_kernels_sim",
                               work_ / "grade/tree/build/bin/hidden_kernels_sim"}) {
    struct stat st{};
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, geteuid()) << path;
    EXPECT_EQ(st.st_mode & 0044, 0u) << path << " is readable by others";
  }

  // At build time: the compiler, run as the student user, is asked for a hidden object by its path
  // (the small one: a readable object of megabytes would take the compiler minutes to reject). The
  // compiler stops at a file it may not read (GCC treats that as a fatal error even inside
  // __has_include), so the build fails, and the output says why and shows nothing of the object.
  const fs::path seed_object = objects / "seed_channel.cpp.o";
  const fs::path at_build = cheating_submission("cheat-hidden-objects-build", "");
  std::ofstream(at_build / "kernels/matmul.cu", std::ios::app) << "\n#include \"" << seed_object.string() << "\"\n";
  const json built = grade_cheat(at_build, 0, hidden);
  const std::string out = built["output"];
  EXPECT_NE(out.find(seed_object.filename().string() + ": Permission denied"), std::string::npos) << out;
  EXPECT_EQ(built.dump().find(needle), std::string::npos) << built.dump(2);
}

TEST_F(Cheat, FifoInSubmission) {
  // A FIFO where a student file should be, and another beside it: reading either would wait
  // forever. They are listed as ignored and the grading goes on.
  const fs::path sub = cheating_submission("cheat-fifo", "");
  fs::remove(sub / "kernels/embedding.cu");
  ASSERT_EQ(mkfifo((sub / "kernels/embedding.cu").c_str(), 0644), 0);
  ASSERT_EQ(mkfifo((sub / "notes").c_str(), 0644), 0);
  const json results = grade_cheat(sub, 0);
  const std::string out = results["output"];
  EXPECT_NE(out.find("kernels/embedding.cu (not a regular file"), std::string::npos) << out;
  EXPECT_NE(out.find("notes (not a regular file"), std::string::npos) << out;
}

TEST_F(Cheat, NamesTheCheckerAndTheReference) {
  // The reference solution, which earns full marks, with the checker switched off in every
  // thread and a declaration of the reference's embedding, the checker's name built by a macro:
  // the grader finds both names in the objects' symbols and grades nothing.
  const fs::path sub = reference_submission("cheat-names");
  std::ofstream(sub / "kernels/embedding.cu", std::ios::app) << R"CHEAT(
#define CLOCKWORK_JOIN(a, b) a##b
namespace cudasim::detail::check {
struct ThreadState;
inline thread_local ThreadState* CLOCKWORK_JOIN(tl_, checked) = nullptr;
}  // namespace cudasim::detail::check
namespace at {
class Tensor;
}  // namespace at
namespace clockwork::ref {
at::Tensor embedding(const at::Tensor& ids, const at::Tensor& table);
}  // namespace clockwork::ref
[[gnu::used]] void clockwork_quiet_checker() { cudasim::detail::check::tl_checked = nullptr; }
[[gnu::used]] static auto* const clockwork_borrowed = &clockwork::ref::embedding;
)CHEAT";
  const json results = grade_cheat(sub, 0);
  const std::string out = results["output"];
  // Defined, as the inline variable it is in the checker's own header.
  EXPECT_NE(out.find("kernels/embedding.cu defines cudasim::detail::check::tl_checked: the CPU backend's checker"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("kernels/embedding.cu refers to clockwork::ref::embedding(at::Tensor const&, at::Tensor const&)"),
            std::string::npos)
      << out;
  for (const json& t : results["tests"]) EXPECT_NE(t["output"].get<std::string>().find("Not run"), std::string::npos);
}

}  // namespace
}  // namespace clockwork::grading
