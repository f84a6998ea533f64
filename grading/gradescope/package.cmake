# Packs Gradescope's autograder.zip: setup.sh and run_autograder at the top, and the solution
# tree in source/. Run by the `autograder` target (make autograder):
#
#   cmake -DSOURCE_DIR=<solution tree> -DOUT=<zip> -DSTAGE=<scratch folder> [-DGIT=<git>]
#         -P package.cmake
#
# The environment variable CLOCKWORK_AUTOGRADER_PRESET (cpu-only, the default, or gpu) is the
# preset the packed setup.sh builds with when Gradescope runs it without arguments.
#
# The tree is the files git tracks, as they are in the work tree: no build output, no .git, no
# fetched headers, and nothing left lying around uncommitted by mistake. The hidden tests and
# their rubric are tracked, so they are in. Files go in sorted, all with the last commit's time,
# so that two packings of one checkout hold the same entries in the same order.
cmake_minimum_required(VERSION 3.25)

foreach(var SOURCE_DIR OUT STAGE)
  if(NOT ${var})
    message(FATAL_ERROR "package.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT GIT)
  set(GIT git)
endif()
set(here ${CMAKE_CURRENT_LIST_DIR})

execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} -c core.quotepath=off ls-files
                OUTPUT_VARIABLE tracked RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autograder.zip: the solution tree's files are taken from git, and ${SOURCE_DIR} is "
                      "not a git checkout (or git is missing): ${err}")
endif()
string(REPLACE ";" "\\;" tracked "${tracked}")
string(REPLACE "\n" ";" tracked "${tracked}")
list(REMOVE_ITEM tracked "")
list(SORT tracked)

foreach(required grading/rubric-hidden.json grading/hidden/CMakeLists.txt)
  if(NOT required IN_LIST tracked)
    message(FATAL_ERROR "autograder.zip: ${required} is not tracked in ${SOURCE_DIR}: the autograder needs "
                        "the instructor's tree, hidden tests included")
  endif()
endforeach()

# The staging folder mirrors the zip.
file(REMOVE_RECURSE ${STAGE})
file(MAKE_DIRECTORY ${STAGE}/source)
set(entries setup.sh run_autograder)
file(COPY ${here}/run_autograder DESTINATION ${STAGE})  # keeps the executable bit
set(preset "$ENV{CLOCKWORK_AUTOGRADER_PRESET}")
if(NOT preset)
  set(preset cpu-only)
endif()
if(NOT preset MATCHES "^(cpu-only|gpu)$")
  message(FATAL_ERROR "CLOCKWORK_AUTOGRADER_PRESET=${preset}: the autograder builds with cpu-only or gpu")
endif()
file(READ ${here}/setup.sh setup)
set(default_line "CLOCKWORK_PRESET=\${CLOCKWORK_PRESET:-cpu-only}")
string(FIND "${setup}" "${default_line}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "autograder.zip: setup.sh has no line ${default_line} to set the preset in")
endif()
string(REPLACE "${default_line}" "CLOCKWORK_PRESET=\${CLOCKWORK_PRESET:-${preset}}" setup "${setup}")
file(WRITE ${STAGE}/setup.sh "${setup}")
file(CHMOD ${STAGE}/setup.sh PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                         WORLD_READ WORLD_EXECUTE)
set(n 0)
foreach(path IN LISTS tracked)
  if(path MATCHES "\\\\;")
    message(FATAL_ERROR "autograder.zip: cannot pack a file whose name holds ';': ${path}")
  endif()
  # A tracked file deleted in the work tree is left out, as the build would not see it either.
  if(NOT EXISTS ${SOURCE_DIR}/${path} AND NOT IS_SYMLINK ${SOURCE_DIR}/${path})
    continue()
  endif()
  get_filename_component(dir ${path} DIRECTORY)
  file(COPY ${SOURCE_DIR}/${path} DESTINATION ${STAGE}/source/${dir})
  list(APPEND entries source/${path})
  math(EXPR n "${n} + 1")
endforeach()
list(JOIN entries "\n" listing)
file(WRITE ${STAGE}.files "${listing}\n")

execute_process(COMMAND ${CMAKE_COMMAND} -E env TZ=UTC ${GIT} -C ${SOURCE_DIR} log -1 --format=%cd "--date=format-local:%Y-%m-%d %H:%M:%S"
                OUTPUT_VARIABLE when OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT when)
  set(when "2000-01-01 00:00:00")
endif()

file(REMOVE ${OUT})
# TZ=UTC: a zip records local times, and the package should not depend on where it was made.
execute_process(COMMAND ${CMAKE_COMMAND} -E env TZ=UTC
                        ${CMAKE_COMMAND} -E tar cf ${OUT} --format=zip "--mtime=${when} UTC" --files-from=${STAGE}.files
                WORKING_DIRECTORY ${STAGE}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autograder.zip: packing failed")
endif()
message(STATUS "Autograder package: ${OUT} (setup.sh, building with the ${preset} preset; run_autograder; "
               "${n} files of the solution tree)")
