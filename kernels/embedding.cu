/// @file embedding.cu
/// Milestone 1: the embedding lookup, x[i, :] = float(table[ids[i], :]).
///
/// One block per token: the token's row of the bf16 table is d contiguous values, so the threads
/// of a block stride over it and each warp reads 32 neighbouring elements (coalesced).
#include <climits>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

// ids [s], table [vocab, d] bf16, x [s, d] fp32; *first_bad receives the smallest position whose
// id is out of range (it starts at INT_MAX).
__global__ void embedding_kernel(const int32_t* ids, const __nv_bfloat16* table, float* x, int d,
                                 int vocab, int* first_bad) {
  // BEGIN SOLUTION(m1): Copy row ids[blockIdx.x] of `table` into row blockIdx.x of `x`, widening
  // each value with __bfloat162float. Never read outside the table: for an id outside [0, vocab),
  // record the position with atomicMin(first_bad, position) and return. Index with size_t:
  // vocab·d = 128256·4096 ≈ 5.3e8 still fits in an int, but only 4x below 2^31, and the byte
  // offsets and the larger products of later milestones do not.
  const int pos = blockIdx.x;
  const int id = ids[pos];
  if (id < 0 || id >= vocab) {
    if (threadIdx.x == 0) atomicMin(first_bad, pos);
    return;
  }
  const __nv_bfloat16* row = table + static_cast<size_t>(id) * d;
  float* out = x + static_cast<size_t>(pos) * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) out[j] = __bfloat162float(row[j]);
  // STUB: (void)ids; (void)table; (void)x; (void)d; (void)vocab; (void)first_bad;
  // END SOLUTION
}

}  // namespace

void embedding(const int32_t* ids, const __nv_bfloat16* table, float* x, int s, int d, int vocab,
               cudaStream_t stream) {
  if (s < 0 || d <= 0 || vocab <= 0) {
    throw std::invalid_argument("embedding: need s >= 0, d > 0, vocab > 0 (got s=" + std::to_string(s) +
                                ", d=" + std::to_string(d) + ", vocab=" + std::to_string(vocab) + ")");
  }
  if (s == 0) return;
  int* first_bad = nullptr;
  const int none = INT_MAX;
  CUDA_CHECK(cudaMalloc(&first_bad, sizeof(int)));
  CUDA_CHECK(cudaMemcpyAsync(first_bad, &none, sizeof(int), cudaMemcpyHostToDevice, stream));
  embedding_kernel<<<s, 256, 0, stream>>>(ids, table, x, d, vocab, first_bad);
  CUDA_CHECK(cudaGetLastError());
  int bad = none;
  CUDA_CHECK(cudaMemcpyAsync(&bad, first_bad, sizeof(int), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaFree(first_bad));
  if (bad != none) {
    int id = 0;
    CUDA_CHECK(cudaMemcpy(&id, ids + bad, sizeof(int), cudaMemcpyDeviceToHost));
    throw std::out_of_range("embedding: token id " + std::to_string(id) + " at position " + std::to_string(bad) +
                            " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
}

}  // namespace clockwork::kernels
