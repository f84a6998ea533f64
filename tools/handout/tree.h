/// @file tree.h
/// Generating a handout tree from the solution tree: which files belong to the project, which are
/// for instructors only, and writing the result so that a failure never leaves half a tree.
#pragma once

#include <climits>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/handout/markers.h"

namespace clockwork::handout {

struct TreeOptions {
  std::filesystem::path source;  ///< the solution tree
  /// Regions of this milestone and later are replaced by their stubs; INT_MAX keeps them all.
  int stub_from = INT_MAX;
  /// Keep instructor-only material (the autograder's copy, which runs the hidden tests).
  bool instructor = false;
  /// Keep the framework's known-good steps (harness/known_good/, instructor-only) even without
  /// the rest: every grading links them into its isolated test programs.
  bool known_good = false;
  /// With a git checkout, also take the files git neither tracks nor ignores (work not yet
  /// committed). Without git every file is taken anyway.
  bool untracked = false;
  /// Folders (absolute, or relative to `source`) never taken, e.g. the output itself.
  std::vector<std::filesystem::path> skip;
};

/// One file of a generated tree.
struct TreeFile {
  std::string path;     ///< relative, with '/' separators
  std::string content;  ///< what the handout holds
  bool executable = false;
  bool stubbed = false;  ///< at least one solution region was replaced
  std::vector<Region> regions;  ///< the solution regions the source file had
};

/// A student file: a file with solution regions. These are the only files a student edits and
/// the only files a submission may replace; nothing else decides it.
struct StudentFile {
  std::string path;             ///< relative, with '/' separators
  std::vector<int> milestones;  ///< the milestones of its regions, ascending, each once
};

struct Tree {
  std::vector<TreeFile> files;            ///< sorted by path
  std::vector<std::string> left_out;      ///< instructor-only files that were not taken
  std::vector<MarkerError> errors;        ///< malformed markers, in every file

  const TreeFile* find(const std::string& path) const;
  /// The milestones that have at least one solution region, ascending.
  std::vector<int> milestones() const;
  /// The files with at least one solution region (whether kept or stubbed), sorted by path.
  std::vector<StudentFile> student_files() const;
};

/// The project's files, relative to `root`: `git ls-files` when `root` is a git checkout (plus
/// untracked, non-ignored files when `untracked`), else every file under `root` except folders
/// named build* or starting with a dot. Folders in `skip` are never listed.
std::vector<std::string> list_project_files(const std::filesystem::path& root, bool untracked,
                                            const std::vector<std::filesystem::path>& skip = {});

/// True for material that never goes into a handout: the hidden tests (grading/hidden/), answer
/// keys (any folder named answer-keys/), the hidden rubrics (grading/rubric-hidden*.json), and
/// files with an INSTRUCTOR-ONLY line near the top.
bool is_instructor_only(const std::string& path, std::string_view content);

/// True for the known-good steps (harness/known_good/): instructor-only, but needed by every
/// grading, public or hidden.
bool is_known_good(const std::string& path);

/// Reads and processes every file. Marker errors are collected in Tree::errors (the tree must then
/// not be written); I/O problems throw std::runtime_error.
Tree generate_tree(const TreeOptions& options);

/// Writes `tree` to `out` through `out`.tmp and a rename, replacing what `out` held: either the
/// whole new tree is there afterwards or the old one is untouched. Throws std::runtime_error.
void write_tree(const Tree& tree, const std::filesystem::path& out);

/// Makes `dest` hold exactly `tree`, writing only files whose content differs (so that the
/// timestamps of the others, and an incremental build of `dest`, survive) and removing files
/// that are not in `tree`. Folders named build* or starting with a dot at the top of `dest` are
/// left alone. Returns the number of files written or removed.
size_t sync_tree(const Tree& tree, const std::filesystem::path& dest);

/// The whole content of a file. Throws std::runtime_error.
std::string read_file(const std::filesystem::path& path);

/// Writes a file through a temporary name and a rename. Throws std::runtime_error.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

}  // namespace clockwork::handout
