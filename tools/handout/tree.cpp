#include "tools/handout/tree.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>

#include "tools/handout/process.h"

namespace clockwork::handout {
namespace {

namespace fs = std::filesystem;

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool skipped_folder_name(const std::string& name) { return name.empty() || name[0] == '.' || starts_with(name, "build"); }

// True when `path` is `dir` or lies inside it (both absolute and normalised).
bool inside(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (d->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

std::vector<fs::path> absolute_skips(const fs::path& root, const std::vector<fs::path>& skip) {
  std::vector<fs::path> out;
  for (const fs::path& s : skip) out.push_back(fs::weakly_canonical(s.is_absolute() ? s : root / s));
  return out;
}

std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find('\0', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

bool git_listing(const fs::path& root, bool untracked, std::vector<std::string>& files) {
  if (!fs::exists(root / ".git") || find_program("git").empty()) return false;
  std::vector<std::string> argv = {"git", "-C", root.string(), "ls-files", "-z", "--cached"};
  if (untracked) {
    argv.push_back("--others");
    argv.push_back("--exclude-standard");
  }
  RunOptions o;
  o.max_output = 64 * 1024 * 1024;
  o.timeout_s = 120;
  // The output file also collects stderr: keep git's warnings out of the listing.
  o.argv = {"sh", "-c", "exec \"$@\" 2>/dev/null", "git"};
  o.argv.insert(o.argv.end(), argv.begin(), argv.end());
  const RunResult r = run_process(o);
  if (!r.succeeded() || r.output_bytes > r.output.size()) return false;
  files = split_nul(r.output);
  return true;
}

}  // namespace

const TreeFile* Tree::find(const std::string& path) const {
  auto it = std::lower_bound(files.begin(), files.end(), path,
                             [](const TreeFile& f, const std::string& p) { return f.path < p; });
  return it != files.end() && it->path == path ? &*it : nullptr;
}

std::vector<int> Tree::milestones() const {
  std::set<int> ms;
  for (const TreeFile& f : files) {
    for (const Region& r : f.regions) ms.insert(r.milestone);
  }
  return {ms.begin(), ms.end()};
}

std::vector<StudentFile> Tree::student_files() const {
  std::vector<StudentFile> out;
  for (const TreeFile& f : files) {
    if (f.regions.empty()) continue;
    std::set<int> ms;
    for (const Region& r : f.regions) ms.insert(r.milestone);
    out.push_back({f.path, {ms.begin(), ms.end()}});
  }
  return out;
}

std::vector<std::string> list_project_files(const fs::path& root_in, bool untracked, const std::vector<fs::path>& skip) {
  const fs::path root = fs::weakly_canonical(root_in);
  const std::vector<fs::path> skips = absolute_skips(root, skip);
  std::vector<std::string> listed;
  if (!git_listing(root, untracked, listed)) {
    if (fs::exists(root / ".git")) {
      // Walking takes every file, committed or not: say so rather than silently take more.
      std::cerr << "warning: git cannot list the files of " << root.string()
                << "; taking every file outside build*/ and dot-folders instead\n";
    }
    listed.clear();
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      const std::string name = it->path().filename().string();
      if (it->is_directory() && !it->is_symlink()) {
        if (skipped_folder_name(name)) it.disable_recursion_pending();
        continue;
      }
      listed.push_back(it->path().lexically_relative(root).generic_string());
    }
  }
  std::vector<std::string> files;
  for (const std::string& rel : listed) {
    const fs::path abs = root / rel;
    std::error_code ec;
    // Listed by git but deleted in the working tree, or a submodule: nothing to copy.
    if (!fs::is_regular_file(abs, ec)) continue;
    if (std::any_of(skips.begin(), skips.end(), [&](const fs::path& s) { return inside(abs, s); })) continue;
    files.push_back(rel);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

bool is_known_good(const std::string& path) { return starts_with(path, "harness/known_good/"); }

bool is_instructor_only(const std::string& path, std::string_view content) {
  if (starts_with(path, "grading/hidden/")) return true;
  // Host versions of every student step: worked answers of the exercises, for the grader only.
  if (is_known_good(path)) return true;
  const std::string wrapped = "/" + path;
  if (wrapped.find("/answer-keys/") != std::string::npos) return true;
  const std::string name = path.substr(path.find_last_of('/') + 1);
  if (starts_with(path, "grading/") && path.find('/', 8) == std::string::npos && starts_with(name, "rubric-hidden") &&
      name.size() >= 5 && name.substr(name.size() - 5) == ".json") {
    return true;
  }
  return has_instructor_only_line(content);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read " + path.string());
  return s;
}

void write_file_atomically(const fs::path& path, const std::string& content) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

Tree generate_tree(const TreeOptions& options) {
  Tree tree;
  const fs::path root = fs::weakly_canonical(options.source);
  if (!fs::is_directory(root)) throw std::runtime_error("not a folder: " + options.source.string());
  for (const std::string& rel : list_project_files(root, options.untracked, options.skip)) {
    const fs::path abs = root / rel;
    TreeFile f;
    f.path = rel;
    f.content = read_file(abs);
    if (!options.instructor && !(options.known_good && is_known_good(rel)) &&
        is_instructor_only(rel, f.content)) {
      tree.left_out.push_back(rel);
      continue;
    }
    const fs::perms perms = fs::status(abs).permissions();
    f.executable = (perms & fs::perms::owner_exec) != fs::perms::none;
    // Binary files (a NUL byte) are copied as they are.
    if (f.content.find('\0') == std::string::npos) {
      StripResult r = strip_solutions(f.content, rel, options.stub_from, comment_leader_for(rel));
      if (!r.ok()) {
        tree.errors.insert(tree.errors.end(), r.errors.begin(), r.errors.end());
        continue;
      }
      f.stubbed = r.stubbed();
      f.regions = std::move(r.regions);
      f.content = std::move(r.text);
    }
    tree.files.push_back(std::move(f));
  }
  return tree;
}

namespace {

void write_one(const TreeFile& f, const fs::path& dest) {
  const fs::path path = dest / f.path;
  fs::create_directories(path.parent_path());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(f.content.data(), static_cast<std::streamsize>(f.content.size()));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path.string());
  }
  fs::perms p = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read;
  if (f.executable) p |= fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  fs::permissions(path, p);
}

}  // namespace

void write_tree(const Tree& tree, const fs::path& out_in) {
  const fs::path out = fs::weakly_canonical(out_in);
  const fs::path tmp = out.string() + ".tmp";
  const fs::path old = out.string() + ".old";
  fs::remove_all(tmp);
  fs::remove_all(old);
  fs::create_directories(tmp);
  for (const TreeFile& f : tree.files) write_one(f, tmp);
  if (fs::exists(out)) fs::rename(out, old);
  fs::rename(tmp, out);
  fs::remove_all(old);
}

size_t sync_tree(const Tree& tree, const fs::path& dest) {
  size_t changes = 0;
  fs::create_directories(dest);
  std::set<std::string> wanted;
  for (const TreeFile& f : tree.files) {
    wanted.insert(f.path);
    const fs::path path = dest / f.path;
    std::error_code ec;
    if (fs::is_regular_file(path, ec) && !fs::is_symlink(path, ec)) {
      const bool exec = (fs::status(path).permissions() & fs::perms::owner_exec) != fs::perms::none;
      if (exec == f.executable && read_file(path) == f.content) continue;
    } else if (fs::exists(fs::symlink_status(path))) {
      fs::remove_all(path);
    }
    write_one(f, dest);
    ++changes;
  }
  // Remove what the tree no longer has, bottom-up so that emptied folders can go too.
  std::vector<fs::path> stale_dirs;
  for (auto it = fs::recursive_directory_iterator(dest); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = it->path().lexically_relative(dest);
    if (it.depth() == 0 && it->is_directory() && skipped_folder_name(rel.string())) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory() && !it->is_symlink()) {
      stale_dirs.push_back(it->path());
      continue;
    }
    if (wanted.count(rel.generic_string()) == 0) {
      fs::remove(it->path());
      ++changes;
    }
  }
  std::sort(stale_dirs.rbegin(), stale_dirs.rend());
  for (const fs::path& d : stale_dirs) {
    std::error_code ec;
    if (fs::is_empty(d, ec)) fs::remove(d, ec);
  }
  return changes;
}

}  // namespace clockwork::handout
