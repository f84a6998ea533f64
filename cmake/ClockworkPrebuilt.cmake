# Reusing a built tree: only the files that differ from it compile.
#
# Grading a submission or checking a generated handout builds a second copy of the project in
# which only student files (the files with solution regions) may differ from a tree that has
# already been built. Compiling that copy from scratch means recompiling the harness, the
# reference and the tests, several of which include libtorch (~30 s each). Instead:
#
#   * every build writes <build>/clockwork-framework.cmake, which lists the object files of each
#     of its targets;
#   * configuring with -DCLOCKWORK_FRAMEWORK_BUILD=<that build> makes every source file that is
#     identical to the built tree's use the object already compiled from it: static libraries are
#     re-archived and programs relinked from those objects, and only the files that differ (the
#     student's work) are compiled.
#
# This is sound only when everything an object depends on is identical in both trees. Student
# files are .cu and .cpp files that nothing includes, so configuring checks every other source
# and header of the tree byte for byte against the built tree and stops if any differs; it also
# stops if the C++ compiler or flags differ. nvcc's objects are reused only when both builds
# compile CUDA with the same nvcc, flags and architectures. A target whose compile definitions
# name a folder of its own tree, and a source whose prebuilt object is missing, are compiled as
# usual.

set(CLOCKWORK_FRAMEWORK_BUILD "" CACHE PATH
    "A built Clockwork tree whose objects this build reuses for identical files (empty: compile everything)")
# For builds whose student files change after configuring (the mutation check edits them one
# mistake at a time): their objects are never taken from the other build, so they always compile.
option(CLOCKWORK_FRAMEWORK_COMPILE_STUDENT_FILES
       "With CLOCKWORK_FRAMEWORK_BUILD: compile the student files even where they are identical" OFF)

# A tree whose regions are all stubbed can still serve other builds (the autograder builds its
# framework from one, so that no solution is compiled where a submission can reach it): it is told
# its student files, which its markers no longer show.
set(CLOCKWORK_STUDENT_FILES "" CACHE STRING
    "For a tree whose solution regions are stubbed: its student files (clockwork-handout --list-student-files of the solution tree), ';'-separated")

# The student files: the files of this tree with solution regions (`// BEGIN SOLUTION(mN)`), as
# clockwork-handout --list-student-files prints them. A copy whose regions are stubbed (a handout,
# a grading tree) has no markers left, so a build that reuses another takes that build's list,
# and a stubbed tree built on its own is given it (CLOCKWORK_STUDENT_FILES).
function(_clockwork_student_files out)
  if(CLOCKWORK_FRAMEWORK_BUILD)
    set(${out} "${CLOCKWORK_PREBUILT_STUDENT_FILES}" PARENT_SCOPE)
    return()
  endif()
  if(CLOCKWORK_STUDENT_FILES)
    foreach(rel IN LISTS CLOCKWORK_STUDENT_FILES)
      if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${rel})
        message(FATAL_ERROR "CLOCKWORK_STUDENT_FILES names ${rel}, which this tree does not have")
      endif()
    endforeach()
    set(${out} "${CLOCKWORK_STUDENT_FILES}" PARENT_SCOPE)
    return()
  endif()
  file(GLOB_RECURSE candidates RELATIVE ${PROJECT_SOURCE_DIR} LIST_DIRECTORIES false
       ${PROJECT_SOURCE_DIR}/kernels/*.cu ${PROJECT_SOURCE_DIR}/kernels/*.cpp
       ${PROJECT_SOURCE_DIR}/milestones/*.cu ${PROJECT_SOURCE_DIR}/milestones/*.cpp)
  set(students "")
  foreach(rel IN LISTS candidates)
    file(STRINGS ${PROJECT_SOURCE_DIR}/${rel} hit REGEX "^[ \t]*// BEGIN SOLUTION[(]m" LIMIT_COUNT 1)
    if(hit)
      list(APPEND students ${rel})
    endif()
  endforeach()
  set(${out} "${students}" PARENT_SCOPE)
endfunction()

# Every target defined in `dir` and below.
function(_clockwork_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _clockwork_targets_below(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

# Whether `target` compiles objects that another copy of the tree may share: a library or
# program whose compile definitions do not name a folder of its own tree.
function(_clockwork_is_shareable target out)
  set(${out} OFF PARENT_SCOPE)
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
    return()
  endif()
  get_target_property(imported ${target} IMPORTED)
  if(imported)
    return()
  endif()
  get_target_property(defs ${target} COMPILE_DEFINITIONS)
  if(defs)
    string(FIND "${defs}" "${PROJECT_SOURCE_DIR}" in_source)
    string(FIND "${defs}" "${PROJECT_BINARY_DIR}" in_binary)
    string(FIND "${defs}" "$<" genex)
    if(in_source GREATER -1 OR in_binary GREATER -1 OR genex GREATER -1)
      return()
    endif()
  endif()
  set(${out} ON PARENT_SCOPE)
endfunction()

# For a source of `target`: `origin`, the file of the tree it is compiled from, relative to the
# root ("" when outside the tree; a .cu rewritten for the CPU backend counts as that .cu), and
# `suffix`, the end of its object's path, as CMake names objects.
function(_clockwork_source_info target src origin_out suffix_out)
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_target_property(binary_dir ${target} BINARY_DIR)
  get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${source_dir}")
  # CMake names the object after the path relative to the target's build folder for generated
  # files (in the build tree), and relative to its source folder for the others.
  string(FIND "${abs}" "${PROJECT_BINARY_DIR}/" in_binary)
  if(in_binary EQUAL 0)
    file(RELATIVE_PATH rel "${binary_dir}" "${abs}")
  else()
    file(RELATIVE_PATH rel "${source_dir}" "${abs}")
  endif()
  string(REPLACE "../" "__/" rel "${rel}")
  set(${suffix_out} "/CMakeFiles/${target}.dir/${rel}.o" PARENT_SCOPE)

  string(REGEX REPLACE "^${PROJECT_BINARY_DIR}/cudasim-gen/(.*)\\.cpp$" "${PROJECT_SOURCE_DIR}/\\1" abs "${abs}")
  file(RELATIVE_PATH origin "${PROJECT_SOURCE_DIR}" "${abs}")
  if(origin MATCHES "^\\.\\./")
    set(origin "")
  endif()
  set(${origin_out} "${origin}" PARENT_SCOPE)
endfunction()

# In a build that reuses another: reads its manifest. Called before the build type is chosen,
# so that it defaults to the other build's.
macro(clockwork_load_framework_build)
  if(CLOCKWORK_FRAMEWORK_BUILD)
    set(_manifest ${CLOCKWORK_FRAMEWORK_BUILD}/clockwork-framework.cmake)
    if(NOT EXISTS ${_manifest})
      message(FATAL_ERROR "CLOCKWORK_FRAMEWORK_BUILD=${CLOCKWORK_FRAMEWORK_BUILD} is not a configured Clockwork "
                          "build (no clockwork-framework.cmake there). Configure and build the solution tree first.")
    endif()
    include(${_manifest})
    if(NOT CMAKE_BUILD_TYPE)
      set(CMAKE_BUILD_TYPE ${CLOCKWORK_PREBUILT_BUILD_TYPE} CACHE STRING "Build type" FORCE)
    endif()
  endif()
endmacro()

# The framework files of this tree that differ from (or are missing in) the built tree: every
# source and header that is not a student file.
function(_clockwork_differing_framework_files students out)
  file(GLOB_RECURSE files RELATIVE ${PROJECT_SOURCE_DIR} LIST_DIRECTORIES false
       ${PROJECT_SOURCE_DIR}/cmake/* ${PROJECT_SOURCE_DIR}/harness/* ${PROJECT_SOURCE_DIR}/kernels/*
       ${PROJECT_SOURCE_DIR}/reference/* ${PROJECT_SOURCE_DIR}/milestones/* ${PROJECT_SOURCE_DIR}/tools/*
       ${PROJECT_SOURCE_DIR}/grading/*)
  set(differ "")
  foreach(rel IN LISTS files)
    if(NOT rel MATCHES "\\.(h|hpp|cuh|inc|c|cc|cpp|cu)$")
      continue()
    endif()
    if(rel IN_LIST students)
      continue()
    endif()
    set(theirs ${CLOCKWORK_PREBUILT_SOURCE_DIR}/${rel})
    if(NOT EXISTS ${theirs})
      list(APPEND differ ${rel})
      continue()
    endif()
    file(SHA256 ${PROJECT_SOURCE_DIR}/${rel} a)
    file(SHA256 ${theirs} b)
    if(NOT a STREQUAL b)
      list(APPEND differ ${rel})
    endif()
  endforeach()
  set(${out} "${differ}" PARENT_SCOPE)
endfunction()

# At the end of the top-level CMakeLists.txt: writes this build's manifest or, when reusing
# another build, points each source identical to that build's at its object.
function(clockwork_finalize_framework)
  _clockwork_student_files(students)
  _clockwork_targets_below(${PROJECT_SOURCE_DIR} targets)
  set(shareable "")
  foreach(t IN LISTS targets)
    _clockwork_is_shareable(${t} ok)
    if(ok)
      list(APPEND shareable ${t})
    endif()
  endforeach()

  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  set(flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${config}}")
  set(compiler "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} ${CMAKE_CXX_COMPILER}")
  # nvcc's objects (the _cuda variants) are reused only when both builds compile CUDA alike: a
  # grading on a GPU builds for that GPU alone, while the solution tree builds for every target.
  set(cuda "")
  if(CMAKE_CUDA_COMPILER)
    list(JOIN CMAKE_CUDA_ARCHITECTURES "," archs)
    string(CONCAT cuda "${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION} "
                       "[${CMAKE_CUDA_FLAGS} ${CMAKE_CUDA_FLAGS_${config}}] ${archs}")
  endif()

  string(CONCAT manifest
    "# Written by Clockwork's configure step: the objects of each target of this build, for builds\n"
    "# that reuse them (CLOCKWORK_FRAMEWORK_BUILD). See cmake/ClockworkPrebuilt.cmake.\n"
    "set(CLOCKWORK_PREBUILT_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")\n"
    "set(CLOCKWORK_PREBUILT_BUILD_TYPE \"${CMAKE_BUILD_TYPE}\")\n"
    "set(CLOCKWORK_PREBUILT_COMPILER \"${compiler}\")\n"
    "set(CLOCKWORK_PREBUILT_FLAGS \"${flags}\")\n"
    "set(CLOCKWORK_PREBUILT_CUDA \"${cuda}\")\n"
    "set(CLOCKWORK_PREBUILT_STUDENT_FILES \"${students}\")\n"
    "set(CLOCKWORK_PREBUILT_TARGETS \"${shareable}\")\n")
  if(NOT CLOCKWORK_FRAMEWORK_BUILD)
    set(content "${manifest}")
    foreach(t IN LISTS shareable)
      string(APPEND content "set(CLOCKWORK_PREBUILT_OBJECTS_${t} \"$<TARGET_OBJECTS:${t}>\")\n")
    endforeach()
    file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/clockwork-framework.cmake CONTENT "${content}")
    # `cmake --build <dir> --target clockwork_framework` brings every listed object up to date.
    add_custom_target(clockwork_framework)
    if(shareable)
      add_dependencies(clockwork_framework ${shareable})
    endif()
    return()
  endif()

  set(cuda_alike OFF)
  if(cuda AND cuda STREQUAL CLOCKWORK_PREBUILT_CUDA)
    set(cuda_alike ON)
  endif()

  # The same C++ compiler, flags and framework files, or nothing can be reused.
  if(NOT compiler STREQUAL CLOCKWORK_PREBUILT_COMPILER OR NOT flags STREQUAL CLOCKWORK_PREBUILT_FLAGS)
    message(FATAL_ERROR "CLOCKWORK_FRAMEWORK_BUILD: that build used another compiler or other flags\n"
                        "  it: ${CLOCKWORK_PREBUILT_COMPILER} [${CLOCKWORK_PREBUILT_FLAGS}]\n"
                        "  this one: ${compiler} [${flags}]\n"
                        "Configure this build like it (build type, flags), or without "
                        "CLOCKWORK_FRAMEWORK_BUILD.")
  endif()
  _clockwork_differing_framework_files("${students}" differ)
  if(differ)
    list(LENGTH differ n)
    list(SUBLIST differ 0 10 shown)
    list(JOIN shown "\n  " shown)
    message(FATAL_ERROR "CLOCKWORK_FRAMEWORK_BUILD: ${n} framework file(s) of this tree differ from those of "
                        "${CLOCKWORK_PREBUILT_SOURCE_DIR}, so its objects cannot be reused:\n  ${shown}\n"
                        "Configure without CLOCKWORK_FRAMEWORK_BUILD to compile everything.")
  endif()

  # Object libraries used through target_link_libraries() must keep their sources: their objects
  # reach those users from the library itself.
  set(linked "")
  foreach(t IN LISTS targets)
    foreach(p LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(libs ${t} ${p})
      if(libs)
        list(APPEND linked ${libs})
      endif()
    endforeach()
  endforeach()

  # Per target: which sources reuse a prebuilt object (identical file, object at hand).
  set(n_reused 0)
  set(n_compiled 0)
  set(all_objects "")
  foreach(t IN LISTS shareable)
    get_target_property(type ${t} TYPE)
    if(NOT t IN_LIST CLOCKWORK_PREBUILT_TARGETS OR (type STREQUAL "OBJECT_LIBRARY" AND t IN_LIST linked))
      continue()
    endif()
    string(REPLACE "/./" "/" prebuilt "${CLOCKWORK_PREBUILT_OBJECTS_${t}}")
    get_target_property(sources ${t} SOURCES)
    set(kept "")
    set(objects "")
    foreach(src IN LISTS sources)
      if(src MATCHES "^\\$<")
        list(APPEND kept "${src}")
        continue()
      endif()
      _clockwork_source_info(${t} "${src}" origin suffix)
      set(object "")
      # A .cu file itself (not its CPU-backend rewrite, a .cu.cpp) is compiled by nvcc.
      set(by_nvcc OFF)
      if(src MATCHES "\\.cu$")
        set(by_nvcc ON)
      endif()
      set(student OFF)
      if(CLOCKWORK_FRAMEWORK_COMPILE_STUDENT_FILES AND origin IN_LIST students)
        set(student ON)
      endif()
      if(origin AND NOT student AND EXISTS ${CLOCKWORK_PREBUILT_SOURCE_DIR}/${origin} AND (cuda_alike OR NOT by_nvcc))
        foreach(o IN LISTS prebuilt)
          string(LENGTH "${o}" lo)
          string(LENGTH "${suffix}" ls)
          if(lo GREATER ls)
            math(EXPR start "${lo} - ${ls}")
            string(SUBSTRING "${o}" ${start} -1 end)
            if(end STREQUAL suffix AND EXISTS ${o})
              file(SHA256 ${PROJECT_SOURCE_DIR}/${origin} a)
              file(SHA256 ${CLOCKWORK_PREBUILT_SOURCE_DIR}/${origin} b)
              if(a STREQUAL b)
                set(object ${o})
              endif()
              break()
            endif()
          endif()
        endforeach()
      endif()
      if(object)
        list(APPEND objects ${object})
        math(EXPR n_reused "${n_reused} + 1")
      else()
        list(APPEND kept "${src}")
        if(src MATCHES "\\.(c|cc|cpp|cxx|cu)$")
          math(EXPR n_compiled "${n_compiled} + 1")
        endif()
      endif()
    endforeach()
    set(_clockwork_reused_${t} "${objects}")
    if(NOT objects)
      continue()
    endif()
    list(APPEND all_objects ${objects})
    if(NOT type STREQUAL "OBJECT_LIBRARY")
      set_property(TARGET ${t} PROPERTY SOURCES ${kept} ${objects})
      set_property(TARGET ${t} PROPERTY LINKER_LANGUAGE CXX)
      continue()
    endif()
    # An object library cannot hold prebuilt objects: its users take them directly, next to
    # what the library still compiles.
    set(CLOCKWORK_REUSED_OBJECTS_${t} "${objects}")
    set(CLOCKWORK_EMPTIED_${t} OFF)
    set(compiles OFF)
    foreach(src IN LISTS kept)
      if(src MATCHES "\\.(c|cc|cpp|cxx|cu)$" OR src MATCHES "^\\$<")
        set(compiles ON)
      endif()
    endforeach()
    if(compiles)
      set_property(TARGET ${t} PROPERTY SOURCES ${kept})
    else()
      set(CLOCKWORK_EMPTIED_${t} ON)
      set_property(TARGET ${t} PROPERTY EXCLUDE_FROM_ALL ON)
    endif()
    list(APPEND object_libraries ${t})
  endforeach()

  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
      continue()
    endif()
    get_target_property(sources ${t} SOURCES)
    set(changed OFF)
    set(new_sources "")
    foreach(src IN LISTS sources)
      if(src MATCHES "^\\$<TARGET_OBJECTS:([^>]+)>$" AND CMAKE_MATCH_1 IN_LIST object_libraries)
        set(lib ${CMAKE_MATCH_1})
        list(APPEND new_sources ${CLOCKWORK_REUSED_OBJECTS_${lib}})
        if(NOT CLOCKWORK_EMPTIED_${lib})
          list(APPEND new_sources "${src}")
        endif()
        set(changed ON)
      else()
        list(APPEND new_sources "${src}")
      endif()
    endforeach()
    if(changed)
      set_property(TARGET ${t} PROPERTY SOURCES "${new_sources}")
      set_property(TARGET ${t} PROPERTY LINKER_LANGUAGE CXX)
    endif()
  endforeach()

  if(all_objects)
    set_source_files_properties(${all_objects} TARGET_DIRECTORY ${targets}
                                PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  endif()
  message(STATUS "Reusing ${n_reused} objects of ${CLOCKWORK_FRAMEWORK_BUILD}; "
                 "${n_compiled} source files differ from it or have no object there and are compiled")

  # This build can serve others in turn: a tree with every region stubbed, built on the solution
  # tree's objects, is the autograder's framework without any solution compiled into it (the
  # Gradescope package's test builds it so). Its manifest lists, per target, the objects it takes
  # from the other build and those it compiles, and names that build (whose programs list the same
  # tests); its clockwork_framework builds the libraries, where the student files are, since its
  # programs' objects are the other build's.
  set(content "${manifest}set(CLOCKWORK_PREBUILT_BASE \"${CLOCKWORK_FRAMEWORK_BUILD}\")\n")
  set(libraries "")
  foreach(t IN LISTS shareable)
    string(APPEND content "set(CLOCKWORK_PREBUILT_OBJECTS_${t} \"${_clockwork_reused_${t}};$<TARGET_OBJECTS:${t}>\")\n")
    get_target_property(type ${t} TYPE)
    get_target_property(excluded ${t} EXCLUDE_FROM_ALL)
    if(NOT type STREQUAL "EXECUTABLE" AND NOT excluded)
      list(APPEND libraries ${t})
    endif()
  endforeach()
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/clockwork-framework.cmake CONTENT "${content}")
  add_custom_target(clockwork_framework)
  if(libraries)
    add_dependencies(clockwork_framework ${libraries})
  endif()
endfunction()
