// .npy output (npy.h).
#include "tools/clockwork/npy.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "tools/clockwork/cli.h"

namespace clockwork::cli {

namespace fs = std::filesystem;

namespace {

// numpy aligns the data of every array it writes to this many bytes.
constexpr size_t kAlign = 64;
constexpr size_t kPrefix = 10;  // magic (6), version (2), header length (2)

void write_all(int fd, const char* data, size_t n, const fs::path& temp) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(temp.string() + ": write failed: " + std::strerror(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

std::string npy_header_f32(uint64_t rows, uint64_t cols) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                     std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  const size_t unpadded = kPrefix + dict.size() + 1;  // + the newline
  dict.append((kAlign - unpadded % kAlign) % kAlign, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  return out + dict;
}

void write_npy_f32(const fs::path& path, const std::vector<std::vector<float>>& rows,
                   uint64_t cols) {
  static_assert(std::endian::native == std::endian::little,
                "the .npy writer stores '<f4' values as they lie in memory");
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != cols) {
      throw std::invalid_argument("write_npy_f32: row " + std::to_string(r) + " has " +
                                  std::to_string(rows[r].size()) + " values, expected " +
                                  std::to_string(cols));
    }
  }
  // The temporary file sits in the same directory, so the rename cannot cross file systems.
  std::string temp_name = path.string() + ".tmp-XXXXXX";
  const int fd = ::mkstemp(temp_name.data());
  if (fd < 0) {
    throw std::runtime_error("cannot create a file next to " + path.string() + ": " +
                             std::strerror(errno));
  }
  const fs::path temp = temp_name;
  bool open = true;
  try {
    // mkstemp makes the file private (0600); give it the usual permissions of a new file.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    const std::string header = npy_header_f32(rows.size(), cols);
    write_all(fd, header.data(), header.size(), temp);
    for (const std::vector<float>& row : rows) {
      write_all(fd, reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float), temp);
    }
    if (::fsync(fd) != 0) {
      throw std::runtime_error(temp.string() + ": flush failed: " + std::strerror(errno));
    }
    open = false;
    if (::close(fd) != 0) {
      throw std::runtime_error(temp.string() + ": close failed: " + std::strerror(errno));
    }
  } catch (...) {
    if (open) ::close(fd);
    std::error_code ec;
    fs::remove(temp, ec);
    throw;
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw std::runtime_error("cannot rename " + temp.string() + " to " + path.string() + ": " +
                             ec.message());
  }
}

void check_writable_file(const fs::path& path, const std::string& option) {
  if (path.empty()) throw UsageError(option + " needs a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw UsageError(option + " " + path.string() + " is a directory, expected a file name");
  }
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) {
    throw UsageError(option + " " + path.string() + ": the directory " + parent.string() +
                     " does not exist");
  }
}

}  // namespace clockwork::cli
