# Third-party libraries, all from Debian 12 packages (see the top-level Makefile for the list).

# ccache, when it is installed, for every compiler (g++ and nvcc), unless a launcher was chosen
# (-DCMAKE_CXX_COMPILER_LAUNCHER=..., empty for none) or CLOCKWORK_CCACHE is OFF. Rebuilds of an
# unchanged file then cost a cache lookup. CCACHE_NOHASHDIR lets build folders of one source tree
# share entries although they compile with -g in different folders: the test builds inside the
# build folder (setup.without_toolkit, cuda_all_archs) reuse what the build compiled.
option(CLOCKWORK_CCACHE "Compile through ccache when it is installed" ON)
if(CLOCKWORK_CCACHE)
  find_program(CLOCKWORK_CCACHE_PROGRAM ccache)
  find_program(CLOCKWORK_ENV_PROGRAM env)
  if(CLOCKWORK_CCACHE_PROGRAM)
    set(_launcher ${CLOCKWORK_CCACHE_PROGRAM})
    if(CLOCKWORK_ENV_PROGRAM)
      set(_launcher ${CLOCKWORK_ENV_PROGRAM} CCACHE_NOHASHDIR=true ${CLOCKWORK_CCACHE_PROGRAM})
    endif()
    foreach(lang C CXX CUDA)
      if(NOT DEFINED CMAKE_${lang}_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_${lang}_COMPILER_LAUNCHER})
        set(CMAKE_${lang}_COMPILER_LAUNCHER "${_launcher}" CACHE STRING
            "Launcher of the ${lang} compiler (ccache, found by Clockwork)")
      endif()
    endforeach()
    if(CMAKE_CXX_COMPILER_LAUNCHER)
      list(JOIN CMAKE_CXX_COMPILER_LAUNCHER " " _shown)
      message(STATUS "Clockwork: compiling through ${_shown}")
    endif()
  endif()
endif()

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
