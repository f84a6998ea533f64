// cudasim: CUDA's pipeline primitives (`#include <cuda_pipeline_primitives.h>`) on the CPU: copies
// from global to shared memory that a thread starts, groups into batches, and waits for later.
//
// A cudasim build finds harness/cudasim/include/cuda_pipeline_primitives.h before CUDA's own,
// and that file includes this one; nvcc builds use CUDA's header unchanged.
//
// Supported, as in the CUDA C++ Programming Guide ("Pipeline Primitives Interface"):
//   __pipeline_memcpy_async(dst_shared, src_global, size_and_align, zfill = 0): starts copying
//     size_and_align − zfill bytes (size_and_align is 4, 8 or 16, both pointers aligned to it)
//     and fills the remaining zfill bytes of the destination with zeros;
//   __pipeline_commit(): the copies started since the last commit form a batch;
//   __pipeline_wait_prior(N): waits until at most the N most recent batches are still in flight
//     (N above 8 counts as 8, as in CUDA's header).
// Each thread has its own copies and batches; another thread sees a copy's bytes only after the
// copying thread has waited for it and the two have synchronised (__syncthreads()).
//
// What a GPU does between the start of a copy and the wait is left open by CUDA: the bytes may
// land at any time. cudasim makes the latest choice: a copy writes its destination (and reads
// its source) when its thread waits for its batch, and a copy nobody waits for never lands. So a
// kernel that reads a buffer before waiting for the copy into it reads its previous contents, and
// a kernel that waits for the wrong batch computes with stale data: mistakes a GPU makes
// intermittently, cudasim makes every time. In a checked build the copies' reads and writes are
// checked like any other, as accesses of the copying thread at the line of its
// __pipeline_wait_prior (races, bounds, reads of memory nothing wrote). Arguments CUDA forbids
// (a size other than 4, 8 or 16, a misaligned pointer, a destination outside shared memory, a
// source in shared memory or on a thread's stack) stop the kernel with a diagnostic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>

#include "cudasim/cudasim.h"

// Always inlined, so that the accesses the checker sees belong to the caller's line.
#define CUDASIM_PIPELINE_INLINE inline __attribute__((always_inline))

namespace cudasim::detail {

/// One asynchronous copy: `copied` bytes from src, then `size` − `copied` zero bytes, to dst.
struct AsyncCopy {
  unsigned char* dst;
  const unsigned char* src;
  uint32_t copied, size;
};

// Provided by the runtime library.
/// Checks a copy's arguments (stops the kernel on a misuse) and queues it for the calling thread.
void pipeline_enqueue(void* dst, const void* src, size_t size, size_t zfill, std::source_location where);
/// Closes the calling thread's current batch.
void pipeline_commit(std::source_location where);
/// Takes from the calling thread's queue the copies of every batch but the `prior` most recent
/// ones; returns how many it took.
size_t pipeline_take(size_t prior);
/// Copy `i` of those the calling thread's last pipeline_take() took, written to *copy: the
/// descriptors live in the runtime, whose memory a checked kernel may not read itself.
void pipeline_taken(size_t i, AsyncCopy* copy);

typedef uint32_t __attribute__((may_alias)) AliasedWord;

/// Carries out one copy in the calling thread, in 4-byte words (every size is a multiple of 4)
/// except for the bytes around a zero fill that does not end on a word.
CUDASIM_PIPELINE_INLINE void pipeline_copy(const AsyncCopy& c) {
  uint32_t i = 0;
  for (; i + 4 <= c.copied; i += 4) {
    *reinterpret_cast<AliasedWord*>(c.dst + i) = *reinterpret_cast<const AliasedWord*>(c.src + i);
  }
  for (; i < c.copied; ++i) c.dst[i] = c.src[i];
  for (; i < c.size && i % 4 != 0; ++i) c.dst[i] = 0;
  for (; i < c.size; i += 4) *reinterpret_cast<AliasedWord*>(c.dst + i) = 0;
}

}  // namespace cudasim::detail

CUDASIM_PIPELINE_INLINE void __pipeline_memcpy_async(void* __restrict__ dst_shared,
                                                     const void* __restrict__ src_global,
                                                     size_t size_and_align, size_t zfill = 0,
                                                     std::source_location where = std::source_location::current()) {
  cudasim::detail::pipeline_enqueue(dst_shared, src_global, size_and_align, zfill, where);
}

CUDASIM_PIPELINE_INLINE void __pipeline_commit(std::source_location where = std::source_location::current()) {
  cudasim::detail::pipeline_commit(where);
}

CUDASIM_PIPELINE_INLINE void __pipeline_wait_prior(size_t prior) {
  const size_t count = cudasim::detail::pipeline_take(prior);
  for (size_t i = 0; i < count; ++i) {
    cudasim::detail::AsyncCopy copy;
    cudasim::detail::pipeline_taken(i, &copy);
    cudasim::detail::pipeline_copy(copy);
  }
}
