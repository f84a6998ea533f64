// Known-good cache append and view checks (kernels/kv_cache.cu's functions), on the host.
#include "harness/known_good/kv_slots.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

int kv_cache_capacity(const KvCacheView& cache) {
  if (cache.table_pages <= 0 || cache.page_size <= 0) return 0;
  const long long positions = static_cast<long long>(cache.table_pages) * cache.page_size;
  return positions > 0x7fffffffLL ? 0x7fffffff : static_cast<int>(positions);
}

void check_kv_cache_view(const KvCacheView& c, const char* who) {
  known_good::require(c.k && c.v, who, "cache.k and cache.v must be device pointers");
  known_good::require(c.k != c.v, who, "cache.k and cache.v must not alias");
  known_good::require(c.n_kv_heads > 0 && c.head_dim > 0, who,
                      "cache.n_kv_heads and cache.head_dim must be positive (got " + std::to_string(c.n_kv_heads) +
                          " and " + std::to_string(c.head_dim) + ")");
  known_good::require(c.page_size > 0 && c.num_pages > 0 && c.table_pages > 0, who,
                      "cache.page_size, cache.num_pages and cache.table_pages must be positive (got " +
                          std::to_string(c.page_size) + ", " + std::to_string(c.num_pages) + " and " +
                          std::to_string(c.table_pages) + ")");
  known_good::require(c.page_table || (c.num_pages == 1 && c.table_pages == 1), who,
                      "a contiguous cache (no page_table) has num_pages = table_pages = 1 (got " +
                          std::to_string(c.num_pages) + " and " + std::to_string(c.table_pages) + ")");
}

void kv_cache_append(const float* k, const float* v, const KvCacheView& cache, int first_pos, int n,
                     cudaStream_t stream) {
  check_kv_cache_view(cache, "kv_cache_append");
  known_good::require(first_pos >= 0 && n >= 0, "kv_cache_append",
                      "need first_pos >= 0 and n >= 0 (got first_pos=" + std::to_string(first_pos) +
                          ", n=" + std::to_string(n) + ")");
  const long long end = static_cast<long long>(first_pos) + n;
  if (end > kv_cache_capacity(cache)) {
    throw std::out_of_range("kv_cache_append: positions " + std::to_string(first_pos) + " .. " +
                            std::to_string(end - 1) + " do not fit: the cache holds " +
                            std::to_string(kv_cache_capacity(cache)) +
                            " positions; a full cache must be reported, never overwritten");
  }
  if (n == 0) return;
  known_good::require(k && v, "kv_cache_append", "k and v must be device pointers");
  known_good::wait_for(stream);
  const known_good::KvSlots slots(cache);
  const size_t width = slots.width();
  for (int i = 0; i < n; ++i) {
    const size_t slot = slots.of(first_pos + i);
    CUDA_CHECK(cudaMemcpy(cache.k + slot * width, k + static_cast<size_t>(i) * width, width * sizeof(float),
                          cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(cache.v + slot * width, v + static_cast<size_t>(i) * width, width * sizeof(float),
                          cudaMemcpyDeviceToDevice));
  }
  CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device copies return before they finish
}

}  // namespace clockwork::kernels
