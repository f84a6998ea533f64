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

/// One access of the running simulated thread (`lane`: its linear index in the block) by the
/// instruction at `pc`; `a` is the address as the kernel used it.
void access(Kind kind, unsigned lane, uintptr_t a, size_t size, const void* pc);

/// Prints the report of everything counted so far (also done at exit).
void print_report();

}  // namespace cudasim::detail::profile
