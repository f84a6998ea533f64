// State of the block and simulated thread running on the current OS thread. Internal to cudasim:
// the built-ins in cudasim.h read it, the runtime (src/) owns it.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <source_location>

namespace cudasim::detail {

enum class LaneState : uint8_t { Ready, AtBlockBarrier, AtWarpSync, Done };

/// What a lane waiting in a warp-synchronous call asks for. Every lane named in its mask meets it;
/// the result each one gets back is computed when the group is released.
enum class WarpOp : uint8_t {
  SyncWarp,
  Shuffle,     // the value deposited by lane `src`
  Ballot,      // bit i set when lane i's predicate holds
  Any,
  All,
  ActiveMask,  // the lanes stopped at the same call site (waits for the whole warp to stop)
  ReduceAdd,   // __reduce_*_sync: the operation over every participant's value
  ReduceMin,
  ReduceMax,
  ReduceUMin,
  ReduceUMax,
  ReduceAnd,
  ReduceOr,
  ReduceXor,
  MatchAny,    // __match_any_sync: the participants whose value equals mine
  MatchAll,    // __match_all_sync: all participants if every value is equal, else 0
};

/// One simulated CUDA thread ("lane" of its warp). 64 bytes: the scheduler walks an array of them.
struct Lane {
  uint3 tid;            // threadIdx
  unsigned linear;      // x + y*Dx + z*Dx*Dy: lane = linear % 32, warp = linear / 32
  LaneState state;
  WarpOp op;            // what it waits for, when AtWarpSync
  uint8_t src;          // source lane of a shuffle (0..31)
  unsigned mask;        // participating lanes, when AtWarpSync
  int pred;             // predicate of __syncthreads_count/and/or and of votes
  unsigned line;        // call site of the barrier it waits at
  uint64_t value;       // payload of a shuffle, reduction or match
  uint64_t result;      // what the warp-synchronous call returns, set when the group is released
  const char* file;
  const char* what;     // name of that call, for diagnostics
};
static_assert(sizeof(Lane) == 64);

/// The block currently running on this OS thread.
struct Block {
  const char* kernel;  // the function launched, or the kernel expression written at the launch
  uint3 idx;
  dim3 dim, grid;
  unsigned nthreads;
  uint64_t generation;           // distinguishes consecutive blocks run by one OS thread
  unsigned char* dynamic_smem;   // `extern __shared__` storage, poisoned at block start
  size_t dynamic_bytes;
};

inline thread_local Block* tl_block = nullptr;
inline thread_local Lane* tl_lane = nullptr;

// Provided by the runtime library. Call sites are passed whole: the runtime reads them (code
// compiled for checking would have its reads of them checked). They are passed by value, one
// pointer in a register: a reference would need a temporary on the kernel's stack, whose every
// write the checker is called for.
/// Waits at a block barrier; returns the number of threads whose predicate was non-zero.
int block_barrier(int pred, const char* what, std::source_location where);
/// Waits until every lane of `mask` has arrived; returns what `op` computes for the caller.
uint64_t warp_sync(WarpOp op, unsigned mask, int pred, uint64_t value, unsigned src, const char* what,
                   std::source_location where);
void* shared_alloc(size_t bytes, size_t align, size_t elem_bytes, const char* name, std::source_location where);
/// Lets the other threads of the block run before the caller goes on: the caller is in a
/// spin-wait (`why` says which kind) that may wait for one of them.
void spin_yield(const char* why);
/// An atomic on `p` by the running thread: after a few in a row on one address, spin_yield().
void note_atomic(const void* p);
/// __threadfence(): a full fence; it also lets other threads of the block run (a fence usually
/// sits in a loop that waits for another thread).
void thread_fence();

}  // namespace cudasim::detail
