// `clockwork bench`: times the course's kernels on Llama-3-8B shapes and reports how close each
// comes to the device's limits.
//
// The command is a small registry of *groups*. A group benchmarks one operator (or one phase of
// the model, such as KV-cache decoding): it allocates its buffers, times every variant through the
// Context, and appends one Row per (case, variant, shape). bench.cpp owns the command line, the
// table, the JSON file and the leaderboard; the backend (GPU events, L2 flush, device peaks,
// cuBLAS; or CPU wall-clock) is behind the Context.
//
// Adding a group, in its own .cpp listed in clockwork_cli_objs (an object library, so the linker
// never drops the registration):
//
//   namespace clockwork::cli::bench {
//   namespace {
//   void run_decode(Context& ctx) {
//     for (const Shape& shape : ctx.options().shapes) {
//       ...allocate with DeviceBuffer, then time one step (weights stay cold by themselves):
//       Row row;
//       row.op = "decode";
//       row.variant = "kv-cache";
//       row.case_name = "step";
//       row.shape = shape.name;
//       row.dims = "pos=" + std::to_string(shape.s);
//       row.bytes = ...;  // what one step must read: weights plus the cache so far
//       row.time = ctx.time([&] { step(); }, {.flush_l2 = false});
//       row.extra_name = "tokens_per_s";
//       row.extra_value = 1e3 / row.time.median_ms;
//       ctx.add(row);
//       ctx.leaderboard("decode ms/token (" + shape.name + ")", row.time.median_ms,
//                       Order::Ascending);
//     }
//   }
//   }  // namespace
//   CLOCKWORK_BENCH_GROUP("decode", "KV-cache decode: ms/token, tokens/s", run_decode);
//   }  // namespace clockwork::cli::bench
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/check/cuda_check.h"
#include "tools/clockwork/cli.h"

namespace clockwork::cli::bench {

/// Model widths and a token count: every group derives its problem sizes from one of these.
struct Shape {
  std::string name;    ///< "decode", "prefill", or the --shape text for a custom one
  int s = 1;           ///< tokens (rows of the activations)
  int d = 4096;        ///< hidden size
  int n_heads = 32;    ///< h
  int n_kv_heads = 8;  ///< h_k
  int head_dim = 128;  ///< h_d = d / h
  int d_ff = 14336;    ///< FFN width
  int vocab = 128256;  ///< V
};

/// What the command line asked for, after validation.
struct Options {
  std::vector<Shape> shapes;          ///< in the order given (never empty)
  int warmup = 0;                     ///< untimed runs before the timed ones
  int repetitions = 0;                ///< timed runs; the median is reported
  std::vector<std::string> variants;  ///< --variant filter; empty = every variant
  const Args* args = nullptr;         ///< the parsed command line, for a group's own options

  /// True when `variant` passes the --variant filter.
  bool wants(const std::string& variant) const;
};

/// Times of the repetitions of one measurement, in milliseconds.
struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0, p10_ms = 0, p90_ms = 0;
  int repetitions = 0;
};

/// Which compute peak a row's FLOP/s are compared with.
enum class Peak {
  None,        ///< no meaningful FLOP count (gathers, copies, argmax)
  Fp32,        ///< fp32 CUDA cores: every course kernel (bf16 is widened to fp32)
  Bf16Tensor,  ///< bf16 tensor cores with fp32 accumulation (cuBLAS GemmEx)
};

/// One line of the table and one element of the JSON "rows".
struct Row {
  std::string op;          ///< group name: "matmul"
  std::string variant;     ///< "naive", "tiled", "cublas", "kernel"
  std::string case_name;   ///< which instance of the op: "q_proj", "input_layernorm"
  std::string shape;       ///< Shape::name it ran at
  std::string dims;        ///< the problem size, e.g. "128x4096x4096" (m x n x k)
  double bytes = 0;        ///< compulsory DRAM traffic: each operand read once, output written once
  double flops = 0;        ///< floating-point operations (0 when not meaningful)
  Peak peak = Peak::Fp32;  ///< which peak FLOP% is of
  Timing time;             ///< from Context::time()
  /// The row other variants of the same (op, case, shape) are compared with ("% of cuBLAS").
  bool reference = false;
  double extra_value = 0;  ///< an optional figure of the group's own, e.g. tokens/s
  std::string extra_name;  ///< its name (JSON key); empty when unused
  /// Where the row sits on the x axis of its --plot panel (decode generation rows: the prompt
  /// length); 0 when the row has no such place.
  double plot_x = 0;
};

/// Leaderboard sort order, as Gradescope spells it.
enum class Order { Ascending, Descending };

/// Timing knobs for one measurement.
struct TimeOptions {
  bool flush_l2 = true;  ///< overwrite the GPU's L2 before every timed run (cold weights)
  int warmup = -1;       ///< below 0: --warmup
  int repetitions = -1;  ///< below 1: --repetitions
};

/// cuBLAS, to put the course's matmuls in perspective. Only the GPU build has one.
class Blas {
 public:
  virtual ~Blas() = default;
  /// y[m, n] = x[m, k]·w[n, k]ᵀ with bf16 x and w, fp32 accumulation and fp32 y (GemmEx, tensor
  /// cores): the same weight bytes as the course's matmul, at the speed of the library.
  virtual void gemm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, int m, int n,
                         int k) = 0;
  /// The same product entirely in fp32 on CUDA cores (Sgemm, TF32 off): what a CUDA-core kernel
  /// could reach, with twice the weight bytes.
  virtual void gemm_f32(const float* x, const float* w, float* y, int m, int n, int k) = 0;
};

/// What a group gets: the options, the timer, and the place its results go.
class Context {
 public:
  virtual ~Context() = default;

  virtual const Options& options() const = 0;
  /// True on the CPU backend: times say how the simulation performs, not a GPU.
  virtual bool simulation() const = 0;

  /// Runs `launch` opts.warmup times, then times opts.repetitions runs (GPU: CUDA events around
  /// each run, the L2 flushed before it; CPU: wall clock), and checks for errors after each.
  virtual Timing time(const std::function<void()>& launch, const TimeOptions& opts = {}) = 0;

  /// cuBLAS on the GPU build; nullptr on the CPU backend.
  virtual Blas* blas() = 0;

  /// Appends a result row.
  virtual void add(Row row) = 0;
  /// A line printed under the table (and kept in the JSON), e.g. why a case was skipped.
  virtual void note(const std::string& text) = 0;
  /// An entry of the JSON "leaderboard" (Gradescope's {name, value, order}). On the CPU backend
  /// the name is marked as a simulation figure.
  virtual void leaderboard(const std::string& name, double value, Order order) = 0;
};

/// A benchmark group: one name for --op, one line for --list, and the code that runs it.
struct Group {
  std::string name;                        ///< what --op selects: "matmul", "decode"
  std::string description;                 ///< one line for --list
  std::function<void(Context&)> run;       ///< times every selected variant at every shape
  std::vector<std::string> variants = {};  ///< for --list and checking --variant (may be empty)
  std::vector<Option> options = {};  ///< extra command-line options the group reads (Options::args)
};

/// A device allocation of `count` T for the length of a benchmark, freed on scope exit. Every
/// byte starts as 0x3c, which reads as about 0.0115 in fp32 and in bf16: NaNs and denormals could
/// slow some hardware down. Most kernels' timings do not depend on the values; where they do
/// (attention), the benchmark uploads random inputs.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (const cudaError_t err = cudaMalloc(&data_, bytes()); err != cudaSuccess) {
      (void)cudaGetLastError();  // clear it, so that later checks do not report it again
      throw CudaError(
          err, "cannot allocate " + std::to_string(bytes()) +
                   " bytes on the device for a benchmark buffer: " + cudaGetErrorString(err));
    }
    CUDA_CHECK(cudaMemset(data_, 0x3c, bytes()));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }
  /// Copies `values` (at most count() of them) to the start of the buffer.
  void upload(const std::vector<T>& values) {
    CUDA_CHECK(cudaMemcpy(data_, values.data(), std::min(values.size(), count_) * sizeof(T),
                          cudaMemcpyHostToDevice));
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

/// Adds a group to the registry (at static initialisation, see CLOCKWORK_BENCH_GROUP); returns
/// true. Groups are listed and run in registration order; a repeated name is a programming error
/// reported when the command starts.
bool register_group(Group group);

/// Every registered group.
const std::vector<Group>& groups();

/// Parses a --shape value (see `clockwork bench --help`); UsageError naming the bad part.
std::vector<Shape> parse_shapes(const std::string& text);

/// The shapes run when --shape is absent: Llama-3-8B at decode and prefill on the GPU, the
/// same model narrowed eightfold on the CPU backend (full widths would take minutes there).
std::vector<Shape> default_shapes(bool simulation);

/// Order statistics of `samples_ms` (which is reordered).
Timing summarize(std::vector<double> samples_ms);

}  // namespace clockwork::cli::bench

#define CLOCKWORK_BENCH_CONCAT2(a, b) a##b
#define CLOCKWORK_BENCH_CONCAT(a, b) CLOCKWORK_BENCH_CONCAT2(a, b)
/// Registers a benchmark group from namespace scope, in one line:
///   CLOCKWORK_BENCH_GROUP("decode", "KV-cache decode: ms/token, tokens/s", run_decode);
#define CLOCKWORK_BENCH_GROUP(name, description, ...)                                           \
  [[maybe_unused]] static const bool CLOCKWORK_BENCH_CONCAT(clockwork_bench_group_, __LINE__) = \
      ::clockwork::cli::bench::register_group({name, description, __VA_ARGS__})
