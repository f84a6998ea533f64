// Checking a KV cache slot by slot: which slots a step wrote, what they hold, and that every
// other slot kept what it held before. When the rows landed in the wrong slots, the report
// says which known mistake puts them there (slot pos+1, slot pos−1, the page table ignored, page
// and offset swapped); when they landed right but hold wrong values, which known mistake
// computes those values (K stored before RoPE, ...).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/random.h"

namespace clockwork {

/// A rule that says where position p is stored (a slot index, or −1: nowhere).
struct SlotRule {
  std::string name;     ///< short identifier
  std::string message;  ///< what the mistake is and what is right
  std::function<long(int pos)> slot;
};

/// Values a known mistake would store instead of the right ones, row by row like `rows`.
struct RowCandidate {
  std::string name;
  std::string message;
  std::vector<float> rows;
};

/// One cache check: a layer's K or V storage after a step.
struct CacheCheck {
  std::string what;                  ///< "K of layer 1", named in every line of the report
  std::vector<float> got;            ///< the storage after the step, [slots, width]
  std::vector<float> before;         ///< the storage before it; empty: every slot was poison
  int width = 0;                     ///< h_k·h_d
  int page_size = 0;                 ///< slots per page of a paged cache, to name slots as
                                     ///< (page, offset); 0 for a contiguous cache
  int head_dim = 1;                  ///< for naming heads
  std::vector<int> positions;        ///< the positions the step should have written
  std::function<long(int)> slot_of;  ///< where each position belongs
  std::vector<float> rows;           ///< their expected rows, [positions.size(), width]
  Tolerance tol;                     ///< how close a written row must be
  std::vector<SlotRule> wrong_slots;       ///< known mistakes of where
  std::vector<RowCandidate> wrong_values;  ///< known mistakes of what
};

namespace cache_check_detail {

inline bool is_poison(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b == 0xFFFFFFFFu;
}

inline bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

inline double rms(const std::vector<float>& v) {
  double s = 0;
  size_t n = 0;
  for (float x : v) {
    if (std::isfinite(x)) {
      s += static_cast<double>(x) * x;
      ++n;
    }
  }
  return n ? std::sqrt(s / static_cast<double>(n)) : 0.0;
}

// Whether `width` values at got[g..] match want[w..] within the tolerance.
inline bool row_close(const float* got, const float* want, int width, double abs_limit,
                      double rtol) {
  for (int j = 0; j < width; ++j) {
    const double g = got[j], e = want[j];
    if (!std::isfinite(g) || !std::isfinite(e) || std::fabs(g - e) > abs_limit + rtol * std::fabs(e))
      return false;
  }
  return true;
}

inline std::string slot_name(long slot, int page_size) {
  if (page_size <= 0) return "slot " + std::to_string(slot);
  return "slot " + std::to_string(slot) + " (page " + std::to_string(slot / page_size) +
         ", offset " + std::to_string(slot % page_size) + ")";
}

}  // namespace cache_check_detail

/// Success when every position of the check is in its slot within the tolerance and every other
/// slot holds exactly what it held before; otherwise a report naming positions, slots, pages
/// and heads, and the known mistake that explains it.
inline ::testing::AssertionResult cache_matches(const CacheCheck& c) {
  using namespace cache_check_detail;
  const size_t width = static_cast<size_t>(c.width);
  const long slots = static_cast<long>(c.got.size() / width);
  const double abs_limit = c.tol.atol + c.tol.rms_atol * rms(c.rows);
  std::vector<bool> owned(static_cast<size_t>(slots), false);
  std::vector<std::string> problems;
  size_t wrong_rows = 0, unwritten_rows = 0, stray_slots = 0;

  for (size_t i = 0; i < c.positions.size(); ++i) {
    const int p = c.positions[i];
    const long slot = c.slot_of(p);
    if (slot < 0 || slot >= slots) {
      problems.push_back("position " + std::to_string(p) + " has no slot in the storage (" +
                         std::to_string(slot) + ")");
      ++wrong_rows;
      continue;
    }
    owned[static_cast<size_t>(slot)] = true;
    const float* got = c.got.data() + static_cast<size_t>(slot) * width;
    const float* want = c.rows.data() + i * width;
    bool all_poison = true;
    for (size_t j = 0; j < width; ++j) all_poison = all_poison && is_poison(got[j]);
    if (all_poison) {
      ++unwritten_rows;
      if (problems.size() < 8) {
        problems.push_back("position " + std::to_string(p) + " belongs in " +
                           slot_name(slot, c.page_size) + ", which was never written");
      }
      continue;
    }
    for (size_t j = 0; j < width; ++j) {
      const double g = got[j], e = want[j];
      if (!std::isfinite(g) || std::fabs(g - e) > abs_limit + c.tol.rtol * std::fabs(e)) {
        ++wrong_rows;
        if (problems.size() < 8) {
          std::ostringstream m;
          m << "position " << p << " in " << slot_name(slot, c.page_size) << ": head "
            << j / static_cast<size_t>(c.head_dim) << ", dim " << j % static_cast<size_t>(c.head_dim)
            << " is " << got[j] << ", expected " << want[j];
          problems.push_back(m.str());
        }
        break;
      }
    }
  }
  for (long s = 0; s < slots; ++s) {
    if (owned[static_cast<size_t>(s)]) continue;
    const float* got = c.got.data() + static_cast<size_t>(s) * width;
    bool kept = true;
    for (size_t j = 0; j < width && kept; ++j) {
      kept = c.before.empty() ? is_poison(got[j])
                              : same_bits(got[j], c.before[static_cast<size_t>(s) * width + j]);
    }
    if (!kept) {
      ++stray_slots;
      if (problems.size() < 8) {
        problems.push_back(slot_name(s, c.page_size) +
                           " was changed, but this step has no position to store there");
      }
    }
  }
  if (wrong_rows == 0 && unwritten_rows == 0 && stray_slots == 0)
    return ::testing::AssertionSuccess();

  std::ostringstream out;
  out << c.what << ": ";
  if (c.positions.size() == 1) {
    out << "position " << c.positions[0] << (unwritten_rows ? " not written" : "")
        << (wrong_rows ? " wrong" : "") << (unwritten_rows || wrong_rows ? "" : " right");
  } else {
    out << "of the " << c.positions.size() << " positions this step writes, " << unwritten_rows
        << " not written, " << wrong_rows << " wrong";
  }
  out << "; " << stray_slots << " other slots changed (they must keep what they held).\n";

  // Where did the rows go? Count, for each known mistake, the positions whose row sits in the
  // slot that mistake would have used (and not in its own slot). A mistake may send some
  // positions nowhere (a page-table entry that does not exist) or two positions to one slot, so
  // it explains the result when it accounts for at least half of the positions it places.
  const SlotRule* best = nullptr;
  size_t best_hits = 0;
  for (const SlotRule& rule : c.wrong_slots) {
    size_t placed = 0, hits = 0;
    for (size_t i = 0; i < c.positions.size(); ++i) {
      const long slot = rule.slot(c.positions[i]);
      if (slot < 0 || slot >= slots || slot == c.slot_of(c.positions[i])) continue;
      ++placed;
      hits += row_close(c.got.data() + static_cast<size_t>(slot) * width,
                        c.rows.data() + i * width, c.width, abs_limit, c.tol.rtol);
    }
    if (hits > 0 && 2 * hits >= placed && hits > best_hits) {
      best = &rule;
      best_hits = hits;
    }
  }
  if (best) out << "  This looks like a known mistake: " << best->message << "\n";
  // Right slots, wrong values?
  for (const RowCandidate& cand : c.wrong_values) {
    bool explains = !c.positions.empty() && unwritten_rows == 0;
    for (size_t i = 0; i < c.positions.size() && explains; ++i) {
      const long slot = c.slot_of(c.positions[i]);
      explains = slot >= 0 && slot < slots &&
                 row_close(c.got.data() + static_cast<size_t>(slot) * width,
                           cand.rows.data() + i * width, c.width, abs_limit, c.tol.rtol);
    }
    if (explains) {
      out << "  This looks like a known mistake: " << cand.message << "\n";
      break;
    }
  }
  for (const std::string& p : problems) out << "  " << p << "\n";
  out << "  Tolerance: " << c.tol.rtol << " relative, " << abs_limit << " absolute ("
      << c.tol.why << ")";
  const std::string seeds = seed_note();
  if (!seeds.empty()) out << "\n  " << seeds;
  return ::testing::AssertionFailure() << out.str();
}

/// The rules of where a position must NOT go, for a cache with this page table (empty for a
/// contiguous cache) and page size.
inline std::vector<SlotRule> slot_pitfalls(const std::vector<int32_t>& table, int page_size) {
  std::vector<SlotRule> rules;
  auto mapped = [table, page_size](long pos) -> long {
    if (pos < 0) return -1;
    if (table.empty()) return pos;
    const size_t page = static_cast<size_t>(pos / page_size);
    if (page >= table.size()) return -1;
    return static_cast<long>(table[page]) * page_size + pos % page_size;
  };
  rules.push_back({"slot_pos_plus_1",
                   "each position was written to the slot of the NEXT position (pos + 1): the "
                   "token at position pos goes to slot pos, and the first decode step's pos is "
                   "the prompt length s",
                   [mapped](int p) { return mapped(p + 1L); }});
  rules.push_back({"slot_pos_minus_1",
                   "each position was written to the slot of the PREVIOUS position (pos − 1), "
                   "overwriting it: the new token's position is the number of tokens before it",
                   [mapped](int p) { return mapped(p - 1L); }});
  if (!table.empty()) {
    rules.push_back({"page_table_ignored",
                     "rows were written to slot = pos, as if the cache were contiguous: look the "
                     "physical page up in the page table, slot = page_table[pos / page_size]·"
                     "page_size + pos % page_size",
                     [](int p) { return static_cast<long>(p); }});
    rules.push_back(
        {"page_and_offset_swapped",
         "page and offset are swapped (page_table[pos % page_size] and offset pos / page_size): "
         "the logical page is pos / page_size and the offset inside it pos % page_size",
         [table, page_size](int p) -> long {
           const size_t page = static_cast<size_t>(p % page_size);
           if (page >= table.size()) return -1;
           return static_cast<long>(table[page]) * page_size + p / page_size;
         }});
    rules.push_back({"page_times_width",
                     "the physical page was used without multiplying it by page_size: slot = "
                     "page_table[pos / page_size]·page_size + pos % page_size",
                     [table, page_size](int p) -> long {
                       const size_t page = static_cast<size_t>(p / page_size);
                       if (page >= table.size()) return -1;
                       return static_cast<long>(table[page]) + p % page_size;
                     }});
  }
  return rules;
}

}  // namespace clockwork
