/// @file page_pool.cpp
/// PagePool (page_pool.h).
#include "harness/pipeline/page_pool.h"

#include <algorithm>
#include <cstdio>

#include "harness/check/cuda_check.h"

namespace clockwork {

namespace {

float* allocate_pool(size_t count, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, count * sizeof(float));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw CudaError(err, std::string("PagePool: cannot allocate ") +
                             std::to_string(count * sizeof(float)) + " bytes for " + what + ": " +
                             cudaGetErrorString(err));
  }
  return static_cast<float*>(p);
}

}  // namespace

PagePool::PagePool(const KvCacheShape& shape, int page_size, int num_pages)
    : shape_(shape), num_pages_(num_pages), page_size_(page_size) {
  if (shape.num_layers < 1 || shape.n_kv_heads < 1 || shape.head_dim < 1) {
    throw std::invalid_argument("PagePool: num_layers, n_kv_heads and head_dim must be positive");
  }
  if (page_size < 1 || num_pages < 1) {
    throw std::invalid_argument("PagePool: page_size and num_pages must be at least 1 (got " +
                                std::to_string(page_size) + " and " + std::to_string(num_pages) +
                                ")");
  }
  const size_t n = static_cast<size_t>(shape.num_layers) * num_pages * page_size * shape.width();
  k_ = allocate_pool(n, "the K pages");
  try {
    v_ = allocate_pool(n, "the V pages");
  } catch (...) {
    cudaFree(k_);
    throw;
  }
  free_ = shuffled_page_order(num_pages);
  // Handed out from the back: reverse so that the first page taken is the permutation's first.
  std::reverse(free_.begin(), free_.end());
  poison();
}

PagePool::~PagePool() {
  cudaFree(k_);
  cudaFree(v_);
}

void PagePool::take(int n, std::vector<int32_t>& table, const std::string& who) {
  if (n < 0) throw std::invalid_argument("PagePool::take: n must be >= 0");
  if (n > free_pages()) {
    throw PagePoolExhausted("page pool exhausted: " + who + " needs " + std::to_string(n) +
                            " more page(s) of " + std::to_string(page_size_) +
                            " positions, but the pool of " + std::to_string(num_pages_) +
                            " pages has " + std::to_string(free_pages()) + " free (" +
                            std::to_string(num_pages_ - free_pages()) + " held by requests)");
  }
  for (int i = 0; i < n; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
}

void PagePool::give_back(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

kernels::BatchedKvView PagePool::layer(int layer) const {
  if (layer < 0 || layer >= shape_.num_layers) {
    throw std::out_of_range("PagePool: layer " + std::to_string(layer) + " outside [0, " +
                            std::to_string(shape_.num_layers) + ")");
  }
  const size_t per_layer = static_cast<size_t>(num_pages_) * page_size_ * shape_.width();
  kernels::BatchedKvView v;
  v.k = k_ + static_cast<size_t>(layer) * per_layer;
  v.v = v_ + static_cast<size_t>(layer) * per_layer;
  v.num_pages = num_pages_;
  v.page_size = page_size_;
  v.n_kv_heads = shape_.n_kv_heads;
  v.head_dim = shape_.head_dim;
  return v;
}

kernels::KvCacheView PagePool::sequence_view(int layer, const int32_t* device_table,
                                             int table_pages) const {
  const kernels::BatchedKvView b = this->layer(layer);
  kernels::KvCacheView v;
  v.k = b.k;
  v.v = b.v;
  v.page_table = device_table;
  v.table_pages = table_pages;
  v.num_pages = num_pages_;
  v.page_size = page_size_;
  v.n_kv_heads = shape_.n_kv_heads;
  v.head_dim = shape_.head_dim;
  return v;
}

std::vector<float> PagePool::download(int layer, bool values) const {
  const kernels::BatchedKvView view = this->layer(layer);
  std::vector<float> host(static_cast<size_t>(num_pages_) * page_size_ * shape_.width());
  CUDA_CHECK(cudaMemcpy(host.data(), values ? view.v : view.k, host.size() * sizeof(float),
                        cudaMemcpyDeviceToHost));
  return host;
}

void PagePool::poison() {
  CUDA_CHECK(cudaMemset(k_, 0xFF, bytes() / 2));
  CUDA_CHECK(cudaMemset(v_, 0xFF, bytes() / 2));
}

size_t PagePool::bytes() const {
  return 2 * static_cast<size_t>(shape_.num_layers) * num_pages_ * page_size_ * shape_.width() *
         sizeof(float);
}

std::string PagePool::describe() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes()) / 1e6);
  return "page pool of " + std::to_string(num_pages_) + " pages of " + std::to_string(page_size_) +
         " positions, " + buf;
}

}  // namespace clockwork
