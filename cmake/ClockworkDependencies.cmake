# Third-party libraries, all from Debian 12 packages (see the top-level Makefile for the list).
find_package(Threads REQUIRED)
find_package(GTest REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS context)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

# The CUDA headers are needed even without nvcc: the CPU backend compiles kernels against the real
# cuda_runtime.h / cuda_bf16.h so that types and signatures are exactly CUDA's. They come from the
# CUDA toolkit or, without it, from NVIDIA's header wheels (see ClockworkCudaHeaders.cmake).
include(ClockworkCudaHeaders)
clockwork_find_cuda_headers()

if(CLOCKWORK_TORCH)
  # Debian's libtorch-dev, or the one inside a PyTorch wheel (pass its cmake prefix path).
  find_package(Torch REQUIRED)
endif()
