/// @file kv_cache.cu
/// Milestone 4: writing keys and values into the KV cache.
///
/// The cache of a layer is a pool of pages, [num_pages, page_size, h_k, h_d] for K and the same
/// for V (see KvCacheView in kernels.h). Position p lives in the slot
///   (physical page, offset) = (page_table[p / page_size], p % page_size),
/// and a contiguous cache is the case without a page table, where slot p is position p. A slot
/// holds h_k·h_d values laid out like one row of the flat K activation, so appending n positions
/// is n row copies, each to wherever its position's slot is.
///
/// kv_cache_append_kernel: one block per appended position; the block's threads copy the K row
/// and the V row with a strided loop (neighbouring threads write neighbouring floats, coalesced).
/// Nothing else in the cache is touched: the tests check that every other slot still holds what
/// it held before.
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kThreads = 256;

// k, v [n, h_k·h_d]: rows of positions first_pos .. first_pos+n−1. One block per row.
__global__ void kv_cache_append_kernel(const float* k, const float* v, KvCacheView cache,
                                       int first_pos, int n) {
  // BEGIN SOLUTION(m4): Block r copies row r of k and of v, the position p = first_pos + r, into
  // p's slot. Without a page table (cache.page_table == nullptr) the slot is p itself; with one
  // it is slot = page_table[p / page_size]·page_size + p % page_size (the physical page times
  // the page size, plus the offset inside the page — not the other way round). Row r starts at
  // r·width of k and v (width = h_k·h_d); the slot starts at slot·width of cache.k and cache.v,
  // a size_t offset (a large cache holds more than 2^31 floats). Copy the row's width values
  // with a strided loop over threadIdx.x. Skip a physical page outside [0, num_pages) rather
  // than write outside the cache.
  const int row = blockIdx.x;
  if (row >= n) return;
  const int pos = first_pos + row;
  const int width = cache.n_kv_heads * cache.head_dim;
  size_t slot = static_cast<size_t>(pos);
  if (cache.page_table) {
    const int page = cache.page_table[pos / cache.page_size];
    if (page < 0 || page >= cache.num_pages) return;
    slot = static_cast<size_t>(page) * cache.page_size + pos % cache.page_size;
  }
  const float* k_row = k + static_cast<size_t>(row) * width;
  const float* v_row = v + static_cast<size_t>(row) * width;
  float* k_slot = cache.k + slot * width;
  float* v_slot = cache.v + slot * width;
  for (int j = threadIdx.x; j < width; j += blockDim.x) {
    k_slot[j] = k_row[j];
    v_slot[j] = v_row[j];
  }
  // STUB: (void)k; (void)v; (void)cache; (void)first_pos; (void)n;
  // END SOLUTION
}

}  // namespace

int kv_cache_capacity(const KvCacheView& cache) {
  if (cache.table_pages <= 0 || cache.page_size <= 0) return 0;
  const long long positions = static_cast<long long>(cache.table_pages) * cache.page_size;
  return positions > 0x7fffffffLL ? 0x7fffffff : static_cast<int>(positions);
}

void check_kv_cache_view(const KvCacheView& c, const char* who) {
  const std::string w = who;
  if (!c.k || !c.v) throw std::invalid_argument(w + ": cache.k and cache.v must be device pointers");
  if (c.k == c.v) throw std::invalid_argument(w + ": cache.k and cache.v must not alias");
  if (c.n_kv_heads <= 0 || c.head_dim <= 0) {
    throw std::invalid_argument(w + ": cache.n_kv_heads and cache.head_dim must be positive (got " +
                                std::to_string(c.n_kv_heads) + " and " +
                                std::to_string(c.head_dim) + ")");
  }
  if (c.page_size <= 0 || c.num_pages <= 0 || c.table_pages <= 0) {
    throw std::invalid_argument(
        w + ": cache.page_size, cache.num_pages and cache.table_pages must be positive (got " +
        std::to_string(c.page_size) + ", " + std::to_string(c.num_pages) + " and " +
        std::to_string(c.table_pages) + ")");
  }
  if (!c.page_table && (c.num_pages != 1 || c.table_pages != 1)) {
    throw std::invalid_argument(w + ": a contiguous cache (no page_table) has num_pages = " +
                                "table_pages = 1 (got " + std::to_string(c.num_pages) + " and " +
                                std::to_string(c.table_pages) + ")");
  }
}

void kv_cache_append(const float* k, const float* v, const KvCacheView& cache, int first_pos,
                     int n, cudaStream_t stream) {
  check_kv_cache_view(cache, "kv_cache_append");
  if (first_pos < 0 || n < 0) {
    throw std::invalid_argument("kv_cache_append: need first_pos >= 0 and n >= 0 (got first_pos=" +
                                std::to_string(first_pos) + ", n=" + std::to_string(n) + ")");
  }
  const long long end = static_cast<long long>(first_pos) + n;
  if (end > kv_cache_capacity(cache)) {
    throw std::out_of_range(
        "kv_cache_append: positions " + std::to_string(first_pos) + " .. " +
        std::to_string(end - 1) + " do not fit: the cache holds " +
        std::to_string(kv_cache_capacity(cache)) + " positions (" +
        (cache.page_table ? std::to_string(cache.table_pages) + " page-table entries of " +
                                std::to_string(cache.page_size) + " positions"
                          : std::string("contiguous")) +
        "); a full cache must be reported, never overwritten");
  }
  if (n == 0) return;
  if (!k || !v) throw std::invalid_argument("kv_cache_append: k and v must be device pointers");
  const int width = cache.n_kv_heads * cache.head_dim;
  const int threads = width < kThreads ? (width + 31) / 32 * 32 : kThreads;
  kv_cache_append_kernel<<<n, threads, 0, stream>>>(k, v, cache, first_pos, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
