/// @file warp_mma.h
/// Tensor-core instructions with documented register layouts, for kernels that must work on the
/// rows of a product in registers (FlashAttention-2 keeps S = Q·Kᵀ, its softmax and P there).
///
/// nvcuda::wmma hides which lane holds which element of a fragment, so anything done per row goes
/// through shared memory. PTX's `mma.sync` and `ldmatrix` fix the layout instead. These wrappers
/// issue them under nvcc (compute capability 8.0 for the bf16 mma, 7.5 for ldmatrix) and run
/// cudasim's simulation of them (cudasim/ptx_mma.h) in a CPU-backend build; both give every lane
/// the same elements. With g = lane / 4 and q = lane % 4, and two bf16 per 32-bit register (the
/// lower-numbered element in the low half):
///
///   mma_m16n8k16(d, a, b, c): D = A·B + C, A 16 × 16 bf16, B 16 × 8 bf16, C and D 16 × 8 fp32.
///     a[0] = A[g][2q, 2q+1]   a[1] = A[g+8][2q, 2q+1]   a[2] = A[g][2q+8, 2q+9]   a[3] =
///     A[g+8][2q+8, 2q+9] b[0] = B[2q, 2q+1][g]   b[1] = B[2q+8, 2q+9][g] c[0], c[1] = C[g][2q,
///     2q+1]   c[2], c[3] = C[g+8][2q, 2q+1]   (d alike)
///   So the four lanes 4g .. 4g + 3 hold rows g and g + 8 of the accumulator: a row's maximum or
///   sum is two shuffles (xor 1, xor 2). And an accumulator tile of 16 × 16 (two n-halves), once
///   rounded to bf16 with pack_bf16x2, is exactly the A operand of the next mma: P never leaves
///   the registers.
///
///   ldmatrix<N>(r, row): N (1, 2, 4) matrices of 8 × 8 16-bit elements from shared memory. Lane
///     8j + i gives the address of row i of matrix j (16 bytes, 16-byte aligned); r[j] =
///     M_j[g][2q, 2q+1]. Four matrices covering a 16 × 16 tile (lanes 0–15 its rows at column 0,
///     lanes 16–31 the same rows at column 8) are the A operand above; two matrices of a tile
///     stored [n][k] are a B operand.
///   ldmatrix_trans<N>(r, row): the same rows, each matrix transposed: r[j] = M_j[2q, 2q+1][g].
///     Two matrices of a tile stored [k][n] (V in P·V) are a B operand.
///
/// All three are warp-collective: every lane of the warp calls them, at the same point, with no
/// lane exited (cudasim stops a kernel that breaks this). ldmatrix reads shared memory like any
/// load: a __syncthreads() (or __syncwarp() within a warp) must order it after the stores.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#if defined(__CUDASIM__)
#include "cudasim/ptx_mma.h"
#endif

namespace clockwork::kernels::warp_mma {

/// Two floats as bf16 (round to nearest even) in one register: `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

#if defined(__CUDASIM__)

using cudasim::ptx::ldmatrix;
using cudasim::ptx::ldmatrix_trans;
using cudasim::ptx::mma_m16n8k16;

#else

/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D = A·B + C for the warp. d may be c.
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2], const float (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  (void)d, (void)a, (void)b, (void)c;
#if defined(__CUDA_ARCH__)
  __trap();  // bf16 tensor cores need compute capability 8.0: callers check before launching
#endif
#endif
}

namespace detail {
template <int N, bool Trans>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices (.x1, .x2, .x4)");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (N == 1 && !Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(at));
  } else if constexpr (N == 1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(at));
  } else if constexpr (N == 2 && !Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(at));
  } else if constexpr (N == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(at));
  } else if constexpr (!Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
  }
#else
  (void)r, (void)row;
#if defined(__CUDA_ARCH__)
  __trap();  // ldmatrix needs compute capability 7.5
#endif
#endif
}
}  // namespace detail

/// ldmatrix.sync.aligned.m8n8.xN.shared.b16: N 8 × 8 matrices of 16-bit elements from shared
/// memory.
template <int N>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[N], const void* row) {
  detail::ldmatrix<N, false>(r, row);
}

/// ldmatrix.sync.aligned.m8n8.xN.trans.shared.b16: the same matrices, each transposed.
template <int N>
__device__ __forceinline__ void ldmatrix_trans(uint32_t (&r)[N], const void* row) {
  detail::ldmatrix<N, true>(r, row);
}

#endif

}  // namespace clockwork::kernels::warp_mma
