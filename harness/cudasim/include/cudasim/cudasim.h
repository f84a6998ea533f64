// cudasim: CUDA C++ on the CPU.
//
// Force-included (`-include cudasim/cudasim.h`) into every .cu file that tools/cudasim-rewrite
// has turned into host C++. It supplies what nvcc would: the launch machinery, the built-in
// variables (threadIdx, blockIdx, ...), barriers, warp shuffles and votes, atomics and the
// device-only intrinsics (cudasim/intrinsics.h). The real CUDA headers provide every type (dim3,
// __nv_bfloat16, cudaError_t, ...) and the runtime API declarations; libcudasim implements those
// functions.
//
// Each CUDA thread of a block is a fiber; a block runs on one OS thread, blocks of a grid run on
// a pool of them (CUDASIM_THREADS). See handouts/running-without-a-gpu.md.
//
// The checked build of a .cu file (`cudasim-cc --check`, the `_check` test binaries) is compiled
// with -fsanitize=thread: the compiler then calls libcudasim before every memory access of the
// file (src/check.cpp). Code of this header that touches cudasim's own state is kept out of that
// instrumentation (CUDASIM_STATE_READ), so the checker sees the program's accesses only.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudasim/state.h"

#ifndef __CUDASIM__
#define __CUDASIM__ 1
#endif

// Set in checked builds (GCC and Clang define __SANITIZE_THREAD__ for -fsanitize=thread).
#if defined(__SANITIZE_THREAD__)
#define CUDASIM_CHECKED_BUILD 1
// Reads of cudasim's own state are not the program's accesses: these functions are not
// instrumented (and, because of that, not inlined into instrumented code).
#define CUDASIM_STATE_READ inline __attribute__((no_sanitize_thread, noinline))
#else
#define CUDASIM_STATE_READ inline __attribute__((always_inline))
#endif

namespace cudasim {

/// Re-reads the CUDASIM_* environment variables (thread order, pool size, poisoning, checks).
/// Tests use it to run one kernel under several settings in one process; call it between launches.
void reload_options();

/// Whether kernels' memory accesses are being checked: the program was built for checking
/// (`cudasim-cc --check`, the `_check` test binaries) and CUDASIM_CHECK asks for a check.
bool checking();

/// How many plain 4-byte reads of checked kernel code have called into the checker so far, in
/// blocks that finished and were checked for races and bounds (CUDASIM_CHECK=all), counting mode
/// off. With cudasim's GCC plugins, checked code skips the call for reads the checker has said
/// need nothing more; tests of that use this count.
unsigned long long checker_read_calls();

// ---- counting mode (CUDASIM_PROFILE=1, see handouts/profiling.md) ------------------------------
// A program built for checking or profiling (`cudasim-cc --check` / `--profile`) counts its
// kernels' global and shared memory requests per warp-level instruction, as Nsight Compute does,
// when CUDASIM_PROFILE=1 (`--profile` builds count by default); the report goes to stderr at exit.

/// Where an access went. Same order as the runtime's own list.
enum class AccessKind { GlobalLoad, GlobalStore, GlobalAtomic, SharedLoad, SharedStore, SharedAtomic };

/// The counts of one source line and kind of access, over every launch of one kernel.
struct ProfileLine {
  std::string file;
  unsigned line = 0;
  AccessKind kind = AccessKind::GlobalLoad;
  uint64_t requests = 0;          // warp-level instructions
  uint64_t lane_accesses = 0;     // the threads' accesses within them
  uint64_t bytes_requested = 0;   // sum of the threads' access sizes
  uint64_t sectors = 0;           // global: distinct 32-byte sectors per request, summed
  uint64_t ideal_sectors = 0;     // global: the fewest sectors that hold the distinct bytes asked for
  uint64_t wavefronts = 0;        // shared: wavefronts (bank-conflict-free: ideal_wavefronts)
  uint64_t ideal_wavefronts = 0;  // shared: one per request (per phase of wide accesses)
};

struct KernelProfile {
  std::string kernel;  // the name written at the launch
  uint64_t launches = 0;
  double flops = 0;    // declared with profile_flops(); 0 when not
  // Executed floating-point operations, counted where the program's kernels were compiled with
  // cudasim's FLOP counter (flops_counted): +, -, *, / one each, a fused multiply-add two.
  bool flops_counted = false;
  double counted_flops = 0;
  std::vector<ProfileLine> lines;
  struct Totals {  // per AccessKind
    uint64_t requests[6] = {}, lane_accesses[6] = {}, bytes_requested[6] = {}, sectors[6] = {}, ideal_sectors[6] = {},
             wavefronts[6] = {}, ideal_wavefronts[6] = {};
  };
  Totals totals() const;
  uint64_t global_bytes_moved() const;  // 32 bytes per sector, loads, stores and atomics
  double roofline_flops() const;        // counted when the build counts them, else declared
};

/// Whether launches are being counted (an instrumented program and CUDASIM_PROFILE).
bool profiling();
/// What has been counted so far, per kernel in the order of their first launch.
std::vector<KernelProfile> profile_results();
/// Forgets the counts (the report at exit then covers what runs afterwards).
void profile_reset();
/// Declares `flops` floating-point operations of the last launched kernel (added up per kernel):
/// the arithmetic intensity and roofline position of builds without the FLOP counter, and a
/// figure to compare with the count in builds with it.
void profile_flops(double flops);
namespace detail {
/// Called once by a program whose kernels count their FLOPs (cudasim's GCC plugin, which comes
/// with CUDASIM_COUNTS_FLOPS).
void note_flop_counting();
#ifdef CUDASIM_COUNTS_FLOPS
inline const bool flop_counting_noted = (note_flop_counting(), true);
#endif
}  // namespace detail
/// A GPU of the roofline prediction: peak DRAM bandwidth and FP32 (CUDA-core) throughput.
struct GpuPeaks {
  std::string name;  // h100, a100, rtx4090, t4
  double bytes_per_s = 0, flops_per_s = 0;
};
/// The GPUs the report predicts for (figures and their sources in profile.cpp).
std::vector<GpuPeaks> profile_gpus();
/// The report printed at exit: per kernel the counts, the three worst lines and a predicted
/// roofline position for `gpu` (h100, a100, rtx4090, t4; null or "": all of them).
std::string profile_report(const char* gpu = nullptr);

#if defined(CUDASIM_PROFILE_BUILD)  // `cudasim-cc --profile`: counting mode unless CUDASIM_PROFILE=0
namespace detail {
void profile_by_default();
inline const bool profile_by_default_set = (profile_by_default(), true);
}  // namespace detail
#endif

/// Exit status of a process stopped by a cudasim diagnostic (divergent barrier, race, ...).
inline constexpr int kDiagnosticExitStatus = 70;

// ---- kernel launches ---------------------------------------------------------------------------

/// What `<<<grid, block, smem, stream>>>` says.
struct LaunchConfig {
  dim3 grid, block;
  size_t dynamic_smem;
  cudaStream_t stream;
  /// The function launched, where the launch can tell (see Launcher): an opt-in to more dynamic
  /// shared memory belongs to that one function, as on a GPU. Null: the name written at the launch.
  const void* function = nullptr;
};

inline LaunchConfig config(dim3 grid, dim3 block, size_t dynamic_smem = 0, cudaStream_t stream = nullptr) {
  return {grid, block, dynamic_smem, stream};
}

namespace detail {
/// Memory of the launching code that every simulated thread reads: the copied arguments and the
/// launcher itself. The checker treats it as the kernel's parameter space.
struct LaunchRange {
  const void* p;
  size_t bytes;
};
/// Runs `body(ctx)` once per thread of every block; sets the last error instead on a bad config.
void launch(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line, void* ctx,
            void (*body)(void*), const LaunchRange* ranges, size_t n_ranges);
/// The name of the function at `fn`, with its template arguments ("transpose<1>"), or `fallback`
/// when no function starts there (or the program has no symbol table).
const char* function_name(const void* fn, const char* fallback = "kernel");
}  // namespace detail

namespace detail {
/// A kernel launch recorded by stream capture (cudaStreamBeginCapture): its own copy of the
/// configuration and of the arguments, run again by every cudaGraphLaunch.
struct CapturedLaunch {
  virtual ~CapturedLaunch() = default;
  virtual void run() = 0;
};
/// What becomes of a launch on `cfg.stream`: run now, recorded into the stream's capture, or
/// refused (the last error says why: an invalid configuration, or a launch the capture forbids).
enum class LaunchMode { Run, Record, Refused };
LaunchMode launch_mode(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line);
/// Adds a recorded launch to the graph that `stream` is capturing (takes ownership of `node`).
void capture_launch(cudaStream_t stream, const char* kernel, CapturedLaunch* node);
}  // namespace detail

namespace detail {
/// Tags that rank the two function_of() overloads: ExactParameters converts to OnlyFunction.
struct OnlyFunction {};
struct ExactParameters : OnlyFunction {};
/// The function `&K` names for arguments of types A..., as the rewrite asks it of a launch's kernel
/// expression K: `function_of<A...>(&K, ExactParameters{})`. The overload or instantiation whose
/// parameters are exactly A... comes first; else the one function K names (its address deduces F;
/// a pointer variable's address deduces a pointer, no function). An overload set neither picks is
/// no call at all: the rewrite tests for that first.
template <class... A>
const void* function_of(void (*f)(A...), ExactParameters) {
  return reinterpret_cast<const void*>(f);
}
template <class... A, class F>
requires std::is_function_v<F>
const void* function_of(F* f, OnlyFunction) {
  return reinterpret_cast<const void*>(f);
}
/// The function a call lambda stands for when it captures a function pointer and nothing else
/// (`kernel<<<...>>>` with `auto kernel = half ? f<16> : f<32>`), or null.
template <class Call>
const void* captured_function(const Call& call) {
  using Fn = void (*)();
  if constexpr (!std::is_empty_v<Call> && sizeof(Call) == sizeof(Fn) &&
                std::is_trivially_copyable_v<Call>) {
    Fn fn;
    std::memcpy(&fn, &call, sizeof fn);
    // Any other capture of that size (a `this`, an index) points at no function.
    return function_name(reinterpret_cast<const void*>(fn), nullptr)
               ? reinterpret_cast<const void*>(fn)
               : nullptr;
  } else {
    return nullptr;
  }
}
}  // namespace detail

/// `K<<<cfg>>>(args...)` becomes `launcher(cfg, "K", call_K, function_of_K)(args...)`: the
/// arguments are copied once at the launch (as CUDA does) and every simulated thread calls the
/// kernel with them. On a capturing stream the copy is kept in the graph instead, and each replay
/// runs with it.
///
/// `function_of_K.operator()<A...>()` is the function K names for arguments of types A...: the
/// overload or instantiation whose parameters are exactly A..., else the one function K names, else
/// null. `k<D>` in a template is thus `k<64>` at one launch and `k<128>` at another, and each has
/// its own opt-in to more dynamic shared memory (cudaFuncSetAttribute), as on a GPU. Where K names
/// no single function (an overload set the argument types do not pick), the launch goes by K's
/// name, and an opt-in of any function of that name holds for it.
template <class Call, class FunctionOf>
struct Launcher {
  LaunchConfig cfg;
  const char* kernel;
  Call call;
  FunctionOf function_of;
  std::source_location where;

  template <class... Args>
  void operator()(Args&&... args) {
    using Copied = std::tuple<std::decay_t<Args>...>;
    cfg.function = function_of.template operator()<std::decay_t<Args>...>();
    if (!cfg.function) cfg.function = detail::captured_function(call);
    if (cfg.function) kernel = detail::function_name(cfg.function, kernel);
    switch (detail::launch_mode(cfg, kernel, where.file_name(), where.line())) {
      case detail::LaunchMode::Refused:
        return;
      case detail::LaunchMode::Record: {
        struct Recorded final : detail::CapturedLaunch {
          Launcher self;
          Copied args;
          Recorded(const Launcher& l, Copied a) : self(l), args(std::move(a)) {}
          void run() override { self.run(args); }
        };
        detail::capture_launch(cfg.stream, kernel, new Recorded(*this, Copied(std::forward<Args>(args)...)));
        return;
      }
      case detail::LaunchMode::Run:
        break;
    }
    Copied copied(std::forward<Args>(args)...);
    run(copied);
  }

  /// Runs the kernel with arguments already copied.
  template <class Copied>
  void run(Copied& copied) {
    struct Ctx {
      Call* call;
      Copied* args;
    } ctx{&call, &copied};
    const detail::LaunchRange ranges[] = {{&copied, sizeof copied}, {&ctx, sizeof ctx}, {this, sizeof *this}};
    detail::launch(cfg, kernel, where.file_name(), where.line(), &ctx, [](void* p) {
      auto* c = static_cast<Ctx*>(p);
      std::apply(*c->call, *c->args);  // each thread gets its own by-value parameters
    }, ranges, 3);
  }
};

template <class Call, class FunctionOf>
Launcher<Call, FunctionOf> launcher(const LaunchConfig& cfg, const char* kernel, Call call,
                                    FunctionOf function_of,
                                    std::source_location where = std::source_location::current()) {
  return {cfg, kernel, std::move(call), std::move(function_of), where};
}

// ---- shared memory -----------------------------------------------------------------------------

namespace detail {
/// The storage of the `__shared__` declaration identified by `key` for the running block, made on
/// first use (checked builds: the declaration's extent and name go to the checker).
void* shared_slot(const void* key, size_t bytes, size_t align, size_t elem_bytes, const char* name,
                  std::source_location where);
/// Start of the running block's dynamic shared memory; `name` and the element size are recorded
/// for the checker's messages.
void* dynamic_shared_named(const char* name, size_t elem_bytes);
CUDASIM_STATE_READ uint64_t block_generation() { return tl_block->generation; }
CUDASIM_STATE_READ unsigned char* block_dynamic_smem() { return tl_block->dynamic_smem; }
}  // namespace detail

/// Storage of one `__shared__` declaration for the running block. The first thread of a block to
/// reach the declaration allocates it (poisoned, so reading before writing shows up as NaN);
/// every other thread of the block gets the same memory.
template <class T, unsigned Id, size_t Align>
T& shared_var(const char* name = "", std::source_location where = std::source_location::current()) {
  constexpr size_t align = Align > alignof(T) ? Align : alignof(T);
  using Elem = std::remove_all_extents_t<T>;
#if CUDASIM_CHECKED_BUILD
  static const char key = 0;  // one per declaration; only its address is used
  return *static_cast<T*>(detail::shared_slot(&key, sizeof(T), align, sizeof(Elem), name, where));
#else
  static thread_local struct {
    uint64_t generation = 0;
    void* ptr = nullptr;
  } slot;
  if (slot.generation != detail::block_generation()) {
    slot.ptr = detail::shared_alloc(sizeof(T), align, sizeof(Elem), name, where);
    slot.generation = detail::block_generation();
  }
  return *static_cast<T*>(slot.ptr);
#endif
}

/// Start of the block's dynamic shared memory (`extern __shared__`), poisoned at block start.
inline void* dynamic_shared() { return detail::block_dynamic_smem(); }

/// The same, for `extern __shared__ T name[]` (what the rewriter emits).
template <class T>
T* dynamic_shared(const char* name) {
#if CUDASIM_CHECKED_BUILD
  return static_cast<T*>(detail::dynamic_shared_named(name, sizeof(std::remove_all_extents_t<T>)));
#else
  (void)name;
  return reinterpret_cast<T*>(detail::block_dynamic_smem());
#endif
}

}  // namespace cudasim

// ---- C++ runtime-API overloads that the CUDA headers declare only for nvcc -----------------------

namespace cudasim::detail {
/// cudaMemcpyToSymbol/FromSymbol with the symbol's size, so that a copy past its end is refused.
cudaError_t copy_symbol(void* symbol, size_t symbol_bytes, void* host, size_t count, size_t offset, bool to_symbol,
                        const char* file, unsigned line);
}  // namespace cudasim::detail

template <class T>
inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                      cudaMemcpyKind = cudaMemcpyHostToDevice,
                                      std::source_location l = std::source_location::current()) {
  return cudasim::detail::copy_symbol(const_cast<T*>(&symbol), sizeof(T), const_cast<void*>(src), count, offset,
                                      true, l.file_name(), l.line());
}
template <class T>
inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                           cudaMemcpyKind = cudaMemcpyHostToDevice, cudaStream_t = nullptr,
                                           std::source_location l = std::source_location::current()) {
  return cudasim::detail::copy_symbol(const_cast<T*>(&symbol), sizeof(T), const_cast<void*>(src), count, offset,
                                      true, l.file_name(), l.line());
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                        cudaMemcpyKind = cudaMemcpyDeviceToHost,
                                        std::source_location l = std::source_location::current()) {
  return cudasim::detail::copy_symbol(const_cast<T*>(&symbol), sizeof(T), dst, count, offset, false, l.file_name(),
                                      l.line());
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                             cudaMemcpyKind = cudaMemcpyDeviceToHost, cudaStream_t = nullptr,
                                             std::source_location l = std::source_location::current()) {
  return cudasim::detail::copy_symbol(const_cast<T*>(&symbol), sizeof(T), dst, count, offset, false, l.file_name(),
                                      l.line());
}
template <class T>
inline cudaError_t cudaGetSymbolAddress(void** ptr, const T& symbol) {
  *ptr = const_cast<void*>(static_cast<const void*>(&symbol));
  return cudaSuccess;
}
template <class T>
inline cudaError_t cudaGetSymbolSize(size_t* size, const T&) {
  *size = sizeof(T);
  return cudaSuccess;
}
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
template <class T>
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* kernel) {
  return ::cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(kernel));
}
template <class T>
inline cudaError_t cudaFuncSetCacheConfig(T* kernel, cudaFuncCache config) {
  return ::cudaFuncSetCacheConfig(reinterpret_cast<const void*>(kernel), config);
}

/// cudaLaunchKernel(kernel, grid, block, args, smem, stream) with a kernel whose parameter types
/// are known: the argument pointers are unpacked into an ordinary launch.
template <class... P>
cudaError_t cudaLaunchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args, size_t smem = 0,
                             cudaStream_t stream = nullptr,
                             std::source_location l = std::source_location::current()) {
  if (!kernel || (sizeof...(P) > 0 && !args)) return cudaErrorInvalidValue;
  auto run = [&]<size_t... I>(std::index_sequence<I...>) {
    cudasim::launcher(
        cudasim::config(grid, block, smem, stream), "kernel", [kernel](auto... a) { kernel(a...); },
        [kernel]<class...>() { return reinterpret_cast<const void*>(kernel); },
        l)(*static_cast<std::decay_t<P>*>(args[I])...);
  };
  run(std::index_sequence_for<P...>{});
  return cudaPeekAtLastError();
}

// ---- built-in variables ------------------------------------------------------------------------

namespace cudasim::detail {
CUDASIM_STATE_READ uint3 builtin_thread_idx() { return tl_lane->tid; }
CUDASIM_STATE_READ uint3 builtin_block_idx() { return tl_block->idx; }
CUDASIM_STATE_READ dim3 builtin_block_dim() { return tl_block->dim; }
CUDASIM_STATE_READ dim3 builtin_grid_dim() { return tl_block->grid; }
}  // namespace cudasim::detail

#if CUDASIM_CHECKED_BUILD
#define threadIdx (::cudasim::detail::builtin_thread_idx())
#define blockIdx (::cudasim::detail::builtin_block_idx())
#define blockDim (::cudasim::detail::builtin_block_dim())
#define gridDim (::cudasim::detail::builtin_grid_dim())
#else
#define threadIdx (::cudasim::detail::tl_lane->tid)
#define blockIdx (::cudasim::detail::tl_block->idx)
#define blockDim (::cudasim::detail::tl_block->dim)
#define gridDim (::cudasim::detail::tl_block->grid)
#endif
inline constexpr int warpSize = 32;

// Declarations the rewriter could not turn into block storage (e.g. in an included header) still
// compile: one copy per OS thread is shared by the threads of the block it runs.
#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

namespace cudasim::detail {
/// Stops the program: the running block has more threads than `max_threads`, its kernel's bound.
[[noreturn]] void launch_bounds_exceeded(long long max_threads);
/// What the rewrite puts first in a kernel declared with `__launch_bounds__(max_threads, ...)`:
/// a GPU refuses to launch more threads per block than that. (The other two arguments steer the
/// compiler's register budget and clusters; they cannot make a launch fail by themselves.)
inline void launch_bounds(long long max_threads, long long = 0, long long = 0) {
  const dim3 d = builtin_block_dim();
  if (static_cast<long long>(d.x) * d.y * d.z > max_threads) launch_bounds_exceeded(max_threads);
}
}  // namespace cudasim::detail

// ---- barriers ----------------------------------------------------------------------------------

namespace cudasim::detail {
using Loc = std::source_location;
inline int syncthreads_with(int pred, const char* what, Loc l) { return block_barrier(pred, what, l); }
CUDASIM_STATE_READ int block_threads() { return static_cast<int>(tl_block->nthreads); }
}  // namespace cudasim::detail

inline void __syncthreads(std::source_location l = std::source_location::current()) {
  cudasim::detail::syncthreads_with(0, "__syncthreads", l);
}
/// Number of threads of the block whose predicate is non-zero.
inline int __syncthreads_count(int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::syncthreads_with(pred != 0, "__syncthreads_count", l);
}
inline int __syncthreads_and(int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::syncthreads_with(pred != 0, "__syncthreads_and", l) == cudasim::detail::block_threads();
}
inline int __syncthreads_or(int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::syncthreads_with(pred != 0, "__syncthreads_or", l) != 0;
}

// ---- warp-level primitives ---------------------------------------------------------------------

inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location l = std::source_location::current()) {
  cudasim::detail::warp_sync(cudasim::detail::WarpOp::SyncWarp, mask, 0, 0, 0, "__syncwarp", l);
}

namespace cudasim::detail {
CUDASIM_STATE_READ unsigned lane_id() { return tl_lane->linear & 31u; }

// All lanes named in `mask` deposit `v`, meet, then each gets lane `src_of(lane)`'s deposit. A
// source lane that did not take part yields poison (all bits set), as its value is undefined.
template <class T, class Src>
T shuffle(unsigned mask, T v, Src src_of, const char* what, Loc l) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const void*>(&v), sizeof(T));
  const unsigned src = static_cast<unsigned>(src_of(static_cast<int>(lane_id()))) & 31u;
  const uint64_t got = warp_sync(WarpOp::Shuffle, mask, 0, bits, src, what, l);
  T r;
  std::memcpy(static_cast<void*>(&r), &got, sizeof(T));
  return r;
}
inline int vote(WarpOp op, unsigned mask, int pred, const char* what, Loc l) {
  return static_cast<int>(warp_sync(op, mask, pred != 0, 0, 0, what, l));
}
template <class T>
T warp_combine(WarpOp op, unsigned mask, T v, const char* what, Loc l) {
  static_assert(sizeof(T) <= 8 && std::is_integral_v<T>, "warp reductions take integers");
  const uint64_t bits = static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
  return static_cast<T>(warp_sync(op, mask, std::is_signed_v<T>, bits, 0, what, l));
}
}  // namespace cudasim::detail

template <class T>
T __shfl_sync(unsigned mask, T var, int src, int width = warpSize, std::source_location l = std::source_location::current()) {
  return cudasim::detail::shuffle(mask, var, [=](int lane) { return (lane & ~(width - 1)) + (src & (width - 1)); },
                                  "__shfl_sync", l);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location l = std::source_location::current()) {
  return cudasim::detail::shuffle(
      mask, var, [=](int lane) { return (lane & (width - 1)) >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : lane; },
      "__shfl_up_sync", l);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location l = std::source_location::current()) {
  return cudasim::detail::shuffle(
      mask, var, [=](int lane) { return (lane & (width - 1)) + static_cast<int>(delta) < width ? lane + static_cast<int>(delta) : lane; },
      "__shfl_down_sync", l);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location l = std::source_location::current()) {
  return cudasim::detail::shuffle(
      // As PTX's shfl.bfly: the partner may sit in an earlier group of `width` lanes, not a later
      // one (the Programming Guide: "access elements from earlier groups", a later one gives the
      // lane its own value). Measured on an H200 for width 4, lane 4 ^ 6 = lane 2.
      mask, var, [=](int lane) { int s = lane ^ (lane_mask & 31); return s <= (lane | (width - 1)) ? s : lane; },
      "__shfl_xor_sync", l);
}
inline unsigned __ballot_sync(unsigned mask, int pred, std::source_location l = std::source_location::current()) {
  return static_cast<unsigned>(cudasim::detail::vote(cudasim::detail::WarpOp::Ballot, mask, pred, "__ballot_sync", l));
}
inline int __any_sync(unsigned mask, int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::vote(cudasim::detail::WarpOp::Any, mask, pred, "__any_sync", l);
}
inline int __all_sync(unsigned mask, int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::vote(cudasim::detail::WarpOp::All, mask, pred, "__all_sync", l);
}
/// Lanes of the calling warp that execute this same call together. Threads run one at a time
/// here, so the call waits until every other lane of the warp has exited or stopped at some
/// barrier, and returns the lanes that stopped at this call site: what a converged warp reports.
inline unsigned __activemask(std::source_location l = std::source_location::current()) {
  return static_cast<unsigned>(cudasim::detail::vote(cudasim::detail::WarpOp::ActiveMask,
                                                     1u << cudasim::detail::lane_id(), 0, "__activemask", l));
}

// Warp reductions and matches (compute capability 8.0 and 7.0).
#define CUDASIM_WARP_REDUCE(name, op, T)                                                               \
  inline T name(unsigned mask, T v, std::source_location l = std::source_location::current()) {      \
    return cudasim::detail::warp_combine(cudasim::detail::WarpOp::op, mask, v, #name, l);             \
  }
CUDASIM_WARP_REDUCE(__reduce_add_sync, ReduceAdd, int)
CUDASIM_WARP_REDUCE(__reduce_add_sync, ReduceAdd, unsigned)
CUDASIM_WARP_REDUCE(__reduce_min_sync, ReduceMin, int)
CUDASIM_WARP_REDUCE(__reduce_min_sync, ReduceUMin, unsigned)
CUDASIM_WARP_REDUCE(__reduce_max_sync, ReduceMax, int)
CUDASIM_WARP_REDUCE(__reduce_max_sync, ReduceUMax, unsigned)
CUDASIM_WARP_REDUCE(__reduce_and_sync, ReduceAnd, unsigned)
CUDASIM_WARP_REDUCE(__reduce_or_sync, ReduceOr, unsigned)
CUDASIM_WARP_REDUCE(__reduce_xor_sync, ReduceXor, unsigned)
#undef CUDASIM_WARP_REDUCE
template <class T>
unsigned __match_any_sync(unsigned mask, T v, std::source_location l = std::source_location::current()) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const void*>(&v), sizeof(T));
  return static_cast<unsigned>(
      cudasim::detail::warp_sync(cudasim::detail::WarpOp::MatchAny, mask, 0, bits, 0, "__match_any_sync", l));
}
template <class T>
unsigned __match_all_sync(unsigned mask, T v, int* pred, std::source_location l = std::source_location::current()) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const void*>(&v), sizeof(T));
  const unsigned r = static_cast<unsigned>(
      cudasim::detail::warp_sync(cudasim::detail::WarpOp::MatchAll, mask, 0, bits, 0, "__match_all_sync", l));
  *pred = r != 0;
  return r;
}

// ---- atomics: blocks run concurrently on several OS threads, so these are real atomics -----------

namespace cudasim::detail {
// A lane that keeps applying atomics to one address is most likely waiting for another thread
// (a lock, a flag): after a few in a row it lets the other threads of its block run. In checked
// builds the checker sees every atomic and does this itself.
inline void spin_hint(const void* p) {
#if !CUDASIM_CHECKED_BUILD
  note_atomic(p);
#else
  (void)p;
#endif
}

template <class T, class F>
T atomic_update(T* p, F f) {  // compare-and-swap loop for operations std::atomic_ref lacks
  spin_hint(p);
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (!a.compare_exchange_weak(old, f(old))) {
  }
  return old;
}
template <class T>
T atomic_cas(T* p, T expected, T desired) {
  spin_hint(p);
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
template <class H>
H atomic_add_16(H* p, H v) {  // __half / __nv_bfloat16: CAS on the 16-bit pattern
  static_assert(sizeof(H) == 2);
  spin_hint(p);
  auto* u = reinterpret_cast<unsigned short*>(p);
  unsigned short old = std::atomic_ref<unsigned short>(*u).load(), next;
  do {
    H cur, sum;
    std::memcpy(static_cast<void*>(&cur), &old, 2);
    sum = H(static_cast<float>(cur) + static_cast<float>(v));
    std::memcpy(&next, static_cast<const void*>(&sum), 2);
  } while (!std::atomic_ref<unsigned short>(*u).compare_exchange_weak(old, next));
  H r;
  std::memcpy(static_cast<void*>(&r), &old, 2);
  return r;
}
template <class H2>
H2 atomic_add_pair(H2* p, H2 v) {  // __half2 / __nv_bfloat162: one CAS on the 32-bit pattern
  static_assert(sizeof(H2) == 4);
  spin_hint(p);
  auto* u = reinterpret_cast<unsigned*>(p);
  unsigned old = std::atomic_ref<unsigned>(*u).load(), next;
  do {
    H2 cur, sum;
    std::memcpy(static_cast<void*>(&cur), &old, 4);
    sum.x = decltype(cur.x)(static_cast<float>(cur.x) + static_cast<float>(v.x));
    sum.y = decltype(cur.y)(static_cast<float>(cur.y) + static_cast<float>(v.y));
    std::memcpy(&next, static_cast<const void*>(&sum), 4);
  } while (!std::atomic_ref<unsigned>(*u).compare_exchange_weak(old, next));
  H2 r;
  std::memcpy(static_cast<void*>(&r), &old, 4);
  return r;
}
}  // namespace cudasim::detail

// The overloads CUDA provides, and no others, so that code compiling here also compiles with nvcc.
#define CUDASIM_ATOMIC_ARITH(T)                                                                  \
  inline T atomicAdd(T* p, T v) {                                                                 \
    cudasim::detail::spin_hint(p);                                                                \
    return std::atomic_ref<T>(*p).fetch_add(v);                                                   \
  }                                                                                               \
  inline T atomicExch(T* p, T v) {                                                                \
    cudasim::detail::spin_hint(p);                                                                \
    return std::atomic_ref<T>(*p).exchange(v);                                                    \
  }
#define CUDASIM_ATOMIC_MINMAX_CAS(T)                                                             \
  inline T atomicMin(T* p, T v) {                                                                \
    return cudasim::detail::atomic_update(p, [v](T o) { return v < o ? v : o; });               \
  }                                                                                              \
  inline T atomicMax(T* p, T v) {                                                                \
    return cudasim::detail::atomic_update(p, [v](T o) { return v > o ? v : o; });               \
  }                                                                                              \
  inline T atomicCAS(T* p, T expected, T desired) { return cudasim::detail::atomic_cas(p, expected, desired); }
#define CUDASIM_ATOMIC_BITS(T)                                                                   \
  inline T atomicAnd(T* p, T v) {                                                                \
    cudasim::detail::spin_hint(p);                                                               \
    return std::atomic_ref<T>(*p).fetch_and(v);                                                  \
  }                                                                                              \
  inline T atomicOr(T* p, T v) {                                                                 \
    cudasim::detail::spin_hint(p);                                                               \
    return std::atomic_ref<T>(*p).fetch_or(v);                                                   \
  }                                                                                              \
  inline T atomicXor(T* p, T v) {                                                                \
    cudasim::detail::spin_hint(p);                                                               \
    return std::atomic_ref<T>(*p).fetch_xor(v);                                                  \
  }
CUDASIM_ATOMIC_ARITH(int)
CUDASIM_ATOMIC_ARITH(unsigned int)
CUDASIM_ATOMIC_ARITH(unsigned long long)
CUDASIM_ATOMIC_ARITH(float)
inline double atomicAdd(double* p, double v) {
  cudasim::detail::spin_hint(p);
  return std::atomic_ref<double>(*p).fetch_add(v);
}
inline int atomicSub(int* p, int v) {
  cudasim::detail::spin_hint(p);
  return std::atomic_ref<int>(*p).fetch_sub(v);
}
inline unsigned atomicSub(unsigned* p, unsigned v) {
  cudasim::detail::spin_hint(p);
  return std::atomic_ref<unsigned>(*p).fetch_sub(v);
}
CUDASIM_ATOMIC_MINMAX_CAS(int)
CUDASIM_ATOMIC_MINMAX_CAS(unsigned int)
CUDASIM_ATOMIC_MINMAX_CAS(unsigned long long)
CUDASIM_ATOMIC_MINMAX_CAS(long long)
CUDASIM_ATOMIC_BITS(int)
CUDASIM_ATOMIC_BITS(unsigned int)
CUDASIM_ATOMIC_BITS(unsigned long long)
#undef CUDASIM_ATOMIC_ARITH
#undef CUDASIM_ATOMIC_MINMAX_CAS
#undef CUDASIM_ATOMIC_BITS

inline unsigned short atomicCAS(unsigned short* p, unsigned short expected, unsigned short desired) {
  return cudasim::detail::atomic_cas(p, expected, desired);
}
inline __half atomicAdd(__half* p, __half v) { return cudasim::detail::atomic_add_16(p, v); }
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) { return cudasim::detail::atomic_add_16(p, v); }
inline __half2 atomicAdd(__half2* p, __half2 v) { return cudasim::detail::atomic_add_pair(p, v); }
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* p, __nv_bfloat162 v) { return cudasim::detail::atomic_add_pair(p, v); }
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  return cudasim::detail::atomic_update(p, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* p, unsigned limit) {
  return cudasim::detail::atomic_update(p, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; });
}
// The _block and _system scopes are the same thing on one CPU.
#define CUDASIM_SCOPED(name)                                                                            \
  template <class T, class... A>                                                                        \
  inline auto name##_block(T* p, A... a) -> decltype(name(p, a...)) { return name(p, a...); }           \
  template <class T, class... A>                                                                        \
  inline auto name##_system(T* p, A... a) -> decltype(name(p, a...)) { return name(p, a...); }
CUDASIM_SCOPED(atomicAdd)
CUDASIM_SCOPED(atomicSub)
CUDASIM_SCOPED(atomicExch)
CUDASIM_SCOPED(atomicMin)
CUDASIM_SCOPED(atomicMax)
CUDASIM_SCOPED(atomicCAS)
CUDASIM_SCOPED(atomicAnd)
CUDASIM_SCOPED(atomicOr)
CUDASIM_SCOPED(atomicXor)
CUDASIM_SCOPED(atomicInc)
CUDASIM_SCOPED(atomicDec)
#undef CUDASIM_SCOPED

// A fence, and a chance for the other threads of the block to run: fences sit in code that
// waits for or signals another thread.
inline void __threadfence() { cudasim::detail::thread_fence(); }
inline void __threadfence_block() { cudasim::detail::thread_fence(); }
inline void __threadfence_system() { cudasim::detail::thread_fence(); }
/// Sleeping is yielding here: the other threads of the block run meanwhile.
inline void __nanosleep(unsigned) { cudasim::detail::spin_yield("__nanosleep"); }

namespace cudasim::detail {
[[noreturn]] void trap(const char* what, std::source_location where);
}  // namespace cudasim::detail
/// Stops the kernel with a diagnostic naming the thread, as a GPU reports an illegal instruction.
[[noreturn]] inline void __trap(std::source_location l = std::source_location::current()) {
  cudasim::detail::trap("__trap()", l);
}
[[noreturn]] inline void __brkpt(std::source_location l = std::source_location::current()) {
  cudasim::detail::trap("__brkpt()", l);
}

/// Nanoseconds of host time, standing in for the SM cycle counter.
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#include "cudasim/intrinsics.h"
