// The checker's side of the runtime (check.cpp): what the scheduler tells it about launches,
// blocks and synchronisation, so that it can order the memory accesses it is shown.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime_internal.h"

namespace cudasim::detail::check {

/// What the inline read check consults. In checked code, the compiler plugin
/// (harness/cudasim/plugins/inline_reads.cpp) puts a few instructions before every plain 4-byte
/// read: the read needs nothing more when its word of shared memory holds a grant equal to the
/// running lane's `token` or to `any`; any other read calls __tsan_read4. The checker gives a word
/// a grant after an access that leaves the word where one more read, by a thread of one warp or
/// of any warp, would neither be a hazard nor change what is recorded. A barrier, a warp's
/// synchronisation, a fence and a new block start a new generation, which voids every grant given
/// before. The plugin addresses the fields by these offsets.
struct ReadFilter {
  uintptr_t base;          // 0: the block's shared-memory window
  uintptr_t words;         // 8: its 4-byte words; 0 while no read may skip the check
  const uint32_t* tokens;  // 16: per word, its grant (0: none)
  uint32_t token;          // 24: the running lane's: generation | its warp
  uint32_t any;            // 28: generation | 32
  uint32_t generation;     // 32: a multiple of 64, never 0
};

}  // namespace cudasim::detail::check

/// One per OS thread, under a name the plugin's instructions can address (local-exec TLS).
extern "C" __thread cudasim::detail::check::ReadFilter __cudasim_read_filter;

namespace cudasim::detail::check {

/// The scheduler switched to the lane with linear index `linear`.
inline void lane_running(unsigned linear) {
  __cudasim_read_filter.token = __cudasim_read_filter.generation | (linear >> 5);
}

/// Whether the running launch is checked (the program is instrumented and CUDASIM_CHECK asks for
/// a check). Read by the scheduler before every hook call, so unchecked runs pay one branch.
extern bool g_launch_checked;

/// The checker's state of an OS thread (check.cpp).
struct ThreadState;

/// While checked kernel code runs on this OS thread: its state; otherwise null. The runtime clears
/// it while it works on a kernel's behalf (a barrier, a diagnostic): inline library code it calls
/// may be the instrumented copy the linker kept, and its accesses are not the kernel's.
inline thread_local ThreadState* tl_checked = nullptr;
/// This OS thread's state (exists once a checked block has started on it).
ThreadState* this_thread_state();

/// Clears tl_checked for a scope of runtime code.
class RuntimeCode {
 public:
  RuntimeCode() : was_(tl_checked) {
    if (was_) tl_checked = nullptr;
  }
  ~RuntimeCode() {
    if (was_) tl_checked = was_;
  }
  RuntimeCode(const RuntimeCode&) = delete;
  RuntimeCode& operator=(const RuntimeCode&) = delete;

 private:
  ThreadState* was_;
};

/// What the scheduler knows about the block it starts on this OS thread.
struct BlockInfo {
  const Lane* lanes;
  unsigned nthreads;
  uint64_t linear_index;      // block index in the grid, x fastest
  const StackRange* stacks;   // of the simulated threads, by linear thread index
  unsigned char* static_shared;   // the __shared__ variables' arena
  size_t static_capacity;
  unsigned char* dynamic_shared;  // extern __shared__, dynamic_bytes long
  size_t dynamic_bytes;
};

/// Brackets one launch (called on the launching thread, before and after its blocks run).
/// `ranges` is the launcher's memory every thread may read (arguments, the launcher itself).
void launch_begin(dim3 grid, dim3 block, const LaunchRange* ranges, size_t n_ranges);
void launch_end();

void block_begin(const BlockInfo& b);
void block_end();
/// A __syncthreads() of the running block was released.
void barrier_released();
/// Lanes `released` (a mask within the warp of `base`) left a warp-synchronous call together;
/// lanes[base + i].mask says whom each met.
void warp_released(const Lane* lanes, unsigned base, unsigned width, unsigned released);
/// A `__shared__` variable was placed at `p` for the running block.
void shared_variable(const void* p, size_t bytes, size_t elem_bytes, const char* name, const char* file,
                     unsigned line);
/// `extern __shared__ T name[]` was reached (the first call of a block names the region).
void dynamic_shared_named(const char* name, size_t elem_bytes);
/// __threadfence() by the running thread.
void fence();

/// Host-side writes of device memory (copies, memsets: `src` null) initialise it; a copy from
/// device memory passes on only what was initialised there.
void note_copy(const void* dst, const void* src, size_t n);
/// Device memory at `region_offset` was freed: its shadow is dropped.
void note_free(size_t region_offset, size_t bytes);

/// Bytes of unused shared memory the scheduler leaves around each `__shared__` variable in a
/// checked launch, so that one element past the end is not another variable.
inline constexpr size_t kSharedRedZone = 64;

}  // namespace cudasim::detail::check
