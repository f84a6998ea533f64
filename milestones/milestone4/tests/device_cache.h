// A KV cache laid out as the kernels see it, built by a test by hand (no KvCache class): K and
// V storage in DeviceBuffers (poisoned, with guard bands) and a page table the test chose.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "harness/check/device_buffer.h"
#include "kernels/kernels.h"

namespace clockwork {

/// K and V storage [num_pages, page_size, h_k, h_d] for `capacity` positions, contiguous
/// (page_size 0: one page of `capacity` slots) or paged. Physical pages are handed out in a
/// scrambled order, with two spare pages the sequence never reaches, so that a position written
/// or read in the wrong slot lands somewhere visible.
struct DeviceCache {
  int h_k, h_d, page_size, num_pages;
  std::vector<int32_t> table;  // empty: contiguous
  DeviceBuffer<float> k, v;
  DeviceBuffer<int32_t> d_table;

  DeviceCache(int h_k_, int h_d_, int capacity, int page_size_)
      : h_k(h_k_),
        h_d(h_d_),
        page_size(page_size_ > 0 ? page_size_ : capacity),
        num_pages(page_size_ > 0 ? (capacity + page_size_ - 1) / page_size_ + 2 : 1),
        table(page_size_ > 0 ? scrambled((capacity + page_size_ - 1) / page_size_, num_pages)
                             : std::vector<int32_t>{}),
        k("K cache", {num_pages, page_size, h_k, h_d}),
        v("V cache", {num_pages, page_size, h_k, h_d}),
        d_table("page table", {std::max<int64_t>(1, static_cast<int64_t>(table.size()))}) {
    if (!table.empty()) d_table.upload(table);
  }

  // `n` distinct physical pages out of `pool`, in an order that is neither ascending nor
  // descending: logical page i gets (7·i + 3) mod pool, made unique.
  static std::vector<int32_t> scrambled(int n, int pool) {
    std::vector<int32_t> t;
    std::set<int32_t> used;
    for (int i = 0; static_cast<int>(t.size()) < n; ++i) {
      int32_t p = static_cast<int32_t>((7L * i + 3) % pool);
      while (used.count(p)) p = (p + 1) % pool;
      used.insert(p);
      t.push_back(p);
    }
    return t;
  }

  /// The view the kernels take (they may write through it: the buffers are this cache's own).
  kernels::KvCacheView view() const {
    kernels::KvCacheView c;
    c.k = const_cast<float*>(k.data());
    c.v = const_cast<float*>(v.data());
    c.page_table = table.empty() ? nullptr : d_table.data();
    c.table_pages = table.empty() ? 1 : static_cast<int>(table.size());
    c.num_pages = num_pages;
    c.page_size = page_size;
    c.n_kv_heads = h_k;
    c.head_dim = h_d;
    return c;
  }

  /// Slots per layer of storage.
  int slots() const { return num_pages * page_size; }

  /// Where position pos lives.
  long slot_of(int pos) const {
    if (table.empty()) return pos;
    return static_cast<long>(table.at(static_cast<size_t>(pos / page_size))) * page_size +
           pos % page_size;
  }
};

}  // namespace clockwork
