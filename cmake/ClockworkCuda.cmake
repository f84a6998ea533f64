# Optional nvcc build. With a GPU present the build targets that GPU only ("native"). Without one,
# the kernels are compiled for one architecture, sm_75 machine code plus compute_75 PTX, which the
# driver of any newer GPU compiles at load time: the build proves the code is valid CUDA and runs
# everywhere, at a fifth of the nvcc time of building for every architecture. The ctest
# cuda_all_archs (labels cuda, slow) compiles kernels/*.cu for every supported architecture, and
# the `all-archs` preset builds everything for all of them.
include(CheckLanguage)
set(CLOCKWORK_CUDA_ALL_ARCHITECTURES 75 80 86 89 90)  # keep in step with CMakePresets.json
set(CLOCKWORK_HAVE_NVCC OFF)
if(CLOCKWORK_CUDA_HEADERS_ONLY)
  # Headers without the toolkit (see ClockworkCudaHeaders.cmake): nothing for nvcc to build with.
elseif(CLOCKWORK_CUDA)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _smi_rc OUTPUT_QUIET ERROR_QUIET)
      if(_smi_rc EQUAL 0)
        set(CMAKE_CUDA_ARCHITECTURES native)
      else()
        set(CMAKE_CUDA_ARCHITECTURES 75)  # sm_75 and compute_75 PTX
      endif()
    endif()
    set(CMAKE_CUDA_STANDARD 17)  # the newest dialect CMake 3.25 knows for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    set(CLOCKWORK_HAVE_NVCC ON)
    message(STATUS "Clockwork: nvcc builds enabled for CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    message(STATUS "Clockwork: nvcc not found; only the CPU backend is built")
  endif()
endif()

# The five-architecture proof, when this build does not already give it.
if(CLOCKWORK_HAVE_NVCC)
  set(_missing_archs "")
  foreach(arch IN LISTS CLOCKWORK_CUDA_ALL_ARCHITECTURES)
    if(NOT "${CMAKE_CUDA_ARCHITECTURES}" MATCHES "(^|;)${arch}(-real)?(;|$)")
      list(APPEND _missing_archs ${arch})
    endif()
  endforeach()
  if(_missing_archs)
    add_test(NAME cuda_all_archs
      COMMAND ${CMAKE_COMMAND}
        -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBINARY_DIR=${PROJECT_BINARY_DIR}/all-archs
        "-DARCHITECTURES=${CLOCKWORK_CUDA_ALL_ARCHITECTURES}" -DGENERATOR=${CMAKE_GENERATOR}
        -DNVCC=${CMAKE_CUDA_COMPILER} -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
        -P ${CMAKE_CURRENT_LIST_DIR}/BuildAllArchitectures.cmake)
    set_tests_properties(cuda_all_archs PROPERTIES LABELS "cuda;slow" TIMEOUT 1800 RUN_SERIAL TRUE)
  endif()
endif()
