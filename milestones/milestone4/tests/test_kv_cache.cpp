// Milestone 4: writing the KV cache. The append kernel on contiguous and paged layouts (pages of
// 1, 3 and 16 positions, handed out in a scrambled order): a prefill fills exactly positions
// 0 .. s−1 and a decode step exactly its slot, with every other slot still holding its poison or
// its earlier contents. Then the cache classes: extend, capacity, the page table, and the clear
// errors for a full cache and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "kernels/kernels.h"
#include "harness/pipeline/kv_cache.h"
#include "milestones/milestone4/tests/cache_check.h"
#include "milestones/milestone4/tests/device_cache.h"

namespace clockwork {
namespace {

// A copy moves values without arithmetic: a slot must hold its row bit for bit.
Tolerance copy_tolerance() {
  return tol::exact("appending copies the rows into their slots, no arithmetic: bit for bit");
}

struct Layout {
  int page_size;  // 0: contiguous
  const char* why;
};

// Checks K and V storage after writing `positions` with `k_rows`/`v_rows`; `before_k`/`before_v`
// hold the storage before the write (empty: it was all poison).
void expect_slots(DeviceCache& cache, const std::string& step, const std::vector<int>& positions,
                  const std::vector<float>& k_rows, const std::vector<float>& v_rows,
                  const std::vector<float>& before_k, const std::vector<float>& before_v) {
  for (int which = 0; which < 2; ++which) {
    CacheCheck c;
    c.what = std::string(which ? "V" : "K") + " cache after " + step;
    c.got = (which ? cache.v : cache.k).download();
    c.before = which ? before_v : before_k;
    c.width = cache.h_k * cache.h_d;
    c.page_size = cache.table.empty() ? 0 : cache.page_size;
    c.head_dim = cache.h_d;
    c.positions = positions;
    c.slot_of = [&cache](int p) { return cache.slot_of(p); };
    c.rows = which ? v_rows : k_rows;
    c.tol = copy_tolerance();
    c.wrong_slots = slot_pitfalls(cache.table, cache.page_size);
    // K and V exchanged is a mistake of what, not where.
    c.wrong_values.push_back({"k_v_swapped",
                              "K and V were exchanged: cache.k takes the rows of k, cache.v those "
                              "of v",
                              which ? k_rows : v_rows});
    EXPECT_TRUE(cache_matches(c));
    EXPECT_TRUE(guards_intact(which ? cache.v : cache.k));
  }
}

std::vector<int> range(int first, int n) {
  std::vector<int> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = first + i;
  return r;
}

// Prefill of s positions, then two decode steps, each checked slot by slot.
void check_prefill_then_decode(const Layout& layout, int s, int h_k, int h_d) {
  const int capacity = s + 4;
  SCOPED_TRACE(std::string(layout.page_size ? "paged, page_size=" + std::to_string(layout.page_size)
                                            : std::string("contiguous")) +
               ", s=" + std::to_string(s) + " (" + layout.why + ")");
  DeviceCache cache(h_k, h_d, capacity, layout.page_size);
  const int width = h_k * h_d;
  const uint64_t seed = test_seed(4100 + s * 3 + layout.page_size);

  // Prefill: positions 0 .. s−1, nothing else.
  const auto k = random_normal(static_cast<size_t>(s) * width, seed);
  const auto v = random_normal(static_cast<size_t>(s) * width, seed + 1);
  DeviceBuffer<float> d_k("k", {s, width}), d_v("v", {s, width});
  d_k.upload(k);
  d_v.upload(v);
  kernels::kv_cache_append(d_k.data(), d_v.data(), cache.view(), 0, s);
  expect_slots(cache, "prefill of positions 0.." + std::to_string(s - 1), range(0, s), k, v, {},
               {});
  if (::testing::Test::HasFailure()) return;  // the decode steps would repeat the same report

  // Two decode steps: position s, then s + 1; each writes its slot only.
  for (int pos = s; pos < s + 2; ++pos) {
    const std::vector<float> before_k = cache.k.download(), before_v = cache.v.download();
    const auto k1 = random_normal(static_cast<size_t>(width), seed + 10 + pos);
    const auto v1 = random_normal(static_cast<size_t>(width), seed + 20 + pos);
    DeviceBuffer<float> d_k1("k", {1, width}), d_v1("v", {1, width});
    d_k1.upload(k1);
    d_v1.upload(v1);
    kernels::kv_cache_append(d_k1.data(), d_v1.data(), cache.view(), pos, 1);
    expect_slots(cache, "the decode step at position " + std::to_string(pos), {pos}, k1, v1,
                 before_k, before_v);
  }
}

TEST(KvCacheAppend, ContiguousPrefillThenDecode) {
  check_prefill_then_decode({0, "one page: slot = position"}, 7, 2, 8);
  check_prefill_then_decode({0, "one position, one KV head"}, 1, 1, 4);
}

TEST(KvCacheAppend, PagedPageSizeOne) {
  check_prefill_then_decode({1, "every position on its own page"}, 7, 2, 8);
}

TEST(KvCacheAppend, PagedPageSizeThree) {
  check_prefill_then_decode({3, "s = 7 ends inside a page"}, 7, 2, 8);
  check_prefill_then_decode({3, "s = 6 ends on a page boundary: decode starts a new page"}, 6, 4,
                            16);
}

TEST(KvCacheAppend, PagedPageSizeSixteen) {
  check_prefill_then_decode({16, "s = 21 spans two pages"}, 21, 2, 8);
  check_prefill_then_decode({16, "Llama-3-8B's h_k = 8, h_d = 128 in the middle of a page"}, 5, 8,
                            128);
}

// The launcher refuses what does not fit, before anything is written.
TEST(KvCacheAppend, FullCacheAndShortPageTableAreErrors) {
  DeviceCache contiguous(2, 8, 6, 0);
  DeviceBuffer<float> k("k", {3, 16}), v("v", {3, 16});
  k.upload(random_normal(48, test_seed(4200)));
  v.upload(random_normal(48, test_seed(4201)));
  try {
    kernels::kv_cache_append(k.data(), v.data(), contiguous.view(), 5, 2);
    ADD_FAILURE() << "positions 5..6 of a 6-position cache were accepted";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("holds 6 positions"), std::string::npos) << e.what();
  }
  for (float x : contiguous.k.download())
    ASSERT_TRUE(cache_check_detail::is_poison(x)) << "a refused append wrote into the cache";

  // A page table of 2 entries of 3 positions covers positions 0..5 only.
  DeviceCache paged(2, 8, 6, 3);
  try {
    kernels::kv_cache_append(k.data(), v.data(), paged.view(), 4, 3);
    ADD_FAILURE() << "positions 4..6 were accepted with a page table covering 0..5";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("page-table entries"), std::string::npos) << e.what();
  }
}

TEST(KvCacheAppend, BadViewsAreNamed) {
  DeviceCache cache(2, 8, 6, 3);
  DeviceBuffer<float> k("k", {1, 16}), v("v", {1, 16});
  auto expect_invalid = [&](kernels::KvCacheView view, const std::string& field) {
    try {
      kernels::kv_cache_append(k.data(), v.data(), view, 0, 1);
      ADD_FAILURE() << "a view with a bad " << field << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  kernels::KvCacheView bad = cache.view();
  bad.page_size = 0;
  expect_invalid(bad, "page_size");
  bad = cache.view();
  bad.head_dim = -1;
  expect_invalid(bad, "head_dim");
  bad = cache.view();
  bad.v = bad.k;
  expect_invalid(bad, "alias");
  bad = cache.view();
  bad.page_table = nullptr;  // contiguous, but with 4 pages
  expect_invalid(bad, "num_pages");
  EXPECT_THROW(kernels::kv_cache_append(k.data(), v.data(), cache.view(), -1, 1),
               std::invalid_argument);
}

// ---- the cache classes ----------------------------------------------------------------------

KvCacheShape small_shape() {
  return {2, 2, 8};  // L = 2, h_k = 2, h_d = 8
}

TEST(KvCacheClasses, ContiguousExtendsUpToItsCapacity) {
  ContiguousKvCache cache(small_shape(), 10);
  EXPECT_EQ(cache.capacity(), 10);
  EXPECT_EQ(cache.extend(7), 0) << "prefill of an empty cache starts at position 0";
  EXPECT_EQ(cache.extend(1), 7) << "the first decode step is at position s (the prompt length)";
  EXPECT_EQ(cache.length(), 8);
  const kernels::KvCacheView view = cache.layer(1);
  EXPECT_EQ(view.page_table, nullptr);
  EXPECT_EQ(kernels::kv_cache_capacity(view), 10);
  EXPECT_EQ(cache.slot_of(5).offset, 5);
  try {
    cache.extend(3);
    ADD_FAILURE() << "8 + 3 positions fit a 10-position cache";
  } catch (const KvCacheFullError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("capacity 10"), std::string::npos) << msg;
    EXPECT_NE(msg.find("contiguous"), std::string::npos) << msg;
  }
  EXPECT_EQ(cache.length(), 8) << "a refused extend changed the cache";
  EXPECT_EQ(cache.extend(2), 8);
  EXPECT_THROW(cache.extend(1), KvCacheFullError);
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  EXPECT_THROW(cache.layer(2), std::out_of_range);
  EXPECT_THROW(ContiguousKvCache(small_shape(), 0), std::invalid_argument);
}

TEST(KvCacheClasses, NewCacheIsPoisoned) {
  PagedKvCache cache(small_shape(), 3, 4);
  for (int l = 0; l < 2; ++l) {
    for (bool values : {false, true}) {
      for (float x : cache.download(l, values))
        ASSERT_TRUE(cache_check_detail::is_poison(x)) << "layer " << l << " starts written";
    }
  }
}

// The page table grows by one page exactly when the sequence reaches a new page, from the pool's
// free pages, and gives them back on clear().
TEST(KvCacheClasses, PagedTableGrowsAtPageBoundaries) {
  const int page_size = 3, pages = 5;
  PagedKvCache cache(small_shape(), page_size, pages);
  EXPECT_EQ(cache.capacity(), 15);
  EXPECT_EQ(cache.extend(4), 0);  // positions 0..3: pages 0 and 1
  ASSERT_EQ(cache.page_table().size(), 2u)
      << "4 positions of pages of 3 need 2 pages: add a page whenever the sequence reaches one";
  for (int pos = 4; pos < 9; ++pos) {
    EXPECT_EQ(cache.extend(1), pos);
    const size_t want = static_cast<size_t>((pos + 1 + page_size - 1) / page_size);
    EXPECT_EQ(cache.page_table().size(), want)
        << "after position " << pos << " the table should hold " << want << " pages";
  }
  const std::vector<int32_t> table = cache.page_table();
  const std::set<int32_t> distinct(table.begin(), table.end());
  EXPECT_EQ(distinct.size(), table.size()) << "a physical page is used twice";
  for (int32_t p : table) EXPECT_TRUE(p >= 0 && p < pages) << "page " << p << " is not in the pool";
  EXPECT_EQ(cache.free_pages(), pages - 3);
  const kernels::KvCacheView view = cache.layer(0);
  EXPECT_NE(view.page_table, nullptr);
  EXPECT_EQ(view.table_pages, 3);
  EXPECT_EQ(view.num_pages, pages);
  EXPECT_EQ(cache.slot_of(7).page, table[2]);
  EXPECT_EQ(cache.slot_of(7).offset, 1);

  cache.clear();
  EXPECT_EQ(cache.free_pages(), pages);
  EXPECT_EQ(cache.extend(9), 0);
  EXPECT_EQ(cache.page_table(), table) << "after clear() the pool should hand out the same pages";
  try {
    cache.extend(7);  // 9 + 7 = 16 > 15
    ADD_FAILURE() << "16 positions fit 5 pages of 3";
  } catch (const KvCacheFullError& e) {
    EXPECT_NE(std::string(e.what()).find("capacity 15"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(), 9);
  EXPECT_THROW(PagedKvCache(small_shape(), 0, 4), std::invalid_argument);
}

TEST(KvCacheClasses, KindsByName) {
  for (KvCacheKind k : {KvCacheKind::None, KvCacheKind::Contiguous, KvCacheKind::Paged})
    EXPECT_EQ(parse_kv_cache_kind(kv_cache_kind_name(k)), k);
  try {
    parse_kv_cache_kind("pagd");
    ADD_FAILURE() << "'pagd' was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pagd"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace clockwork
