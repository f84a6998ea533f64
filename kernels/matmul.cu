/// @file matmul.cu
/// Milestone 1: matrix multiplication, the kernel behind every projection of the model.
///
/// Variant 0, naive: one thread per output element, both operands read straight from global
/// memory. For y = x·wᵀ neighbouring threads read rows of w that are k elements apart, so the
/// loads of a warp are not coalesced: kept as the starting point of the profiling exercise.
///
/// Variant 1, tiled (the default): a block computes a 32×32 tile of y. For each step of 32 along
/// k it stages a 32×32 tile of x and one of w in shared memory, each loaded by consecutive threads
/// reading consecutive addresses (coalesced), waits at a barrier, and multiplies from shared
/// memory. Every value loaded from global memory is then used 32 times instead of once. The
/// block has 32×8 threads and each computes 4 outputs of one column, so a thread does 128
/// multiply-adds per tile step. Edges are handled by loading zeros outside the matrices, so any
/// m, n, k works.
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = 32;       // tile edge along m, n and k
constexpr int kRowsPerThread = 4;  // block of 32 × (32/4) threads

// x [m, k] fp32, w [n, k] bf16, y [m, n] fp32.
__global__ void matmul_naive(const float* x, const __nv_bfloat16* w, float* y, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += x[static_cast<size_t>(row) * k + i] * __bfloat162float(w[static_cast<size_t>(col) * k + i]);
  y[static_cast<size_t>(row) * n + col] = acc;
}

// x [m, k] fp32, w [n, k] bf16, y [m, n] fp32. Block (32, 8); grid (ceil(n/32), ceil(m/32)).
__global__ void matmul_tiled(const float* x, const __nv_bfloat16* w, float* y, int m, int n, int k) {
  // BEGIN SOLUTION(m1): Tiled y = x·wᵀ. Stage a 32×32 tile of x (rows of this block, columns
  // k0..k0+31) and a 32×32 tile of w (rows = this block's output columns) in shared memory; let
  // threadIdx.x run along k while loading so that a warp reads 32 consecutive values. Load 0 for
  // elements outside the matrices. __syncthreads() after loading and again before the next load.
  // Each thread accumulates 4 outputs: rows threadIdx.y + 8·r of the tile, column threadIdx.x.
  __shared__ float xs[kTile][kTile + 1];  // +1: the column reads of ws below avoid bank conflicts
  __shared__ float ws[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  float acc[kRowsPerThread] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < k; k0 += kTile) {
    for (int r = ty; r < kTile; r += blockDim.y) {
      const int xr = row0 + r, wr = col0 + r, kk = k0 + tx;
      xs[r][tx] = (xr < m && kk < k) ? x[static_cast<size_t>(xr) * k + kk] : 0.f;
      ws[r][tx] = (wr < n && kk < k) ? __bfloat162float(w[static_cast<size_t>(wr) * k + kk]) : 0.f;
    }
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) {
      const float wv = ws[tx][kk];
      for (int r = 0; r < kRowsPerThread; ++r) acc[r] += xs[ty + r * 8][kk] * wv;
    }
    __syncthreads();
  }
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int row = row0 + ty + r * 8, col = col0 + tx;
    if (row < m && col < n) y[static_cast<size_t>(row) * n + col] = acc[r];
  }
  // STUB: (void)x; (void)w; (void)y; (void)m; (void)n; (void)k;
  // END SOLUTION
}

dim3 tiled_grid(int m, int n) { return dim3((n + kTile - 1) / kTile, (m + kTile - 1) / kTile); }

}  // namespace

void matmul(const float* x, const __nv_bfloat16* w, float* y, int m, int n, int k, cudaStream_t stream,
            MatmulVariant variant) {
  if (m < 0 || n < 0 || k < 0) {
    throw std::invalid_argument("matmul: negative size (m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                                ", k=" + std::to_string(k) + ")");
  }
  if (m == 0 || n == 0) return;
  if (variant == MatmulVariant::Naive) {
    const dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
    matmul_naive<<<grid, block, 0, stream>>>(x, w, y, m, n, k);
  } else {
    matmul_tiled<<<tiled_grid(m, n), dim3(kTile, kTile / kRowsPerThread), 0, stream>>>(x, w, y, m, n, k);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
