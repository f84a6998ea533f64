/// @file random.h
/// Reproducible test data: a seed per test that the grader can override, and normal, uniform and
/// token-id generators that give the same numbers on every machine and compiler (they do not use
/// the standard library's distributions, whose output is implementation-defined).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace clockwork {

/// The seed a test should generate its data from. Without the environment variable
/// `CLOCKWORK_SEED` it is `fallback` (the test's own fixed seed). With it (decimal or 0x-hex),
/// the seed is mixed from that value and `fallback`, so hidden grading runs see fresh data while
/// different tests still get different data. The seed is remembered for the running GoogleTest
/// test, and failure reports print it (see seed_note()). Throws std::invalid_argument when
/// `CLOCKWORK_SEED` is not a number. In the autograder's hidden test runs the value comes from the
/// grader's secret seed instead, which is never printed (see grader_seed.h).
uint64_t test_seed(uint64_t fallback);

/// One line for failure messages naming the seeds the running test obtained from test_seed()
/// and how to reproduce or vary the data, or "" when the running test never called test_seed().
std::string seed_note();

/// `n` samples of a normal distribution N(mean, stddev²). Throws std::invalid_argument when
/// stddev <= 0 (the data would be constant, and all-zero data hides unwritten outputs).
std::vector<float> random_normal(size_t n, uint64_t seed, float stddev = 1.f, float mean = 0.f);

/// `n` samples uniform in [lo, hi). Throws std::invalid_argument unless lo < hi.
std::vector<float> random_uniform(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);

/// `n` token ids uniform in [0, vocab). With n >= 2 and vocab >= 2 the ids are never all equal
/// (a kernel that ignores the id would otherwise pass). Throws std::invalid_argument when
/// vocab <= 0.
std::vector<int32_t> random_ids(size_t n, int64_t vocab, uint64_t seed);

/// Rounds each value to bf16 (round to nearest, ties to even; NaN stays NaN).
std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& values);

/// Widens each bf16 value to fp32 (exact). The bf16 poison pattern 0xFFFF becomes the fp32 poison
/// pattern 0xFFFFFFFF, so compare() still reports those elements as never written.
std::vector<float> from_bf16(const std::vector<__nv_bfloat16>& values);

/// Rounds each value to the nearest bf16 and back: what a bf16 weight holds, as fp32.
std::vector<float> round_to_bf16(const std::vector<float>& values);

}  // namespace clockwork
