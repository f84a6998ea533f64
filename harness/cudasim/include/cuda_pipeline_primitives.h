// `#include <cuda_pipeline_primitives.h>` in a CPU-backend build: this folder comes before CUDA's
// headers on the include path, so kernels that copy global memory to shared memory
// asynchronously (__pipeline_memcpy_async, __pipeline_commit, __pipeline_wait_prior) get
// cudasim's implementation (cudasim/pipeline.h). Should this file ever be seen by nvcc, it passes
// on to CUDA's.
#pragma once

#if defined(__CUDACC__)
#include_next <cuda_pipeline_primitives.h>
#else
// CUDA's own header, included by anything else, then adds nothing.
#ifndef _CUDA_PIPELINE_PRIMITIVES_H_
#define _CUDA_PIPELINE_PRIMITIVES_H_
#endif
#include "cudasim/pipeline.h"
#endif
