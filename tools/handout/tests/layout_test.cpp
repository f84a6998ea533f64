// The project's layout rules, checked on the solution tree itself:
//   - a milestone folder holds student files (files with solution regions) and their tests only;
//   - student files are kernels/*.cu and the C++ files directly in milestones/milestoneN/;
//   - the framework (harness/, reference/, kernels/) never includes a milestone, and no milestone
//     file includes tools/;
//   - the README and each milestone's handout list exactly the student files they concern.
// The student files are derived from the markers (handout::Tree::student_files) and nothing else,
// so these tests keep the documents and the layout in step with the code.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "tools/handout/tree.h"

namespace clockwork::handout {
namespace {

namespace fs = std::filesystem;

class Layout : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TreeOptions o;
    o.source = CLOCKWORK_SOURCE_DIR;
    o.untracked = true;
    o.instructor = true;
    tree_ = new Tree(generate_tree(o));
  }
  static void TearDownTestSuite() {
    delete tree_;
    tree_ = nullptr;
  }
  static std::set<std::string> student_paths() {
    std::set<std::string> s;
    for (const StudentFile& f : tree_->student_files()) s.insert(f.path);
    return s;
  }
  static Tree* tree_;
};

Tree* Layout::tree_ = nullptr;

// "milestones/milestone3/decoder.cpp" -> 3; files under a tests/ folder or outside a milestone
// folder -> 0.
int milestone_folder_of(const std::string& path) {
  static const std::regex re(R"(^milestones/milestone([0-9]+)/[^/]+$)");
  std::smatch m;
  return std::regex_match(path, m, re) ? std::stoi(m[1]) : 0;
}

TEST_F(Layout, MarkersAreWellFormed) {
  for (const MarkerError& e : tree_->errors) ADD_FAILURE() << e.str();
}

TEST_F(Layout, MilestoneFoldersHoldOnlyStudentFilesAndTests) {
  const std::set<std::string> students = student_paths();
  for (const TreeFile& f : tree_->files) {
    if (f.path.rfind("milestones/", 0) != 0) continue;
    if (f.path == "milestones/CMakeLists.txt" || f.path.find("/tests/") != std::string::npos) continue;
    EXPECT_TRUE(students.count(f.path))
        << f.path << " is in a milestone folder but has no solution region: framework code belongs in "
        << "harness/ (model I/O in harness/model, pipelines in harness/pipeline), declarations students "
        << "implement in kernels/";
  }
}

TEST_F(Layout, StudentFilesAreKernelsAndMilestoneSources) {
  const std::set<std::string> students = student_paths();
  EXPECT_FALSE(students.empty());
  static const std::regex kernel(R"(^kernels/[^/]+\.cu$)");
  for (const std::string& p : students) {
    EXPECT_TRUE(std::regex_match(p, kernel) || milestone_folder_of(p) != 0)
        << p << " has solution regions but is neither kernels/*.cu nor a file of milestones/milestoneN/";
  }
}

TEST_F(Layout, ArrowsPointDown) {
  static const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  for (const TreeFile& f : tree_->files) {
    const bool framework = f.path.rfind("harness/", 0) == 0 || f.path.rfind("reference/", 0) == 0 ||
                           f.path.rfind("kernels/", 0) == 0;
    const bool milestone = f.path.rfind("milestones/", 0) == 0;
    if (!framework && !milestone) continue;
    size_t line_no = 0, begin = 0;
    while (begin < f.content.size()) {
      size_t end = f.content.find('\n', begin);
      if (end == std::string::npos) end = f.content.size();
      const std::string line = f.content.substr(begin, end - begin);
      begin = end + 1;
      ++line_no;
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string target = m[1];
      if (framework) {
        EXPECT_NE(target.rfind("milestones/", 0), 0u)
            << f.path << ":" << line_no << " includes " << target << ": the framework must not depend on "
            << "student code (declare what students implement in kernels/kernels.h or kernels/steps.h)";
      }
      EXPECT_NE(target.rfind("tools/", 0), 0u)
          << f.path << ":" << line_no << " includes " << target << ": tools sit above the framework and "
          << "the milestones";
    }
  }
}

// The paths written in `doc` (as `path` in backticks) that look like student files.
std::set<std::string> listed_in(const std::string& doc) {
  static const std::regex mention(R"(`((kernels/[^`/]+\.cu)|(milestones/milestone[0-9]+/[^`/]+\.cpp))`)");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), mention); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

TEST_F(Layout, ReadmeListsEveryStudentFile) {
  const TreeFile* readme = tree_->find("README.md");
  ASSERT_NE(readme, nullptr);
  const std::set<std::string> students = student_paths(), listed = listed_in(readme->content);
  for (const std::string& p : students) {
    EXPECT_TRUE(listed.count(p)) << "README.md does not list the student file `" << p << "`";
  }
  for (const std::string& p : listed) {
    EXPECT_TRUE(students.count(p)) << "README.md lists `" << p << "` as a student file, but it has no "
                                   << "solution region";
  }
}

TEST_F(Layout, EachHandoutListsItsStudentFiles) {
  std::map<int, std::set<std::string>> by_milestone;
  for (const StudentFile& f : tree_->student_files()) {
    for (int m : f.milestones) by_milestone[m].insert(f.path);
  }
  ASSERT_FALSE(by_milestone.empty());
  for (const auto& [m, files] : by_milestone) {
    const std::string name = "handouts/milestone" + std::to_string(m) + ".md";
    const TreeFile* doc = tree_->find(name);
    if (!doc) {
      ADD_FAILURE() << "milestone " << m << " has solution regions but no handout " << name;
      continue;
    }
    const std::set<std::string> listed = listed_in(doc->content);
    for (const std::string& p : files) {
      EXPECT_TRUE(listed.count(p)) << name << " does not list `" << p << "`, which has milestone-" << m
                                   << " solution regions";
    }
  }
}

}  // namespace
}  // namespace clockwork::handout
