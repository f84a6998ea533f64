# ctest driver (cmake -P) of inline_reads_diff: runs seeds 1..SEEDS of its random program with the
# inline read check on and off, in a thread order that changes with the seed, and fails when a
# seed ends differently (exit status, report or printed result). It also fails when nearly all
# seeds end the same way, race or no race, since then it would compare little.
set(orders forward warps-reverse shuffle)
set(reported 0)
set(clean 0)
foreach(seed RANGE 1 ${SEEDS})
  math(EXPR pick "${seed} % 3")
  list(GET orders ${pick} order)
  if(order STREQUAL "shuffle")
    set(order "shuffle:${seed}")
  endif()
  set(results "")
  foreach(inline 1 0)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env CUDASIM_CHECK=all CUDASIM_THREADS=1 CUDASIM_ORDER=${order}
                            CUDASIM_INLINE_READS=${inline} ${PROGRAM} ${seed}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    string(REPLACE ";" "," result "exit ${rc}\n${out}${err}")  # kept as one list element
    list(APPEND results "${result}")
  endforeach()
  list(GET results 0 with)
  list(GET results 1 without)
  if(NOT with STREQUAL without)
    message(FATAL_ERROR "seed ${seed} (CUDASIM_ORDER=${order}) ends differently with the inline read check "
                        "(CUDASIM_INLINE_READS=1):\n${with}\nthan without it:\n${without}")
  endif()
  if(with MATCHES "^exit 70\n")
    math(EXPR reported "${reported} + 1")
  elseif(with MATCHES "^exit 0\n")
    math(EXPR clean "${clean} + 1")
  else()
    message(FATAL_ERROR "seed ${seed} (CUDASIM_ORDER=${order}) neither passed nor stopped with a report:\n${with}")
  endif()
endforeach()
message("${SEEDS} seeds: ${reported} stopped with the same report both ways, ${clean} ran clean both ways")
math(EXPR tenth "${SEEDS} / 10")
if(reported LESS tenth OR clean LESS tenth)
  message(FATAL_ERROR "too few seeds of one kind (a tenth of each is expected): the programs test little")
endif()
