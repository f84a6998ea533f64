// Shared between the parts of the runtime: execution (exec.cpp), the CUDA API (api.cpp), device
// memory (memory.cpp), the checker (check.cpp), crash reports (crash.cpp) and symbols
// (symbolize.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cudasim/cudasim.h"

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

/// Largest dynamic shared memory `kernel` (the name written at its launch) may use.
size_t dynamic_smem_limit(const char* kernel);

}  // namespace cudasim::detail
