// The part of `clockwork bench` that differs between the two binaries: how a run is timed, what
// the device's limits are, and cuBLAS. bench_backend.cpp is compiled once per binary (like
// backend.cpp): with CLOCKWORK_CLI_CUDA it uses CUDA events, an L2 flush, cudaDeviceProp and
// cuBLAS; without, the CPU backend's wall clock. Everything else in the command is shared.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tools/clockwork/bench.h"

namespace clockwork::cli::bench {

/// A device limit and where the number came from (0 when unknown).
struct PeakFigure {
  double value = 0;    ///< GB/s or TFLOP/s
  std::string source;  ///< "cudaDeviceProp: ...", "table for sm_90: ...", "--peak-gbps"
};

/// Command-line overrides of the device's peaks (0 = not given).
struct PeakOverrides {
  double gbps = 0;
  double fp32_tflops = 0;
  double bf16_tflops = 0;
};

/// What the table header and the JSON say about the machine.
struct DeviceInfo {
  std::string name;     ///< "NVIDIA H100 80GB HBM3", "cudasim (CPU backend)"
  std::string backend;  ///< "cuda" or "sim"
  bool simulation = false;
  std::string detail;  ///< "sm_90, 132 SMs, 50 MB L2" or "2 CPU threads"
  std::string timer;   ///< how runs are timed, one phrase
  size_t l2_flush_bytes = 0;
  PeakFigure bandwidth_gbps;  ///< DRAM bandwidth
  PeakFigure fp32_tflops;     ///< fp32 CUDA cores
  PeakFigure bf16_tflops;     ///< bf16 tensor cores, fp32 accumulation, dense
};

/// The timer, the device description and cuBLAS of one binary.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;
  /// See Context::time(); `warmup` and `repetitions` are final (no -1).
  virtual Timing time(const std::function<void()>& launch, bool flush_l2, int warmup,
                      int repetitions) = 0;
  /// cuBLAS (created on first use), or nullptr on the CPU backend.
  virtual Blas* blas() = 0;
  /// Counting mode (clockwork-profile, `clockwork bench --profile`): the header of the table of
  /// counts, and its line for `row`, from the launches of the last time(); empty otherwise.
  virtual std::string counted_header() const { return {}; }
  virtual std::string counted_line(const Row& /*row*/) { return {}; }
  /// Counting mode: global bytes moved per launch in the last time() (0 otherwise), and the GPU
  /// of the prediction (false when not counting).
  virtual double counted_bytes() const { return 0; }
  virtual bool counted_gpu(std::string& /*name*/, double& /*bytes_per_s*/, double& /*flops_per_s*/) const {
    return false;
  }
};

/// Whether this binary is clockwork-profile: the CPU backend with kernels built for counting.
bool counting_build();
/// The GPUs `--gpu` may name for the counting mode's prediction.
std::vector<std::string> counting_gpus();

/// The backend this binary was built for. Throws when the GPU build finds no device.
std::unique_ptr<Backend> make_backend(const PeakOverrides& overrides);

}  // namespace clockwork::cli::bench
