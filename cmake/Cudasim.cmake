# Building .cu sources for the CPU backend (cudasim).
#
# Each .cu is rewritten by `cudasim-rewrite` (kernel launches and shared-memory declarations become
# calls into the cudasim runtime; line numbers are kept with #line) and the result is compiled by
# the host C++ compiler with cudasim/cudasim.h force-included. Plain .cpp sources are compiled as
# they are. Editing one .cu re-runs the rewrite and the compile of that file only.

set(CUDASIM_INCLUDE_DIR ${PROJECT_SOURCE_DIR}/harness/cudasim/include)

# Zero-cost check: GCC >= 12 and Clang >= 16 can fill uninitialised locals with a pattern, which
# turns "forgot to initialise the accumulator" into a visibly wrong answer on the CPU backend.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-ftrivial-auto-var-init=pattern CUDASIM_HAVE_AUTO_VAR_INIT)

# cudasim_target_sources(<target> <files>...)
#   Adds sources to <target> for the CPU backend: .cu files through the rewriter, others as is.
function(cudasim_target_sources target)
  foreach(src IN LISTS ARGN)
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
    set(out "${PROJECT_BINARY_DIR}/cudasim-gen/${rel}.cpp")
    get_filename_component(src_dir "${abs}" DIRECTORY)
    add_custom_command(
      OUTPUT "${out}"
      COMMAND cudasim-rewrite "${abs}" "${out}"
      DEPENDS cudasim-rewrite "${abs}"
      COMMENT "cudasim: rewriting ${rel}"
      VERBATIM)
    set(opts -include cudasim/cudasim.h -iquote "${src_dir}")
    if(CUDASIM_HAVE_AUTO_VAR_INIT)
      list(APPEND opts -ftrivial-auto-var-init=pattern)
    endif()
    set_source_files_properties("${out}" PROPERTIES COMPILE_OPTIONS "${opts}")
    target_sources(${target} PRIVATE "${out}")
  endforeach()
  target_link_libraries(${target} PRIVATE cudasim::runtime)
endfunction()

# cudasim_add_executable(<name> <files>...)
function(cudasim_add_executable name)
  add_executable(${name})
  cudasim_target_sources(${name} ${ARGN})
endfunction()

# cudasim_add_library(<name> <files>...)  (static; consumers also get the cudasim runtime)
function(cudasim_add_library name)
  add_library(${name} STATIC)
  cudasim_target_sources(${name} ${ARGN})
  target_link_libraries(${name} INTERFACE cudasim::runtime)
endfunction()
