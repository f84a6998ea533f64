// The backend of `clockwork bench` (see bench_backend.h), compiled once per binary. The GPU build
// (CLOCKWORK_CLI_CUDA) times with CUDA events, flushes L2 before every timed run, reads the
// device's peaks from its properties and a small table, and compares matmuls with cuBLAS. The CPU
// build times the simulation with the wall clock and claims no peaks.
#include "tools/clockwork/bench_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/cuda_check.h"
#include "tools/clockwork/commands.h"
#ifdef CLOCKWORK_CLI_PROFILE
#include "cudasim/cudasim.h"
#endif

#ifdef CLOCKWORK_CLI_CUDA
#include <cublas_v2.h>
#endif

namespace clockwork::cli::bench {

namespace {

#ifdef CLOCKWORK_CLI_CUDA

// ---- GPU ---------------------------------------------------------------------------------------

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

// Command-line values win over anything measured or looked up.
void apply_overrides(DeviceInfo& info, const PeakOverrides& o) {
  if (o.gbps > 0) info.bandwidth_gbps = {o.gbps, "--peak-gbps"};
  if (o.fp32_tflops > 0) info.fp32_tflops = {o.fp32_tflops, "--peak-tflops"};
  if (o.bf16_tflops > 0) info.bf16_tflops = {o.bf16_tflops, "--peak-tensor-tflops"};
}

#define CUBLAS_CHECK(expr)                                                                    \
  do {                                                                                        \
    const cublasStatus_t clockwork_cublas_status_ = (expr);                                   \
    if (clockwork_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                  \
      throw std::runtime_error(std::string(#expr) +                                           \
                               " failed: " + cublasGetStatusName(clockwork_cublas_status_) +  \
                               " (" + cublasGetStatusString(clockwork_cublas_status_) + ")"); \
    }                                                                                         \
  } while (0)

// Per-SM throughput by compute capability, dense, per clock. The datasheets quote these rates
// times SMs times boost clock; the clock here is the one the device reports, so the result is an
// estimate within about 10% (use --peak-tflops / --peak-tensor-tflops for a datasheet figure).
struct ArchRate {
  int major, minor;
  int fp32_lanes;         // fp32 FMA units per SM (one FMA = 2 FLOP)
  int bf16_flop_per_clk;  // bf16 tensor-core FLOP per SM per clock with fp32 accumulation; 0: none
  const char* example;
};

const ArchRate kArchRates[] = {
    {7, 0, 64, 0, "V100 (tensor cores take fp16, not bf16)"},
    {7, 5, 64, 0, "T4 / RTX 20 (tensor cores take fp16, not bf16)"},
    {8, 0, 64, 2048, "A100"},
    {8, 6, 128, 1024, "A10 / A40 / RTX A6000; GeForce RTX 30 reach half with fp32 accumulation"},
    {8, 9, 128, 1024, "L4 / L40S / RTX 6000 Ada; GeForce RTX 40 reach half with fp32 accumulation"},
    {9, 0, 128, 4096, "H100 / H200"},
    {10, 0, 128, 8192, "B200"},
};

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

class Cublas final : public Blas {
 public:
  Cublas() {
    CUBLAS_CHECK(cublasCreate(&handle_));
    // Default math: Sgemm stays true fp32 (no TF32); GemmEx with bf16 inputs uses tensor cores.
    CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~Cublas() override { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // Row-major y[m,n] = x[m,k]·w[n,k]ᵀ is column-major yᵀ[n,m] = w·xᵀ with w read transposed:
  // w (row-major [n,k]) is column-major [k,n] with leading dimension k, x is [k,m] likewise.
  void gemm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, int m, int n,
                 int k) override {
    const float alpha = 1.f, beta = 0.f;
    CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k,
                              x, CUDA_R_16BF, k, &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  }

  void gemm_f32(const float* x, const float* w, float* y, int m, int n, int k) override {
    const float alpha = 1.f, beta = 0.f;
    CUBLAS_CHECK(
        cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, k, x, k, &beta, y, n));
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(const PeakOverrides& overrides) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    info_.name = prop.name;
    info_.backend = "cuda";
    info_.simulation = false;

    // cudaDeviceProp lost its clock fields in CUDA 13; the attributes exist in every version.
    const double mem_clock_khz = attribute(cudaDevAttrMemoryClockRate, device);
    const double bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, device);
    const double sm_clock_khz = attribute(cudaDevAttrClockRate, device);
    const int sms = prop.multiProcessorCount;
    const int l2 = prop.l2CacheSize;

    info_.detail = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                   std::to_string(sms) + " SMs, " + format("%.0f MB L2", l2 / 1e6);

    // DRAM moves data on both clock edges: bytes/s = clock × 2 × bus width / 8.
    if (mem_clock_khz > 0 && bus_bits > 0) {
      info_.bandwidth_gbps = {
          mem_clock_khz * 1e3 * 2 * bus_bits / 8 / 1e9,
          format("memory clock %.0f MHz x 2 x %.0f-bit bus", mem_clock_khz / 1e3, bus_bits)};
    }
    for (const ArchRate& r : kArchRates) {
      if (r.major != prop.major || r.minor != prop.minor) continue;
      const double clock_hz = sm_clock_khz * 1e3;
      const std::string arch = "table for sm_" + std::to_string(r.major) + std::to_string(r.minor);
      info_.fp32_tflops = {2.0 * r.fp32_lanes * sms * clock_hz / 1e12,
                           arch + format(": %.0f fp32 lanes x 2 x %.0f SMs x %.2f GHz",
                                         r.fp32_lanes, sms, clock_hz / 1e9)};
      if (r.bf16_flop_per_clk > 0) {
        info_.bf16_tflops = {static_cast<double>(r.bf16_flop_per_clk) * sms * clock_hz / 1e12,
                             arch +
                                 format(": %.0f FLOP/clock x %.0f SMs x %.2f GHz",
                                        r.bf16_flop_per_clk, sms, clock_hz / 1e9) +
                                 " (" + r.example + ")"};
      }
    }
    apply_overrides(info_, overrides);

    // Anything at least twice the L2 evicts every line a previous run left there.
    info_.l2_flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2), size_t{8} << 20);
    CUDA_CHECK(cudaMalloc(&flush_, info_.l2_flush_bytes));
    info_.timer = "CUDA events, L2 flushed before each run";
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }

  ~GpuBackend() override {
    blas_.reset();
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaFree(flush_);
  }
  GpuBackend(const GpuBackend&) = delete;
  GpuBackend& operator=(const GpuBackend&) = delete;

  const DeviceInfo& info() const override { return info_; }

  Timing time(const std::function<void()>& launch, bool flush_l2, int warmup,
              int repetitions) override {
    for (int i = 0; i < warmup; ++i) launch();
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> samples;
    samples.reserve(repetitions);
    for (int r = 0; r < repetitions; ++r) {
      if (flush_l2) CUDA_CHECK(cudaMemsetAsync(flush_, r & 0xff, info_.l2_flush_bytes, nullptr));
      CUDA_CHECK(cudaEventRecord(start_, nullptr));
      launch();
      CUDA_CHECK(cudaEventRecord(stop_, nullptr));
      // Waiting here also surfaces a fault of the kernel at this run, not a later one.
      CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(ms);
    }
    CUDA_CHECK(cudaGetLastError());
    return summarize(std::move(samples));
  }

  Blas* blas() override {
    if (!blas_) blas_ = std::make_unique<Cublas>();
    return blas_.get();
  }

 private:
  DeviceInfo info_;
  void* flush_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::unique_ptr<Cublas> blas_;
};

#else

// ---- CPU backend -------------------------------------------------------------------------------

#ifdef CLOCKWORK_CLI_PROFILE
// Counting mode: the kernels are built for checking, CUDASIM_PROFILE is set by the launcher, and
// each measurement's counts are summed over its kernels and divided by its launches.
struct Counted {
  double launches = 0;
  cudasim::KernelProfile::Totals totals;
  double moved = 0;
  bool flops_counted = false;  // the kernels were built with cudasim's FLOP counter
  double flops = 0;            // what it counted
};

Counted snapshot(int launches) {
  Counted c;
  c.launches = launches;
  for (const cudasim::KernelProfile& k : cudasim::profile_results()) {
    const auto t = k.totals();
    for (int i = 0; i < 6; ++i) {
      c.totals.requests[i] += t.requests[i];
      c.totals.sectors[i] += t.sectors[i];
      c.totals.ideal_sectors[i] += t.ideal_sectors[i];
      c.totals.wavefronts[i] += t.wavefronts[i];
      c.totals.ideal_wavefronts[i] += t.ideal_wavefronts[i];
    }
    c.moved += static_cast<double>(k.global_bytes_moved());
    c.flops_counted = c.flops_counted || k.flops_counted;
    c.flops += k.counted_flops;
  }
  cudasim::profile_reset();
  return c;
}

std::string ratio(double a, double b) {
  char buf[32];
  if (b <= 0) return "-";
  std::snprintf(buf, sizeof buf, "%.2f", a / b);
  return buf;
}

// 2.10M, 35.7K, 512: three significant digits.
std::string si(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.3g%s" : "%.0f%s", v, units[u]);
  return buf;
}
#endif

class SimBackend final : public Backend {
 public:
  explicit SimBackend(const PeakOverrides& overrides) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    info_.name = prop.name;
    info_.backend = "sim";
    info_.simulation = true;
    // The CPU backend reports its worker threads as multiprocessors (CUDASIM_THREADS).
    info_.detail = std::to_string(prop.multiProcessorCount) + " CPU threads";
    info_.timer = "wall clock of the simulation";
    // A simulation has no peaks to speak of; overrides are accepted and ignored so that the
    // same command line works with both binaries.
    (void)overrides;
  }

  const DeviceInfo& info() const override { return info_; }

  Timing time(const std::function<void()>& launch, bool /*flush_l2*/, int warmup,
              int repetitions) override {
#ifdef CLOCKWORK_CLI_PROFILE
    cudasim::profile_reset();
#endif
    for (int i = 0; i < warmup; ++i) launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaGetLastError());
    std::vector<double> samples;
    samples.reserve(repetitions);
    for (int r = 0; r < repetitions; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      launch();
      CUDA_CHECK(cudaDeviceSynchronize());
      samples.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    CUDA_CHECK(cudaGetLastError());
#ifdef CLOCKWORK_CLI_PROFILE
    last_ = snapshot(warmup + repetitions);
#endif
    return summarize(std::move(samples));
  }

  Blas* blas() override { return nullptr; }

#ifdef CLOCKWORK_CLI_PROFILE
  std::string counted_header() const override {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%-10s %-8s %-16s %-12s %9s %9s %9s %10s %9s %12s %12s %10s  %s\n", "op", "variant", "case", "shape",
                  "ld sec/rq", "ideal", "st sec/rq", "smem wf/rq", "ideal", "MB/launch", "FLOPs/launch", "FLOP/B",
                  ("predicted on " + gpu_.name + " (a prediction from counts, not a measurement)").c_str());
    return buf;
  }

  std::string counted_line(const Row& row) override {
    const Counted& c = last_;
    const auto& t = c.totals;
    const int ld = static_cast<int>(cudasim::AccessKind::GlobalLoad), st = static_cast<int>(cudasim::AccessKind::GlobalStore);
    const int sld = static_cast<int>(cudasim::AccessKind::SharedLoad), sst = static_cast<int>(cudasim::AccessKind::SharedStore);
    const double bytes = c.launches > 0 ? c.moved / c.launches : 0;
    const double wf = static_cast<double>(t.wavefronts[sld] + t.wavefronts[sst]);
    const double rq = static_cast<double>(t.requests[sld] + t.requests[sst]);
    const double wf_ideal = static_cast<double>(t.ideal_wavefronts[sld] + t.ideal_wavefronts[sst]);
    // The FLOPs the kernels executed where the build counts them, else the operation's formula.
    const double flops = c.flops_counted ? (c.launches > 0 ? c.flops / c.launches : 0) : row.flops;
    std::string predicted = "-";
    if (bytes > 0) {
      const double t_mem = bytes / gpu_.bytes_per_s, t_fp = flops / gpu_.flops_per_s;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s-bound, >= %.2f us", t_mem >= t_fp ? "memory" : "compute",
                    std::max(t_mem, t_fp) * 1e6);
      predicted = buf;
    }
    char buf[400];
    std::snprintf(buf, sizeof buf, "%-10s %-8s %-16s %-12s %9s %9s %9s %10s %9s %12.3f %12s %10s  %s\n", row.op.c_str(),
                  row.variant.c_str(), row.case_name.c_str(), row.shape.c_str(),
                  ratio(static_cast<double>(t.sectors[ld]), static_cast<double>(t.requests[ld])).c_str(),
                  ratio(static_cast<double>(t.ideal_sectors[ld]), static_cast<double>(t.requests[ld])).c_str(),
                  ratio(static_cast<double>(t.sectors[st]), static_cast<double>(t.requests[st])).c_str(),
                  ratio(wf, rq).c_str(), ratio(wf_ideal, rq).c_str(), bytes / 1e6, c.flops_counted ? si(flops).c_str() : "-",
                  flops > 0 && bytes > 0 ? ratio(flops, bytes).c_str() : "-",
                  predicted.c_str());
    return buf;
  }

  void set_gpu(const cudasim::GpuPeaks& g) { gpu_ = g; }

  double counted_bytes() const override { return last_.launches > 0 ? last_.moved / last_.launches : 0; }
  bool counted_gpu(std::string& name, double& bytes_per_s, double& flops_per_s) const override {
    name = gpu_.name;
    bytes_per_s = gpu_.bytes_per_s;
    flops_per_s = gpu_.flops_per_s;
    return true;
  }
#endif

 private:
  DeviceInfo info_;
#ifdef CLOCKWORK_CLI_PROFILE
  Counted last_;
  cudasim::GpuPeaks gpu_;
#endif
};

#endif

}  // namespace

std::unique_ptr<Backend> make_backend(const PeakOverrides& overrides) {
  require_device();
#ifdef CLOCKWORK_CLI_CUDA
  return std::make_unique<GpuBackend>(overrides);
#elif defined(CLOCKWORK_CLI_PROFILE)
  if (!cudasim::profiling()) {
    throw std::runtime_error("clockwork-profile: counting mode is off (run it as `clockwork bench --profile`, or "
                             "with CUDASIM_PROFILE=1)");
  }
  auto b = std::make_unique<SimBackend>(overrides);
  const char* want = std::getenv("CUDASIM_GPU");
  for (const cudasim::GpuPeaks& g : cudasim::profile_gpus()) {
    if ((!want || !*want) ? g.name == "h100" : g.name == want) b->set_gpu(g);
  }
  return b;
#else
  return std::make_unique<SimBackend>(overrides);
#endif
}

bool counting_build() {
#ifdef CLOCKWORK_CLI_PROFILE
  return true;
#else
  return false;
#endif
}

std::vector<std::string> counting_gpus() {
#ifdef CLOCKWORK_CLI_PROFILE
  std::vector<std::string> names;
  for (const cudasim::GpuPeaks& g : cudasim::profile_gpus()) names.push_back(g.name);
  return names;
#else
  return {"h100", "a100", "rtx4090", "t4"};  // the table of cudasim's counting mode (profile.cpp)
#endif
}

}  // namespace clockwork::cli::bench
