// compare() and the report a student reads when an output is wrong (see compare.h).
//
// The report is built in two steps: one pass over the elements gathers counts, error sizes and,
// per dimension, where the bad elements lie; then findings() turns those facts into sentences,
// from the most specific (nothing written, whole rows missing past a tile boundary) to the most
// general (which rows and columns hold the errors).
#include "harness/check/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "harness/check/random.h"
#include "harness/check/shape.h"

namespace clockwork {

namespace {

constexpr size_t kListed = 6;                  // mismatches listed in a report
constexpr uint32_t kPoisonBits = 0xFFFFFFFFu;  // DeviceBuffer's poison, read as float
constexpr int64_t kTiles[] = {8, 16, 32, 64, 128, 256};
constexpr double kInf = std::numeric_limits<double>::infinity();

// The CPU backend's __shared__ poison (16-bit words 0xFFF1). Arithmetic keeps a NaN operand's
// bits, so a value computed from shared memory nobody wrote carries it to the output.
constexpr uint32_t kSharedPoisonBits = 0xFFF1FFF1u;

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool is_poison(float v) { return bits_of(v) == kPoisonBits; }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "got 1.5, expected 1.25"; with 9 significant digits when 6 would print the same number twice
// (an exact tolerance failing on the last bits).
std::string got_expected(float got, float expected) {
  std::string g = num(got), e = num(expected);
  if (g == e) {
    char buf[2][32];
    std::snprintf(buf[0], sizeof buf[0], "%.9g", got);
    std::snprintf(buf[1], sizeof buf[1], "%.9g", expected);
    g = buf[0];
    e = buf[1];
  }
  return "got " + g + ", expected " + e;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string count_of(size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string capitalized(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

std::vector<std::string> default_names(size_t rank) {
  if (rank == 1) return {"element"};
  if (rank == 2) return {"row", "column"};
  std::vector<std::string> names;
  for (size_t d = 0; d < rank; ++d) names.push_back("dim " + std::to_string(d));
  return names;
}

// "rows", "heads"; "dim 1 indices" for the generic names.
std::string plural(const std::string& name) {
  return name.find(' ') != std::string::npos ? name + " indices" : name + "s";
}

std::vector<int64_t> unflatten(size_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const auto extent = static_cast<size_t>(shape[d]);
    idx[d] = static_cast<int64_t>(flat % extent);
    flat /= extent;
  }
  return idx;
}

std::string index_string(const std::vector<int64_t>& idx) {
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

// Maximal runs of marked indices.
std::vector<IndexRange> runs(const std::vector<bool>& marked) {
  std::vector<IndexRange> out;
  for (size_t i = 0; i < marked.size(); ++i) {
    if (!marked[i]) continue;
    const auto k = static_cast<int64_t>(i);
    if (!out.empty() && out.back().last == k - 1) {
      out.back().last = k;
    } else {
      out.push_back({k, k});
    }
  }
  return out;
}

size_t covered(const std::vector<IndexRange>& r) {
  size_t n = 0;
  for (const IndexRange& x : r) n += static_cast<size_t>(x.last - x.first + 1);
  return n;
}

// "0, 5..9, 12" (at most four runs, then "and 3 more ranges").
std::string ranges_string(const std::vector<IndexRange>& r) {
  std::string s;
  const size_t shown = std::min<size_t>(r.size(), 4);
  for (size_t i = 0; i < shown; ++i) {
    if (i) s += ", ";
    s += std::to_string(r[i].first);
    if (r[i].last != r[i].first) s += ".." + std::to_string(r[i].last);
  }
  if (r.size() > shown) s += " and " + count_of(r.size() - shown, "more range", "more ranges");
  return s;
}

// Tile sizes T for which `r` is exactly the indices past the last full tile of T in [0, extent).
std::vector<int64_t> suffix_tiles(const std::vector<IndexRange>& r, int64_t extent) {
  std::vector<int64_t> tiles;
  if (r.size() != 1 || r[0].last != extent - 1 || r[0].first == 0) return tiles;
  for (int64_t t : kTiles) {
    if (extent % t != 0 && extent / t * t == r[0].first) tiles.push_back(t);
  }
  return tiles;
}

// "16, 32 or 64"
std::string tile_list(const std::vector<int64_t>& t) {
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i) s += i + 1 == t.size() ? " or " : ", ";
    s += std::to_string(t[i]);
  }
  return s;
}

// Number of elements of got that are bad against `expected` read through `index_of`.
template <class IndexOf>
size_t bad_count_remapped(const std::vector<float>& got, const std::vector<float>& expected,
                          double abs_limit, double rtol, IndexOf index_of) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = expected[index_of(i)];
    const double g = got[i];
    if (!std::isfinite(g) || !std::isfinite(e) ||
        std::fabs(g - e) > abs_limit + rtol * std::fabs(e)) {
      ++bad;
    }
  }
  return bad;
}

// Everything the single pass collects beyond the report's own fields.
struct PassFacts {
  std::vector<size_t> unwritten_in_row;             // per index of dimension 0
  std::vector<size_t> unwritten_in_column;          // per index of the last dimension
  std::vector<std::vector<size_t>> written_bad_at;  // per dimension, per index
  size_t written_bad = 0;                           // bad elements that were written
  size_t first_nan = 0, first_inf = 0;
};

void unwritten_findings(CompareReport& r, const PassFacts& f, const std::vector<float>& got) {
  const std::vector<int64_t>& shape = r.shape;
  const std::string& row = r.dim_names[0];
  const int64_t rows = shape[0];
  const size_t row_len = r.count / static_cast<size_t>(rows);

  std::vector<bool> whole_row(static_cast<size_t>(rows));
  for (size_t i = 0; i < whole_row.size(); ++i) whole_row[i] = f.unwritten_in_row[i] == row_len;
  r.unwritten_rows = runs(whole_row);
  r.unwritten_row_tiles = suffix_tiles(r.unwritten_rows, rows);
  const size_t n_rows = covered(r.unwritten_rows);

  // Columns: index of the last dimension, across every row (only for 2 or more dimensions).
  size_t n_cols = 0, col_len = 0, cols = 1;
  std::vector<bool> whole_col(1, false);
  if (shape.size() >= 2) {
    cols = static_cast<size_t>(shape.back());
    col_len = r.count / cols;
    whole_col.assign(cols, false);
    for (size_t j = 0; j < cols; ++j) whole_col[j] = f.unwritten_in_column[j] == col_len;
    r.unwritten_columns = runs(whole_col);
    r.unwritten_column_tiles = suffix_tiles(r.unwritten_columns, static_cast<int64_t>(cols));
    n_cols = covered(r.unwritten_columns);
  }

  auto edge_advice = [](const std::string& name, int64_t extent) {
    const std::string e = std::to_string(extent);
    return "Launch ceil_div(" + e + ", tile) blocks, not " + e +
           " / tile, and guard the edge with `if (" + name + " < " + e + ")`.";
  };
  // "Rows 64..69 were not written" / "Row 64 was not written", and "they are the rows" / "it is
  // the row".
  auto subject = [](const std::string& name, const std::vector<IndexRange>& where) {
    const bool one = covered(where) == 1;
    return capitalized(one ? name : plural(name)) + " " + ranges_string(where) +
           (one ? " was" : " were") + " not written";
  };
  auto they_are = [](const std::string& name, const std::vector<IndexRange>& where) {
    return covered(where) == 1 ? "it is the " + name : "they are the " + plural(name);
  };
  if (n_rows) {
    std::string s = subject(row, r.unwritten_rows);
    if (!r.unwritten_row_tiles.empty()) {
      s += ": " + they_are(row, r.unwritten_rows) + " past the last full tile (for tiles of " +
           tile_list(r.unwritten_row_tiles) + " " + plural(row) + "). " + edge_advice(row, rows);
    } else {
      s += " (" + std::to_string(n_rows) + " of " + std::to_string(rows) + " " + plural(row) + ").";
    }
    r.findings.push_back(s);
  }
  if (n_cols) {
    const std::string& col = r.dim_names.back();
    std::string s = subject(col, r.unwritten_columns) + " in any " + row;
    if (!r.unwritten_column_tiles.empty()) {
      s += ": " + they_are(col, r.unwritten_columns) + " past the last full tile (for tiles of " +
           tile_list(r.unwritten_column_tiles) + " " + plural(col) + "). " +
           edge_advice(col, static_cast<int64_t>(cols));
    } else {
      s += " (" + std::to_string(n_cols) + " of " + std::to_string(cols) + " " + plural(col) + ").";
    }
    r.findings.push_back(s);
  }

  // Never-written elements outside the whole rows and columns reported above.
  size_t other = 0, first_other = 0;
  std::vector<bool> rows_with(static_cast<size_t>(rows), false);
  for (size_t i = 0; i < r.count; ++i) {
    if (!is_poison(got[i]) || whole_row[i / row_len] || (n_cols && whole_col[i % cols])) continue;
    if (other++ == 0) first_other = i;
    rows_with[i / row_len] = true;
  }
  if (other == 0) return;
  std::string s = std::string(n_rows || n_cols ? "Besides those, " : "") +
                  count_of(other, "element was", "elements were") + " not written (first at " +
                  index_string(unflatten(first_other, shape)) + ")";
  if (shape.size() >= 2) {
    const auto where = runs(rows_with);
    s += ", in " + (covered(where) == 1 ? row : plural(row)) + " " + ranges_string(where) + " (" +
         std::to_string(covered(where)) + " of " + std::to_string(rows) + ")";
  }
  s += other == 1 ? ": it still holds" : ": they still hold";
  r.findings.push_back(capitalized(s + " the poison pattern (all bytes 0xFF)."));
}

void error_location_findings(CompareReport& r, const PassFacts& f) {
  if (f.written_bad == 0) return;
  std::vector<std::string> partial, full;
  for (size_t d = 0; d < r.shape.size(); ++d) {
    const int64_t extent = r.shape[d];
    if (extent <= 1) continue;
    std::vector<bool> marked(static_cast<size_t>(extent));
    for (size_t i = 0; i < marked.size(); ++i) marked[i] = f.written_bad_at[d][i] > 0;
    const auto where = runs(marked);
    const size_t k = covered(where);
    if (k < static_cast<size_t>(extent)) {
      partial.push_back((k == 1 ? r.dim_names[d] : plural(r.dim_names[d])) + " " +
                        ranges_string(where) + " (" + std::to_string(k) + " of " +
                        std::to_string(extent) + ")");
    } else {
      full.push_back(r.dim_names[d]);
    }
  }
  const std::string lead = r.unwritten || r.nan || r.inf ? "The wrong values" : "The errors";
  auto join = [](const std::vector<std::string>& v, const std::string& last_sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += i + 1 == v.size() ? last_sep : ", ";
      s += v[i];
    }
    return s;
  };
  if (partial.empty() && full.empty()) return;
  if (partial.empty()) {
    r.findings.push_back(lead + " are spread over every " + join(full, " and ") + ".");
    return;
  }
  std::string s = lead + " are only in " + join(partial, " and ");
  if (!full.empty()) s += "; every " + join(full, " and ") + " has some";
  r.findings.push_back(s + ".");
}

void nonfinite_findings(CompareReport& r, const PassFacts& f) {
  if (r.nan) {
    r.findings.push_back(
        count_of(r.nan, "element is", "elements are") + " NaN where the expected value is finite" +
        " (first at " + index_string(unflatten(f.first_nan, r.shape)) +
        "). NaN comes from 0/0, inf - inf, the square root of a negative number, an exp that "
        "overflowed (subtract the row maximum before exp), or reading memory nobody wrote.");
  }
  if (r.inf) {
    r.findings.push_back(count_of(r.inf, "element is", "elements are") +
                         " infinite where the expected value is finite (first at " +
                         index_string(unflatten(f.first_inf, r.shape)) +
                         "): an overflow (exp of a large value?) or a division by zero.");
  }
}

// Whole-output patterns: zeros, a constant factor, a transpose. Only for outputs without
// unwritten or non-finite elements, where they are unambiguous.
void pattern_findings(CompareReport& r, const std::vector<float>& got,
                      const std::vector<float>& expected) {
  if (r.unwritten || r.nan || r.inf || r.expected_nonfinite || r.count < 2) return;
  double gg = 0, ge = 0, ee = 0;
  for (size_t i = 0; i < r.count; ++i) {
    gg += static_cast<double>(got[i]) * got[i];
    ge += static_cast<double>(got[i]) * expected[i];
    ee += static_cast<double>(expected[i]) * expected[i];
  }
  if (ee == 0) return;
  if (gg == 0) {
    r.findings.push_back(
        "Every element is 0 but the expected values are not: the kernel stored zeros (an "
        "accumulator that was never added to, or a result stored before it was computed?).");
    return;
  }
  const double alpha = ge / ee;
  double resid = 0;
  for (size_t i = 0; i < r.count; ++i) {
    const double d = got[i] - alpha * expected[i];
    resid += d * d;
  }
  if (resid <= 1e-6 * alpha * alpha * ee && std::fabs(alpha - 1) > 1e-3) {
    if (std::fabs(alpha + 1) <= 1e-3) {
      r.findings.push_back("The output is the expected output with the sign flipped everywhere.");
    } else {
      r.findings.push_back("The output is the expected output times " + num(alpha) +
                           " everywhere: a constant factor is missing or applied twice.");
    }
    return;
  }
  if (r.shape.size() == 2 && r.shape[0] > 1 && r.shape[1] > 1) {
    const auto rows = static_cast<size_t>(r.shape[0]);
    const auto cols = static_cast<size_t>(r.shape[1]);
    // got read as the transpose: got[j·rows + i] against expected[i·cols + j].
    const size_t bad = bad_count_remapped(got, expected, r.abs_limit, r.tol.rtol, [&](size_t k) {
      const size_t j = k / rows, i = k % rows;
      return i * cols + j;
    });
    if (bad == 0) {
      const std::string at =
          "j*" + std::to_string(rows) + " + i instead of i*" + std::to_string(cols) + " + j";
      r.findings.push_back(
          "The output is the expected output transposed: element (i, j) was written at "
          "position " +
          at + ". Swap the roles of the two indices where the result is stored.");
    }
  }
}

Mismatch make_mismatch(size_t i, const std::vector<float>& got, const std::vector<float>& expected,
                       const std::vector<int64_t>& shape) {
  Mismatch m;
  m.flat = i;
  m.index = unflatten(i, shape);
  m.got = got[i];
  m.expected = expected[i];
  m.unwritten = is_poison(got[i]);
  return m;
}

}  // namespace

CompareReport compare(const std::vector<float>& got, const std::vector<float>& expected,
                      const std::vector<int64_t>& shape, Tolerance tol,
                      const std::vector<std::string>& dim_names) {
  const size_t n = element_count(shape);
  if (got.size() != n || expected.size() != n) {
    throw std::invalid_argument("compare: shape " + shape_string(shape) + " has " +
                                std::to_string(n) + " elements, but got has " +
                                std::to_string(got.size()) + " and expected has " +
                                std::to_string(expected.size()));
  }
  if (!dim_names.empty() && dim_names.size() != shape.size()) {
    throw std::invalid_argument("compare: " + std::to_string(dim_names.size()) +
                                " dimension names for the shape " + shape_string(shape));
  }
  CompareReport r;
  r.shape = shape;
  r.dim_names = dim_names.empty() ? default_names(shape.size()) : dim_names;
  r.tol = tol;
  r.count = n;
  const size_t rank = shape.size();

  double ee = 0;
  size_t finite = 0;
  for (float e : expected) {
    if (std::isfinite(e)) {
      ee += static_cast<double>(e) * e;
      ++finite;
    }
  }
  r.ref_rms = finite ? std::sqrt(ee / static_cast<double>(finite)) : 0.0;
  r.abs_limit = tol.atol + tol.rms_atol * r.ref_rms;
  const double rel_floor = 1e-3 * r.ref_rms;

  PassFacts f;
  const size_t rows = rank ? static_cast<size_t>(shape[0]) : 1;
  const size_t row_len = rows ? n / rows : 0;
  const size_t cols = rank >= 2 ? static_cast<size_t>(shape.back()) : 1;
  f.unwritten_in_row.assign(rows, 0);
  f.unwritten_in_column.assign(cols, 0);
  f.written_bad_at.resize(rank);
  for (size_t d = 0; d < rank; ++d) f.written_bad_at[d].assign(static_cast<size_t>(shape[d]), 0);
  std::vector<int64_t> idx(rank, 0);  // multi-index of element i, advanced like an odometer

  double err2 = 0, dot = 0, gg = 0, sum_ee = 0;
  for (size_t i = 0; i < n; ++i) {
    const float g = got[i];
    const float e = expected[i];
    const bool poison = is_poison(g);
    if (bits_of(g) == kSharedPoisonBits) ++r.from_unwritten_shared;
    if (poison) {
      ++r.unwritten;
      ++f.unwritten_in_row[i / row_len];
      ++f.unwritten_in_column[i % cols];
    }
    bool bad = false;
    if (std::isfinite(e)) {
      if (std::isfinite(g)) {
        const double d = std::fabs(static_cast<double>(g) - e);
        err2 += d * d;
        dot += static_cast<double>(g) * e;
        gg += static_cast<double>(g) * g;
        sum_ee += static_cast<double>(e) * e;
        if (d > r.max_abs) {
          r.max_abs = d;
          r.largest = make_mismatch(i, got, expected, shape);
        }
        if (e != 0 && std::fabs(e) >= rel_floor) r.max_rel = std::max(r.max_rel, d / std::fabs(e));
        bad = d > r.abs_limit + tol.rtol * std::fabs(e);
      } else {
        bad = true;
        if (!poison && std::isnan(g) && r.nan++ == 0) f.first_nan = i;
        if (std::isinf(g) && r.inf++ == 0) f.first_inf = i;
      }
    } else {
      ++r.expected_nonfinite;
      bad = !((std::isnan(e) && std::isnan(g)) || g == e);
    }
    if (bad) {
      ++r.bad;
      if (r.first_bad.size() < kListed)
        r.first_bad.push_back(make_mismatch(i, got, expected, shape));
      if (!poison) {
        ++f.written_bad;
        for (size_t d = 0; d < rank; ++d) ++f.written_bad_at[d][static_cast<size_t>(idx[d])];
      }
    }
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  r.nmse = sum_ee > 0 ? err2 / sum_ee : (err2 > 0 ? kInf : 0.0);
  if (gg > 0 && sum_ee > 0) {
    r.cosine = dot / std::sqrt(gg * sum_ee);
  } else {
    r.cosine = gg == sum_ee ? 1.0 : 0.0;
  }

  if (r.bad == 0) return r;
  if (n > 0 && r.unwritten == n) {
    r.findings.push_back(
        "Nothing was written: every element still holds the poison pattern (all bytes 0xFF). Did "
        "the kernel run? Check the grid and block sizes, and call cudaGetLastError() right after "
        "the launch.");
    return r;
  }
  if (r.from_unwritten_shared > 0) {
    const bool all = r.from_unwritten_shared == n;
    r.findings.push_back(
        std::string(all ? "Every element holds"
                        : count_of(r.from_unwritten_shared, "element holds", "elements hold")) +
        " the CPU backend's __shared__ poison (bits 0xFFF1FFF1): computed from shared memory "
        "that no thread had written yet. Look for a missing __syncthreads() between loading a "
        "tile into shared memory and reading it, or a part of the tile that is never loaded.");
    if (all) return r;
  }
  if (rank >= 1 && r.unwritten) unwritten_findings(r, f, got);
  nonfinite_findings(r, f);
  error_location_findings(r, f);
  pattern_findings(r, got, expected);
  return r;
}

std::string CompareReport::describe(const std::string& what) const {
  std::string out;
  if (!pitfall_message.empty()) {
    out += "This looks like a known mistake: " + pitfall_message;
    if (!pitfall_exact)
      out += " (your output is much closer to that mistake than to the reference)";
    out += "\n";
  }
  const std::string head = "'" + what + "' " + shape_string(shape);
  if (ok()) {
    return out + head + ": all " + std::to_string(count) +
           " elements match the reference (max |got - expected| = " + sci(max_abs) + ").";
  }
  out += head + ": " + std::to_string(bad) + " of " +
         count_of(count, "element differs", "elements differ") + " from the reference.\n";
  if (max_abs > 0) {
    out += "  largest difference: " + sci(max_abs) + " at " + index_string(largest.index) + " (" +
           got_expected(largest.got, largest.expected) + "); NMSE " + sci(nmse) +
           ", cosine similarity " + num(cosine) + "\n";
  }
  for (const std::string& s : findings) out += "  " + s + "\n";
  const bool nothing_written = unwritten == count;
  if (!nothing_written) out += "  first differences:\n";
  for (const Mismatch& m : nothing_written ? std::vector<Mismatch>{} : first_bad) {
    out += "    " + index_string(m.index) + "  ";
    out += m.unwritten ? "never written (0xFF bytes), expected " + num(m.expected)
                       : got_expected(m.got, m.expected);
    out += "\n";
  }
  if (!nothing_written && bad > first_bad.size()) {
    out += "    ... and " + std::to_string(bad - first_bad.size()) + " more\n";
  }
  out += "  tolerance: ";
  if (tol.atol == 0 && tol.rtol == 0 && tol.rms_atol == 0) {
    out += "exact (the values must be identical)";
  } else {
    std::vector<std::string> terms;
    if (tol.atol > 0) terms.push_back(sci(tol.atol));
    if (tol.rms_atol > 0) terms.push_back(sci(tol.rms_atol) + " * rms(expected)");
    if (tol.rtol > 0) terms.push_back(sci(tol.rtol) + " * |expected|");
    out += "|got - expected| <= ";
    for (size_t i = 0; i < terms.size(); ++i) out += (i ? " + " : "") + terms[i];
    if (tol.rms_atol > 0) out += ", where rms(expected) = " + num(ref_rms);
  }
  out += "\n";
  if (tol.why && *tol.why) out += "    because " + std::string(tol.why) + "\n";
  const std::string seed = seed_note();
  if (!seed.empty()) out += "  " + seed + "\n";
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

// The best-matching candidate for a failing output, or -1.
int match_pitfall(const CompareReport& vs_ref, const std::vector<float>& got,
                  const std::vector<float>& expected, const std::vector<int64_t>& shape,
                  Tolerance tol, const std::vector<PitfallCandidate>& pitfalls, bool& exact) {
  int best = -1;
  bool best_exact = false;
  double best_nmse = kInf;
  for (size_t c = 0; c < pitfalls.size(); ++c) {
    const std::vector<float>& out = pitfalls[c].output;
    if (out.size() != got.size()) continue;
    if (compare(out, expected, shape, tol).ok()) continue;  // same as the reference here
    const CompareReport vs_c = compare(got, out, shape, tol);
    const bool is_exact = vs_c.ok();
    // "Much closer" is measured on finite values only, so an output with unwritten, NaN or
    // infinite elements can only match a mistake exactly, never approximately.
    const bool all_finite = vs_c.unwritten == 0 && vs_c.nan == 0 && vs_c.inf == 0;
    const bool close = all_finite && vs_ref.nmse > 0 && vs_c.bad <= vs_ref.bad &&
                       vs_c.nmse <= 1e-3 * vs_ref.nmse && vs_c.nmse <= 1e-4;
    if (!is_exact && !close) continue;
    if (best < 0 || (is_exact && !best_exact) ||
        (is_exact == best_exact && vs_c.nmse < best_nmse)) {
      best = static_cast<int>(c);
      best_exact = is_exact;
      best_nmse = vs_c.nmse;
    }
  }
  exact = best_exact;
  return best;
}

}  // namespace

::testing::AssertionResult matches_reference(const std::string& what, const std::vector<float>& got,
                                             const std::vector<float>& expected,
                                             const std::vector<int64_t>& shape, Tolerance tol,
                                             const std::vector<PitfallCandidate>& pitfalls,
                                             const std::vector<std::string>& dim_names) {
  size_t n = 0;
  try {
    n = element_count(shape);
  } catch (const std::invalid_argument& e) {
    return ::testing::AssertionFailure() << "test error for '" << what << "': " << e.what();
  }
  if (expected.size() != n) {
    return ::testing::AssertionFailure()
           << "test error for '" << what << "': the reference has " << expected.size()
           << " values but the shape " << shape_string(shape) << " has " << n << " elements";
  }
  if (got.size() != n) {
    std::string known;
    for (const PitfallCandidate& c : pitfalls) {
      if (c.output.size() != got.size() || got.empty()) continue;
      if (compare(got, c.output, {static_cast<int64_t>(got.size())}, tol).ok()) {
        known = "This looks like a known mistake: " + c.message + "\n";
        break;
      }
    }
    return ::testing::AssertionFailure()
           << known << "'" << what << "' has " << got.size() << " elements, but the expected shape "
           << shape_string(shape) << " has " << n << ".";
  }
  CompareReport report;
  try {
    report = compare(got, expected, shape, tol, dim_names);
  } catch (const std::invalid_argument& e) {
    return ::testing::AssertionFailure() << "test error for '" << what << "': " << e.what();
  }
  if (report.ok()) return ::testing::AssertionSuccess() << report.describe(what);
  bool exact = false;
  const int k = match_pitfall(report, got, expected, shape, tol, pitfalls, exact);
  if (k >= 0) {
    report.pitfall_name = pitfalls[static_cast<size_t>(k)].name;
    report.pitfall_message = pitfalls[static_cast<size_t>(k)].message;
    report.pitfall_exact = exact;
  }
  return ::testing::AssertionFailure() << report.describe(what);
}

}  // namespace clockwork
