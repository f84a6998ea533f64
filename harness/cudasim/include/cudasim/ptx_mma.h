// cudasim: the tensor-core instructions whose register layouts PTX documents, ldmatrix and
// mma.sync m16n8k16 (bf16 inputs, fp32 accumulators), on the CPU.
//
// Kernels do not include this file: they include kernels/warp_mma.h, which issues the PTX
// instructions under nvcc and takes these functions in a cudasim build. Unlike nvcuda::wmma,
// whose fragments hide which lane holds which element, these instructions fix it, so a kernel
// can work on a row of an accumulator in registers (FlashAttention-2's online softmax). The
// layouts below are the PTX ISA's ("Matrix fragments for mma.m16n8k16 with floating point type",
// "ldmatrix"), and cudasim gives every lane exactly the elements a GPU gives it. With g = lane / 4
// and q = lane % 4, a 32-bit register holds two bf16, the lower-numbered element in the low half:
//
//   A (16 x 16, row-major)  a[0] = A[g][2q, 2q+1]   a[1] = A[g+8][2q, 2q+1]
//                           a[2] = A[g][2q+8, +9]   a[3] = A[g+8][2q+8, +9]
//   B (16 x 8, k x n)       b[0] = B[2q, 2q+1][g]   b[1] = B[2q+8, 2q+9][g]
//   C, D (16 x 8, fp32)     c[0], c[1] = C[g][2q, 2q+1]   c[2], c[3] = C[g+8][2q, 2q+1]
//
//   ldmatrix<N> (N = 1, 2 or 4 matrices of 8 x 8 bf16): lane 8j + i gives the address of row i
//   of matrix j (16 bytes, 16-byte aligned, in shared memory); then r[j] = M_j[g][2q, 2q+1].
//   ldmatrix_trans<N>: the same rows, transposed on the way: r[j] = M_j[2q, 2q+1][g].
//
// Both are warp-collective: every lane of a whole warp makes the call, at the same line; a call
// reached by part of a warp stops the program with a diagnostic, as wmma's do. In a checked
// build (CUDASIM_CHECK) each lane's ldmatrix reads its own row, so the checker sees every byte
// read, attributed to the lane that gave the address and to the line of the call. mma_m16n8k16
// multiplies the bf16 inputs exactly and sums the products in fp32 in the order k = 0 .. 15
// starting from C; a GPU's tensor cores also multiply exactly, but their order of summation
// within the instruction is unspecified: results agree to the rounding of a 16-term fp32 sum.
#pragma once

#include <cstdint>
#include <source_location>

#include "cudasim/cudasim.h"

// Always inlined, so that the accesses the checker sees belong to the caller's line.
#define CUDASIM_PTX_INLINE inline __attribute__((always_inline))

namespace cudasim::detail {

/// One lane's registers of an mma.sync m16n8k16 with bf16 inputs.
struct PtxMmaOperands {
  const uint32_t* a;  // 4 registers
  const uint32_t* b;  // 2
  const float* c;     // 4
  float* d;           // 4
};

// Provided by the runtime library.
/// Stops the kernel unless `row` can be a row address of ldmatrix (16-byte aligned, 16 bytes
/// inside the block's shared memory).
void ldmatrix_check(const void* row, const char* what, std::source_location where);
/// The warp meets; this lane's r[0 .. n−1] are filled from every lane's row (`mine`: the 4 words
/// this lane read, if it gave an address), transposed or not.
void ldmatrix_exchange(const uint32_t* mine, unsigned n, bool trans, uint32_t* r, const char* what,
                       std::source_location where);
/// The warp meets; this lane's D is computed from every lane's A, B and its own C.
void ptx_mma_m16n8k16_bf16(const PtxMmaOperands& mine, const char* what,
                           std::source_location where);

// A row of ldmatrix: four words, read at once.
typedef uint32_t PtxRow __attribute__((vector_size(16), may_alias));

template <int N, bool Trans>
CUDASIM_PTX_INLINE void ldmatrix(uint32_t (&r)[N], const void* row, std::source_location where) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices (.x1, .x2, .x4)");
  constexpr const char* what = Trans ? (N == 1   ? "ldmatrix.x1.trans"
                                        : N == 2 ? "ldmatrix.x2.trans"
                                                 : "ldmatrix.x4.trans")
                                     : (N == 1   ? "ldmatrix.x1"
                                        : N == 2 ? "ldmatrix.x2"
                                                 : "ldmatrix.x4");
  uint32_t mine[4] = {0, 0, 0, 0};
  if (lane_id() < 8u * N) {  // the other lanes' addresses are not used
    ldmatrix_check(row, what, where);
    // One 16-byte read per row, as the GPU reads it: counting mode (CUDASIM_PROFILE) sees a
    // quarter warp's 8 rows as one phase, so bank conflicts between them show.
    const PtxRow x = *static_cast<const PtxRow*>(row);
    for (int i = 0; i < 4; ++i) mine[i] = x[i];
  }
  ldmatrix_exchange(mine, N, Trans, r, what, where);
}

}  // namespace cudasim::detail

namespace cudasim::ptx {

/// ldmatrix.sync.aligned.m8n8.xN.shared.b16: N 8 x 8 matrices of 16-bit elements from shared
/// memory.
template <int N>
CUDASIM_PTX_INLINE void ldmatrix(uint32_t (&r)[N], const void* row,
                                 std::source_location where = std::source_location::current()) {
  cudasim::detail::ldmatrix<N, false>(r, row, where);
}

/// ldmatrix.sync.aligned.m8n8.xN.trans.shared.b16: the same matrices, each transposed.
template <int N>
CUDASIM_PTX_INLINE void ldmatrix_trans(
    uint32_t (&r)[N], const void* row,
    std::source_location where = std::source_location::current()) {
  cudasim::detail::ldmatrix<N, true>(r, row, where);
}

/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D = A·B + C for the warp. d may be c.
CUDASIM_PTX_INLINE void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                     const float (&c)[4],
                                     std::source_location where = std::source_location::current()) {
  const cudasim::detail::PtxMmaOperands mine{a, b, c, d};
  cudasim::detail::ptx_mma_m16n8k16_bf16(mine, "mma.sync.m16n8k16", where);
}

}  // namespace cudasim::ptx
