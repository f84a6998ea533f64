// INSTRUCTOR-ONLY: part of the hidden tests, never part of a handout.
//
// Takes the autograder's secret seed from the pipe it hands the hidden tests (CLOCKWORK_SEED_FD),
// before any code of the submission runs, and closes the pipe (see take_grader_seed()).
//
// Why this runs first: the function below is an entry of .preinit_array, which the dynamic loader
// runs before the static initialisers of every library and of the program itself (.init_array,
// where constructors of global objects and __attribute__((constructor)) functions go). A
// submission could add a .preinit_array entry of its own, but the entries run in link order, and
// this file is the first source of the hidden tests' programs, ahead of every library holding
// student code. So a static initialiser of a submission that looks for the seed finds no variable,
// no argument and no open descriptor. The limit: code in the same process can still read the
// process's memory once the seed is there, or run even earlier (an ifunc resolver runs while the
// program is being relocated). The seed only has to be unknown before the run, so that nobody can
// prepare answers for the hidden data; the answers themselves are checked against the reference
// whatever the data are. A submission that empties the pipe first makes every hidden test fail.
#include "harness/check/grader_seed.h"

namespace {

void take_seed(int, char**, char** envp) { clockwork::take_grader_seed(envp); }

[[gnu::used, gnu::section(".preinit_array")]] void (*take_seed_first)(int, char**, char**) = take_seed;

}  // namespace
