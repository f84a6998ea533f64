/// @file kv_cache.h
/// The KV cache of one sequence (milestone 4), contiguous or paged, behind one interface.
///
/// Both kinds store every layer's K and V in the same token-major page layout
/// [num_pages, page_size, h_k, h_d] (kernels::KvCacheView): a slot holds one position's row of
/// h_k·h_d values, exactly one row of the flat K or V activation, so prefill and decode append
/// rows and the attention kernel reads each head's slice as h_d contiguous floats.
/// - ContiguousKvCache: one page as long as the capacity; position p is slot p. Simple, but its
///   memory is reserved for the longest sequence up front.
/// - PagedKvCache: a pool of fixed-size pages and a page table per sequence; position p lives in
///   slot (page_table[p / page_size], p % page_size). Pages are taken from the pool only when
///   the sequence reaches them, which is what lets a server share one pool among many sequences
///   of unknown length.
/// The page table is the same for every layer (a position has the same slot in each layer's
/// pool), as in paged-attention engines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/model_config.h"

namespace clockwork {

/// Which cache generation uses (`clockwork generate --kv-cache`).
enum class KvCacheKind {
  None,        ///< no cache: every step re-runs the whole sequence (milestone 3)
  Contiguous,  ///< ContiguousKvCache
  Paged,       ///< PagedKvCache
};

/// "none", "contiguous" or "paged".
const char* kv_cache_kind_name(KvCacheKind kind);

/// The kind named `name` (as kv_cache_kind_name() spells it). Throws std::invalid_argument
/// naming the value and the choices for anything else.
KvCacheKind parse_kv_cache_kind(const std::string& name);

/// A sequence would outgrow its cache. The message names the cache, its capacity and the
/// positions asked for; the cache is left as it was.
class KvCacheFullError : public std::length_error {
 public:
  using std::length_error::length_error;
};

/// The shapes a cache is built for.
struct KvCacheShape {
  int num_layers = 0;  ///< L
  int n_kv_heads = 0;  ///< h_k
  int head_dim = 0;    ///< h_d

  /// The shapes of a model.
  static KvCacheShape of(const ModelConfig& config);
  /// Floats of one slot: h_k·h_d.
  int width() const { return n_kv_heads * head_dim; }
};

/// Where a position is stored: physical page and offset inside it.
struct KvSlot {
  int page = 0;    ///< physical page
  int offset = 0;  ///< slot inside the page
};

/// The cache of one sequence: K and V of every layer for positions 0 .. length()−1.
/// Not copyable (it owns device memory).
class KvCache {
 public:
  virtual ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  /// The shapes it was built for.
  const KvCacheShape& shape() const { return shape_; }
  /// Positions the sequence holds.
  int length() const { return length_; }
  /// The most positions the sequence can hold.
  virtual int capacity() const = 0;

  /// Appends n positions to the sequence and returns the first of them (length() before the
  /// call): prefill extends an empty cache by s, a decode step by 1 and writes position
  /// length() − 1. Every layer's view covers the new positions afterwards. Throws
  /// KvCacheFullError when length() + n > capacity(), std::invalid_argument for n < 0; the cache
  /// is unchanged then.
  int extend(int n);

  /// Forgets the sequence (length 0); a paged cache returns its pages to the pool. The stored
  /// values are not erased.
  void clear();

  /// Layer `layer`'s view for the kernels. Valid until the next extend() or clear().
  /// Throws std::out_of_range for a layer outside [0, L).
  virtual kernels::KvCacheView layer(int layer) const = 0;

  /// Where position pos (< length()) is stored; std::out_of_range otherwise.
  virtual KvSlot slot_of(int pos) const = 0;

  /// Physical pages per layer.
  int num_pages() const { return num_pages_; }
  /// Slots per page.
  int page_size() const { return page_size_; }
  /// Slots per layer: num_pages()·page_size().
  int slots() const { return num_pages_ * page_size_; }

  /// Fills K and V of every layer with the poison pattern (bytes 0xFF, read as NaN), so that a
  /// slot nobody wrote stays recognisable. A new cache starts poisoned.
  void poison();

  /// Layer `layer`'s K (or, with values, V) storage copied to the host: [slots(), h_k·h_d],
  /// slot-major (slot = page·page_size + offset).
  std::vector<float> download(int layer, bool values) const;

  /// Bytes of K and V storage, all layers.
  size_t bytes() const;

  /// One line: kind, capacity, pages and size.
  virtual std::string describe() const = 0;

 protected:
  /// Allocates and poisons [L, num_pages, page_size, h_k, h_d] for K and for V.
  KvCache(const KvCacheShape& shape, int num_pages, int page_size);

  /// Makes positions < new_length addressable (capacity is already checked).
  virtual void grow(int new_length) = 0;
  /// clear()'s own part of a subclass.
  virtual void forget() {}
  /// The view of layer `layer` without the page table: K and V of that layer's pool.
  kernels::KvCacheView base_view(int layer) const;

  KvCacheShape shape_;
  int num_pages_ = 0;
  int page_size_ = 0;
  int length_ = 0;
  float* k_ = nullptr;  // [L, num_pages, page_size, h_k, h_d]
  float* v_ = nullptr;  // [L, num_pages, page_size, h_k, h_d]
};

/// One page of max_positions slots per layer: position p is slot p.
class ContiguousKvCache final : public KvCache {
 public:
  /// Throws std::invalid_argument for max_positions < 1 or a bad shape, CudaError when the
  /// device has no room.
  ContiguousKvCache(const KvCacheShape& shape, int max_positions);

  int capacity() const override { return page_size_; }
  kernels::KvCacheView layer(int layer) const override;
  KvSlot slot_of(int pos) const override;
  std::string describe() const override;

 protected:
  void grow(int) override {}
};

/// A pool of num_pages pages of page_size slots per layer and the sequence's page table.
///
/// Pages are handed out in a fixed shuffled order, not 0, 1, 2, ...: with pages in order a
/// kernel that ignored the page table would still find every position where it expects it, and
/// no test could tell.
class PagedKvCache final : public KvCache {
 public:
  /// Throws std::invalid_argument for page_size < 1, num_pages < 1 or a bad shape, CudaError
  /// when the device has no room.
  PagedKvCache(const KvCacheShape& shape, int page_size, int num_pages);
  ~PagedKvCache() override;

  /// Positions the sequence can reach: the pages it holds plus the free ones.
  int capacity() const override;
  kernels::KvCacheView layer(int layer) const override;
  KvSlot slot_of(int pos) const override;
  std::string describe() const override;

  /// The sequence's page table (host copy): entry i is the physical page of positions
  /// i·page_size .. (i+1)·page_size − 1.
  const std::vector<int32_t>& page_table() const { return table_; }
  /// Pages of the pool not in the page table.
  int free_pages() const { return static_cast<int>(free_.size()); }

 protected:
  void grow(int new_length) override;
  void forget() override;

 private:
  std::vector<int32_t> table_;        // logical page -> physical page
  std::vector<int32_t> free_;         // the pool's free pages; the next one is free_.back()
  int32_t* device_table_ = nullptr;   // [num_pages] device copy of table_
};

/// The order in which a pool of n pages hands its pages out: a fixed permutation of 0 .. n−1 (the
/// same on every machine and run), so that a kernel which ignores a page table cannot pass.
std::vector<int32_t> shuffled_page_order(int n);

/// The cache of `kind` for a model: contiguous with max_positions slots, or paged with pages of
/// page_size and enough of them for max_positions. nullptr for KvCacheKind::None.
std::unique_ptr<KvCache> make_kv_cache(KvCacheKind kind, const ModelConfig& config,
                                       int max_positions, int page_size = 16);

}  // namespace clockwork
