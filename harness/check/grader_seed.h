/// @file grader_seed.h
/// The autograder's secret seed for the hidden tests, and the channel it comes through.
#pragma once

namespace clockwork {

/// Reads the autograder's secret seed, once per process: when `envp` holds
/// `CLOCKWORK_SEED_FD=<n>`, descriptor n is the read end of a pipe into which the grader wrote the
/// seed and closed its end. The seed is read to the end and the descriptor closed, so that code
/// running later in the process finds nothing there. From then on test_seed() (random.h) draws
/// from it instead of `CLOCKWORK_SEED`, and seed_note() does not print it or the seeds made from
/// it. If the channel was given but held no seed (emptied by other code first, or never read
/// because the program lacks the reader), test_seed() throws, so that the tests fail instead of
/// running on their fixed, published data. Later calls do nothing.
///
/// The hidden tests call it before any static initialiser runs (grading/hidden/seed_channel.cpp,
/// from the program's .preinit_array, which is also why it takes `envp`: getenv() may not work
/// yet there). It touches no object that needs constructing, so it may run that early.
void take_grader_seed(char** envp);

}  // namespace clockwork
