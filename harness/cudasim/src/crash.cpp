// Crashes inside kernels become diagnostics: SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT raised
// while a simulated thread runs are reported with the kernel, block, thread, source line and what
// the faulting address is (an element past the end of a buffer, a freed buffer, a stack overflow,
// shared memory out of bounds, a null pointer), and the process ends with the diagnostic status.
// In a checked program, host code that dereferences a device pointer faults too (device memory
// is closed to it between kernels) and is reported as such. Any other crash in host code is
// named as one and then takes its normal course (the handler that was there before runs).
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>

#include "check.h"
#include "memory.h"
#include "runtime_internal.h"
#include "symbolize.h"

namespace cudasim::detail {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[sizeof kSignals / sizeof kSignals[0]];

const char* signal_text(int sig, int code) {
  switch (sig) {
    case SIGSEGV:
      return code == SI_KERNEL ? "general protection fault (a misaligned vector access such as a float4 load "
                                 "from an address that is not a multiple of 16, or a wild pointer)"
                               : "invalid memory access (SIGSEGV)";
    case SIGBUS: return "misaligned or invalid memory access (SIGBUS)";
    case SIGFPE:
      return code == FPE_INTDIV ? "integer division by zero (SIGFPE)"
             : code == FPE_INTOVF ? "integer overflow in a division (SIGFPE: INT_MIN / -1)"
                                  : "arithmetic exception (SIGFPE)";
    case SIGILL: return "illegal instruction (SIGILL; e.g. __builtin_trap or unreachable code was reached)";
    case SIGABRT: return "abort() (a failed assert() in the kernel?)";
  }
  return "signal";
}

void pass_on(int sig, siginfo_t* info, void* uc) {
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
    if (kSignals[i] != sig) continue;
    const struct sigaction& prev = g_previous[i];
    if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
      prev.sa_sigaction(sig, info, uc);
      return;
    }
    if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler) {
      prev.sa_handler(sig);
      return;
    }
    // The default action: put it back and let the signal happen again (a fault re-executes the
    // faulting instruction; an abort is raised again).
    signal(sig, SIG_DFL);
    if (sig == SIGABRT) raise(sig);
    return;
  }
}

void handler(int sig, siginfo_t* info, void* ucv) {
  check::tl_checked = nullptr;  // what runs below is the runtime, not a kernel
  auto* uc = static_cast<ucontext_t*>(ucv);
  const void* pc = reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const bool memory_fault = sig == SIGSEGV || sig == SIGBUS;
  const std::string kernel = running_kernel_description(true);
  if (kernel.empty()) {
    // Host code. A checked program keeps device memory closed to it between kernels.
    DeviceMemory& m = device_memory();
    if (memory_fault && m.host_protected() && m.in_device_view(addr)) {
      std::string what = describe_device_address(addr, 1);
      fatal("host code at " + describe_code_address(pc, false) + " dereferenced a device pointer: " +
            (what.empty() ? "an address in device memory" : what) +
            ".\n  Host code cannot read or write device memory (on a GPU this is a segmentation fault): copy it "
            "with cudaMemcpy, or use cudaMallocManaged / cudaMallocHost memory.");
    }
    static std::once_flag once;
    std::call_once(once, [&] {
      std::fprintf(stderr, "\ncudasim: %s in host code (not in a kernel) at %s, address %p\n", signal_text(sig, info->si_code),
                   describe_code_address(pc, false).c_str(), info->si_addr);
    });
    pass_on(sig, info, ucv);
    return;
  }
  std::ostringstream m;
  m << kernel << ": " << signal_text(sig, info->si_code) << " at " << describe_code_address(pc, false);
  if (memory_fault) {
    std::string what = describe_worker_address(addr);
    if (what.empty()) what = describe_device_address(addr, 4);
    if (what.empty() && addr < 65536) what = "a null pointer (address " + std::to_string(addr) + ")";
    if (what.empty() && info->si_code != SI_KERNEL) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%p", info->si_addr);
      what = std::string("address ") + buf + ", which is neither device memory nor shared memory (a host pointer "
             "passed to the kernel?)";
    }
    if (!what.empty()) m << ":\n  " << what;
  }
  fatal(m.str());
}

}  // namespace

void ensure_signal_stack() {
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) && current.ss_sp) return;
  const size_t size = 256 * 1024;  // the report symbolises addresses on it
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  stack_t ss{};
  ss.ss_sp = p;
  ss.ss_size = size;
  sigaltstack(&ss, nullptr);
}

void install_crash_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    ensure_signal_stack();
    for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
      struct sigaction sa{};
      sa.sa_sigaction = handler;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
      sigemptyset(&sa.sa_mask);
      sigaction(kSignals[i], &sa, &g_previous[i]);
    }
  });
}

}  // namespace cudasim::detail
