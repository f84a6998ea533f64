// `#include <mma.h>` in a CPU-backend build: this folder comes before CUDA's headers on the
// include path, so kernels that use nvcuda::wmma get cudasim's implementation (cudasim/wmma.h).
// CUDA's own mma.h declares nothing for a host compiler. Should this file ever be seen by nvcc, it
// passes on to CUDA's.
#pragma once

#if defined(__CUDACC__)
#include_next <mma.h>
#else
// CUDA's crt/mma.h, included by anything else, then adds nothing.
#ifndef __CUDA_MMA_H__
#define __CUDA_MMA_H__
#endif
#include "cudasim/wmma.h"
#endif
