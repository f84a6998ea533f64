// cudasim: CUDA C++ on the CPU.
//
// Force-included (`-include cudasim/cudasim.h`) into every .cu file that tools/cudasim-rewrite
// has turned into host C++. It supplies what nvcc would: the launch machinery, the built-in
// variables (threadIdx, blockIdx, ...), barriers, warp shuffles and votes, atomics and the
// device-only math intrinsics. The real CUDA headers provide every type (dim3, __nv_bfloat16,
// cudaError_t, ...) and the runtime API declarations; libcudasim implements those functions.
//
// Each CUDA thread of a block is a fiber; a block runs on one OS thread, blocks of a grid run on
// a pool of them (CUDASIM_THREADS). See handouts/running-without-a-gpu.md.
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
#include <tuple>
#include <type_traits>
#include <utility>

#include "cudasim/state.h"

#ifndef __CUDASIM__
#define __CUDASIM__ 1
#endif

namespace cudasim {

/// Re-reads the CUDASIM_* environment variables (thread order, pool size, poisoning). Tests use
/// it to run one kernel under several thread orders in one process; call it between launches.
void reload_options();

/// Exit status of a process stopped by a cudasim diagnostic (divergent barrier, deadlock, ...).
inline constexpr int kDiagnosticExitStatus = 70;

// ---- kernel launches ---------------------------------------------------------------------------

/// What `<<<grid, block, smem, stream>>>` says.
struct LaunchConfig {
  dim3 grid, block;
  size_t dynamic_smem;
  cudaStream_t stream;
};

inline LaunchConfig config(dim3 grid, dim3 block, size_t dynamic_smem = 0, cudaStream_t stream = nullptr) {
  return {grid, block, dynamic_smem, stream};
}

namespace detail {
/// Runs `body(ctx)` once per thread of every block; sets the last error instead on a bad config.
void launch(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line, void* ctx,
            void (*body)(void*));
}  // namespace detail

/// `K<<<cfg>>>(args...)` becomes `launcher(cfg, "K", call_K)(args...)`: the arguments are copied
/// once at the launch (as CUDA does) and every simulated thread calls the kernel with them.
template <class Call>
struct Launcher {
  LaunchConfig cfg;
  const char* kernel;
  Call call;
  std::source_location where;

  template <class... Args>
  void operator()(Args&&... args) {
    std::tuple<std::decay_t<Args>...> copied(std::forward<Args>(args)...);
    struct Ctx {
      Call* call;
      std::tuple<std::decay_t<Args>...>* args;
    } ctx{&call, &copied};
    detail::launch(cfg, kernel, where.file_name(), where.line(), &ctx, [](void* p) {
      auto* c = static_cast<Ctx*>(p);
      std::apply(*c->call, *c->args);  // each thread gets its own by-value parameters
    });
  }
};

template <class Call>
Launcher<Call> launcher(const LaunchConfig& cfg, const char* kernel, Call call,
                        std::source_location where = std::source_location::current()) {
  return {cfg, kernel, std::move(call), where};
}

// ---- shared memory -----------------------------------------------------------------------------

/// Storage of one `__shared__` declaration for the running block. The first thread of a block to
/// reach the declaration allocates it (poisoned, so reading before writing shows up as NaN);
/// every other thread of the block gets the same memory.
template <class T, unsigned Id, size_t Align>
T& shared_var(std::source_location where = std::source_location::current()) {
  static thread_local struct {
    uint64_t generation = 0;
    void* ptr = nullptr;
  } slot;
  detail::Block* b = detail::tl_block;
  if (slot.generation != b->generation) {
    constexpr size_t align = Align > alignof(T) ? Align : alignof(T);
    slot.ptr = detail::shared_alloc(sizeof(T), align, where.file_name(), where.line());
    slot.generation = b->generation;
  }
  return *static_cast<T*>(slot.ptr);
}

/// Start of the block's dynamic shared memory (`extern __shared__`), poisoned at block start.
inline void* dynamic_shared() { return detail::tl_block->dynamic_smem; }

}  // namespace cudasim

// ---- C++ runtime-API overloads that the CUDA headers declare only for nvcc -----------------------

template <class T>
inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  return ::cudaMemcpyToSymbol(static_cast<const void*>(&symbol), src, count, offset, kind);
}
template <class T>
inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                           cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t = nullptr) {
  return ::cudaMemcpyToSymbol(static_cast<const void*>(&symbol), src, count, offset, kind);
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  return ::cudaMemcpyFromSymbol(dst, static_cast<const void*>(&symbol), count, offset, kind);
}
template <class T>
inline cudaError_t cudaGetSymbolAddress(void** ptr, const T& symbol) {
  *ptr = const_cast<void*>(static_cast<const void*>(&symbol));
  return cudaSuccess;
}
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// ---- built-in variables ------------------------------------------------------------------------

#define threadIdx (::cudasim::detail::tl_lane->tid)
#define blockIdx (::cudasim::detail::tl_block->idx)
#define blockDim (::cudasim::detail::tl_block->dim)
#define gridDim (::cudasim::detail::tl_block->grid)
inline constexpr int warpSize = 32;

// Declarations the rewriter could not turn into block storage (e.g. in an included header) still
// compile: one copy per OS thread is shared by the threads of the block it runs.
#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

// ---- barriers ----------------------------------------------------------------------------------

namespace cudasim::detail {
using Loc = std::source_location;
inline int syncthreads_with(int pred, const char* what, const Loc& l) {
  block_barrier(pred, what, l.file_name(), l.line());
  return tl_block->barrier_result;
}
}  // namespace cudasim::detail

inline void __syncthreads(std::source_location l = std::source_location::current()) {
  cudasim::detail::syncthreads_with(0, "__syncthreads", l);
}
/// Number of threads of the block whose predicate is non-zero.
inline int __syncthreads_count(int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::syncthreads_with(pred != 0, "__syncthreads_count", l);
}
inline int __syncthreads_and(int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::syncthreads_with(pred != 0, "__syncthreads_and", l) ==
         static_cast<int>(cudasim::detail::tl_block->nthreads);
}
inline int __syncthreads_or(int pred, std::source_location l = std::source_location::current()) {
  return cudasim::detail::syncthreads_with(pred != 0, "__syncthreads_or", l) != 0;
}

// ---- warp-level primitives ---------------------------------------------------------------------

inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location l = std::source_location::current()) {
  cudasim::detail::warp_sync(cudasim::detail::WarpOp::SyncWarp, mask, 0, 0, "__syncwarp", l.file_name(),
                             l.line());
}

namespace cudasim::detail {
// All lanes named in `mask` deposit `v`, meet, then each reads lane `src_of(lane)`'s deposit. A
// source lane that did not take part yields poison (all bits set), as its value is undefined.
template <class T, class Src>
T shuffle(unsigned mask, T v, Src src_of, const char* what, const Loc& l) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const void*>(&v), sizeof(T));
  warp_sync(WarpOp::Shuffle, mask, 0, bits, what, l.file_name(), l.line());
  const unsigned me = tl_lane->linear, base = me & ~31u;
  const unsigned src = static_cast<unsigned>(src_of(static_cast<int>(me & 31u)));
  const uint64_t got = (tl_block->participants[me] >> src & 1u) ? tl_block->snapshot[base + src] : ~0ull;
  T r;
  std::memcpy(static_cast<void*>(&r), &got, sizeof(T));
  return r;
}
inline int vote(WarpOp op, unsigned mask, int pred, const char* what, const Loc& l) {
  warp_sync(op, mask, pred != 0, 0, what, l.file_name(), l.line());
  return static_cast<int>(tl_block->vote[tl_lane->linear]);
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
      mask, var, [=](int lane) { int s = lane ^ lane_mask; return (s & ~(width - 1)) == (lane & ~(width - 1)) ? s : lane; },
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
                                                     1u << (cudasim::detail::tl_lane->linear & 31u), 0,
                                                     "__activemask", l));
}

// ---- atomics: blocks run concurrently on several OS threads, so these are real atomics -----------

namespace cudasim::detail {
template <class T, class F>
T atomic_update(T* p, F f) {  // compare-and-swap loop for operations std::atomic_ref lacks
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (!a.compare_exchange_weak(old, f(old))) {
  }
  return old;
}
template <class H>
H atomic_add_16(H* p, H v) {  // __half / __nv_bfloat16: CAS on the 16-bit pattern
  static_assert(sizeof(H) == 2);
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
}  // namespace cudasim::detail

// The overloads CUDA provides, and no others, so that code compiling here also compiles with nvcc.
#define CUDASIM_ATOMIC_ARITH(T)                                                                 \
  inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }                  \
  inline T atomicExch(T* p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
#define CUDASIM_ATOMIC_MINMAX_CAS(T)                                                             \
  inline T atomicMin(T* p, T v) {                                                                \
    return cudasim::detail::atomic_update(p, [v](T o) { return v < o ? v : o; });               \
  }                                                                                              \
  inline T atomicMax(T* p, T v) {                                                                \
    return cudasim::detail::atomic_update(p, [v](T o) { return v > o ? v : o; });               \
  }                                                                                              \
  inline T atomicCAS(T* p, T expected, T desired) {                                             \
    std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);                           \
    return expected;                                                                             \
  }
#define CUDASIM_ATOMIC_BITS(T)                                                                   \
  inline T atomicAnd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_and(v); }                  \
  inline T atomicOr(T* p, T v) { return std::atomic_ref<T>(*p).fetch_or(v); }                    \
  inline T atomicXor(T* p, T v) { return std::atomic_ref<T>(*p).fetch_xor(v); }
CUDASIM_ATOMIC_ARITH(int)
CUDASIM_ATOMIC_ARITH(unsigned int)
CUDASIM_ATOMIC_ARITH(unsigned long long)
CUDASIM_ATOMIC_ARITH(float)
inline double atomicAdd(double* p, double v) { return std::atomic_ref<double>(*p).fetch_add(v); }
inline int atomicSub(int* p, int v) { return std::atomic_ref<int>(*p).fetch_sub(v); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_sub(v); }
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
  std::atomic_ref<unsigned short>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
inline __half atomicAdd(__half* p, __half v) { return cudasim::detail::atomic_add_16(p, v); }
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) { return cudasim::detail::atomic_add_16(p, v); }
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  return cudasim::detail::atomic_update(p, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* p, unsigned limit) {
  return cudasim::detail::atomic_update(p, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; });
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- loads, bit tricks and math intrinsics ---------------------------------------------------------
// The fast-math intrinsics (__expf, __logf, __fdividef, ...) are exact here and approximate on a GPU;
// tolerances of tests must allow for both.

template <class T>
inline T __ldg(const T* p) { return *p; }
template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline T __ldcg(const T* p) { return *p; }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return std::isnan(x) ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }

/// Nanoseconds of host time, standing in for the SM cycle counter.
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
