// Counting mode (profile.cpp): what the checker's access hooks tell the profiler, and when.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime_internal.h"

namespace cudasim::detail::profile {

/// Whether the running launch is counted (CUDASIM_PROFILE and an instrumented program).
extern bool g_launch_profiled;

/// Where an access went and what it did. The order is the report's.
enum Kind : uint8_t { kGlobalLoad, kGlobalStore, kGlobalAtomic, kSharedLoad, kSharedStore, kSharedAtomic, kKinds };

/// Brackets one launch (launching thread).
void launch_begin(const char* kernel, dim3 grid, dim3 block);
void launch_end();

/// Brackets one block on the OS thread that runs it.
void block_begin(unsigned nthreads);
void block_end();
/// A __syncthreads() of the running block was released: the warps' open instructions are done.
void barrier_released();

/// What a simulated thread did at one access: each thread keeps its last kLogDepth accesses in
/// order, and they are counted a warp at a time (profile.cpp), so that the hook below, called for
/// every access of a counted kernel, only appends. Position p of a warp's log holds the 32 lanes'
/// p-th accesses side by side, as they are read when counted. The lanes of a warp usually make the
/// same accesses, so a position stores one access site (code address and kind) for them all, and
/// a lane's own only where it differs. Addresses and code addresses of user space lie below 2^56
/// (x86-64 and AArch64 Linux), which leaves their top byte for the access's size (clamped to 255)
/// and kind.
struct LogSlot {
  uint64_t key = 0;        // code address | kind << 56 of the first lane logged here (0: none yet)
  uint32_t differ = 0;     // the lanes whose site is not `key`: theirs is in other[]
  uint64_t addr[32];       // address | size << 56
  uint64_t other[32];
};
inline constexpr unsigned kLogDepth = 64;
inline constexpr unsigned kTopShift = 56;
struct LaneLogs {
  LogSlot* slots = nullptr;    // warp w's position p: slots[w * kLogDepth + p]
  uint32_t* depth = nullptr;   // per lane: its entries not yet counted
};
/// The running block's logs (set by block_begin on the OS thread that runs the block).
extern constinit thread_local LaneLogs tl_logs;

/// A lane's log is full: counts what can be counted and lets the other threads take a turn.
void log_full(unsigned lane);

/// One access of the running simulated thread (`lane`: its linear index in the block) by the
/// instruction at `pc`; `a` is the address as the kernel used it.
inline void access(Kind kind, unsigned lane, uintptr_t a, size_t size, const void* pc) {
  const LaneLogs& l = tl_logs;
  const uint32_t n = l.depth[lane];
  LogSlot& s = l.slots[(lane >> 5) * kLogDepth + n];
  const unsigned bit = lane & 31;
  s.addr[bit] = a | uint64_t{size < 255 ? size : 255} << kTopShift;
  const uint64_t key = reinterpret_cast<uintptr_t>(pc) | uint64_t{kind} << kTopShift;
  if (__builtin_expect(s.key != key, 0)) {
    if (!s.key) {
      s.key = key;
    } else {
      s.other[bit] = key;
      s.differ |= 1u << bit;
    }
  }
  l.depth[lane] = n + 1;
  if (__builtin_expect(n + 1 == kLogDepth, 0)) log_full(lane);
}

/// Prints the report of everything counted so far (also done at exit).
void print_report();

}  // namespace cudasim::detail::profile
