/// @file batched_kv_cache.cu
/// Milestone 5: the decode step's K/V append for a whole batch of requests sharing one page pool.
///
/// Every request of the batch has its own page table (a row of BatchedKvView::page_tables) and
/// its own length lens[b]; its new token goes to position lens[b] − 1, i.e. to the slot
///   page_tables[b·table_stride + p / page_size]·page_size + p % page_size,   p = lens[b] − 1.
/// batched_kv_cache_append_kernel: one block per request; its threads copy the K row and the V
/// row with a strided loop. The two classic mistakes both write into another request's pages:
/// looking the page up in the wrong row of the table (row 0, or the row of the request at the
/// same position), or using the request's index (or another request's length) as the position.
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kThreads = 256;

// k, v [batch, h_k·h_d]: row b is request b's new token. One block per request.
__global__ void batched_kv_cache_append_kernel(const float* k, const float* v,
                                               BatchedKvView cache) {
  // BEGIN SOLUTION(m5): Block b owns request b. Its position is p = cache.lens[b] − 1 (lens
  // already counts the new token); its page table is the row starting at
  // cache.page_tables + b·table_stride, so the slot is row[p / page_size]·page_size +
  // p % page_size. Skip the request when p / page_size is not below table_stride or the page is
  // outside [0, num_pages) rather than write outside the pool. Copy the width = h_k·h_d values of
  // row b of k and v to slot·width of cache.k and cache.v (size_t offsets) with a strided loop
  // over threadIdx.x. Both the table row and the position must be request b's own: another
  // request's row or position writes into pages that are not this request's.
  const int b = blockIdx.x;
  if (b >= cache.batch) return;
  const int pos = cache.lens[b] - 1;
  if (pos < 0) return;
  const int logical = pos / cache.page_size;
  if (logical >= cache.table_stride) return;
  const int page = cache.page_tables[static_cast<size_t>(b) * cache.table_stride + logical];
  if (page < 0 || page >= cache.num_pages) return;
  const int width = cache.n_kv_heads * cache.head_dim;
  const size_t slot = static_cast<size_t>(page) * cache.page_size + pos % cache.page_size;
  const float* k_row = k + static_cast<size_t>(b) * width;
  const float* v_row = v + static_cast<size_t>(b) * width;
  float* k_slot = cache.k + slot * width;
  float* v_slot = cache.v + slot * width;
  for (int j = threadIdx.x; j < width; j += blockDim.x) {
    k_slot[j] = k_row[j];
    v_slot[j] = v_row[j];
  }
  // STUB: (void)k; (void)v; (void)cache;
  // END SOLUTION
}

}  // namespace

void check_batched_kv_view(const BatchedKvView& c, const char* who) {
  const std::string w = who;
  if (!c.k || !c.v) throw std::invalid_argument(w + ": cache.k and cache.v must be device pointers");
  if (c.k == c.v) throw std::invalid_argument(w + ": cache.k and cache.v must not alias");
  if (!c.page_tables || !c.lens) {
    throw std::invalid_argument(w + ": cache.page_tables and cache.lens must be device pointers");
  }
  if (c.batch < 1 || c.table_stride < 1 || c.num_pages < 1 || c.page_size < 1 ||
      c.n_kv_heads < 1 || c.head_dim < 1) {
    throw std::invalid_argument(
        w + ": cache.batch, table_stride, num_pages, page_size, n_kv_heads and head_dim must be "
            "positive (got " + std::to_string(c.batch) + ", " + std::to_string(c.table_stride) +
        ", " + std::to_string(c.num_pages) + ", " + std::to_string(c.page_size) + ", " +
        std::to_string(c.n_kv_heads) + " and " + std::to_string(c.head_dim) + ")");
  }
  if (c.batch > 65535) {
    throw std::invalid_argument(w + ": cache.batch = " + std::to_string(c.batch) +
                                " exceeds the grid's 65535 blocks in y");
  }
}

void batched_kv_cache_append(const float* k, const float* v, const BatchedKvView& cache,
                             cudaStream_t stream) {
  check_batched_kv_view(cache, "batched_kv_cache_append");
  if (!k || !v) throw std::invalid_argument("batched_kv_cache_append: k and v must be device pointers");
  const int width = cache.n_kv_heads * cache.head_dim;
  const int threads = width < kThreads ? (width + 31) / 32 * 32 : kThreads;
  batched_kv_cache_append_kernel<<<cache.batch, threads, 0, stream>>>(k, v, cache);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
