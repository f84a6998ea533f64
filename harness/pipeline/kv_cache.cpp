/// @file kv_cache.cpp
/// The contiguous and the paged KV cache (kv_cache.h). Milestone 4's page-table growth is the
/// student's (grow_page_table in milestones/milestone4/page_table.cpp).
#include "harness/pipeline/kv_cache.h"

#include <cstdio>
#include <string>
#include <utility>

#include "harness/check/cuda_check.h"
#include "kernels/steps.h"

namespace clockwork {

namespace {

std::string human(size_t bytes) {
  char buf[32];
  if (bytes >= 1000000000) {
    std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
  } else if (bytes >= 1000000) {
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KB", static_cast<double>(bytes) / 1e3);
  }
  return buf;
}

void check_shape(const KvCacheShape& s) {
  if (s.num_layers < 1 || s.n_kv_heads < 1 || s.head_dim < 1) {
    throw std::invalid_argument("KvCache: num_layers, n_kv_heads and head_dim must be positive (got " +
                                std::to_string(s.num_layers) + ", " + std::to_string(s.n_kv_heads) +
                                " and " + std::to_string(s.head_dim) + ")");
  }
}

float* allocate_floats(size_t count, const std::string& what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, count * sizeof(float));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw CudaError(err, "KvCache: cannot allocate " + human(count * sizeof(float)) +
                             " on the device for " + what + ": " + cudaGetErrorString(err));
  }
  return static_cast<float*>(p);
}

}  // namespace

// A fixed permutation of 0 .. n−1 (Fisher–Yates driven by splitmix64): the order in which a
// paged cache hands out its pages. The same on every machine and run.
std::vector<int32_t> shuffled_page_order(int n) {
  std::vector<int32_t> pages(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) pages[static_cast<size_t>(i)] = i;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (int i = n - 1; i > 0; --i) {
    const auto j = static_cast<int>(next() % static_cast<uint64_t>(i + 1));
    std::swap(pages[static_cast<size_t>(i)], pages[static_cast<size_t>(j)]);
  }
  return pages;
}

const char* kv_cache_kind_name(KvCacheKind kind) {
  switch (kind) {
    case KvCacheKind::None: return "none";
    case KvCacheKind::Contiguous: return "contiguous";
    case KvCacheKind::Paged: return "paged";
  }
  return "?";
}

KvCacheKind parse_kv_cache_kind(const std::string& name) {
  for (KvCacheKind k : {KvCacheKind::None, KvCacheKind::Contiguous, KvCacheKind::Paged}) {
    if (name == kv_cache_kind_name(k)) return k;
  }
  throw std::invalid_argument("unknown KV cache '" + name +
                              "' (choose none, contiguous or paged)");
}

KvCacheShape KvCacheShape::of(const ModelConfig& c) {
  return {static_cast<int>(c.num_layers), static_cast<int>(c.num_kv_heads),
          static_cast<int>(c.head_dim)};
}

// ---- KvCache -----------------------------------------------------------------------------------

KvCache::KvCache(const KvCacheShape& shape, int num_pages, int page_size)
    : shape_(shape), num_pages_(num_pages), page_size_(page_size) {
  check_shape(shape);
  const size_t n = static_cast<size_t>(shape.num_layers) * num_pages * page_size * shape.width();
  k_ = allocate_floats(n, "the K cache");
  try {
    v_ = allocate_floats(n, "the V cache");
  } catch (...) {
    cudaFree(k_);
    throw;
  }
  poison();
}

KvCache::~KvCache() {
  cudaFree(k_);  // errors ignored: a destructor cannot report them
  cudaFree(v_);
}

int KvCache::extend(int n) {
  if (n < 0) throw std::invalid_argument("KvCache::extend: n must be >= 0 (got " + std::to_string(n) + ")");
  if (static_cast<long long>(length_) + n > capacity()) {
    throw KvCacheFullError("KV cache full: " + describe() + " holds " + std::to_string(length_) +
                           " positions and cannot take " + std::to_string(n) + " more (capacity " +
                           std::to_string(capacity()) + "); give it more positions or pages");
  }
  const int first = length_;
  grow(length_ + n);
  // The views must now cover every position of the sequence.
  const int covered = kernels::kv_cache_capacity(layer(0));
  if (covered < length_ + n) {
    throw std::logic_error("KvCache::extend: after grow(" + std::to_string(length_ + n) +
                           ") the cache's view covers only " + std::to_string(covered) +
                           " positions (page size " + std::to_string(page_size_) +
                           "): grow_page_table (milestones/milestone4/page_table.cpp) must add a page to "
                           "the page table whenever the sequence reaches a new one");
  }
  length_ += n;
  return first;
}

void KvCache::clear() {
  forget();
  length_ = 0;
}

kernels::KvCacheView KvCache::base_view(int layer) const {
  if (layer < 0 || layer >= shape_.num_layers) {
    throw std::out_of_range("KvCache: layer " + std::to_string(layer) + " outside [0, " +
                            std::to_string(shape_.num_layers) + ")");
  }
  const size_t per_layer = static_cast<size_t>(num_pages_) * page_size_ * shape_.width();
  kernels::KvCacheView v;
  v.k = k_ + static_cast<size_t>(layer) * per_layer;
  v.v = v_ + static_cast<size_t>(layer) * per_layer;
  v.num_pages = num_pages_;
  v.page_size = page_size_;
  v.n_kv_heads = shape_.n_kv_heads;
  v.head_dim = shape_.head_dim;
  return v;
}

void KvCache::poison() {
  CUDA_CHECK(cudaMemset(k_, 0xFF, bytes() / 2));
  CUDA_CHECK(cudaMemset(v_, 0xFF, bytes() / 2));
}

std::vector<float> KvCache::download(int layer, bool values) const {
  const kernels::KvCacheView view = base_view(layer);
  std::vector<float> host(static_cast<size_t>(slots()) * shape_.width());
  CUDA_CHECK(cudaMemcpy(host.data(), values ? view.v : view.k, host.size() * sizeof(float),
                        cudaMemcpyDeviceToHost));
  return host;
}

size_t KvCache::bytes() const {
  return 2 * static_cast<size_t>(shape_.num_layers) * num_pages_ * page_size_ * shape_.width() *
         sizeof(float);
}

// ---- ContiguousKvCache -------------------------------------------------------------------------

namespace {
int positive(int value, const char* name) {
  if (value < 1) {
    throw std::invalid_argument(std::string("KvCache: ") + name + " must be at least 1 (got " +
                                std::to_string(value) + ")");
  }
  return value;
}
}  // namespace

ContiguousKvCache::ContiguousKvCache(const KvCacheShape& shape, int max_positions)
    : KvCache(shape, 1, positive(max_positions, "max_positions")) {}

kernels::KvCacheView ContiguousKvCache::layer(int layer) const {
  kernels::KvCacheView v = base_view(layer);
  v.table_pages = 1;
  return v;
}

KvSlot ContiguousKvCache::slot_of(int pos) const {
  if (pos < 0 || pos >= length_) {
    throw std::out_of_range("KvCache::slot_of: position " + std::to_string(pos) +
                            " is not in the sequence (length " + std::to_string(length_) + ")");
  }
  return {0, pos};
}

std::string ContiguousKvCache::describe() const {
  return "contiguous KV cache, " + std::to_string(capacity()) + " positions, " + human(bytes());
}

// ---- PagedKvCache ------------------------------------------------------------------------------

PagedKvCache::PagedKvCache(const KvCacheShape& shape, int page_size, int num_pages)
    : KvCache(shape, positive(num_pages, "num_pages"), positive(page_size, "page_size")),
      free_(shuffled_page_order(num_pages)) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(num_pages) * sizeof(int32_t));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw CudaError(err, std::string("PagedKvCache: cannot allocate the page table: ") +
                             cudaGetErrorString(err));
  }
  device_table_ = static_cast<int32_t*>(p);
  CUDA_CHECK(cudaMemset(device_table_, 0xFF, static_cast<size_t>(num_pages) * sizeof(int32_t)));
}

PagedKvCache::~PagedKvCache() {
  cudaFree(device_table_);
}

int PagedKvCache::capacity() const {
  return static_cast<int>(table_.size() + free_.size()) * page_size_;
}

kernels::KvCacheView PagedKvCache::layer(int layer) const {
  kernels::KvCacheView v = base_view(layer);
  v.page_table = device_table_;
  v.table_pages = static_cast<int>(table_.size());
  return v;
}

KvSlot PagedKvCache::slot_of(int pos) const {
  if (pos < 0 || pos >= length_) {
    throw std::out_of_range("KvCache::slot_of: position " + std::to_string(pos) +
                            " is not in the sequence (length " + std::to_string(length_) + ")");
  }
  return {table_.at(static_cast<size_t>(pos / page_size_)), pos % page_size_};
}

void PagedKvCache::grow(int new_length) {
  // The student's part (milestones/milestone4/page_table.cpp); extend() checked the capacity.
  grow_page_table(table_, free_, new_length, page_size_, device_table_);
}

void PagedKvCache::forget() {
  // Back to the pool in reverse, so that the next sequence gets the same pages in the same order.
  for (auto it = table_.rbegin(); it != table_.rend(); ++it) free_.push_back(*it);
  table_.clear();
}

std::string PagedKvCache::describe() const {
  return "paged KV cache, " + std::to_string(num_pages_) + " pages of " +
         std::to_string(page_size_) + " positions, " + human(bytes());
}

std::unique_ptr<KvCache> make_kv_cache(KvCacheKind kind, const ModelConfig& config,
                                       int max_positions, int page_size) {
  const KvCacheShape shape = KvCacheShape::of(config);
  switch (kind) {
    case KvCacheKind::None: return nullptr;
    case KvCacheKind::Contiguous: return std::make_unique<ContiguousKvCache>(shape, max_positions);
    case KvCacheKind::Paged: {
      positive(page_size, "page_size");
      const int pages = (positive(max_positions, "max_positions") + page_size - 1) / page_size;
      return std::make_unique<PagedKvCache>(shape, page_size, pages);
    }
  }
  throw std::invalid_argument("make_kv_cache: unknown kind");
}

}  // namespace clockwork
