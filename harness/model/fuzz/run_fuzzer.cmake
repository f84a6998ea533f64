# Runs one fuzz target for a bounded time (cmake -P, from the model_fuzz.* ctests).
#   FUZZER  the target program       SEEDS  its committed seed corpus (only read)
#   WORK    a scratch folder         SECONDS how long to fuzz
# New inputs go to WORK/corpus, a crashing input to WORK/artifacts/; the source tree is not
# written. Fails when the target crashes or a sanitizer reports an error.
foreach(var FUZZER SEEDS WORK SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake needs -D${var}=...")
  endif()
endforeach()
if(NOT EXISTS ${FUZZER})
  message(FATAL_ERROR "${FUZZER} is not built (the model_fuzz.build test builds it)")
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts ${WORK}/tmp)
# Targets that need files make them under TMPDIR: keep them inside the scratch folder.
set(ENV{TMPDIR} ${WORK}/tmp)
# A fixed seed by default, so that a run is repeatable: a slower machine tries a prefix of the same
# input sequence, and a red CI run is reproduced by the same command. CLOCKWORK_FUZZ_SEED=0 in the
# environment (or any other number) explores new sequences, e.g. for a long run by hand.
set(seed 1)
if(DEFINED ENV{CLOCKWORK_FUZZ_SEED} AND NOT "$ENV{CLOCKWORK_FUZZ_SEED}" STREQUAL "")
  if(NOT "$ENV{CLOCKWORK_FUZZ_SEED}" MATCHES "^[0-9]+$")
    message(FATAL_ERROR "CLOCKWORK_FUZZ_SEED='$ENV{CLOCKWORK_FUZZ_SEED}' is not a number")
  endif()
  set(seed $ENV{CLOCKWORK_FUZZ_SEED})
endif()
execute_process(
  COMMAND ${FUZZER} -seed=${seed} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -print_final_stats=1 -artifact_prefix=${WORK}/artifacts/ ${WORK}/corpus ${SEEDS}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB found ${WORK}/artifacts/*)
  message(FATAL_ERROR "${FUZZER} failed (exit status ${rc}). The input that triggered it: ${found}\n"
                      "Rerun it with: ${FUZZER} <that file> (the run used -seed=${seed}). Once fixed, add the input to ${SEEDS} "
                      "as a regression input.")
endif()
