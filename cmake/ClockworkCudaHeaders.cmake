# The CUDA headers the CPU backend compiles against: the CUDA toolkit's, or NVIDIA's header wheels.
#
# The CPU backend needs CUDA's headers (cuda_runtime.h, cuda_bf16.h, nvtx3, ...) but no nvcc, no
# driver and no CUDA library. Without the toolkit, tools/cuda-headers/fetch unpacks the headers
# from NVIDIA's wheels on PyPI (`make test` runs it by itself) and
#     -DCLOCKWORK_CUDA_HEADERS=<its folder>/include
# builds against them: CUDA::toolkit and CUDA::nvtx3 then name that folder, find_package(CUDAToolkit)
# is not called, and only the CPU backend is built (no nvcc, no GPU targets).
#
# When CLOCKWORK_CUDA_HEADERS is empty: a build that reuses another one's objects
# (CLOCKWORK_FRAMEWORK_BUILD, as the grader and the handout checks do) takes that build's
# headers, so that both compile against the same files; otherwise the toolkit is looked for as
# usual and, if it is missing, .cuda-headers/include (where `make test` puts the wheels' headers)
# is used when it exists.

set(CLOCKWORK_CUDA_HEADERS "" CACHE PATH
    "CUDA headers without the CUDA toolkit, e.g. from tools/cuda-headers/fetch (CPU backend only; empty: use the toolkit)")

# Files the CPU backend's compile includes, and the wheel that provides each.
set(_clockwork_cuda_header_sources
    "cuda_runtime.h=nvidia-cuda-runtime"
    "cuda_bf16.h=nvidia-cuda-runtime"
    "vector_types.h=nvidia-cuda-runtime"
    "crt/host_defines.h=nvidia-cuda-crt"
    "nv/target=nvidia-cuda-cccl"
    "nvtx3/nvtx3.hpp=nvidia-nvtx")

# clockwork_use_cuda_headers(<dir>): CUDA::toolkit and CUDA::nvtx3 as header-only targets on <dir>.
function(clockwork_use_cuda_headers dir)
  foreach(entry IN LISTS _clockwork_cuda_header_sources)
    string(REPLACE "=" ";" pair "${entry}")
    list(GET pair 0 header)
    list(GET pair 1 wheel)
    if(NOT EXISTS "${dir}/${header}")
      message(FATAL_ERROR "CLOCKWORK_CUDA_HEADERS=${dir} has no ${header} (it comes with NVIDIA's "
                          "'${wheel}' wheel). Fetch the headers with\n"
                          "  tools/cuda-headers/fetch .cuda-headers\n"
                          "and configure with -DCLOCKWORK_CUDA_HEADERS=<source dir>/.cuda-headers/include.")
    endif()
  endforeach()
  file(STRINGS "${dir}/cuda_runtime_api.h" version_line REGEX "^#define[ \t]+CUDART_VERSION[ \t]+[0-9]+")
  string(REGEX REPLACE ".*[ \t]([0-9]+)[ \t]*$" "\\1" version "${version_line}")
  if(NOT version MATCHES "^[0-9]+$")
    message(FATAL_ERROR "CLOCKWORK_CUDA_HEADERS=${dir}: no CUDART_VERSION in cuda_runtime_api.h")
  endif()
  math(EXPR major "${version} / 1000")
  math(EXPR minor "(${version} % 1000) / 10")

  add_library(CUDA::toolkit INTERFACE IMPORTED)
  set_target_properties(CUDA::toolkit PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dir}")
  # NVTX3 is header-only; it loads a profiler's tool with dlopen when one is attached.
  add_library(CUDA::nvtx3 INTERFACE IMPORTED)
  set_target_properties(CUDA::nvtx3 PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${dir}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")

  set(CUDAToolkit_INCLUDE_DIRS "${dir}" PARENT_SCOPE)
  set(CUDAToolkit_VERSION "${major}.${minor}" PARENT_SCOPE)
  set(CLOCKWORK_CUDA_HEADERS_ONLY ON PARENT_SCOPE)
  message(STATUS "Clockwork: CUDA ${major}.${minor} headers from ${dir}, no CUDA toolkit: "
                 "building the CPU backend only (no nvcc, no GPU targets)")
endfunction()

# Sets CLOCKWORK_CUDA_HEADERS_ONLY, and defines the CUDA:: targets from the toolkit or the headers.
macro(clockwork_find_cuda_headers)
  set(CLOCKWORK_CUDA_HEADERS_ONLY OFF)
  set(_clockwork_wheel_headers "${PROJECT_SOURCE_DIR}/.cuda-headers/include")
  set(_clockwork_framework_headers "")
  if(NOT CLOCKWORK_CUDA_HEADERS AND CLOCKWORK_FRAMEWORK_BUILD
     AND EXISTS "${CLOCKWORK_FRAMEWORK_BUILD}/CMakeCache.txt")
    load_cache("${CLOCKWORK_FRAMEWORK_BUILD}" READ_WITH_PREFIX _clockwork_framework_ CLOCKWORK_CUDA_HEADERS)
    set(_clockwork_framework_headers "${_clockwork_framework_CLOCKWORK_CUDA_HEADERS}")
  endif()
  if(CLOCKWORK_CUDA_HEADERS)
    clockwork_use_cuda_headers("${CLOCKWORK_CUDA_HEADERS}")
  elseif(_clockwork_framework_headers)
    clockwork_use_cuda_headers("${_clockwork_framework_headers}")
  else()
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      message(STATUS "Clockwork: CUDA toolkit ${CUDAToolkit_VERSION} headers from ${CUDAToolkit_INCLUDE_DIRS}")
    elseif(EXISTS "${_clockwork_wheel_headers}/cuda_runtime.h")
      # Recorded in the cache, as if given: builds that reuse this one then find the same headers.
      set(CLOCKWORK_CUDA_HEADERS "${_clockwork_wheel_headers}" CACHE PATH
          "CUDA headers without the CUDA toolkit (CPU backend only)" FORCE)
      clockwork_use_cuda_headers("${_clockwork_wheel_headers}")
    else()
      message(FATAL_ERROR
        "No CUDA headers: the CPU backend compiles kernels against CUDA's cuda_runtime.h and friends.\n"
        "Either let `make test` fetch them (NVIDIA's header wheels from PyPI, a few MB), or run\n"
        "  tools/cuda-headers/fetch .cuda-headers\n"
        "and configure again (or pass -DCLOCKWORK_CUDA_HEADERS=<dir>/include), or install the CUDA\n"
        "toolkit (see README).")
    endif()
  endif()
endmacro()
