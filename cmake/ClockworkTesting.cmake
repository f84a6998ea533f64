# Test registration. One ctest entry per test binary (not per test case), so a label's run pays
# each binary's start-up once; GoogleTest prints every case and its failure messages.

# Labels every test gets, so `ctest -L sim` / `ctest -L '^cuda$'` select a backend (-L takes a
# regular expression: a bare `cuda` also matches the label `cudasim`).
set(CLOCKWORK_SKIP_REGEX "CLOCKWORK-SKIP:")

function(_clockwork_register_test test_name target labels timeout)
  add_test(NAME ${test_name} COMMAND ${target} --gtest_color=no ${ARGN})
  set_tests_properties(${test_name} PROPERTIES
    LABELS "${labels}"
    TIMEOUT ${timeout}
    SKIP_REGULAR_EXPRESSION "${CLOCKWORK_SKIP_REGEX}")
  _clockwork_add_to_milestone_targets(${target} "${labels}")
endfunction()

# The student's edit loop: `make m2` builds only milestone 2's test programs (target
# milestone2_tests) and runs them. Slow tests stay out, and so do GPU programs when this machine
# has no GPU to run them (compiling them with nvcc would only lengthen the loop; `make build`
# still compiles everything).
if(NOT DEFINED CLOCKWORK_EDIT_LOOP_CUDA)
  set(_gpu OFF)
  find_program(CLOCKWORK_NVIDIA_SMI nvidia-smi)
  if(CLOCKWORK_NVIDIA_SMI)
    execute_process(COMMAND ${CLOCKWORK_NVIDIA_SMI} -L RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(_gpu ON)
    endif()
  endif()
  set(CLOCKWORK_EDIT_LOOP_CUDA ${_gpu} CACHE BOOL "make mN also builds the milestone's GPU test programs")
endif()

function(_clockwork_add_to_milestone_targets target labels)
  if("slow" IN_LIST labels OR ("cuda" IN_LIST labels AND NOT CLOCKWORK_EDIT_LOOP_CUDA))
    return()
  endif()
  foreach(label IN LISTS labels)
    if(label MATCHES "^milestone[0-9]+$")
      if(NOT TARGET ${label}_tests)
        add_custom_target(${label}_tests)
      endif()
      add_dependencies(${label}_tests ${target})
    endif()
  endforeach()
endfunction()

# The checked variant of a kernel test runs with every check on and warp by warp, last warp and
# last lane first: an order in which a missing barrier or __syncwarp() shows as a wrong answer
# even where the checker cannot see it (see handouts/running-without-a-gpu.md).
set(CLOCKWORK_CHECK_ENVIRONMENT "CUDASIM_CHECK=all;CUDASIM_ORDER=warps-reverse")

# One backend's test program <name>_<variant>: the test main, GoogleTest, `libs`, and the same
# variant of each kernel library in `kernel_libs`.
function(_clockwork_link_test_variant name variant libs kernel_libs)
  target_include_directories(${name}_${variant} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name}_${variant} PRIVATE clockwork_test_main GTest::gtest ${libs})
  foreach(lib IN LISTS kernel_libs)
    target_link_libraries(${name}_${variant} PRIVATE ${lib}_${variant})
  endforeach()
endfunction()

# clockwork_add_kernel_test(<name> SOURCES <.cu/.cpp>... [KERNEL_LIBS <base>...] [LIBS <lib>...]
#                           [LABELS <label>...] [TIMEOUT <s>])
#   Builds the test for each backend: <name>_sim for the CPU backend (ctest name <name>.sim, label
#   sim); with CLOCKWORK_CUDASIM_CHECK, <name>_check, the same test with its .cu files and kernel
#   libraries built for checking (ctest name <name>.check, labels check and the test's own, run
#   with CLOCKWORK_CHECK_ENVIRONMENT; not for tests labelled slow or llama3-8b, which run
#   minutes); and, when nvcc is available, <name>_cuda (ctest name <name>.cuda, label cuda), which
#   reports itself skipped when no CUDA device is present. KERNEL_LIBS names kernel libraries made
#   by clockwork_add_kernel_library; the matching variant is linked.
#   With CASES <case>..., each backend's binary gets one ctest entry per case instead of one in
#   all: <name>.<case>.sim (and .check, .cuda) runs only the GoogleTest tests matching *<case>*,
#   for a binary whose tests each take minutes and are worth selecting one by one.
#   Tests written as .cu files (they define kernels of their own) are compiled once per backend.
#   Tests that only call launchers are .cpp files: they are compiled once, into an object library
#   shared by both binaries, which matters when they include libtorch.
function(clockwork_add_kernel_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;KERNEL_LIBS;LIBS;LABELS;CASES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set(cu_sources "${T_SOURCES}")
  list(FILTER cu_sources INCLUDE REGEX "\\.cu$")
  if(cu_sources)
    set(sim_sources ${T_SOURCES})
    set(cuda_sources ${T_SOURCES})
  else()
    add_library(${name}_objs OBJECT ${T_SOURCES})
    target_include_directories(${name}_objs PRIVATE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name}_objs PRIVATE GTest::gtest CUDA::toolkit ${T_LIBS})
    set(sim_sources $<TARGET_OBJECTS:${name}_objs>)
    set(cuda_sources $<TARGET_OBJECTS:${name}_objs>)
  endif()

  cudasim_add_executable(${name}_sim ${sim_sources})
  _clockwork_link_test_variant(${name} sim "${T_LIBS}" "${T_KERNEL_LIBS}")
  _clockwork_register_kernel_test(${name} sim "sim;${T_LABELS}" ${T_TIMEOUT} "${T_CASES}")

  if(CLOCKWORK_CUDASIM_CHECK AND NOT "slow" IN_LIST T_LABELS AND NOT "llama3-8b" IN_LIST T_LABELS)
    cudasim_add_executable(${name}_check CHECKED ${sim_sources})
    _clockwork_link_test_variant(${name} check "${T_LIBS}" "${T_KERNEL_LIBS}")
    _clockwork_register_kernel_test(${name} check "check;${T_LABELS}" ${T_TIMEOUT} "${T_CASES}")
  endif()

  if(CLOCKWORK_HAVE_NVCC)
    add_executable(${name}_cuda ${cuda_sources})
    _clockwork_link_test_variant(${name} cuda "CUDA::cudart;${T_LIBS}" "${T_KERNEL_LIBS}")
    _clockwork_register_kernel_test(${name} cuda "cuda;${T_LABELS}" ${T_TIMEOUT} "${T_CASES}")
  endif()
endfunction()

# The ctest entries of one backend's kernel test binary: <name>.<variant>, or with cases one
# <name>.<case>.<variant> per case, filtered to the GoogleTest tests matching *<case>*.
function(_clockwork_register_kernel_test name variant labels timeout cases)
  set(entries)
  if(cases)
    foreach(c IN LISTS cases)
      _clockwork_register_test(${name}.${c}.${variant} ${name}_${variant} "${labels}" ${timeout}
                               "--gtest_filter=*${c}*")
      list(APPEND entries ${name}.${c}.${variant})
    endforeach()
  else()
    _clockwork_register_test(${name}.${variant} ${name}_${variant} "${labels}" ${timeout})
    set(entries ${name}.${variant})
  endif()
  if(variant STREQUAL "check")
    set_tests_properties(${entries} PROPERTIES ENVIRONMENT "${CLOCKWORK_CHECK_ENVIRONMENT}")
  endif()
endfunction()

# clockwork_add_kernel_library(<name> <.cu/.cpp>...)
#   <name>_sim (CPU backend), with CLOCKWORK_CUDASIM_CHECK <name>_check (the same built for
#   checking) and, with nvcc, <name>_cuda, from the same sources.
function(clockwork_add_kernel_library name)
  cudasim_add_library(${name}_sim ${ARGN})
  target_include_directories(${name}_sim PUBLIC ${PROJECT_SOURCE_DIR})
  if(CLOCKWORK_CUDASIM_CHECK)
    cudasim_add_library(${name}_check CHECKED ${ARGN})
    target_include_directories(${name}_check PUBLIC ${PROJECT_SOURCE_DIR})
  endif()
  if(CLOCKWORK_HAVE_NVCC)
    add_library(${name}_cuda STATIC ${ARGN})
    target_include_directories(${name}_cuda PUBLIC ${PROJECT_SOURCE_DIR})
  endif()
endfunction()

# clockwork_add_host_test(<name> SOURCES <.cpp>... [LIBS <lib>...] [LABELS <label>...]
#                         [TIMEOUT <s>])
#   A plain C++ GoogleTest binary (no kernels), e.g. the safetensors reader or the tokenizer.
function(clockwork_add_host_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main ${T_LIBS})
  _clockwork_register_test(${name} ${name} "${T_LABELS}" ${T_TIMEOUT})
endfunction()

# clockwork_add_isolated_test(<name> KNOWN_GOOD <op>... FILTER <gtest filter> [LABELS <label>...]
#                             [TIMEOUT <s>])
#   The grading variant of kernel test <name> (already added with clockwork_add_kernel_test, from
#   .cpp files): the same test objects and libraries, with the known-good implementations of the
#   listed operators (harness/known_good: embedding, matmul, ..., qkv, decoder, decode) linked
#   ahead of the kernel library, so they replace the student's. Programs <name>_isolated_sim and
#   (with nvcc) <name>_isolated_cuda; ctest entries <name>_isolated.<variant>, label `isolated`
#   and no milestone label (a student's `make mN` and `ctest -L milestoneN` run their own chain).
#   The grader runs a rubric item with "isolated": true on it, so that the item costs points only
#   for the step it is about. FILTER selects the cases ctest runs (the grader gives its own).
#   With CHECKED, also <name>_isolated_check (ctest <name>_isolated.check, run checked like
#   every kernel test's .check): for tests of a student kernel, which the grader also runs
#   checked. Without it there is none: the student's code left in the program is host code.
function(clockwork_add_isolated_test name)
  cmake_parse_arguments(T "CHECKED" "TIMEOUT;FILTER" "KNOWN_GOOD;LABELS" ${ARGN})
  if(NOT CLOCKWORK_KNOWN_GOOD)
    return()  # a student's handout tree has no harness/known_good (instructor-only)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set(known_good)
  foreach(op IN LISTS T_KNOWN_GOOD)
    if(NOT TARGET clockwork_known_good_${op})
      message(FATAL_ERROR "clockwork_add_isolated_test(${name}): no known-good implementation of '${op}'")
    endif()
    list(APPEND known_good $<TARGET_OBJECTS:clockwork_known_good_${op}>)
  endforeach()
  set(variants sim cuda)
  if(T_CHECKED)
    list(APPEND variants check)
  endif()
  foreach(variant IN LISTS variants)
    if(NOT TARGET ${name}_${variant})
      continue()
    endif()
    set(target ${name}_isolated_${variant})
    if(variant STREQUAL "sim")
      cudasim_add_executable(${target} ${known_good} $<TARGET_OBJECTS:${name}_objs>)
    elseif(variant STREQUAL "check")
      cudasim_add_executable(${target} CHECKED ${known_good} $<TARGET_OBJECTS:${name}_objs>)
    else()
      add_executable(${target} ${known_good} $<TARGET_OBJECTS:${name}_objs>)
    endif()
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
    get_target_property(libs ${name}_${variant} LINK_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${libs})
    get_target_property(defs ${name}_${variant} COMPILE_DEFINITIONS)
    if(defs)
      target_compile_definitions(${target} PRIVATE ${defs})
    endif()
    _clockwork_register_test(${name}_isolated.${variant} ${target} "${variant};isolated;${T_LABELS}" ${T_TIMEOUT}
                             "--gtest_filter=${T_FILTER}")
    if(variant STREQUAL "check")
      set_tests_properties(${name}_isolated.${variant} PROPERTIES ENVIRONMENT "${CLOCKWORK_CHECK_ENVIRONMENT}")
    endif()
  endforeach()
endfunction()
