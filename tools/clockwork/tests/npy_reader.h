// Reading a .npy file back in the tests of `--dump-logits`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace clockwork::cli_test {

// A .npy file read back by the rules of the format (NumPy's format.py, version 1.0), written
// here rather than shared with the program so that the writer is checked against the format and
// not against itself.
struct Npy {
  std::string problem;  // empty when the file is a valid float32 C-order 2-D array
  std::vector<uint64_t> shape;
  std::vector<float> values;
};

inline Npy read_npy(const std::filesystem::path& path) {
  Npy n;
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      n.problem = "cannot open " + path.string();
      return n;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    n.problem = "no \\x93NUMPY magic";
    return n;
  }
  if (bytes[6] != 1 || bytes[7] != 0) {
    n.problem = "version " + std::to_string(bytes[6]) + "." + std::to_string(bytes[7]) +
                ", expected 1.0";
    return n;
  }
  const size_t len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  const size_t data_start = 10 + len;
  if (bytes.size() < data_start) {
    n.problem = "the header runs past the end of the file";
    return n;
  }
  if (data_start % 64 != 0) {
    n.problem = "the data starts at byte " + std::to_string(data_start) +
                ", not a multiple of 64 as numpy writes it";
    return n;
  }
  const std::string header = bytes.substr(10, len);
  if (header.back() != '\n') {
    n.problem = "the header does not end with a newline";
    return n;
  }
  // The dictionary's keys in numpy's order; anything after the closing brace is padding.
  const std::string want_prefix = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  if (header.rfind(want_prefix, 0) != 0) {
    n.problem = "header is not a little-endian float32 C-order array: " + header;
    return n;
  }
  const size_t close = header.find(')', want_prefix.size());
  std::string dims = header.substr(want_prefix.size(), close - want_prefix.size());
  const std::string rest = header.substr(close + 1);
  if (rest.find_first_not_of(" ,}\n") != std::string::npos || rest.find('}') == std::string::npos) {
    n.problem = "unexpected text after the shape: " + rest;
    return n;
  }
  std::replace(dims.begin(), dims.end(), ',', ' ');
  std::istringstream in(dims);
  uint64_t dim;
  while (in >> dim) n.shape.push_back(dim);
  if (n.shape.size() != 2) {
    n.problem = "shape (" + dims + ") is not 2-D";
    return n;
  }
  const uint64_t count = n.shape[0] * n.shape[1];
  if (bytes.size() - data_start != count * sizeof(float)) {
    n.problem = "the file holds " + std::to_string(bytes.size() - data_start) +
                " bytes of data, the shape needs " + std::to_string(count * sizeof(float));
    return n;
  }
  n.values.resize(count);
  std::memcpy(n.values.data(), bytes.data() + data_start, count * sizeof(float));
  return n;
}

}  // namespace clockwork::cli_test
