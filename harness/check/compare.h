/// @file compare.h
/// Checking a kernel's output against the reference: one call, one clear report.
///
///     EXPECT_TRUE(matches_reference("q", out.download(), expected, {s, 4096}, tol::matmul(d)));
///
/// An element is bad when |got − expected| > atol + rms_atol·rms(expected) + rtol·|expected|, or
/// when got is NaN or ±Inf while expected is finite. On a mismatch the report says how many
/// elements are bad, how large the error is (max |diff|, NMSE, cosine similarity), where the bad
/// elements are (rows, columns, heads), which elements were never written (they still hold the
/// poison pattern of DeviceBuffer), the first few differences with their indices, the tolerance
/// with its reason, the seed of the test data, and, when the output matches a known mistake
/// (pitfall), that mistake first.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/check/device_buffer.h"

namespace clockwork {

/// How close is close enough, and why (tolerances.h has one per operator).
struct Tolerance {
  double atol = 0;       ///< absolute tolerance
  double rtol = 0;       ///< relative tolerance, times |expected| of the element
  const char* why = "";  ///< the reason for these numbers, printed with every failure
  /// Absolute tolerance in units of the root-mean-square of the expected tensor: rounding errors
  /// of long sums scale with the size of the values summed, not with the one result.
  double rms_atol = 0;
};

/// The output a known mistake would produce for the same inputs (torch_bridge.h builds these
/// from the reference's pitfall table).
struct PitfallCandidate {
  std::string name;           ///< short identifier, e.g. "linear_no_transpose"
  std::string message;        ///< student-facing sentence: what is wrong and what is right
  std::vector<float> output;  ///< the wrong output, flattened row-major
};

/// One bad element.
struct Mismatch {
  size_t flat = 0;             ///< row-major position
  std::vector<int64_t> index;  ///< multi-dimensional index, outermost first
  float got = 0;               ///< the kernel's value
  float expected = 0;          ///< the reference value
  bool unwritten = false;      ///< got still holds the poison pattern (never written)
};

/// An inclusive range of indices, first..last.
struct IndexRange {
  int64_t first = 0;  ///< first index in the range
  int64_t last = 0;   ///< last index in the range (inclusive)
};

/// Everything compare() found. describe() turns it into the message a student reads.
struct CompareReport {
  std::vector<int64_t> shape;          ///< shape of both tensors
  std::vector<std::string> dim_names;  ///< one name per dimension ("row", "column", "head", ...)
  Tolerance tol;                       ///< the tolerance used
  double abs_limit = 0;                ///< atol + rms_atol·rms(expected): the absolute allowance

  size_t count = 0;               ///< number of elements
  size_t bad = 0;                 ///< elements outside the tolerance (all kinds below included)
  size_t nan = 0;                 ///< got NaN where expected is finite (never-written excluded)
  size_t inf = 0;                 ///< got ±Inf where expected is finite
  size_t unwritten = 0;           ///< got holds the poison bit pattern 0xFFFFFFFF
  /// got holds the CPU backend's __shared__ poison 0xFFF1FFF1 (counted in nan too): computed
  /// from shared memory that was never written
  size_t from_unwritten_shared = 0;
  size_t expected_nonfinite = 0;  ///< expected NaN or ±Inf (such an element must match in kind)

  double max_abs = 0;  ///< largest |got − expected| over elements where both are finite
  Mismatch largest;    ///< the element where max_abs occurs (meaningful when max_abs > 0)
  /// Largest |got − expected| / |expected| over elements whose |expected| is at least 1/1000 of
  /// rms(expected) (smaller ones make the ratio meaningless).
  double max_rel = 0;
  double nmse = 0;     ///< Σ(got − expected)² / Σ expected², over finite pairs
  double cosine = 1;   ///< cosine similarity of got and expected, over finite pairs
  double ref_rms = 0;  ///< root-mean-square of the finite expected values

  std::vector<Mismatch> first_bad;  ///< the first few bad elements, in row-major order

  std::vector<IndexRange> unwritten_rows;  ///< whole rows (dimension 0) never written
  /// Tile sizes T for which the never-written rows are exactly the rows past the last full tile
  /// of T rows (a grid that rounds the row count down instead of up).
  std::vector<int64_t> unwritten_row_tiles;
  std::vector<IndexRange> unwritten_columns;    ///< whole columns (last dimension) never written
  std::vector<int64_t> unwritten_column_tiles;  ///< same as unwritten_row_tiles, for columns

  /// Sentences about where and how the output differs (never-written rows and columns, NaN/Inf,
  /// which rows/columns/heads hold the errors, a constant factor, a transpose). describe() prints
  /// them; tests may search them.
  std::vector<std::string> findings;

  std::string pitfall_name;     ///< set by matches_reference() when a known mistake matches
  std::string pitfall_message;  ///< that mistake's message
  bool pitfall_exact = false;   ///< it matches within the tolerance (not only much closer)

  /// True when no element is bad.
  bool ok() const { return bad == 0; }
  /// A multi-line report for a student: what differs, where, by how much, the tolerance and its
  /// reason, and the seed of the test data. `what` names the tensor (e.g. "q").
  std::string describe(const std::string& what) const;
};

/// Compares `got` with `expected`, both flattened row-major with shape `shape`. `dim_names` names
/// each dimension in the report (default: row and column for 2-D, "dim k" otherwise; for a
/// flat [s, h·h_d] activation pass shape {s, h, h_d} and names {"row", "head", "dim"} to have
/// errors located per head). Throws std::invalid_argument when a size does not match the shape.
CompareReport compare(const std::vector<float>& got, const std::vector<float>& expected,
                      const std::vector<int64_t>& shape, Tolerance tol,
                      const std::vector<std::string>& dim_names = {});

/// GoogleTest check: success when every element is within `tol`; otherwise a failure carrying
/// CompareReport::describe(). When the output matches one of `pitfalls` (within the same
/// tolerance, or with an NMSE far below the one against the reference) the message starts with
/// "This looks like a known mistake: ...". A candidate that equals the reference for these inputs
/// is ignored: it cannot explain a difference. A `got` of the wrong size fails with both sizes
/// (and is still matched against candidates of its size, e.g. an [s, V] lm_head output).
///
///     EXPECT_TRUE(matches_reference("y", got, expected, {m, n}, tol::matmul(k), pitfalls));
::testing::AssertionResult matches_reference(const std::string& what, const std::vector<float>& got,
                                             const std::vector<float>& expected,
                                             const std::vector<int64_t>& shape, Tolerance tol,
                                             const std::vector<PitfallCandidate>& pitfalls = {},
                                             const std::vector<std::string>& dim_names = {});

/// Same check for an output still on the device: downloads it, uses its name and shape, and also
/// fails when the kernel wrote outside it (DeviceBuffer::check_guards()).
::testing::AssertionResult matches_reference(const DeviceBuffer<float>& got,
                                             const std::vector<float>& expected, Tolerance tol,
                                             const std::vector<PitfallCandidate>& pitfalls = {},
                                             const std::vector<std::string>& dim_names = {});

/// GoogleTest check that nothing was written outside `buffer` (its guard bands are intact).
///
///     EXPECT_TRUE(guards_intact(out));
template <class T>
::testing::AssertionResult guards_intact(const DeviceBuffer<T>& buffer) {
  const std::string damage = buffer.check_guards();
  if (damage.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << damage << "\n  A thread wrote outside the buffer: check the kernel's bounds test "
         << "(e.g. `if (row < rows && col < cols)`) and the index it writes.";
}

}  // namespace clockwork
