/// @file temp_dir.h
/// TempDir: a fresh directory for one test, removed with everything in it afterwards.
#pragma once

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace clockwork {

/// Removes `path` and everything under it, quietly (what is left is left). Used instead of
/// std::filesystem::remove_all in every program that may load libtorch: PyTorch's own libtorch
/// (its Python wheel, as on GPU machines) exports a copy of remove_all that the dynamic linker can
/// bind in place of libstdc++'s, and that copy crashed, a call through a null pointer, in test
/// programs that also use the CUDA runtime.
inline void remove_tree(const std::filesystem::path& path) noexcept {
  ::nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p), 0; },
      16, FTW_DEPTH | FTW_PHYS);
}

/// A private directory under the system's temporary directory (mkdtemp), deleted recursively by
/// the destructor, so a test that fails half-way leaves nothing behind.
class TempDir {
 public:
  /// `prefix` starts the directory's name, to tell which test made it.
  explicit TempDir(const std::string& prefix = "clockwork") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() { remove_tree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory.
  const std::filesystem::path& path() const { return path_; }
  /// A path inside the directory.
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace clockwork
