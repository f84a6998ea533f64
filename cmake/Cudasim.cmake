# Building .cu sources for the CPU backend (cudasim).
#
# Each .cu is rewritten by `cudasim-rewrite` (kernel launches and shared-memory declarations become
# calls into the cudasim runtime; line numbers are kept with #line) and the result is compiled by
# the host C++ compiler with cudasim/cudasim.h force-included. Plain .cpp sources are compiled as
# they are. Editing one .cu re-runs the rewrite and the compile of that file only.
#
# Checked builds (CHECKED): the rewritten .cu files are compiled a second time with GCC's
# thread-sanitizer instrumentation, which calls the cudasim runtime before every memory access;
# the runtime's checker (harness/cudasim/src/check.cpp) then finds races, out-of-bounds accesses
# and reads of uninitialised memory when the program runs with CUDASIM_CHECK set. libtsan is not
# linked: the runtime defines the functions the instrumentation calls. Only .cu files are
# instrumented; .cpp files (tests, host code) are the same objects as in the normal build.

set(CUDASIM_INCLUDE_DIR ${PROJECT_SOURCE_DIR}/harness/cudasim/include)

# Zero-cost check: GCC >= 12 and Clang >= 16 can fill uninitialised locals with a pattern, which
# turns "forgot to initialise the accumulator" into a visibly wrong answer on the CPU backend.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-ftrivial-auto-var-init=pattern CUDASIM_HAVE_AUTO_VAR_INIT)

# The instrumentation of checked builds: every access (volatile ones told apart, so that a spin on
# a volatile flag can yield), no calls at function entry and exit, and at least line tables, so
# that reports name source lines. No scalar replacement of aggregates: a float4 (int2, ...) read
# through a pointer stays one 16-byte access, as the GPU's vector load is, instead of four 4-byte
# ones once its fields are used apart; so its alignment is checked and counting mode sees one
# request.
set(CUDASIM_CHECK_FLAGS -fsanitize=thread --param=tsan-distinguish-volatile=1
                        --param=tsan-instrument-func-entry-exit=0 -fno-tree-sra -Wno-tsan)
string(TOUPPER "${CMAKE_BUILD_TYPE}" _cudasim_config)
if(NOT "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_cudasim_config}}" MATCHES "(^| )-g")
  list(APPEND CUDASIM_CHECK_FLAGS -g1)
endif()

# Whether the compiler can compile for checking (GCC's flags; compiled, never linked with libtsan).
if(NOT DEFINED CUDASIM_CAN_CHECK)
  set(_probe ${CMAKE_BINARY_DIR}/CMakeFiles/cudasim-check-probe)
  file(WRITE ${_probe}/probe.cpp "int f(int* p) { return __atomic_fetch_add(p, 1, 0) + p[1]; }\n")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} ${CUDASIM_CHECK_FLAGS} -c ${_probe}/probe.cpp -o ${_probe}/probe.o
                  RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(_rc EQUAL 0)
    set(CUDASIM_CAN_CHECK ON CACHE INTERNAL "")
  else()
    set(CUDASIM_CAN_CHECK OFF CACHE INTERNAL "")
  endif()
endif()

option(CLOCKWORK_CUDASIM_CHECK
       "Also build every CPU-backend kernel test for checking (<test>_check, ctest <test>.check: races, bounds, initialisation)"
       ON)
if(CLOCKWORK_CUDASIM_CHECK AND NOT CUDASIM_CAN_CHECK)
  message(STATUS "cudasim: ${CMAKE_CXX_COMPILER_ID} cannot compile for checking (GCC's -fsanitize=thread "
                 "parameters); the <test>.check variants are not built")
  set(CLOCKWORK_CUDASIM_CHECK OFF)
endif()

# Two GCC plugins (harness/cudasim/plugins) join the instrumentation of checked code when GCC's
# plugin headers are present (Debian: gcc-12-plugin-dev):
#   - cudasim_inline_reads puts the checker's test for reads that need nothing more in front of
#     each 4-byte read's call (speed only: without it every read makes the call);
#   - cudasim_flops makes checked code count its floating-point operations (the arithmetic in
#     cudasim's own headers aside); without it counting mode reports FLOPs only where the program
#     declares them (cudasim::profile_flops).
# A build that reuses another (CLOCKWORK_FRAMEWORK_BUILD) loads that build's plugins. Both emit
# x86-64 instructions.
set(CUDASIM_PLUGINS "")
set(CUDASIM_FLOPS_PLUGIN "")
if(CLOCKWORK_CUDASIM_CHECK AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  if(CLOCKWORK_FRAMEWORK_BUILD AND EXISTS "${CLOCKWORK_FRAMEWORK_BUILD}/lib/cudasim_flops.so"
     AND EXISTS "${CLOCKWORK_FRAMEWORK_BUILD}/lib/cudasim_inline_reads.so")
    set(_cudasim_plugin_lib "${CLOCKWORK_FRAMEWORK_BUILD}/lib")
  else()
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=plugin
                    OUTPUT_VARIABLE _cudasim_plugin_dir OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(EXISTS "${_cudasim_plugin_dir}/include/gcc-plugin.h")
      set(_cudasim_plugin_lib "${PROJECT_BINARY_DIR}/lib")
      foreach(_plugin cudasim_inline_reads:inline_reads cudasim_flops:count_flops)
        string(REPLACE ":" ";" _plugin "${_plugin}")
        list(GET _plugin 0 _name)
        list(GET _plugin 1 _file)
        add_library(${_name} MODULE ${PROJECT_SOURCE_DIR}/harness/cudasim/plugins/${_file}.cpp)
        target_include_directories(${_name} SYSTEM PRIVATE "${_cudasim_plugin_dir}/include")
        target_compile_options(${_name} PRIVATE -fno-rtti)
        set_target_properties(${_name} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${_cudasim_plugin_lib})
      endforeach()
    else()
      message(STATUS "cudasim: no GCC plugin headers (${_cudasim_plugin_dir}/include; Debian: gcc-"
                     "<version>-plugin-dev): checking makes a call for every read, and counting mode "
                     "will not count FLOPs")
    endif()
  endif()
  if(_cudasim_plugin_lib)
    set(CUDASIM_FLOPS_PLUGIN "${_cudasim_plugin_lib}/cudasim_flops.so")
    set(CUDASIM_PLUGINS "${_cudasim_plugin_lib}/cudasim_inline_reads.so" "${CUDASIM_FLOPS_PLUGIN}")
    foreach(_plugin ${CUDASIM_PLUGINS})
      list(APPEND CUDASIM_CHECK_FLAGS -fplugin=${_plugin})
    endforeach()
    list(APPEND CUDASIM_CHECK_FLAGS -fplugin-arg-cudasim_flops-skip=${CUDASIM_INCLUDE_DIR} -DCUDASIM_COUNTS_FLOPS)
  endif()
endif()

# cudasim_target_sources(<target> [CHECKED] <files>...)
#   Adds sources to <target> for the CPU backend: .cu files through the rewriter (instrumented for
#   checking with CHECKED), others as is.
function(cudasim_target_sources target)
  set(checked OFF)
  set(files ${ARGN})
  if(files AND "${ARGV1}" STREQUAL "CHECKED")
    set(checked ON)
    list(REMOVE_AT files 0)
  endif()
  foreach(src IN LISTS files)
    if(src MATCHES "^\\$<")  # generator expression, e.g. $<TARGET_OBJECTS:...>
      target_sources(${target} PRIVATE "${src}")
      continue()
    endif()
    get_filename_component(abs "${src}" ABSOLUTE)
    get_filename_component(ext "${abs}" LAST_EXT)
    if(NOT ext STREQUAL ".cu")
      target_sources(${target} PRIVATE "${abs}")
      continue()
    endif()
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${abs}")
    get_filename_component(src_dir "${abs}" DIRECTORY)
    set(opts -include cudasim/cudasim.h -iquote "${src_dir}")
    if(CUDASIM_HAVE_AUTO_VAR_INIT)
      list(APPEND opts -ftrivial-auto-var-init=pattern)
    endif()
    # The checked copy is a file of its own, so that only it gets the instrumentation flags.
    if(checked)
      set(out "${PROJECT_BINARY_DIR}/cudasim-gen/${rel}.check.cpp")
      list(APPEND opts ${CUDASIM_CHECK_FLAGS})
    else()
      set(out "${PROJECT_BINARY_DIR}/cudasim-gen/${rel}.cpp")
    endif()
    # One rule per generated file, whichever targets of the folder use it.
    get_property(done DIRECTORY PROPERTY CUDASIM_GENERATED)
    if(NOT out IN_LIST done)
      add_custom_command(
        OUTPUT "${out}"
        COMMAND cudasim-rewrite "${abs}" "${out}"
        DEPENDS cudasim-rewrite "${abs}"
        COMMENT "cudasim: rewriting ${rel}"
        VERBATIM)
      set_property(DIRECTORY APPEND PROPERTY CUDASIM_GENERATED "${out}")
      set_source_files_properties("${out}" PROPERTIES COMPILE_OPTIONS "${opts}")
      if(checked AND CUDASIM_PLUGINS)  # rebuilt when a plugin changes
        set_source_files_properties("${out}" PROPERTIES OBJECT_DEPENDS "${CUDASIM_PLUGINS}")
      endif()
    endif()
    target_sources(${target} PRIVATE "${out}")
  endforeach()
  target_link_libraries(${target} PRIVATE cudasim::runtime)
endfunction()

# cudasim_add_executable(<name> [CHECKED] <files>...)
function(cudasim_add_executable name)
  add_executable(${name})
  cudasim_target_sources(${name} ${ARGN})
endfunction()

# cudasim_add_library(<name> [CHECKED] <files>...)  (static; consumers also get the cudasim runtime)
function(cudasim_add_library name)
  add_library(${name} STATIC)
  cudasim_target_sources(${name} ${ARGN})
  target_link_libraries(${name} INTERFACE cudasim::runtime)
endfunction()
