// Shared between the parts of the runtime: execution (exec.cpp), the CUDA API (api.cpp), device
// memory (memory.cpp), the checker (check.cpp), crash reports (crash.cpp) and symbols
// (symbolize.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "cudasim/cudasim.h"

struct CUgraph_st;

// The runtime API's opaque stream handle, given a body here (api.cpp, graph.cpp).
struct CUstream_st {
  unsigned flags = 0;
  int priority = 0;
  // Stream capture (graph.cpp): the graph being recorded while `capture` is not None.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  CUgraph_st* graph = nullptr;
};

namespace cudasim::detail {

// The device the CPU backend presents itself as: an Ampere-class GPU (compute capability 8.0).
inline constexpr size_t kMaxStaticSharedBytes = 48 * 1024;    // __shared__ declarations per block
inline constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;
inline constexpr size_t kMaxSharedBytes = 163 * 1024;         // with cudaFuncSetAttribute opt-in
inline constexpr unsigned kMaxThreadsPerBlock = 1024;

/// Prints a diagnostic and ends the process with kDiagnosticExitStatus.
[[noreturn]] void fatal(const std::string& message);

/// Validates a launch like the CUDA runtime; on failure sets the last error, explains on stderr
/// and returns false.
bool check_launch(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line);

/// OS threads that run blocks (reported as the multiprocessor count).
unsigned simulated_multiprocessors();

/// Whether fresh memory is poisoned (CUDASIM_POISON, default on; see reload_options()).
bool poison_enabled();

// ---- checking (CUDASIM_CHECK) ---------------------------------------------------------------------

enum CheckKind : unsigned { kCheckRace = 1, kCheckBounds = 2, kCheckInit = 4 };

/// The checks CUDASIM_CHECK asks for (a CheckKind mask), whether or not the program can do them.
unsigned requested_checks();
/// Whether checked code may skip the call into the checker for the reads it has granted
/// (CUDASIM_INLINE_READS=0: every read calls, to compare against).
bool inline_reads_enabled();

/// Whether CUDASIM_PROFILE asks for counting mode (or the program was built with --profile).
bool profiling_requested();
/// Counting mode is the default (a program built with `cudasim-cc --profile`).
void profile_by_default();

/// Whether the program contains code compiled for checking (any translation unit built with
/// -fsanitize=thread calls __tsan_init before main).
bool program_is_instrumented();

/// "race, bounds" for a CheckKind mask.
std::string check_names(unsigned checks);

/// Usable stack of one simulated thread: [lo, hi); the guard page is just below lo.
struct StackRange {
  uintptr_t lo = 0, hi = 0;
};

/// What the running kernel is, for messages: "kernel 'k' (launched at f.cu:12), block (0,0,0)",
/// and the thread when one is running: ", thread (3,0,0)". Empty outside kernels.
std::string running_kernel_description(bool with_thread);

/// Fault addresses that belong to the simulator's per-thread memory: a simulated thread's stack
/// guard page, or outside the block's shared memory. Returns "" when `addr` is not one of them.
std::string describe_worker_address(uintptr_t addr);

/// Installs the handlers that turn SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT inside a kernel
/// into diagnostics (crash.cpp). Idempotent.
void install_crash_handlers();
/// Gives the calling OS thread an alternate signal stack, so that a stack overflow can be reported.
void ensure_signal_stack();

/// Counting mode: lets the other runnable threads of the block go first (no livelock accounting:
/// the thread is not waiting for anything), so that the lanes of a warp stay close together.
void profile_yield();

/// spin_yield() for code whose caller's address (`pc`, for the livelock diagnostic) is known.
void spin_yield_at(const char* why, const void* pc);

/// Whether [p, p+n) is host memory registered with cudaHostRegister (usable by kernels).
bool host_registered(const void* p, size_t n);

/// Largest dynamic shared memory a launch of `function` may use; where it is null, of the
/// function named `kernel` (the name written at the launch).
size_t dynamic_smem_limit(const char* kernel, const void* function);

/// What the `__shared__` variables of a block of one launch may take, as a GPU decides it before
/// the launch (here they are only known as the block declares them).
struct StaticSharedBudget {
  size_t bytes;          // the most they may take
  bool opted_in;         // the kernel raised its dynamic limit with cudaFuncSetAttribute
  size_t dynamic_bytes;  // the opted-in limit (with opted_in), or what the launch asks for
};
/// Without an opt-in, static and dynamic shared memory share 48 KB (a GPU refuses the launch
/// beyond it). With an opt-in of X bytes, the static part must fit beside X in the most a block
/// may have (a GPU refuses the cudaFuncSetAttribute). Never more than 48 KB either way.
StaticSharedBudget static_shared_budget(const LaunchConfig& c, const char* kernel);

// ---- stream capture and graphs (graph.cpp) ----------------------------------------------------------

/// Sets the calling thread's last error (cudaGetLastError) and returns it.
cudaError_t set_last_error(cudaError_t e);
/// Prints `why` on stderr unless CUDASIM_QUIET is set.
void explain_call(const std::string& why);

/// What becomes of work that `call` queues on `stream`: run now, recorded into the stream's
/// capture, or refused (last error set and explained: the legacy stream used while a blocking
/// stream captures, or a stream whose capture was invalidated).
enum class StreamUse { Run, Record, Refused };
StreamUse stream_use(cudaStream_t stream, const char* call);
/// A call that stream capture forbids while a capture is under way (allocation, freeing, device
/// synchronisation): cudaSuccess when allowed, otherwise cudaErrorStreamCaptureUnsupported (the
/// captures concerned are invalidated, as CUDA does).
cudaError_t forbidden_during_capture(const char* call);
/// A stream destroyed while it captures: its capture ends and the recording is dropped.
void forget_capture(cudaStream_t stream);
/// Waiting for `stream` (cudaStreamSynchronize, cudaStreamQuery): refused while it captures.
cudaError_t wait_for_stream(cudaStream_t stream, const char* call);
/// Nodes recorded by asynchronous copies, memsets and host functions on a capturing stream.
void record_copy(cudaStream_t stream, void* dst, const void* src, size_t n, cudaMemcpyKind kind);
void record_memset(cudaStream_t stream, void* p, int value, size_t n);
void record_host_fn(cudaStream_t stream, cudaHostFn_t fn, void* data);
/// The copy and the memset as an uncaptured call does them (what a replayed node does).
cudaError_t copy_now(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* call);
cudaError_t memset_now(void* p, int value, size_t n, const char* call);

}  // namespace cudasim::detail
