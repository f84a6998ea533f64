// Reading and writing safetensors checkpoints (the HuggingFace weight format).
//
// A safetensors file is
//   [8 bytes: header length N, little-endian u64] [N bytes: JSON header] [data area]
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, with
// offsets relative to the start of the data area, plus an optional "__metadata__" object of
// strings. A large model is split into shards ("model-00001-of-00004.safetensors", ...) and
// `model.safetensors.index.json` says which shard holds each tensor.
//
// The reader memory-maps every file read-only, so opening a 16 GB checkpoint costs only the
// header parsing; tensor bytes are paged in when first touched. Every header is validated before
// any tensor is handed out, and every problem is reported as a clockwork::CheckpointError whose
// message names the file, the tensor, what is wrong and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace clockwork {

/// Any problem reading or writing a checkpoint: a malformed file, a missing tensor, a tensor with
/// the wrong dtype or shape. The message names the file (and tensor) and says what was expected.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ------------------------------------------------------------------------------------------------
// Element types
// ------------------------------------------------------------------------------------------------

/// The element types the course reads. Other safetensors dtypes (I64, F64, F8_E4M3, ...) are
/// rejected with an error naming the tensor.
enum class DType { BF16, F16, F32 };

/// Bytes per element: 2 for BF16 and F16, 4 for F32.
size_t dtype_size(DType dtype);

/// The name safetensors uses in the header: "BF16", "F16" or "F32".
std::string_view dtype_name(DType dtype);

/// Parses a header dtype name; returns false (leaving `out` untouched) for any other name.
bool parse_dtype(std::string_view name, DType& out);

/// "[14336, 4096]"; "[]" for a scalar.
std::string shape_string(const std::vector<int64_t>& shape);

/// bfloat16 bits -> float. Exact: bf16 is the top half of an IEEE float.
float bf16_to_float(uint16_t bits);

/// float -> bfloat16 bits, rounding to nearest even. NaN stays NaN (made quiet, sign kept);
/// values beyond the bf16 range round to infinity.
uint16_t float_to_bf16(float value);

/// IEEE half bits -> float. Exact, including subnormals, infinities and NaN.
float f16_to_float(uint16_t bits);

/// float -> IEEE half bits, rounding to nearest even; |x| >= 65520 becomes infinity, tiny values
/// become half subnormals or zero, NaN stays NaN.
uint16_t float_to_f16(float value);

// ------------------------------------------------------------------------------------------------
// Reading
// ------------------------------------------------------------------------------------------------

/// One tensor of an opened checkpoint. `data` points into the memory-mapped file and stays valid
/// as long as the Checkpoint it came from. It may not be aligned to the element size (the format
/// does not require it), so read elements with std::memcpy or convert with to_float32().
struct TensorInfo {
  std::string name;                 ///< e.g. "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::F32;         ///< element type
  std::vector<int64_t> shape;       ///< row-major; linear weights are (out_features, in_features)
  const std::byte* data = nullptr;  ///< first byte of the tensor, numel() * dtype_size(dtype) bytes
  size_t nbytes = 0;                ///< byte length of the tensor
  std::string file;                 ///< the file that holds the tensor (for error messages)
  /// The name in the file when it differs from `name`: the text model of a multimodal checkpoint
  /// is stored under another prefix (see Checkpoint::open); empty otherwise.
  std::string stored_name;

  /// Number of elements: the product of `shape` (1 for a scalar).
  int64_t numel() const;
  /// "BF16 [4096, 4096]".
  std::string describe() const;
};

/// One file of an opened checkpoint.
struct CheckpointFile {
  std::filesystem::path path;
  uint64_t file_bytes = 0;    ///< size of the whole file
  uint64_t header_bytes = 0;  ///< N, the length of the JSON header
  size_t num_tensors = 0;
  std::map<std::string, std::string> metadata;  ///< the header's "__metadata__" (may be empty)
};

/// A validated, memory-mapped safetensors checkpoint: one file or a set of shards.
///
///   auto ckpt = clockwork::Checkpoint::open("Meta-Llama-3-8B-Instruct");
///   const auto& wq = ckpt.get("model.layers.0.self_attn.q_proj.weight", DType::BF16, {4096,
///   4096});
class Checkpoint {
 public:
  /// Opens `path`, which is one of
  ///   - a directory with `model.safetensors.index.json` (a sharded checkpoint),
  ///   - a directory with `model.safetensors`,
  ///   - a `.safetensors` file.
  /// Validates every header (and the index against the shards) before returning.
  /// Throws CheckpointError on any problem.
  ///
  /// A multimodal checkpoint (Gemma3ForConditionalGeneration, model_type "gemma3") keeps its
  /// text model under another prefix: "language_model.model." (and "language_model.lm_head.") in
  /// Google's released files and older transformers, "model.language_model." in transformers
  /// 4.52 and later. Such a checkpoint is opened as its text model: those tensors are named as a
  /// text-only checkpoint names them ("model.layers.0...", "lm_head.weight"), and every other
  /// tensor (the vision tower, the multimodal projector) is set aside: absent from names(),
  /// get(), size(), total_bytes() and num_parameters(), and listed by set_aside().
  static Checkpoint open(const std::filesystem::path& path);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  ~Checkpoint();

  /// True when a tensor of that name exists.
  bool contains(std::string_view name) const;

  /// All tensor names, sorted.
  std::vector<std::string> names() const;

  /// Number of tensors.
  size_t size() const;

  /// The tensor called `name`. A missing name throws CheckpointError that suggests the closest
  /// existing name (a missing "model." prefix or a layer typo shows up right away).
  const TensorInfo& get(std::string_view name) const;

  /// Same, and checks the dtype and shape; a mismatch throws CheckpointError with
  /// "Expected: BF16 [4096, 4096]" and "Actual: ..." lines.
  const TensorInfo& get(std::string_view name, DType dtype,
                        const std::vector<int64_t>& shape) const;

  /// Sum of the tensors' byte lengths (16,060,522,496 for Llama-3-8B in bf16).
  uint64_t total_bytes() const;

  /// Sum of the tensors' element counts (8,030,261,248 for Llama-3-8B).
  uint64_t num_parameters() const;

  /// The files that make up the checkpoint, in the order they were opened (shards sorted by name).
  const std::vector<CheckpointFile>& files() const;

  /// The path that was passed to open().
  const std::filesystem::path& path() const;

  /// Names (as stored) of the tensors a multimodal checkpoint holds beside its text model, sorted;
  /// empty for a text-only checkpoint.
  const std::vector<std::string>& set_aside() const;

 private:
  struct State;
  explicit Checkpoint(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Validates a whole safetensors file held in memory as Checkpoint::open() validates each file
/// and returns its tensors, which point into `bytes`; `label` names the file in errors. Throws
/// CheckpointError.
std::vector<TensorInfo> parse_safetensors_bytes(std::span<const std::byte> bytes,
                                                const std::string& label);

/// Converts a tensor's elements (BF16, F16 or F32) to floats, in storage order.
std::vector<float> to_float32(const TensorInfo& tensor);

/// Same, into `out`, which must hold exactly tensor.numel() floats.
void to_float32(const TensorInfo& tensor, std::span<float> out);

// ------------------------------------------------------------------------------------------------
// Writing
// ------------------------------------------------------------------------------------------------

/// A tensor to be written: a name, a dtype, a shape and the raw little-endian element bytes.
struct TensorData {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;  ///< numel * dtype_size(dtype) bytes

  /// Encodes `values` (row-major, numel(shape) of them) as `dtype`: BF16 and F16 round to
  /// nearest even, F32 is copied. Throws CheckpointError if the count does not match the shape.
  static TensorData from_floats(std::string name, DType dtype, std::vector<int64_t> shape,
                                std::span<const float> values);
  /// Same, for a braced list of values: from_floats("w", DType::BF16, {2}, {1.0f, -2.5f}).
  static TensorData from_floats(std::string name, DType dtype, std::vector<int64_t> shape,
                                std::initializer_list<float> values) {
    return from_floats(std::move(name), dtype, std::move(shape),
                       std::span<const float>(values.begin(), values.size()));
  }
};

/// Writes one safetensors file. Tensors are laid out largest element size first, then by name, so
/// the layout does not depend on the order of `tensors` and every tensor starts at a multiple of
/// its element size. The header is padded with spaces to a multiple of 8 bytes. The file is
/// written under a temporary name in the same directory and renamed into place, so a failure never
/// leaves a half-written file at `path`. Throws CheckpointError on a bad tensor (duplicate or
/// empty name, byte count not matching dtype x shape) or an I/O error.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

/// How write_sharded() splits tensors into shards. Set exactly one of the two.
struct ShardingOptions {
  /// Start a new shard when adding the next tensor would exceed this many bytes of tensor data
  /// (a tensor larger than this gets a shard of its own).
  uint64_t max_shard_bytes = 0;
  /// Split into exactly this many shards of roughly equal size.
  size_t num_shards = 0;
};

/// Writes a sharded checkpoint into `directory` (created if needed): shards named
/// "model-0000k-of-0000n.safetensors" and `model.safetensors.index.json` with
/// `metadata.total_size` and `weight_map`. Tensors keep the order of `tensors` across shards (a
/// model's layer order, as HuggingFace does), each shard being written with write_safetensors().
/// The index is written last. Returns the shard paths in order.
std::vector<std::filesystem::path> write_sharded(
    const std::filesystem::path& directory, const std::vector<TensorData>& tensors,
    const ShardingOptions& options,
    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

/// File names the reader looks for inside a checkpoint directory.
inline constexpr std::string_view kIndexFileName = "model.safetensors.index.json";
inline constexpr std::string_view kSingleFileName = "model.safetensors";

}  // namespace clockwork
