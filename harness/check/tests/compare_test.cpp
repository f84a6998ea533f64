// The comparison and its report, without kernels: hand-made outputs with known differences must
// produce the expected numbers and sentences.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/grader_seed.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/tests/expect_text.h"

namespace {

using clockwork::compare;
using clockwork::CompareReport;
using clockwork::matches_reference;
using clockwork::PitfallCandidate;
using clockwork::Tolerance;

constexpr Tolerance kTight{1e-6, 1e-6, "test tolerance"};

float poison_value() {
  const uint32_t bits = 0xFFFFFFFFu;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// 0.5, 1.5, 2.5, ... : no zeros, no two equal.
std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f + static_cast<float>(i);
  return v;
}

bool any_finding_contains(const CompareReport& r, const std::string& text) {
  for (const std::string& f : r.findings) {
    if (f.find(text) != std::string::npos) return true;
  }
  return false;
}

// ---- numbers ----------------------------------------------------------------------------------

TEST(Compare, IdenticalOutputsMatch) {
  const auto v = ramp(12);
  const CompareReport r = compare(v, v, {3, 4}, kTight);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.bad, 0u);
  EXPECT_EQ(r.max_abs, 0.0);
  EXPECT_EQ(r.nmse, 0.0);
  EXPECT_DOUBLE_EQ(r.cosine, 1.0);
  EXPECT_CONTAINS(r.describe("y"), "'y' [3 x 4]: all 12 elements match the reference");
  EXPECT_TRUE(matches_reference("y", v, v, {3, 4}, kTight));
}

TEST(Compare, KnownDifferencesGiveExactNumbers) {
  const std::vector<float> expected{3.f, 4.f};
  const std::vector<float> got{3.f, 5.f};
  const CompareReport r = compare(got, expected, {2}, kTight);
  EXPECT_EQ(r.bad, 1u);
  EXPECT_DOUBLE_EQ(r.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(r.max_rel, 0.25);
  EXPECT_DOUBLE_EQ(r.nmse, 1.0 / 25.0);
  EXPECT_NEAR(r.cosine, 29.0 / (5.0 * std::sqrt(34.0)), 1e-12);
  EXPECT_EQ(r.largest.index, (std::vector<int64_t>{1}));
}

TEST(Compare, MismatchesAreListedWithMultiDimensionalIndices) {
  auto expected = ramp(24);
  auto got = expected;
  got[1 * 4 + 2] = 100.f;          // [0, 1, 2] of [2 x 3 x 4]
  got[1 * 12 + 2 * 4 + 3] = -1.f;  // [1, 2, 3]
  const CompareReport r = compare(got, expected, {2, 3, 4}, kTight);
  ASSERT_EQ(r.bad, 2u);
  ASSERT_EQ(r.first_bad.size(), 2u);
  EXPECT_EQ(r.first_bad[0].index, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(r.first_bad[1].index, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(r.first_bad[0].got, 100.f);
  EXPECT_EQ(r.first_bad[0].expected, 6.5f);
  EXPECT_EQ(r.largest.index, (std::vector<int64_t>{0, 1, 2}));
  const std::string d = r.describe("x");
  EXPECT_CONTAINS(d, "'x' [2 x 3 x 4]: 2 of 24 elements differ from the reference.");
  EXPECT_CONTAINS(d, "largest difference: 9.35e+01 at [0, 1, 2] (got 100, expected 6.5)");
  EXPECT_CONTAINS(d, "[1, 2, 3]  got -1, expected 23.5");
  EXPECT_CONTAINS(d,
                  "tolerance: |got - expected| <= 1.00e-06 + 1.00e-06 * |expected|\n"
                  "    because test tolerance");
}

TEST(Compare, LastBitDifferencesShowEnoughDigits) {
  const std::vector<float> expected{1.f};
  const std::vector<float> got{std::nextafter(1.f, 2.f)};
  EXPECT_CONTAINS(compare(got, expected, {1}, clockwork::tol::exact()).describe("x"),
                  "got 1.00000012, expected 1");
}

TEST(Compare, ListStopsAfterAFewAndCountsTheRest) {
  const auto expected = ramp(100);
  std::vector<float> got(100, 0.25f);
  const CompareReport r = compare(got, expected, {10, 10}, kTight);
  EXPECT_EQ(r.bad, 100u);
  EXPECT_LT(r.first_bad.size(), 10u);
  EXPECT_CONTAINS(r.describe("y"), "... and " + std::to_string(100 - r.first_bad.size()) + " more");
}

TEST(Compare, ToleranceIsAbsolutePlusRelative) {
  const std::vector<float> expected{1.f, 100.f};
  const Tolerance tol{0.01, 0.001, "t"};
  // allowed: 0.011 at 1, 0.11 at 100
  EXPECT_TRUE(compare({1.0105f, 100.105f}, expected, {2}, tol).ok());
  EXPECT_EQ(compare({1.012f, 100.105f}, expected, {2}, tol).bad, 1u);
  EXPECT_EQ(compare({1.0105f, 100.12f}, expected, {2}, tol).bad, 1u);
}

TEST(Compare, RmsToleranceScalesWithTheReference) {
  // rms(expected) = sqrt(400 / 5) ≈ 8.94: rms_atol 1e-3 allows 0.00894 everywhere, also at the
  // element that is 0.
  const std::vector<float> expected{0.f, 10.f, -10.f, 10.f, -10.f};
  std::vector<float> got = expected;
  got[0] = 0.0089f;
  const Tolerance tol{0, 0, "t", 1e-3};
  const CompareReport ok = compare(got, expected, {5}, tol);
  EXPECT_NEAR(ok.ref_rms, std::sqrt(400.0 / 5.0), 1e-12);
  EXPECT_TRUE(ok.ok());
  got[0] = 0.009f;
  EXPECT_EQ(compare(got, expected, {5}, tol).bad, 1u);
  EXPECT_CONTAINS(compare(got, expected, {5}, tol).describe("v"), "* rms(expected)");
}

TEST(Compare, SizeMismatchIsReported) {
  EXPECT_THROW(compare({1.f, 2.f}, {1.f, 2.f}, {3}, kTight), std::invalid_argument);
  const auto r = matches_reference("logits", ramp(6), ramp(3), {3}, kTight);
  EXPECT_FALSE(r);
  EXPECT_CONTAINS(r.message(), "'logits' has 6 elements, but the expected shape [3] has 3.");
  const auto bad_test = matches_reference("q", ramp(3), ramp(4), {3}, kTight);
  EXPECT_FALSE(bad_test);
  EXPECT_CONTAINS(bad_test.message(), "test error");
}

// ---- never-written elements --------------------------------------------------------------------

TEST(Unwritten, NothingWrittenSaysSo) {
  const std::vector<float> got(32, poison_value());
  const CompareReport r = compare(got, ramp(32), {4, 8}, kTight);
  EXPECT_EQ(r.unwritten, 32u);
  EXPECT_EQ(r.nan, 0u) << "never-written elements are counted apart from NaN results";
  EXPECT_TRUE(any_finding_contains(r, "Nothing was written"));
  EXPECT_EQ(r.describe("y").find("first differences"), std::string::npos)
      << "listing never-written elements one by one adds nothing";
}

// Values computed from the CPU backend's unwritten __shared__ memory carry its poison (bits
// 0xFFF1FFF1): that is a missing barrier or an unloaded tile, not a kernel that never ran.
float shared_poison_value() {
  const uint32_t bits = 0xFFF1FFF1u;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

TEST(Unwritten, ValuesFromUnwrittenSharedMemoryAreNamed) {
  const std::vector<float> all(32, shared_poison_value());
  const CompareReport r = compare(all, ramp(32), {4, 8}, kTight);
  EXPECT_EQ(r.from_unwritten_shared, 32u);
  EXPECT_EQ(r.unwritten, 0u) << "the kernel did write these elements";
  EXPECT_TRUE(any_finding_contains(r, "Every element holds the CPU backend's __shared__ poison"));
  EXPECT_TRUE(any_finding_contains(r, "missing __syncthreads()"));
  EXPECT_FALSE(any_finding_contains(r, "Nothing was written"));

  auto some = ramp(32);
  some[5] = some[17] = shared_poison_value();
  const CompareReport s = compare(some, ramp(32), {4, 8}, kTight);
  EXPECT_EQ(s.from_unwritten_shared, 2u);
  EXPECT_TRUE(any_finding_contains(s, "2 elements hold the CPU backend's __shared__ poison"));
}

TEST(Unwritten, RowsPastTheLastFullTile) {
  const int64_t rows = 70, cols = 8;
  const auto expected = ramp(rows * cols);
  auto got = expected;
  for (int64_t i = 64 * cols; i < rows * cols; ++i) got[i] = poison_value();
  const CompareReport r = compare(got, expected, {rows, cols}, kTight);
  EXPECT_EQ(r.unwritten, 6u * cols);
  ASSERT_EQ(r.unwritten_rows.size(), 1u);
  EXPECT_EQ(r.unwritten_rows[0].first, 64);
  EXPECT_EQ(r.unwritten_rows[0].last, 69);
  EXPECT_EQ(r.unwritten_row_tiles, (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_TRUE(r.unwritten_columns.empty());
  const std::string d = r.describe("y");
  EXPECT_CONTAINS(d,
                  "Rows 64..69 were not written: they are the rows past the last full tile "
                  "(for tiles of 8, 16, 32 or 64 rows). Launch ceil_div(70, tile) blocks");
  EXPECT_CONTAINS(d, "`if (row < 70)`");
}

TEST(Unwritten, ScatteredWholeRowsAreListed) {
  const auto expected = ramp(20 * 4);
  auto got = expected;
  for (int64_t r : {3, 7, 8, 9}) {
    for (int64_t j = 0; j < 4; ++j) got[r * 4 + j] = poison_value();
  }
  const CompareReport r = compare(got, expected, {20, 4}, kTight);
  EXPECT_TRUE(r.unwritten_row_tiles.empty());
  EXPECT_TRUE(any_finding_contains(r, "Rows 3, 7..9 were not written (4 of 20 rows)."));
}

TEST(Unwritten, ColumnsPastTheLastFullTile) {
  const int64_t rows = 4, cols = 100;
  const auto expected = ramp(rows * cols);
  auto got = expected;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 96; j < cols; ++j) got[i * cols + j] = poison_value();
  }
  const CompareReport r = compare(got, expected, {rows, cols}, kTight);
  ASSERT_EQ(r.unwritten_columns.size(), 1u);
  EXPECT_EQ(r.unwritten_columns[0].first, 96);
  EXPECT_EQ(r.unwritten_column_tiles, (std::vector<int64_t>{8, 16, 32}));
  EXPECT_TRUE(r.unwritten_rows.empty());
  EXPECT_TRUE(any_finding_contains(
      r,
      "Columns 96..99 were not written in any row: they are the columns past the last full "
      "tile (for tiles of 8, 16 or 32 columns)."));
}

TEST(Unwritten, ElementsPastTheLastTileOfAVector) {
  const auto expected = ramp(300);
  auto got = expected;
  for (int i = 256; i < 300; ++i) got[i] = poison_value();
  const CompareReport r = compare(got, expected, {300}, kTight);
  EXPECT_EQ(r.unwritten_row_tiles, (std::vector<int64_t>{64, 128, 256}));
  EXPECT_TRUE(any_finding_contains(r,
                                   "Elements 256..299 were not written: they are the elements "
                                   "past the last full tile"));
}

TEST(Unwritten, ScatteredElementsAreCountedWithTheirRows) {
  const auto expected = ramp(6 * 5);
  auto got = expected;
  got[1 * 5 + 2] = poison_value();
  got[4 * 5 + 0] = poison_value();
  const CompareReport r = compare(got, expected, {6, 5}, kTight);
  EXPECT_EQ(r.unwritten, 2u);
  EXPECT_TRUE(r.unwritten_rows.empty());
  EXPECT_TRUE(any_finding_contains(r,
                                   "2 elements were not written (first at [1, 2]), in rows 1, 4 "
                                   "(2 of 6)"));
  EXPECT_CONTAINS(r.describe("y"), "[1, 2]  never written (0xFF bytes), expected 7.5");
}

// ---- NaN and Inf ------------------------------------------------------------------------------

TEST(NonFinite, NanAndInfWhereTheReferenceIsFinite) {
  const auto expected = ramp(8);
  auto got = expected;
  got[5] = std::numeric_limits<float>::quiet_NaN();
  got[6] = std::numeric_limits<float>::infinity();
  got[7] = -std::numeric_limits<float>::infinity();
  const CompareReport r = compare(got, expected, {2, 4}, kTight);
  EXPECT_EQ(r.bad, 3u);
  EXPECT_EQ(r.nan, 1u);
  EXPECT_EQ(r.inf, 2u);
  EXPECT_EQ(r.unwritten, 0u);
  EXPECT_DOUBLE_EQ(r.max_abs, 0.0) << "max |diff| is over finite pairs only";
  EXPECT_TRUE(any_finding_contains(r,
                                   "1 element is NaN where the expected value is finite (first "
                                   "at [1, 1])"));
  EXPECT_TRUE(any_finding_contains(r, "subtract the row maximum"));
  EXPECT_TRUE(any_finding_contains(r,
                                   "2 elements are infinite where the expected value is finite "
                                   "(first at [1, 2])"));
}

TEST(NonFinite, MatchingNonFiniteValuesAreNotErrors) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> expected{1.f, nan, inf, -inf};
  EXPECT_TRUE(compare({1.f, nan, inf, -inf}, expected, {4}, kTight).ok());
  const CompareReport r = compare({1.f, 2.f, -inf, -inf}, expected, {4}, kTight);
  EXPECT_EQ(r.bad, 2u);
  EXPECT_EQ(r.expected_nonfinite, 3u);
}

// ---- where the errors are, and whole-output patterns ------------------------------------------

TEST(Location, ErrorsConfinedToOneHead) {
  const int64_t s = 5, h = 4, hd = 8;
  const auto expected = ramp(s * h * hd);
  auto got = expected;
  for (int64_t p = 0; p < s; ++p) {
    for (int64_t j = 0; j < hd; ++j) got[(p * h + 2) * hd + j] += 1.f;
  }
  const CompareReport r = compare(got, expected, {s, h, hd}, kTight, {"row", "head", "dim"});
  EXPECT_TRUE(any_finding_contains(r,
                                   "The errors are only in head 2 (1 of 4); every row and dim "
                                   "has some."));
}

TEST(Location, ErrorsInTheSecondHalfOfEachRowAfterTheFirst) {
  const auto expected = ramp(6 * 8);
  auto got = expected;
  for (int64_t p = 1; p < 6; ++p) {
    for (int64_t j = 4; j < 8; ++j) got[p * 8 + j] *= 2.f;
  }
  const CompareReport r = compare(got, expected, {6, 8}, kTight);
  EXPECT_TRUE(any_finding_contains(r,
                                   "The errors are only in rows 1..5 (5 of 6) and columns 4..7 "
                                   "(4 of 8)."));
}

TEST(Location, SpreadErrorsSaySo) {
  const auto expected = ramp(12);
  auto got = expected;
  for (float& v : got) v += 1.f;
  const CompareReport r = compare(got, expected, {3, 4}, kTight);
  EXPECT_TRUE(any_finding_contains(r, "The errors are spread over every row and column."));
}

TEST(Patterns, ConstantFactor) {
  const auto expected = ramp(40);
  auto got = expected;
  for (float& v : got) v *= 0.125f;
  const CompareReport r = compare(got, expected, {5, 8}, kTight);
  EXPECT_TRUE(any_finding_contains(r, "times 0.125 everywhere"));
}

TEST(Patterns, FlippedSign) {
  const auto expected = ramp(10);
  auto got = expected;
  for (float& v : got) v = -v;
  EXPECT_TRUE(any_finding_contains(compare(got, expected, {10}, kTight), "sign flipped"));
}

TEST(Patterns, AllZeros) {
  const CompareReport r = compare(std::vector<float>(10, 0.f), ramp(10), {2, 5}, kTight);
  EXPECT_TRUE(any_finding_contains(r, "Every element is 0"));
}

TEST(Patterns, Transposed) {
  const int64_t m = 3, n = 5;
  const auto expected = ramp(m * n);
  std::vector<float> got(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) got[j * m + i] = expected[i * n + j];
  }
  const CompareReport r = compare(got, expected, {m, n}, kTight);
  EXPECT_TRUE(any_finding_contains(r, "The output is the expected output transposed"));
}

// ---- known mistakes ---------------------------------------------------------------------------

TEST(Pitfalls, ExactMatchIsNamedFirst) {
  const auto expected = ramp(16);
  auto wrong = expected;
  for (size_t i = 0; i < wrong.size(); i += 3) wrong[i] += 2.f;
  const std::vector<PitfallCandidate> candidates{
      {"unrelated", "an unrelated mistake", std::vector<float>(16, 7.f)},
      {"fake", "You did the fake thing; do the real thing.", wrong},
  };
  const auto r = matches_reference("y", wrong, expected, {4, 4}, kTight, candidates);
  EXPECT_FALSE(r);
  const std::string msg = r.message();
  EXPECT_EQ(
      msg.rfind("This looks like a known mistake: You did the fake thing; do the real thing.\n", 0),
      0u)
      << msg;
  EXPECT_CONTAINS(msg, "'y' [4 x 4]:");
}

TEST(Pitfalls, MuchCloserToAMistakeThanToTheReference) {
  const auto expected = ramp(16);
  auto wrong = expected;
  for (float& v : wrong) v *= 3.f;
  auto got = wrong;
  got[0] += 1e-3f;  // outside kTight of the candidate, but far closer to it than to the reference
  const std::vector<PitfallCandidate> candidates{{"fake", "Tripled.", wrong}};
  const auto r = matches_reference("y", got, expected, {16}, kTight, candidates);
  EXPECT_FALSE(r);
  EXPECT_CONTAINS(r.message(),
                  "This looks like a known mistake: Tripled. (your output is much closer");
}

TEST(Pitfalls, CandidateEqualToTheReferenceIsIgnored) {
  const auto expected = ramp(16);
  auto got = expected;
  got[3] = -5.f;
  const std::vector<PitfallCandidate> candidates{{"same", "Same as the reference.", expected}};
  const auto r = matches_reference("y", got, expected, {16}, kTight, candidates);
  EXPECT_FALSE(r);
  EXPECT_EQ(std::string(r.message()).find("known mistake"), std::string::npos) << r.message();
}

TEST(Pitfalls, UnrelatedOutputIsNotBlamedOnAMistake) {
  const auto expected = ramp(16);
  auto wrong = expected;
  for (float& v : wrong) v += 1.f;
  auto got = expected;
  got[0] = 1000.f;
  const auto r = matches_reference("y", got, expected, {16}, kTight, {{"fake", "Fake.", wrong}});
  EXPECT_FALSE(r);
  EXPECT_EQ(std::string(r.message()).find("known mistake"), std::string::npos) << r.message();
}

// An output nobody wrote holds no values, so it cannot be "closer" to any mistake: the report
// must say that nothing was written, not name a pitfall.
TEST(Pitfalls, UnwrittenOutputIsNotBlamedOnAMistake) {
  const auto expected = ramp(16);
  auto wrong = expected;
  for (float& v : wrong) v = -v;
  const std::vector<float> got(16, poison_value());
  const auto r = matches_reference("y", got, expected, {16}, kTight, {{"fake", "Fake.", wrong}});
  EXPECT_FALSE(r);
  EXPECT_EQ(std::string(r.message()).find("known mistake"), std::string::npos) << r.message();
  EXPECT_CONTAINS(r.message(), "Nothing was written");
}

TEST(Pitfalls, WrongSizeMatchedAgainstCandidateOfThatSize) {
  const auto expected = ramp(5);      // [V]
  const auto all_rows = ramp(3 * 5);  // [s, V]
  const auto r = matches_reference("logits", all_rows, expected, {5}, kTight,
                                   {{"all_rows", "You projected every row.", all_rows}});
  EXPECT_FALSE(r);
  EXPECT_CONTAINS(r.message(), "This looks like a known mistake: You projected every row.");
  EXPECT_CONTAINS(r.message(), "'logits' has 15 elements, but the expected shape [5] has 5.");
}

// ---- seeds and data ---------------------------------------------------------------------------

// Sets or clears CLOCKWORK_SEED for one test and restores what the run was started with (a
// grading run may set it for the whole binary).
class SeedEnv {
 public:
  SeedEnv() {
    if (const char* v = std::getenv("CLOCKWORK_SEED")) saved_ = v, had_ = true;
  }
  ~SeedEnv() {
    if (had_) {
      setenv("CLOCKWORK_SEED", saved_.c_str(), 1);
    } else {
      unsetenv("CLOCKWORK_SEED");
    }
  }
  void set(const char* v) { setenv("CLOCKWORK_SEED", v, 1); }
  void clear() { unsetenv("CLOCKWORK_SEED"); }

 private:
  std::string saved_;
  bool had_ = false;
};

TEST(Seeds, FallbackWithoutTheEnvironmentAndNoteInReports) {
  SeedEnv env;
  env.clear();
  EXPECT_EQ(clockwork::test_seed(42), 42u);
  EXPECT_CONTAINS(clockwork::seed_note(), "seed 42");
  auto got = ramp(4);
  got[0] = 9.f;
  EXPECT_CONTAINS(compare(got, ramp(4), {4}, kTight).describe("y"), "test data: seed 42");
}

TEST(Seeds, EnvironmentOverridesAndIsPrinted) {
  SeedEnv env;
  env.set("777");
  const uint64_t a = clockwork::test_seed(1);
  const uint64_t b = clockwork::test_seed(2);
  EXPECT_NE(a, 1u);
  EXPECT_NE(a, b) << "different tests still get different data";
  EXPECT_EQ(clockwork::test_seed(1), a) << "reproducible";
  EXPECT_CONTAINS(clockwork::seed_note(), "test data: seeds " + std::to_string(a) + ", " +
                                              std::to_string(b) +
                                              ", derived from CLOCKWORK_SEED=777");
  env.set("seven");
  EXPECT_THROW(clockwork::test_seed(1), std::invalid_argument);
}

// The autograder's seed channel, as a hidden test program meets it (grading/hidden/
// seed_channel.cpp). It is read once per process, so each case runs in a child process of its own.

// A pipe holding `text` (its write end closed) and an environment naming its read end.
struct SeedChannel {
  explicit SeedChannel(const std::string& text) {
    int fds[2];
    if (pipe(fds) != 0 || write(fds[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
    close(fds[1]);
    fd = fds[0];
    var = "CLOCKWORK_SEED_FD=" + std::to_string(fd);
    envp[0] = var.data();
  }
  int fd = -1;
  std::string var;
  char* envp[2] = {nullptr, nullptr};
};

TEST(SeedsDeathTest, GraderChannelIsReadOnceClosedAndNeverPrinted) {
  EXPECT_EXIT(
      {
        SeedEnv env;
        env.set("777");
        const uint64_t expected = clockwork::test_seed(1);  // what the seed 777 gives
        env.set("5");  // a variable set by other code: the channel's seed wins
        SeedChannel channel("777");
        clockwork::take_grader_seed(channel.envp);
        char byte = 0;
        const bool closed = read(channel.fd, &byte, 1) < 0 && errno == EBADF;
        const bool same = clockwork::test_seed(1) == expected;
        const std::string note = clockwork::seed_note();
        const bool secret = note.find("777") == std::string::npos &&
                            note.find(std::to_string(expected)) == std::string::npos &&
                            note.find("secret seed") != std::string::npos;
        std::fprintf(stderr, "closed=%d same=%d secret=%d note: %s\n", closed, same, secret, note.c_str());
        std::_Exit(closed && same && secret ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "closed=1 same=1 secret=1");
}

// Inside a death test: asks for a seed, prints the error it must refuse with and exits 0; exits 1
// if a seed was given.
[[noreturn]] void exit_with_the_seed_error() {
  try {
    clockwork::test_seed(1);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(0);
  }
  std::_Exit(1);
}

TEST(SeedsDeathTest, EmptyChannelFailsInsteadOfUsingTheFixedSeeds) {
  // What the tests find when other code in the process emptied the pipe first.
  EXPECT_EXIT(
      {
        SeedChannel channel("");
        clockwork::take_grader_seed(channel.envp);
        exit_with_the_seed_error();
      },
      ::testing::ExitedWithCode(0), "was empty or already closed");
  EXPECT_EXIT(
      {
        SeedChannel channel("12x");
        clockwork::take_grader_seed(channel.envp);
        exit_with_the_seed_error();
      },
      ::testing::ExitedWithCode(0), "did not hold a number");
}

TEST(SeedsDeathTest, ChannelGivenButNeverReadFails) {
  // A program without the seed reader, given a channel: its tests must not run on fixed data.
  EXPECT_EXIT(
      {
        setenv("CLOCKWORK_SEED_FD", "9", 1);
        exit_with_the_seed_error();
      },
      ::testing::ExitedWithCode(0), "never read the seed");
}

TEST(Seeds, NoNoteForATestThatDidNotAsk) {
  EXPECT_EQ(clockwork::seed_note(), "");
}

TEST(Data, GeneratorsAreDeterministicAndNeverFlat) {
  const auto a = clockwork::random_normal(1001, 5);
  EXPECT_EQ(a, clockwork::random_normal(1001, 5));
  EXPECT_NE(a, clockwork::random_normal(1001, 6));
  double mean = 0, var = 0;
  for (float v : a) mean += v;
  mean /= a.size();
  for (float v : a) var += (v - mean) * (v - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.15);
  const auto s = clockwork::random_normal(100, 5, 0.01f, 3.f);
  for (float v : s) EXPECT_NEAR(v, 3.f, 0.1f);
  EXPECT_THROW(clockwork::random_normal(10, 1, 0.f), std::invalid_argument);

  const auto u = clockwork::random_uniform(1000, 3, -2.f, 2.f);
  for (float v : u) {
    EXPECT_GE(v, -2.f);
    EXPECT_LT(v, 2.f);
  }
  EXPECT_THROW(clockwork::random_uniform(10, 1, 1.f, 1.f), std::invalid_argument);

  const auto ids = clockwork::random_ids(500, 97, 9);
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 97);
  }
  const auto two = clockwork::random_ids(2, 2, 0);
  EXPECT_NE(two[0], two[1]) << "ids are never all equal";
}

// Long streams are filled in parallel chunks; every value must be the one a single serial loop
// gives (splitmix64 + Box-Muller, written out again here), at chunk edges too, so that a seed
// means the same data on a laptop with 8 threads and a CI machine with 2.
TEST(Data, LongStreamsEqualTheSerialStream) {
  uint64_t state = 11;
  auto unit = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1p-53;
  };
  const size_t n = (size_t{3} << 20) + 7;  // several chunks, odd length
  const auto normal = clockwork::random_normal(n, 11, 0.5f, 0.25f);
  ASSERT_EQ(normal.size(), n);
  size_t mismatches = 0, first = n;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - unit(), u2 = unit();
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586476925 * u2;
    const float c = static_cast<float>(0.25f + 0.5f * r * std::cos(a));
    const float sn = static_cast<float>(0.25f + 0.5f * r * std::sin(a));
    if (normal[i] != c) ++mismatches, first = std::min(first, i);
    if (i + 1 < n && normal[i + 1] != sn) ++mismatches, first = std::min(first, i + 1);
  }
  EXPECT_EQ(mismatches, 0u) << "first differing index " << first;

  state = 12;
  const auto uniform = clockwork::random_uniform(n, 12, -1.f, 3.f);
  mismatches = 0;
  first = n;
  for (size_t i = 0; i < n; ++i) {
    float v = static_cast<float>(-1.0 + 4.0 * unit());
    if (!(v < 3.f)) v = -1.f;
    if (uniform[i] != v) ++mismatches, first = std::min(first, i);
  }
  EXPECT_EQ(mismatches, 0u) << "first differing index " << first;
}

TEST(Data, Bf16RoundsToNearestEvenAndKeepsPoison) {
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties go to the even one (1).
  const std::vector<float> in{1.f, 1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, -2.5f,
                              std::numeric_limits<float>::max()};
  const auto back = clockwork::round_to_bf16(in);
  EXPECT_EQ(back[0], 1.f);
  EXPECT_EQ(back[1], 1.f);
  EXPECT_EQ(back[2], 1.f + 0x1p-6f);
  EXPECT_EQ(back[3], -2.5f);
  EXPECT_TRUE(std::isinf(back[4]));
  const uint16_t poison_bits = 0xFFFF;
  __nv_bfloat16 p;
  std::memcpy(&p, &poison_bits, sizeof p);
  const auto widened = clockwork::from_bf16({p});
  uint32_t bits;
  std::memcpy(&bits, &widened[0], sizeof bits);
  EXPECT_EQ(bits, 0xFFFFFFFFu) << "an unwritten bf16 stays recognisable as unwritten";
}

// ---- the tolerances accept honest rounding and reject real mistakes ---------------------------

// Dot products of k terms summed in three orders (forward, backward, pairwise in fp32) against
// a double-precision sum: all within tol::matmul(k); dropping one term is not.
TEST(Tolerances, MatmulCoversSummationOrderOnly) {
  for (int64_t k : {64, 1000, 4096, 14336}) {
    const int m = 64;
    const auto x = clockwork::random_normal(m * k, 11);
    const auto w =
        clockwork::round_to_bf16(clockwork::random_normal(m * k, 12, 1.f / std::sqrt(k)));
    std::vector<float> exact(m), fwd(m), bwd(m), tree(m), dropped(m);
    for (int r = 0; r < m; ++r) {
      const float* a = &x[r * k];
      const float* b = &w[r * k];
      double e = 0;
      float f = 0, g = 0;
      for (int64_t i = 0; i < k; ++i) e += static_cast<double>(a[i]) * b[i];
      for (int64_t i = 0; i < k; ++i) f += a[i] * b[i];
      for (int64_t i = k; i-- > 0;) g += a[i] * b[i];
      std::vector<float> part(k);
      for (int64_t i = 0; i < k; ++i) part[i] = a[i] * b[i];
      for (int64_t n = k; n > 1; n = (n + 1) / 2) {
        for (int64_t i = 0; i < n / 2; ++i) part[i] = part[2 * i] + part[2 * i + 1];
        if (n % 2) part[n / 2] = part[n - 1];
      }
      exact[r] = static_cast<float>(e);
      fwd[r] = f;
      bwd[r] = g;
      tree[r] = part[0];
      dropped[r] = static_cast<float>(e - static_cast<double>(a[k - 1]) * b[k - 1]);
    }
    const Tolerance tol = clockwork::tol::matmul(k);
    EXPECT_TRUE(matches_reference("forward", fwd, exact, {m}, tol)) << "k = " << k;
    EXPECT_TRUE(matches_reference("backward", bwd, exact, {m}, tol)) << "k = " << k;
    EXPECT_TRUE(matches_reference("pairwise", tree, exact, {m}, tol)) << "k = " << k;
    EXPECT_FALSE(compare(dropped, exact, {m}, tol).ok()) << "k = " << k;
  }
}

TEST(Tolerances, ExactOnesHaveNoSlackAndAllHaveReasons) {
  EXPECT_EQ(clockwork::tol::embedding().atol, 0.0);
  EXPECT_EQ(clockwork::tol::embedding().rtol, 0.0);
  EXPECT_EQ(clockwork::tol::residual_add().rtol, 0.0);
  for (const Tolerance& t :
       {clockwork::tol::embedding(), clockwork::tol::matmul(4096), clockwork::tol::rms_norm(4096),
        clockwork::tol::softmax(1000), clockwork::tol::attention(128, 1000),
        clockwork::tol::rope(1000), clockwork::tol::swiglu(), clockwork::tol::residual_add()}) {
    EXPECT_GT(std::strlen(t.why), 20u);
    EXPECT_LT(t.rtol, 1e-3) << t.why;
  }
}

}  // namespace
