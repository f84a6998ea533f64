/// @file kv_slots.h
/// Where a position lives in a KV cache, for the known-good cache and decode implementations.
#pragma once

#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::known_good {

/// The slots of a cache view, with its page table copied to the host once.
class KvSlots {
 public:
  explicit KvSlots(const kernels::KvCacheView& c) : c_(c) {
    if (c.page_table) table_ = download(c.page_table, static_cast<size_t>(c.table_pages));
  }
  /// Values in one slot: a row of n_kv_heads·head_dim.
  size_t width() const { return static_cast<size_t>(c_.n_kv_heads) * c_.head_dim; }
  /// The slot of position `pos` (page·page_size + offset).
  size_t of(int pos) const {
    const int page = table_.empty() ? 0 : table_[static_cast<size_t>(pos / c_.page_size)];
    if (page < 0 || page >= c_.num_pages) {
      throw std::out_of_range("KV cache: the page table maps position " + std::to_string(pos) + " to page " +
                              std::to_string(page) + ", outside the " + std::to_string(c_.num_pages) + " pages");
    }
    return static_cast<size_t>(page) * c_.page_size + static_cast<size_t>(pos % c_.page_size);
  }

 private:
  kernels::KvCacheView c_;
  std::vector<int32_t> table_;
};

}  // namespace clockwork::known_good
