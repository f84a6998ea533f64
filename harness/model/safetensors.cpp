// Safetensors reader and writer; see safetensors.h for the file layout.
#include "harness/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "harness/model/json_reader.h"

namespace clockwork {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The header length and all tensor bytes are little-endian; reading them in place needs a
// little-endian host (x86-64 and the Arm servers GPUs sit in).
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw CheckpointError(message);
}

std::string in_quotes(std::string_view s) {
  return "'" + std::string(s) + "'";
}

std::string offsets_string(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// "2 bytes x 14336 x 4096"; the product is what the data_offsets length must equal.
std::string size_formula(DType dtype, const std::vector<int64_t>& shape) {
  std::string s = std::to_string(dtype_size(dtype)) + " bytes";
  if (shape.empty()) return s + " (a scalar)";
  for (int64_t d : shape) s += " x " + std::to_string(d);
  return s;
}

// Product of the dimensions times `element_size`; false when it does not fit in 64 bits.
bool checked_nbytes(const std::vector<int64_t>& shape, uint64_t element_size, uint64_t& out) {
  uint64_t n = element_size;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  out = n;
  return true;
}

// Read-only memory map of a whole file; unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path.string() + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      fail(path.string() + ": cannot stat: " + std::strerror(err));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        fail(path.string() + ": cannot memory-map " + std::to_string(size_) +
             " bytes: " + std::strerror(err));
      }
      data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// ------------------------------------------------------------------------------------------------
// Header validation
// ------------------------------------------------------------------------------------------------

struct ParsedFile {
  CheckpointFile info;
  std::vector<TensorInfo> tensors;
};

// Validates one file's header and returns its tensors, pointing into `file`.
ParsedFile parse_safetensors(std::span<const std::byte> file, const fs::path& path) {
  const std::string label = path.string();
  const uint64_t size = file.size();
  if (size < 8) {
    fail(label + ": file is " + std::to_string(size) +
         " bytes; a safetensors file starts with an 8-byte header length, so it needs at "
         "least 8 bytes");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, file.data(), 8);
  if (header_len > kSafetensorsHeaderLimits.max_bytes) {
    fail(label + ": header length field says " + std::to_string(header_len) +
         " bytes, more than the " + std::to_string(kSafetensorsHeaderLimits.max_bytes) +
         "-byte limit (not a safetensors file, or a corrupt length)");
  }
  if (header_len > size - 8) {
    fail(label + ": header length field says " + std::to_string(header_len) + " bytes, but only " +
         std::to_string(size - 8) + " bytes follow it (file truncated?)");
  }
  const uint64_t data_size = size - 8 - header_len;
  const std::byte* data_area = file.data() + 8 + header_len;

  std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, header_len);
  json header;
  try {
    header = parse_json(text, label, kSafetensorsHeaderLimits);
  } catch (const JsonError& e) {
    fail(e.what());
  }
  if (!header.is_object()) {
    fail(label + ": header is a JSON " + header.type_name() +
         ", expected an object mapping tensor names to {dtype, shape, data_offsets}");
  }

  ParsedFile out;
  out.info.path = path;
  out.info.file_bytes = size;
  out.info.header_bytes = header_len;

  struct Range {
    uint64_t begin, end;
    size_t index;  // into out.tensors
  };
  std::vector<Range> ranges;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        fail(label + ": __metadata__ is a JSON " + entry.type_name() +
             ", expected an object of strings");
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          fail(label + ": __metadata__ key " + in_quotes(key) + " holds a " + value.type_name() +
               ", expected a string");
        }
        out.info.metadata[key] = value.get<std::string>();
      }
      continue;
    }

    const std::string where = label + ": tensor " + in_quotes(name) + ": ";
    if (name.empty()) fail(label + ": header has a tensor with an empty name");
    if (!entry.is_object()) {
      fail(where + "header entry is a JSON " + entry.type_name() +
           ", expected an object with dtype, shape and data_offsets");
    }

    // dtype
    auto it = entry.find("dtype");
    if (it == entry.end()) fail(where + "missing 'dtype' (expected one of BF16, F16, F32)");
    if (!it->is_string())
      fail(where + "'dtype' is a JSON " + it->type_name() + ", expected a string");
    TensorInfo t;
    t.name = name;
    t.file = label;
    const std::string dtype_str = it->get<std::string>();
    if (!parse_dtype(dtype_str, t.dtype)) {
      fail(where + "dtype " + in_quotes(dtype_str) +
           " is not supported (supported: BF16, F16, F32)");
    }

    // shape
    it = entry.find("shape");
    if (it == entry.end())
      fail(where + "missing 'shape' (expected a list of non-negative integers)");
    if (!it->is_array()) {
      fail(where + "'shape' is a JSON " + it->type_name() +
           ", expected a list of non-negative integers");
    }
    for (const json& dim : *it) {
      if (!dim.is_number_integer()) {
        fail(where + "shape " + json_short_text(*it) + " has the entry " + json_short_text(dim) +
             ", expected non-negative integers");
      }
      if (dim.is_number_unsigned()) {
        uint64_t u = dim.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          fail(where + "shape " + json_short_text(*it) + " has a dimension too large for 64 bits");
        }
        t.shape.push_back(static_cast<int64_t>(u));
      } else {
        int64_t d = dim.get<int64_t>();
        if (d < 0) {
          fail(where + "shape " + json_short_text(*it) + " has the negative dimension " +
               std::to_string(d) +
               ", expected non-negative integers");
        }
        t.shape.push_back(d);
      }
    }
    uint64_t expected_bytes = 0;
    if (!checked_nbytes(t.shape, dtype_size(t.dtype), expected_bytes)) {
      fail(where + "shape " + shape_string(t.shape) + " has more bytes than fit in 64 bits");
    }

    // data_offsets
    it = entry.find("data_offsets");
    if (it == entry.end()) {
      fail(where +
           "missing 'data_offsets' (expected [begin, end], byte offsets into the data area)");
    }
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_unsigned() ||
        !(*it)[1].is_number_unsigned()) {
      fail(where + "'data_offsets' is " + json_short_text(*it) +
           ", expected [begin, end] with two non-negative integers");
    }
    const uint64_t begin = (*it)[0].get<uint64_t>();
    const uint64_t end = (*it)[1].get<uint64_t>();
    const std::string offs = "data_offsets " + offsets_string(begin, end);
    if (begin > end) fail(where + offs + " has begin > end");
    if (end - begin != expected_bytes) {
      fail(where + offs + " length " + std::to_string(end - begin) +
           " != " + size_formula(t.dtype, t.shape) + " = " + std::to_string(expected_bytes) +
           " bytes (" + t.describe() + ")");
    }
    if (end > data_size) {
      fail(where + offs + " ends beyond the data area, which has " + std::to_string(data_size) +
           " bytes (file truncated?)");
    }
    t.data = data_area + begin;
    t.nbytes = static_cast<size_t>(expected_bytes);
    ranges.push_back({begin, end, out.tensors.size()});
    out.tensors.push_back(std::move(t));
  }

  // The byte ranges must tile the data area exactly: sorted by begin, each one starts where the
  // previous one ended, and the last one ends at the end of the file. This rules out overlaps
  // (two tensors sharing bytes) and gaps (bytes no tensor owns, a sign of a broken writer).
  std::sort(ranges.begin(), ranges.end(), [&](const Range& a, const Range& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return out.tensors[a.index].name < out.tensors[b.index].name;
  });
  uint64_t pos = 0;
  const Range* prev = nullptr;  // the range that ends at `pos`
  auto range_text = [&](const Range& r) {
    return "tensor " + in_quotes(out.tensors[r.index].name) + " (data_offsets " +
           offsets_string(r.begin, r.end) + ")";
  };
  for (const Range& r : ranges) {
    if (r.begin < pos) {
      fail(label + ": " + range_text(r) + " overlaps " + range_text(*prev) +
           "; tensors must not share bytes");
    }
    if (r.begin > pos) {
      if (prev == nullptr) {
        fail(label + ": the first tensor, " + range_text(r) + ", starts at byte " +
             std::to_string(r.begin) + "; the data area must be covered from byte 0 with no gaps");
      }
      fail(label + ": gap of " + std::to_string(r.begin - pos) + " bytes between " +
           range_text(*prev) + " and " + range_text(r) +
           "; tensors must cover the data area with no gaps");
    }
    if (r.end > pos || prev == nullptr) prev = &r;
    pos = r.end;
  }
  if (pos != data_size) {
    fail(label + ": the data area has " + std::to_string(data_size) +
         " bytes but the tensors end at byte " + std::to_string(pos) + "; " +
         std::to_string(data_size - pos) + " trailing bytes belong to no tensor");
  }
  out.info.num_tensors = out.tensors.size();
  return out;
}

// Edit distance, for suggesting the closest name when a lookup misses.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Element types
// ------------------------------------------------------------------------------------------------

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::BF16:
    case DType::F16:
      return 2;
    case DType::F32:
      return 4;
  }
  throw CheckpointError("dtype_size: invalid DType value");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::F32:
      return "F32";
  }
  throw CheckpointError("dtype_name: invalid DType value");
}

bool parse_dtype(std::string_view name, DType& out) {
  for (DType d : {DType::BF16, DType::F16, DType::F32}) {
    if (name == dtype_name(d)) {
      out = d;
      return true;
    }
  }
  return false;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t float_to_bf16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncating could clear every mantissa bit left and turn it into infinity, so keep
    // the sign and the top payload bits and set the quiet bit.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  // Round to nearest, ties to even: add just under half an ulp, plus one if the kept lsb is odd.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24, exact in float.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  // Normal: rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_f16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((a >> 13) & 0x3ffu);  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity (max half 65504)
  if (a < 0x38800000u) {
    // Below 2^-14, the smallest normal half: count units of 2^-24. The scaling is exact and
    // nearbyint rounds ties to even; a result of 0x400 is correctly the smallest normal.
    const float scaled = std::bit_cast<float>(a) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent (127 -> 15), then round 23 mantissa bits to 10, ties to even.
  uint32_t r = a - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

// ------------------------------------------------------------------------------------------------
// TensorInfo and conversion
// ------------------------------------------------------------------------------------------------

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::describe() const {
  return std::string(dtype_name(dtype)) + " " + shape_string(shape);
}

void to_float32(const TensorInfo& tensor, std::span<float> out) {
  const size_t n = static_cast<size_t>(tensor.numel());
  if (out.size() != n) {
    fail("to_float32: tensor " + in_quotes(tensor.name) + " has " + std::to_string(n) +
         " elements, but the output holds " + std::to_string(out.size()));
  }
  const std::byte* src = tensor.data;
  switch (tensor.dtype) {
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);  // memcpy: the data may be unaligned
        out[i] = bf16_to_float(bits);
      }
      return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = f16_to_float(bits);
      }
      return;
    case DType::F32:
      if (n > 0) std::memcpy(out.data(), src, 4 * n);
      return;
  }
}

std::vector<float> to_float32(const TensorInfo& tensor) {
  std::vector<float> out(static_cast<size_t>(tensor.numel()));
  to_float32(tensor, out);
  return out;
}

// ------------------------------------------------------------------------------------------------
// Checkpoint
// ------------------------------------------------------------------------------------------------

// Shards named "<stem>-0000k-of-0000n.safetensors" form a series; an index that names some of
// them must name all n, or the tensors of the shard it leaves out silently vanish from the model.
static void check_shard_series(const std::string& index_label,
                               const std::map<std::string, std::vector<std::string>>& tensors_in) {
  constexpr std::string_view kSuffix = ".safetensors";
  constexpr std::size_t kNumbers = 15;  // "-DDDDD-of-DDDDD"
  const auto is_digits = [](std::string_view text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  // (stem, n) -> the shard numbers the index names, and one shard name to quote.
  std::map<std::pair<std::string, unsigned long>, std::set<unsigned long>> series;
  std::map<std::pair<std::string, unsigned long>, std::string> example;
  for (const auto& [shard, names] : tensors_in) {
    if (shard.size() < kNumbers + kSuffix.size() || !shard.ends_with(kSuffix)) continue;
    const std::string_view numbers =
        std::string_view(shard).substr(shard.size() - kSuffix.size() - kNumbers, kNumbers);
    if (numbers[0] != '-' || numbers.substr(6, 4) != "-of-" || !is_digits(numbers.substr(1, 5)) ||
        !is_digits(numbers.substr(10, 5))) {
      continue;
    }
    const unsigned long k = std::stoul(std::string(numbers.substr(1, 5)));
    const unsigned long n = std::stoul(std::string(numbers.substr(10, 5)));
    if (k < 1 || k > n) {
      fail(index_label + ": tensor " + in_quotes(names.front()) + " is mapped to shard " +
           in_quotes(shard) + ", whose number " + std::to_string(k) + " is outside 1.." +
           std::to_string(n));
    }
    const auto key = std::make_pair(shard.substr(0, shard.size() - kSuffix.size() - kNumbers), n);
    series[key].insert(k);
    example.emplace(key, shard);
  }
  for (const auto& [key, named] : series) {
    const auto& [stem, n] = key;
    for (unsigned long k = 1; k <= n; ++k) {
      if (named.count(k) != 0) continue;
      char numbers[40];
      std::snprintf(numbers, sizeof numbers, "-%05lu-of-%05lu", k, n);
      fail(index_label + ": the weight_map maps tensors to " + in_quotes(example.at(key)) +
           " but none to " + in_quotes(stem + numbers + std::string(kSuffix)) +
           ", shard " + std::to_string(k) + " of the " + std::to_string(n) +
           "; an index that leaves out a shard loses its tensors (is it truncated or edited?)");
    }
  }
}

struct Checkpoint::State {
  fs::path path;
  std::vector<std::unique_ptr<MappedFile>> maps;  // owns the memory every TensorInfo points into
  std::vector<CheckpointFile> files;
  std::map<std::string, TensorInfo, std::less<>> tensors;
  uint64_t total_bytes = 0;
  uint64_t num_parameters = 0;

  // Maps and validates one file; returns its tensors without adding them.
  std::vector<TensorInfo> load_file(const fs::path& file) {
    maps.push_back(std::make_unique<MappedFile>(file));
    ParsedFile parsed = parse_safetensors({maps.back()->data(), maps.back()->size()}, file);
    files.push_back(std::move(parsed.info));
    return std::move(parsed.tensors);
  }

  void add(TensorInfo t) {
    total_bytes += t.nbytes;
    num_parameters += static_cast<uint64_t>(t.numel());
    std::string name = t.name;
    tensors.emplace(std::move(name), std::move(t));
  }

  void open_single(const fs::path& file) {
    for (TensorInfo& t : load_file(file)) add(std::move(t));
  }

  void open_sharded(const fs::path& dir, const fs::path& index_path) {
    const std::string index_label = index_path.string();
    json index;
    try {
      index = read_json_file(index_path, kIndexJsonLimits);
    } catch (const JsonError& e) {
      fail(e.what());
    }
    if (!index.is_object()) {
      fail(index_label + ": is a JSON " + std::string(index.type_name()) +
           ", expected an object with a 'weight_map'");
    }
    auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) {
      fail(index_label +
           ": missing 'weight_map' (expected an object mapping tensor name -> "
           "shard file name)");
    }
    if (wm->empty()) fail(index_label + ": 'weight_map' is empty; expected at least one tensor");

    // The index's claim: tensor -> shard, and shard -> its tensors.
    std::map<std::string, std::string> shard_of;
    std::map<std::string, std::vector<std::string>> tensors_in;
    for (const auto& [name, value] : wm->items()) {
      if (!value.is_string()) {
        fail(index_label + ": weight_map[" + in_quotes(name) + "] is a JSON " + value.type_name() +
             ", expected a shard file name");
      }
      const std::string shard = value.get<std::string>();
      if (shard.empty() || fs::path(shard).filename() != fs::path(shard) || shard == "." ||
          shard == "..") {
        fail(index_label + ": weight_map[" + in_quotes(name) + "] = " + in_quotes(shard) +
             " is not a plain file name; shards must sit next to the index");
      }
      shard_of[name] = shard;
      tensors_in[shard].push_back(name);
    }
    for (const auto& [shard, names] : tensors_in) {
      // The error_code form: a name the OS refuses (longer than NAME_MAX, say) is the index's
      // fault and must be reported as such, not escape as a std::filesystem error.
      std::error_code ec;
      const fs::file_status st = fs::status(dir / shard, ec);
      if (!fs::is_regular_file(st)) {
        std::string others =
            names.size() > 1 ? " (and " + std::to_string(names.size() - 1) + " more)" : "";
        const std::string why = !fs::exists(st) && ec && ec != std::errc::no_such_file_or_directory
                                    ? " cannot be opened (" + ec.message() + ")"
                                : fs::exists(st) ? " is not a regular file"
                                                 : " does not exist";
        fail(index_label + ": tensor " + in_quotes(names.front()) + others +
             " is mapped to shard " + in_quotes(shard) + ", but " + (dir / shard).string() + why);
      }
    }

    check_shard_series(index_label, tensors_in);

    // What the shards really hold.
    std::map<std::string, std::vector<TensorInfo>> found;  // name -> every copy found
    for (const auto& [shard, names] : tensors_in) {
      for (TensorInfo& t : load_file(dir / shard)) found[t.name].push_back(std::move(t));
    }
    for (auto& [name, copies] : found) {
      if (copies.size() > 1) {
        fail(index_label + ": tensor " + in_quotes(name) + " is stored in two shards, " +
             copies[0].file + " and " + copies[1].file + "; each tensor must be in exactly one");
      }
      TensorInfo& t = copies.front();
      auto claimed = shard_of.find(name);
      if (claimed == shard_of.end()) {
        fail(t.file + ": tensor " + in_quotes(name) + " is in this shard but not listed in " +
             index_label + "'s weight_map");
      }
      if (fs::path(t.file).filename() != fs::path(claimed->second)) {
        fail(t.file + ": tensor " + in_quotes(name) + " is in this shard, but " + index_label +
             " maps it to " + in_quotes(claimed->second));
      }
    }
    for (const auto& [name, shard] : shard_of) {
      if (found.find(name) == found.end()) {
        fail((dir / shard).string() + ": tensor " + in_quotes(name) + " is missing; " +
             index_label + " says this shard holds it");
      }
    }
    for (auto& [name, copies] : found) add(std::move(copies.front()));
  }

  // The multimodal layouts (see Checkpoint::open): renames the text model's tensors to the names
  // of a text-only checkpoint and sets the others aside. A checkpoint with neither prefix is left
  // as it is.
  void adopt_text_model() {
    struct Prefix {
      std::string_view stored, canonical;
    };
    static constexpr Prefix kTextPrefixes[] = {
        {"language_model.model.", "model."},      // Google's files, transformers before 4.52
        {"language_model.lm_head.", "lm_head."},  // (absent when the embeddings are tied)
        {"model.language_model.", "model."},      // transformers 4.52 and later
    };
    const bool multimodal = std::any_of(tensors.begin(), tensors.end(), [](const auto& entry) {
      return entry.first.starts_with("language_model.model.") ||
             entry.first.starts_with("model.language_model.");
    });
    if (!multimodal) return;
    std::map<std::string, TensorInfo, std::less<>> text;
    for (auto& [stored, t] : tensors) {
      std::string name;
      for (const Prefix& p : kTextPrefixes) {
        if (stored.starts_with(p.stored)) {
          name = std::string(p.canonical) + stored.substr(p.stored.size());
          break;
        }
      }
      // The newer layout keeps lm_head at the top level, beside "model.language_model.".
      // Text-model names already in the text-only form stay (and clash with a prefixed copy).
      for (std::string_view own : {"lm_head.", "model.layers.", "model.embed_tokens.", "model.norm."}) {
        if (name.empty() && stored.starts_with(own)) name = stored;
      }
      if (name.empty()) {
        set_aside.push_back(stored);
        total_bytes -= t.nbytes;
        num_parameters -= static_cast<uint64_t>(t.numel());
        continue;
      }
      if (auto clash = text.find(name); clash != text.end()) {
        fail(t.file + ": tensors " +
             in_quotes(clash->second.stored_name.empty() ? clash->first
                                                         : clash->second.stored_name) +
             " and " + in_quotes(stored) + " both hold the text model's " + in_quotes(name) +
             "; a multimodal checkpoint stores its text model under one prefix only");
      }
      if (name != stored) t.stored_name = stored;
      t.name = name;
      text.emplace(std::move(name), std::move(t));
    }
    tensors = std::move(text);
  }

  std::vector<std::string> set_aside;  // sorted: collected from the sorted map
};

Checkpoint::Checkpoint(std::unique_ptr<State> state) : state_(std::move(state)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const fs::path& path) {
  auto state = std::make_unique<State>();
  state->path = path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    fail(path.string() +
         ": no such file or directory (expected a checkpoint directory or a .safetensors file)");
  }
  if (fs::is_directory(st)) {
    const fs::path index = path / kIndexFileName;
    const fs::path single = path / kSingleFileName;
    if (fs::exists(index, ec)) {
      state->open_sharded(path, index);
    } else if (fs::exists(single, ec)) {
      state->open_single(single);
    } else {
      fail(path.string() + ": directory has neither " + std::string(kIndexFileName) +
           " (a sharded checkpoint) nor " + std::string(kSingleFileName) +
           " (a single-file checkpoint)");
    }
  } else {
    state->open_single(path);
  }
  state->adopt_text_model();
  return Checkpoint(std::move(state));
}

bool Checkpoint::contains(std::string_view name) const {
  return state_->tensors.find(name) != state_->tensors.end();
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(state_->tensors.size());
  for (const auto& entry : state_->tensors) out.push_back(entry.first);
  return out;  // std::map iterates in sorted order
}

size_t Checkpoint::size() const {
  return state_->tensors.size();
}

const TensorInfo& Checkpoint::get(std::string_view name) const {
  auto it = state_->tensors.find(name);
  if (it != state_->tensors.end()) return it->second;
  std::string message = state_->path.string() + ": no tensor named " + in_quotes(name);
  if (state_->tensors.empty()) {
    message += " (the checkpoint has no tensors)";
  } else {
    const std::string* best = nullptr;
    size_t best_distance = std::numeric_limits<size_t>::max();
    for (const auto& entry : state_->tensors) {
      size_t d = edit_distance(name, entry.first);
      if (d < best_distance) {
        best_distance = d;
        best = &entry.first;
      }
    }
    message += "; did you mean " + in_quotes(*best) + "? (" +
               std::to_string(state_->tensors.size()) + " tensors in the checkpoint)";
  }
  fail(message);
}

const TensorInfo& Checkpoint::get(std::string_view name, DType dtype,
                                  const std::vector<int64_t>& shape) const {
  const TensorInfo& t = get(name);
  const bool dtype_ok = t.dtype == dtype;
  const bool shape_ok = t.shape == shape;
  if (dtype_ok && shape_ok) return t;
  const char* what = !dtype_ok && !shape_ok ? "dtype and shape" : (!dtype_ok ? "dtype" : "shape");
  const std::string stored =
      t.stored_name.empty() ? "" : " (stored as " + in_quotes(t.stored_name) + ")";
  fail(t.file + ": tensor " + in_quotes(t.name) + stored + " has the wrong " + what +
       "\n  Expected: " + std::string(dtype_name(dtype)) + " " + shape_string(shape) +
       "\n  Actual:   " + t.describe());
}

uint64_t Checkpoint::total_bytes() const {
  return state_->total_bytes;
}
uint64_t Checkpoint::num_parameters() const {
  return state_->num_parameters;
}
const std::vector<CheckpointFile>& Checkpoint::files() const {
  return state_->files;
}
const fs::path& Checkpoint::path() const {
  return state_->path;
}
const std::vector<std::string>& Checkpoint::set_aside() const {
  return state_->set_aside;
}

std::vector<TensorInfo> parse_safetensors_bytes(std::span<const std::byte> bytes,
                                                const std::string& label) {
  return parse_safetensors(bytes, label).tensors;
}

// ------------------------------------------------------------------------------------------------
// Writing
// ------------------------------------------------------------------------------------------------

TensorData TensorData::from_floats(std::string name, DType dtype, std::vector<int64_t> shape,
                                   std::span<const float> values) {
  uint64_t count = 0;
  if (!checked_nbytes(shape, 1, count) || count != values.size()) {
    fail("TensorData::from_floats: tensor " + in_quotes(name) + " has shape " +
         shape_string(shape) + " but " + std::to_string(values.size()) + " values were given");
  }
  TensorData t{std::move(name), dtype, std::move(shape), {}};
  t.bytes.resize(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::BF16: {
        uint16_t b = float_to_bf16(values[i]);
        std::memcpy(t.bytes.data() + 2 * i, &b, 2);
        break;
      }
      case DType::F16: {
        uint16_t h = float_to_f16(values[i]);
        std::memcpy(t.bytes.data() + 2 * i, &h, 2);
        break;
      }
      case DType::F32:
        std::memcpy(t.bytes.data() + 4 * i, &values[i], 4);
        break;
    }
  }
  return t;
}

namespace {

// Checks what the reader would check, so the writer can never produce a file the reader rejects.
void validate_for_writing(const fs::path& path, const std::vector<const TensorData*>& tensors) {
  std::set<std::string_view> names;
  for (const TensorData* t : tensors) {
    const std::string where = path.string() + ": tensor " + in_quotes(t->name) + ": ";
    if (t->name.empty()) fail(path.string() + ": cannot write a tensor with an empty name");
    if (t->name == "__metadata__") fail(where + "the name is reserved for the header metadata");
    if (!names.insert(t->name).second) fail(where + "given twice; tensor names must be unique");
    uint64_t expected = 0;
    if (!checked_nbytes(t->shape, dtype_size(t->dtype), expected)) {
      fail(where + "shape " + shape_string(t->shape) + " is negative or too large");
    }
    if (expected != t->bytes.size()) {
      fail(where + "has " + std::to_string(t->bytes.size()) + " bytes, but " +
           size_formula(t->dtype, t->shape) + " = " + std::to_string(expected));
    }
  }
}

// Removes the temporary file of a failed write and reports the error.
[[noreturn]] void abandon_write(int fd, const fs::path& tmp, const fs::path& path,
                                const std::string& what) {
  const int err = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(tmp.c_str());
  fail(path.string() + ": " + what + ": " + std::strerror(err));
}

// Writes `pieces` to a temporary file beside `path`, flushes it to disk and renames it over
// `path`; on any error the temporary file is removed and `path` is left as it was.
void write_atomically(const fs::path& path, const std::vector<std::span<const std::byte>>& pieces) {
  static std::atomic<unsigned> counter{0};
  const fs::path tmp =
      path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()) +
                            "." + std::to_string(counter++));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(path.string() + ": cannot create " + tmp.string() + ": " + std::strerror(errno));
  for (std::span<const std::byte> piece : pieces) {
    const std::byte* p = piece.data();
    size_t left = piece.size();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        abandon_write(fd, tmp, path, "write failed");
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0) abandon_write(fd, tmp, path, "fsync failed");
  if (::close(fd) != 0) abandon_write(-1, tmp, path, "close failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0) abandon_write(-1, tmp, path, "rename failed");
}

std::span<const std::byte> as_bytes_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

void write_one(const fs::path& path, std::vector<const TensorData*> tensors,
               const std::map<std::string, std::string>& metadata) {
  validate_for_writing(path, tensors);
  // Widest elements first keeps every tensor aligned to its element size (the data area starts
  // at a multiple of 8); the name breaks ties so the file depends only on the set of tensors.
  std::sort(tensors.begin(), tensors.end(), [](const TensorData* a, const TensorData* b) {
    if (dtype_size(a->dtype) != dtype_size(b->dtype)) {
      return dtype_size(a->dtype) > dtype_size(b->dtype);
    }
    return a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorData* t : tensors) {
    header[t->name] = {{"dtype", dtype_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format allows trailing spaces as padding

  const uint64_t header_len = text.size();
  std::byte length_field[8];
  std::memcpy(length_field, &header_len, 8);

  std::vector<std::span<const std::byte>> pieces;
  pieces.emplace_back(length_field, 8);
  pieces.push_back(as_bytes_of(text));
  for (const TensorData* t : tensors) pieces.emplace_back(t->bytes);
  write_atomically(path, pieces);
}

std::string shard_file_name(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return buf;
}

}  // namespace

void write_safetensors(const fs::path& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorData*> ptrs;
  ptrs.reserve(tensors.size());
  for (const TensorData& t : tensors) ptrs.push_back(&t);
  write_one(path, std::move(ptrs), metadata);
}

std::vector<fs::path> write_sharded(const fs::path& directory,
                                    const std::vector<TensorData>& tensors,
                                    const ShardingOptions& options,
                                    const std::map<std::string, std::string>& metadata) {
  const std::string label = directory.string();
  if ((options.max_shard_bytes > 0) == (options.num_shards > 0)) {
    fail(label + ": write_sharded needs exactly one of max_shard_bytes and num_shards");
  }
  if (tensors.empty()) fail(label + ": write_sharded needs at least one tensor");
  if (options.num_shards > tensors.size()) {
    fail(label + ": cannot split " + std::to_string(tensors.size()) + " tensors into " +
         std::to_string(options.num_shards) + " non-empty shards");
  }
  {
    std::vector<const TensorData*> all;
    for (const TensorData& t : tensors) all.push_back(&t);
    validate_for_writing(directory / kIndexFileName, all);  // catches duplicates across shards
  }

  // starts[k] = index of the first tensor of shard k; tensors keep their given order.
  const size_t n = tensors.size();
  std::vector<size_t> starts{0};
  if (options.max_shard_bytes > 0) {
    uint64_t used = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t b = tensors[i].bytes.size();
      if (i > starts.back() && used + b > options.max_shard_bytes) {
        starts.push_back(i);
        used = 0;
      }
      used += b;
    }
  } else {
    // Shard k starts at the first tensor that begins at or past k/N of the total bytes, nudged
    // so that every shard gets at least one tensor.
    const uint64_t shards = options.num_shards;
    std::vector<uint64_t> prefix(n + 1, 0);  // prefix[i] = bytes of tensors [0, i)
    for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + tensors[i].bytes.size();
    const uint64_t total = prefix[n];
    for (uint64_t k = 1; k < shards; ++k) {
      // ceil(total * k / shards), split so that nothing overflows (shards <= tensor count).
      const uint64_t rem = total % shards * k;
      const uint64_t target = total / shards * k + rem / shards + (rem % shards != 0 ? 1 : 0);
      size_t i = 0;
      while (i < n && prefix[i] < target) ++i;
      i = std::max(i, starts.back() + 1);
      i = std::min(i, n - static_cast<size_t>(shards - k));
      starts.push_back(i);
    }
  }
  starts.push_back(n);

  fs::create_directories(directory);
  const size_t num_shards = starts.size() - 1;
  std::vector<fs::path> written;
  json weight_map = json::object();
  uint64_t total_size = 0;
  for (size_t k = 0; k < num_shards; ++k) {
    const std::string file = shard_file_name(k, num_shards);
    std::vector<const TensorData*> group;
    for (size_t i = starts[k]; i < starts[k + 1]; ++i) {
      group.push_back(&tensors[i]);
      weight_map[tensors[i].name] = file;
      total_size += tensors[i].bytes.size();
    }
    write_one(directory / file, std::move(group), metadata);
    written.push_back(directory / file);
  }
  json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  write_atomically(directory / kIndexFileName, {as_bytes_of(text)});
  return written;
}

}  // namespace clockwork
