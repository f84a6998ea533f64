// `#include <cuda_pipeline.h>` in a CPU-backend build. CUDA's C++ pipeline interface
// (nvcuda::experimental::pipeline, memcpy_async) is not simulated; its primitives are. Should this
// file ever be seen by nvcc, it passes on to CUDA's.
#pragma once

#if defined(__CUDACC__)
#include_next <cuda_pipeline.h>
#else
#error "cudasim simulates CUDA's pipeline primitives (#include <cuda_pipeline_primitives.h>: __pipeline_memcpy_async, __pipeline_commit, __pipeline_wait_prior), not the C++ interface of <cuda_pipeline.h>"
#endif
