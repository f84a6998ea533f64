# cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DARCHITECTURES="75;80;86;89;90" -DGENERATOR=... -DNVCC=...
#       [-DBUILD_TYPE=...] -P BuildAllArchitectures.cmake
#
# The proof that every kernel is valid CUDA for every architecture the course supports, without
# paying for it in every build: the default build compiles kernels/*.cu for one architecture (plus
# PTX), and this compiles only those files, for all of them, in a build of its own. It then checks
# with cuobjdump that the library holds machine code for each architecture. Run by the ctest
# cuda_all_archs (labels cuda, slow); the `all-archs` preset builds everything this way.
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE_DIR BINARY_DIR ARCHITECTURES GENERATOR NVCC)
  if(NOT ${var})
    message(FATAL_ERROR "BuildAllArchitectures.cmake: -D${var}=... is required")
  endif()
endforeach()
# The architectures go through an initial-cache file: a list cannot be one -D argument here.
file(MAKE_DIRECTORY ${BINARY_DIR})
file(WRITE ${BINARY_DIR}/architectures.cmake
     "set(CMAKE_CUDA_ARCHITECTURES \"${ARCHITECTURES}\" CACHE STRING \"\" FORCE)\n")
set(options -C ${BINARY_DIR}/architectures.cmake -DCMAKE_CUDA_COMPILER=${NVCC} -DCLOCKWORK_TORCH=OFF)
if(BUILD_TYPE)
  list(APPEND options -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR} ${options}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${BINARY_DIR} failed:\n${out}")
endif()
if(NOT out MATCHES "nvcc builds enabled")
  message(FATAL_ERROR "configuring ${BINARY_DIR} did not enable nvcc:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target clockwork_kernels_cuda
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc could not compile kernels/*.cu for architectures ${ARCHITECTURES} (see above)")
endif()

# Proof that nvcc built each architecture: the machine code in the library when cuobjdump is
# there (not in every toolkit), otherwise every kernel's nvcc command line.
file(GLOB_RECURSE library ${BINARY_DIR}/kernels/*clockwork_kernels_cuda.a)
get_filename_component(nvcc_dir "${NVCC}" DIRECTORY)
find_program(CUOBJDUMP cuobjdump HINTS ${nvcc_dir} NO_CACHE)
if(CUOBJDUMP AND library)
  execute_process(COMMAND ${CUOBJDUMP} --list-elf ${library} OUTPUT_VARIABLE found RESULT_VARIABLE rc)
  set(what "the library's machine code (cuobjdump --list-elf)")
  set(pattern "sm_<arch>")
else()
  file(READ ${BINARY_DIR}/compile_commands.json found)
  set(what "the nvcc command lines (compile_commands.json)")
  set(pattern "code=\\[compute_<arch>,sm_<arch>\\]")
endif()
file(GLOB kernels RELATIVE ${SOURCE_DIR}/kernels ${SOURCE_DIR}/kernels/*.cu)
foreach(arch IN LISTS ARCHITECTURES)
  string(REPLACE "<arch>" "${arch}" re "${pattern}")
  string(REGEX MATCHALL "${re}" hits "${found}")
  list(LENGTH hits n)
  list(LENGTH kernels n_kernels)
  if(n LESS n_kernels)
    message(FATAL_ERROR "sm_${arch}: found for ${n} of the ${n_kernels} kernels in ${what}:\n${found}")
  endif()
endforeach()
list(JOIN ARCHITECTURES ", sm_" shown)
message(STATUS "kernels/*.cu compiled for sm_${shown}: machine code for every one is in the library")
