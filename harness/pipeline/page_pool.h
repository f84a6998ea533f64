/// @file page_pool.h
/// One pool of KV-cache pages shared by every request of a batch (milestone 5).
///
/// The storage is that of a paged cache ([L, num_pages, page_size, h_k, h_d] for K and for V),
/// but the pool belongs to no sequence: requests take pages as they grow and give them back
/// when they finish, and their page tables live with the requests (BatchedGenerator). Pages are
/// handed out in the fixed shuffled order of shuffled_page_order(), so consecutive positions of a
/// request are never in consecutive pages by accident.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/pipeline/kv_cache.h"
#include "kernels/kernels.h"

namespace clockwork {

/// The pool has fewer free pages than a request needs. The message names the pool's size and the
/// request.
class PagePoolExhausted : public std::length_error {
 public:
  using std::length_error::length_error;
};

/// K and V pages of every layer, shared by a batch. Not copyable (it owns device memory).
class PagePool {
 public:
  /// Allocates and poisons the pool. Throws std::invalid_argument for a bad shape or size,
  /// CudaError when the device has no room.
  PagePool(const KvCacheShape& shape, int page_size, int num_pages);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  int num_pages() const { return num_pages_; }
  int page_size() const { return page_size_; }
  /// Pages not held by any request.
  int free_pages() const { return static_cast<int>(free_.size()); }

  /// Moves n pages from the pool to the end of `table` (a request's page table). Throws
  /// PagePoolExhausted naming the pool size, the free pages and `who` when fewer than n are free
  /// (the table is unchanged then).
  void take(int n, std::vector<int32_t>& table, const std::string& who);
  /// Returns every page of `table` to the pool and empties it.
  void give_back(std::vector<int32_t>& table);

  /// Layer `layer`'s K and V with the pool's sizes; the caller sets page_tables, lens, batch and
  /// table_stride. Throws std::out_of_range for a layer outside [0, L).
  kernels::BatchedKvView layer(int layer) const;
  /// Layer `layer` seen as the paged cache of one request whose table (table_pages entries) is
  /// at `device_table`: what prefill_layer() writes a prompt through.
  kernels::KvCacheView sequence_view(int layer, const int32_t* device_table,
                                     int table_pages) const;

  /// Layer `layer`'s K (or V) storage on the host: [num_pages·page_size, h_k·h_d].
  std::vector<float> download(int layer, bool values) const;
  /// Fills the pool with the poison pattern (bytes 0xFF, read as NaN).
  void poison();
  /// Bytes of K and V, all layers.
  size_t bytes() const;
  /// One line: pages, page size, bytes.
  std::string describe() const;

 private:
  KvCacheShape shape_;
  int num_pages_ = 0;
  int page_size_ = 0;
  float* k_ = nullptr;
  float* v_ = nullptr;
  std::vector<int32_t> free_;  // the next page handed out is free_.back()
};

}  // namespace clockwork
