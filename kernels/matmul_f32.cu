/// @file matmul_f32.cu
/// Milestone 3: the tiled matmul again, for two fp32 operands with row strides.
///
/// Attention multiplies activations by activations: the scores S = Q_i·K_gᵀ of one head, and the
/// output P·V_g. Both operands are fp32, and a head's slice of the flat [s, h·h_d] layout is a
/// matrix whose rows are h·h_d floats apart, so the kernel takes row strides instead of needing
/// a copy. The tiling is milestone 1's: a block computes a 32×32 tile of c, staging 32×32 tiles
/// of a and b in shared memory, loaded so that consecutive threads read consecutive addresses.
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kTile = 32;          // tile edge along m, n and k
constexpr int kRowsPerThread = 4;  // block of 32 × (32/4) threads

// a [m, k] (row stride lda), b [n, k] with transpose_b or [k, n] without (row stride ldb),
// c [m, n] (row stride ldc), all fp32. Block 32×8, grid tiled_grid(m, n).
__global__ void matmul_f32_tiled(const float* a, const float* b, float* c, int m, int n, int k, bool transpose_b,
                                 int lda, int ldb, int ldc) {
  // BEGIN SOLUTION(m3): The tiled kernel again, for fp32 operands with row strides. With
  // transpose_b, b is [n, k] and loads like w above; without, b is [k, n] and the tile is loaded
  // with threadIdx.x running along n, which is then the contiguous direction.
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];  // bs[col][kk] in both cases
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  float acc[kRowsPerThread] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < k; k0 += kTile) {
    for (int r = ty; r < kTile; r += blockDim.y) {
      const int ar = row0 + r, kk = k0 + tx;
      as[r][tx] = (ar < m && kk < k) ? a[static_cast<size_t>(ar) * lda + kk] : 0.f;
      if (transpose_b) {
        const int br = col0 + r;
        bs[r][tx] = (br < n && kk < k) ? b[static_cast<size_t>(br) * ldb + kk] : 0.f;
      } else {
        const int bk = k0 + r, bc = col0 + tx;
        bs[tx][r] = (bk < k && bc < n) ? b[static_cast<size_t>(bk) * ldb + bc] : 0.f;
      }
    }
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) {
      const float bv = bs[tx][kk];
      for (int r = 0; r < kRowsPerThread; ++r) acc[r] += as[ty + r * 8][kk] * bv;
    }
    __syncthreads();
  }
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int row = row0 + ty + r * 8, col = col0 + tx;
    if (row < m && col < n) c[static_cast<size_t>(row) * ldc + col] = acc[r];
  }
  // STUB: (void)a; (void)b; (void)c; (void)m; (void)n; (void)k; (void)transpose_b; (void)lda; (void)ldb; (void)ldc;
  // END SOLUTION
}

dim3 tiled_grid(int m, int n) { return dim3((n + kTile - 1) / kTile, (m + kTile - 1) / kTile); }

}  // namespace

void matmul_f32(const float* a, const float* b, float* c, int m, int n, int k, bool transpose_b, cudaStream_t stream,
                int lda, int ldb, int ldc) {
  if (m < 0 || n < 0 || k < 0) {
    throw std::invalid_argument("matmul_f32: negative size (m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                                ", k=" + std::to_string(k) + ")");
  }
  lda = lda ? lda : k;
  ldb = ldb ? ldb : (transpose_b ? k : n);
  ldc = ldc ? ldc : n;
  if (lda < k || ldb < (transpose_b ? k : n) || ldc < n) {
    throw std::invalid_argument("matmul_f32: a row stride is smaller than the row (lda=" + std::to_string(lda) +
                                ", ldb=" + std::to_string(ldb) + ", ldc=" + std::to_string(ldc) + ")");
  }
  if (m == 0 || n == 0) return;
  matmul_f32_tiled<<<tiled_grid(m, n), dim3(kTile, kTile / kRowsPerThread), 0, stream>>>(a, b, c, m, n, k, transpose_b,
                                                                                       lda, ldb, ldc);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
