// State of the block and simulated thread running on the current OS thread. Internal to cudasim:
// the built-ins in cudasim.h read it, the runtime (src/) owns it.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>

namespace cudasim::detail {

enum class LaneState : uint8_t { Ready, AtBlockBarrier, AtWarpSync, Done };
enum class WarpOp : uint8_t { SyncWarp, Shuffle, Ballot, Any, All, ActiveMask };

/// One simulated CUDA thread ("lane" of its warp).
struct Lane {
  uint3 tid;            // threadIdx
  unsigned linear;      // x + y*Dx + z*Dx*Dy: lane = linear % 32, warp = linear / 32
  LaneState state;
  WarpOp op;            // what it waits for, when AtWarpSync
  unsigned mask;        // participating lanes, when AtWarpSync
  int pred;             // predicate of __syncthreads_count/and/or and of votes
  uint64_t value;       // shuffle payload
  const char* file;     // call site of the barrier it waits at
  unsigned line;
  const char* what;     // name of that call, for diagnostics
};

/// The block currently running on this OS thread.
struct Block {
  const char* kernel;  // kernel expression as written at the launch site
  uint3 idx;
  dim3 dim, grid;
  Lane* lanes;
  unsigned nthreads;
  uint64_t generation;           // distinguishes consecutive blocks run by one OS thread
  unsigned char* dynamic_smem;   // `extern __shared__` storage, poisoned at block start
  size_t dynamic_bytes;
  int barrier_result;            // result of the last __syncthreads_count/and/or
  uint64_t* snapshot;            // per lane: shuffle payloads frozen when a warp sync released
  unsigned* vote;                // per lane: ballot over its mask at that release
  unsigned* participants;        // per lane: lanes released together with it
};

inline thread_local Block* tl_block = nullptr;
inline thread_local Lane* tl_lane = nullptr;

// Provided by the runtime library.
void block_barrier(int pred, const char* what, const char* file, unsigned line);
void warp_sync(WarpOp op, unsigned mask, int pred, uint64_t value, const char* what, const char* file,
               unsigned line);
void* shared_alloc(size_t bytes, size_t align, const char* file, unsigned line);

}  // namespace cudasim::detail
