// clockwork-handout: writes the student tree of one milestone from the solution tree.
//
//   clockwork-handout --milestone N --out DIR [--solutions-through M] [--source ROOT] [--untracked]
//                     [--instructor] [--update]
//   clockwork-handout --list-student-files [--source ROOT] [--untracked]
//
// Regions of milestone N and later (later than M with --solutions-through) become their TODO and
// stub; earlier ones keep their solution. Instructor-only material is left out, unless
// --instructor keeps it: the autograder builds its framework from such a tree (every region
// stubbed, hidden tests in), so that no solution is compiled where a submission can reach it.
// --update writes only the files that changed, so that a build of DIR stays up to date. Malformed
// markers are reported as file:line: error: ... and nothing is written. --list-student-files
// prints the student files (those with solution regions) and the milestones of their regions.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "tools/handout/tree.h"

namespace {

namespace fs = std::filesystem;

int usage(const char* why) {
  if (why) std::cerr << "clockwork-handout: " << why << "\n";
  std::cerr << "usage: clockwork-handout --milestone N --out DIR [--solutions-through M] [--source ROOT]\n"
               "                         [--untracked] [--instructor] [--force | --update] [--quiet]\n"
               "       clockwork-handout --list-student-files [--source ROOT] [--untracked]\n"
               "  --milestone N          the milestone the students start: its regions and later ones are stubbed\n"
               "  --solutions-through M  keep only the solutions of milestones <= M (M < N); default N-1\n"
               "  --source ROOT          the solution tree (default: the current folder)\n"
               "  --untracked            in a git checkout, also take files git neither tracks nor ignores\n"
               "  --instructor           keep the instructor-only material (hidden tests, hidden rubric): the\n"
               "                         tree an autograder builds its framework from, never a handout\n"
               "  --force                replace DIR when it exists and is not empty\n"
               "  --update               make DIR hold the tree by writing only the files that differ and\n"
               "                         removing the others; folders named build* at its top are kept\n"
               "  --list-student-files   print the files with solution regions (the only files a submission\n"
               "                         may replace) and the milestones of their regions, then exit\n";
  return 2;
}

bool parse_int(const std::string& s, int& out) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < 0 || v > 100000) return false;
  out = static_cast<int>(v);
  return true;
}

int list_student_files(const fs::path& source, bool untracked) {
  try {
    clockwork::handout::TreeOptions o;
    o.source = source;
    o.untracked = untracked;
    o.instructor = true;
    const clockwork::handout::Tree tree = clockwork::handout::generate_tree(o);
    if (!tree.errors.empty()) {
      for (const auto& e : tree.errors) std::cerr << e.str() << "\n";
      return 1;
    }
    for (const auto& f : tree.student_files()) {
      std::cout << f.path;
      for (int m : f.milestones) std::cout << " m" << m;
      std::cout << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "clockwork-handout: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int milestone = -1, through = -1;
  fs::path out, source = ".";
  bool untracked = false, quiet = false, force = false, list = false, instructor = false, update = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) return {};
      return argv[++i];
    };
    if (a == "--milestone") {
      if (!parse_int(value(), milestone) || milestone < 1) return usage("--milestone needs a number >= 1");
    } else if (a == "--solutions-through") {
      if (!parse_int(value(), through)) return usage("--solutions-through needs a number >= 0");
    } else if (a == "--out") {
      out = value();
      if (out.empty()) return usage("--out needs a folder");
    } else if (a == "--source") {
      source = value();
      if (source.empty()) return usage("--source needs a folder");
    } else if (a == "--untracked") {
      untracked = true;
    } else if (a == "--list-student-files") {
      list = true;
    } else if (a == "--force") {
      force = true;
    } else if (a == "--instructor") {
      instructor = true;
    } else if (a == "--update") {
      update = true;
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--help" || a == "-h") {
      usage(nullptr);
      return 0;
    } else {
      return usage(("unknown argument: " + a).c_str());
    }
  }
  if (list) return list_student_files(source, untracked);
  if (milestone < 0) return usage("--milestone is required");
  if (out.empty()) return usage("--out is required");
  if (through >= milestone) return usage("--solutions-through must be smaller than --milestone");

  try {
    clockwork::handout::TreeOptions o;
    o.source = source;
    o.stub_from = through >= 0 ? through + 1 : milestone;
    o.untracked = untracked;
    o.instructor = instructor;
    const fs::path out_abs = fs::weakly_canonical(fs::absolute(out));
    const fs::path source_abs = fs::weakly_canonical(fs::absolute(source));
    // DIR is replaced as a whole: refuse anything that would take the source with it, and ask
    // before replacing a folder that holds something.
    const std::string src_s = source_abs.string() + "/", out_s = out_abs.string() + "/";
    if (src_s.rfind(out_s, 0) == 0) {
      std::cerr << "clockwork-handout: --out must not be the source tree or a folder containing it\n";
      return 2;
    }
    if (fs::exists(out_abs) && !(fs::is_directory(out_abs) && fs::is_empty(out_abs)) && !force && !update) {
      std::cerr << "clockwork-handout: " << out.string() << " exists and is not empty; pass --force to replace it\n";
      return 2;
    }
    o.skip = {out_abs, out_abs.string() + ".tmp", out_abs.string() + ".old"};
    const clockwork::handout::Tree tree = clockwork::handout::generate_tree(o);
    if (!tree.errors.empty()) {
      for (const auto& e : tree.errors) std::cerr << e.str() << "\n";
      std::cerr << "clockwork-handout: " << tree.errors.size() << " marker error(s); nothing was written\n";
      return 1;
    }
    if (update) {
      clockwork::handout::sync_tree(tree, out_abs);
    } else {
      clockwork::handout::write_tree(tree, out_abs);
    }
    if (!quiet) {
      size_t stubbed = 0;
      for (const auto& f : tree.files) stubbed += f.stubbed ? 1 : 0;
      std::cout << "milestone " << milestone << " handout: " << tree.files.size() << " files in " << out.string()
                << ", " << stubbed << " with regions replaced by stubs (milestones >= " << o.stub_from << "), "
                << (instructor ? "instructor-only files kept" : std::to_string(tree.left_out.size()) +
                                                                     " instructor-only files left out")
                << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "clockwork-handout: " << e.what() << "\n";
    return 1;
  }
}
