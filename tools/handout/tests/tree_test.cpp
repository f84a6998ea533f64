// Handout trees: which files are taken, what instructors keep to themselves, the command line
// tool's output and errors, and the incremental copy the autograder builds in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tools/handout/process.h"
#include "tools/handout/tree.h"

namespace clockwork::handout {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& file, const std::string& content) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
}

// A scratch folder per test, removed afterwards.
class TreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("clockwork-handout-test-" + std::to_string(getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    src_ = dir_ / "src";
    fs::create_directories(src_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A small project: one kernel with regions of milestones 1 and 2, docs, and instructor files.
  void make_project() {
    put(src_ / "kernels/k.cu",
        "__global__ void k(float* y) {\n"
        "  // BEGIN SOLUTION(m1): Write 1.\n"
        "  y[0] = 1;\n"
        "  // STUB: (void)y;\n"
        "  // END SOLUTION\n"
        "}\n"
        "__global__ void k2(float* y) {\n"
        "  // BEGIN SOLUTION(m2): Write 2.\n"
        "  y[0] = 2;\n"
        "  // STUB: (void)y;\n"
        "  // END SOLUTION\n"
        "}\n");
    put(src_ / "README.md", "read me\n");
    put(src_ / "grading/rubric.json", "{}\n");
    put(src_ / "grading/rubric-hidden.json", "{}\n");
    put(src_ / "grading/rubric-hidden-m2.json", "{}\n");
    put(src_ / "grading/hidden/test_secret.cpp", "int secret;\n");
    put(src_ / "grading/hidden-notes.md", "not in the hidden folder: shipped\n");
    put(src_ / "milestones/milestone1/answer-keys/q1.md", "42\n");
    put(src_ / "milestones/milestone1/notes.cpp",
        "/// @file notes.cpp\n"
        "// INSTRUCTOR-ONLY: grading notes\n"
        "int notes;\n");
    put(src_ / "tools/run.sh", "#!/bin/sh\necho hi\n");
    fs::permissions(src_ / "tools/run.sh", fs::perms::owner_all);
    put(src_ / "build/junk.cpp", "junk\n");
    put(src_ / "build-debug/junk.cpp", "junk\n");
    put(src_ / ".cache/junk", "junk\n");
  }

  RunResult handout(std::vector<std::string> args) {
    RunOptions o;
    o.argv = {CLOCKWORK_HANDOUT_EXE};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout_s = 60;
    return run_process(o);
  }

  fs::path dir_, src_;
};

TEST_F(TreeTest, ListsFilesAndLeavesOutInstructorMaterial) {
  make_project();
  EXPECT_TRUE(is_instructor_only("grading/hidden/x.cpp", ""));
  EXPECT_TRUE(is_instructor_only("harness/known_good/matmul.cpp", ""));
  EXPECT_TRUE(is_instructor_only("a/answer-keys/b/c.txt", ""));
  EXPECT_TRUE(is_instructor_only("answer-keys/c.txt", ""));
  EXPECT_TRUE(is_instructor_only("grading/rubric-hidden.json", ""));
  EXPECT_FALSE(is_instructor_only("grading/rubric.json", ""));
  EXPECT_FALSE(is_instructor_only("grading/hidden-notes.md", ""));
  EXPECT_FALSE(is_instructor_only("kernels/answer-keys.cu", ""));

  TreeOptions o;
  o.source = src_;
  o.stub_from = 2;
  const Tree tree = generate_tree(o);
  ASSERT_TRUE(tree.errors.empty());
  std::vector<std::string> paths;
  for (const TreeFile& f : tree.files) paths.push_back(f.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"README.md", "grading/hidden-notes.md", "grading/rubric.json",
                                             "kernels/k.cu", "tools/run.sh"}));
  EXPECT_EQ(tree.left_out,
            (std::vector<std::string>{"grading/hidden/test_secret.cpp", "grading/rubric-hidden-m2.json",
                                      "grading/rubric-hidden.json", "milestones/milestone1/answer-keys/q1.md",
                                      "milestones/milestone1/notes.cpp"}));
  EXPECT_EQ(tree.milestones(), (std::vector<int>{1, 2}));
  const TreeFile* k = tree.find("kernels/k.cu");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->stubbed);
  EXPECT_NE(k->content.find("y[0] = 1;"), std::string::npos);
  EXPECT_NE(k->content.find("// TODO(m2): Write 2."), std::string::npos);
  EXPECT_TRUE(tree.find("tools/run.sh")->executable);

  o.instructor = true;
  const Tree full = generate_tree(o);
  EXPECT_TRUE(full.left_out.empty());
  EXPECT_NE(full.find("grading/hidden/test_secret.cpp"), nullptr);
}

TEST_F(TreeTest, CommandLineWritesTheTree) {
  make_project();
  const fs::path out = dir_ / "m2";
  const RunResult r = handout({"--milestone", "2", "--source", src_.string(), "--out", out.string()});
  ASSERT_TRUE(r.succeeded()) << r.describe() << "\n" << r.output;
  const std::string k = read_file(out / "kernels/k.cu");
  EXPECT_EQ(k,
            "__global__ void k(float* y) {\n"
            "  y[0] = 1;\n"
            "}\n"
            "__global__ void k2(float* y) {\n"
            "  // TODO(m2): Write 2.\n"
            "  (void)y;\n"
            "}\n");
  EXPECT_FALSE(fs::exists(out / "grading/hidden"));
  EXPECT_FALSE(fs::exists(out / "grading/rubric-hidden.json"));
  EXPECT_FALSE(fs::exists(out / "milestones/milestone1/answer-keys"));
  EXPECT_FALSE(fs::exists(out / "milestones/milestone1/notes.cpp"));
  EXPECT_FALSE(fs::exists(out / "build"));
  EXPECT_FALSE(fs::exists(out / ".cache"));
  EXPECT_TRUE(fs::exists(out / "grading/rubric.json"));
  EXPECT_NE(fs::status(out / "tools/run.sh").permissions() & fs::perms::owner_exec, fs::perms::none);
  EXPECT_FALSE(fs::exists(dir_ / "m2.tmp"));

  // Replacing an existing tree needs --force.
  const RunResult again = handout({"--milestone", "1", "--source", src_.string(), "--out", out.string()});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  const RunResult forced =
      handout({"--milestone", "1", "--source", src_.string(), "--out", out.string(), "--force"});
  ASSERT_TRUE(forced.succeeded()) << forced.output;
  EXPECT_NE(read_file(out / "kernels/k.cu").find("// TODO(m1): Write 1."), std::string::npos);
}

TEST_F(TreeTest, SolutionsThroughAnEarlierMilestone) {
  make_project();
  const fs::path out = dir_ / "m2-own";
  // Milestone 2's handout for students who continue with their own milestone 1.
  const RunResult r = handout({"--milestone", "2", "--solutions-through", "0", "--source", src_.string(), "--out",
                               out.string()});
  ASSERT_TRUE(r.succeeded()) << r.output;
  const std::string k = read_file(out / "kernels/k.cu");
  EXPECT_NE(k.find("// TODO(m1): Write 1."), std::string::npos);
  EXPECT_NE(k.find("// TODO(m2): Write 2."), std::string::npos);
  EXPECT_EQ(handout({"--milestone", "2", "--solutions-through", "2", "--source", src_.string(), "--out",
                     (dir_ / "x").string()})
                .exit_code,
            2);
}

TEST_F(TreeTest, MarkerErrorsWriteNothing) {
  make_project();
  put(src_ / "kernels/bad.cu",
      "int a;\n"
      "// BEGIN SOLUTION(m1): t\n"
      "a = 1;\n");
  put(src_ / "milestones/m.cpp",
      "int b;\n"
      "// END SOLUTION\n");
  const fs::path out = dir_ / "m1";
  const RunResult r = handout({"--milestone", "1", "--source", src_.string(), "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("kernels/bad.cu:2: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("milestones/m.cpp:2: error: END SOLUTION without"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing was written"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(dir_ / "m1.tmp"));
}

TEST_F(TreeTest, GitCheckoutTakesTrackedFiles) {
  if (find_program("git").empty()) GTEST_SKIP() << "git is not installed";
  make_project();
  put(src_ / ".gitignore", "/ignored.txt\n/build*/\n/.cache/\n");
  put(src_ / "ignored.txt", "x\n");
  put(src_ / "untracked.cpp", "int u;\n");
  RunOptions git;
  git.cwd = src_;
  git.timeout_s = 60;
  git.argv = {"git", "init", "-q"};
  ASSERT_TRUE(run_process(git).succeeded());
  git.argv = {"git", "add", ".gitignore", "README.md", "kernels/k.cu", "grading/hidden/test_secret.cpp"};
  ASSERT_TRUE(run_process(git).succeeded());
  EXPECT_EQ(list_project_files(src_, false),
            (std::vector<std::string>{".gitignore", "README.md", "grading/hidden/test_secret.cpp", "kernels/k.cu"}));
  const std::vector<std::string> with_untracked = list_project_files(src_, true);
  EXPECT_NE(std::find(with_untracked.begin(), with_untracked.end(), "untracked.cpp"), with_untracked.end());
  EXPECT_EQ(std::find(with_untracked.begin(), with_untracked.end(), "ignored.txt"), with_untracked.end());
}

TEST_F(TreeTest, SyncWritesOnlyWhatChanged) {
  make_project();
  TreeOptions o;
  o.source = src_;
  o.stub_from = 1;
  const fs::path dest = dir_ / "work";
  const Tree m1 = generate_tree(o);
  EXPECT_EQ(sync_tree(m1, dest), m1.files.size());
  put(dest / "build/CMakeCache.txt", "keep me\n");
  put(dest / "stale/old.cpp", "gone\n");
  const auto readme_time = fs::last_write_time(dest / "README.md");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));

  o.stub_from = 2;
  const Tree m2 = generate_tree(o);
  EXPECT_EQ(sync_tree(m2, dest), 2u);  // k.cu rewritten, stale/old.cpp removed
  EXPECT_EQ(fs::last_write_time(dest / "README.md"), readme_time);
  EXPECT_FALSE(fs::exists(dest / "stale"));
  EXPECT_TRUE(fs::exists(dest / "build/CMakeCache.txt"));
  EXPECT_EQ(read_file(dest / "kernels/k.cu"), m2.find("kernels/k.cu")->content);
  EXPECT_EQ(sync_tree(m2, dest), 0u);
}

}  // namespace
}  // namespace clockwork::handout
