// Writing logits as a NumPy .npy file (format version 1.0), so that another implementation's
// logits can be compared with numpy.load() and no extra library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace clockwork::cli {

/// The .npy v1.0 header of a C-order little-endian float32 array of shape [rows, cols]: the
/// magic "\x93NUMPY", version 1.0, the header length (uint16, little-endian) and the header
/// dictionary, padded with spaces and a final newline so the data starts at a multiple of 64.
std::string npy_header_f32(uint64_t rows, uint64_t cols);

/// Writes `rows` (each of `cols` values) as a float32 .npy array of shape [rows.size(), cols].
/// The file appears complete or not at all: the bytes go to a temporary file next to `path`,
/// which is renamed onto it once written and flushed. Throws std::runtime_error naming the
/// file, or std::invalid_argument when a row does not have `cols` values.
void write_npy_f32(const std::filesystem::path& path, const std::vector<std::vector<float>>& rows,
                   uint64_t cols);

/// Checks before a long run that `path` can be written later: its directory exists and it is
/// not a directory itself. Throws UsageError naming `option` (e.g. "--dump-logits").
void check_writable_file(const std::filesystem::path& path, const std::string& option);

}  // namespace clockwork::cli
