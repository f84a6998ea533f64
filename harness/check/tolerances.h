/// @file tolerances.h
/// The tolerance of every operator in the course, each with its reason.
///
/// Two correct fp32 implementations of the same formula rarely agree bit for bit: they add in a
/// different order, and GPU math functions (`__expf`, `rsqrtf`, `sinf`) are a few units in the
/// last place (ulp) away from the correctly rounded result. A tolerance should cover exactly that
/// and nothing more, so that it still catches real mistakes, which change results by far more.
///
/// The unit used below is u = 2^-24 ≈ 6e-8, the largest relative error of one fp32 rounding (half
/// an ulp). Rules of thumb behind the numbers:
/// - One rounding of a value v: error ≤ u·|v|. IEEE fp32 +, −, ×, / and sqrt are correctly
///   rounded, so the same operation on the same inputs gives the same bits on CPU and GPU.
/// - A sum of n terms: each addition rounds the running sum. With errors of random sign the total
///   grows like u·sqrt(n)·(size of the terms)·sqrt(n), i.e. u·sqrt(n)·(size of the result) for
///   results of typical size. Different summation orders differ by about that much.
/// - Each number gets a safety factor (8 or 16): the check takes the maximum over up to millions
///   of elements, and a few of them sit far out in the tail of the error distribution.
///
/// Absolute tolerances are given in units of the expected tensor's root-mean-square
/// (Tolerance::rms_atol), because rounding errors scale with the values being summed; this keeps
/// the tolerances right whatever scale a test draws its data at.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/check/compare.h"

namespace clockwork::tol {

/// u = 2^-24: the largest relative error of one fp32 rounding.
inline constexpr double kUnitRoundoff = 0x1p-24;

/// Exact equality, for results that involve no rounding at all.
inline Tolerance exact(const char* why =
                           "no arithmetic is involved, so a correct kernel "
                           "reproduces the reference bit for bit") {
  return {0, 0, why, 0};
}

/// Embedding lookup: a row of the bf16 table widened to fp32. Widening bf16 to fp32 is exact (bf16
/// is the top half of an fp32), so nothing may differ.
inline Tolerance embedding() {
  return exact(
      "an embedding row is bf16 values widened to fp32, which is exact: a correct kernel "
      "matches bit for bit");
}

/// Matrix product with fp32 accumulation over `k` terms (bf16 weights widened to fp32, or fp32
/// operands): x·Wᵀ projections, lm_head, attention scores Q·Kᵀ (k = h_d) and P·V (k = s).
/// Widening bf16 is exact, so only the summation order differs from the reference: about
/// u·sqrt(k)·rms(result) per element, for tiled, split or fused-multiply-add orders alike.
/// Allowed: 16·u·sqrt(k) absolute (in units of rms(expected)) and relative. For k = 4096 that is
/// about 6e-5·rms: a mistake such as a missing k-tile or a transposed weight is thousands of
/// times larger.
inline Tolerance matmul(int64_t k) {
  const double t = 16 * kUnitRoundoff * std::sqrt(static_cast<double>(k > 0 ? k : 1));
  return {0, t,
          "fp32 sums of k products in a different order than the reference: rounding differences "
          "grow like sqrt(k) (bf16 weights widen to fp32 exactly, so only the order matters)",
          t};
}

/// RMSNorm of rows of length `d`: y = x·r·γ with r = 1/sqrt(mean(x²) + ε). The sum of d squares
/// differs by order (about u·sqrt(d) relative; half of that reaches r), `rsqrtf` is up to 2 ulp
/// off, and two products round once each. Every output element inherits the same relative error,
/// so the check is relative: 8·u·(sqrt(d) + 8), plus 2·u·rms absolute for values near zero.
/// Note: on rows of typical size (mean(x²) ≈ 1) putting ε outside the root changes the result by
/// only ε/2 relative; tests of that mistake use rows with values around 1e-3.
inline Tolerance rms_norm(int64_t d) {
  const double r = 8 * kUnitRoundoff * (std::sqrt(static_cast<double>(d > 0 ? d : 1)) + 8);
  return {0, r,
          "the sum of squares is added in a different order and rsqrtf is up to 2 ulp off: a "
          "relative error that grows like sqrt(d)",
          2 * kUnitRoundoff};
}

/// Softmax of rows of length `n`. The row sum differs by order (u·sqrt(n) relative), and
/// `__expf` is off by up to 2 + 1.2·|x| ulp for exp(x) (x = score − row max ≤ 0), which only
/// matters for arguments where the probability is already tiny. Allowed: 8·u·(sqrt(n) + 16)
/// relative and the same in units of rms(expected) absolute.
inline Tolerance softmax(int64_t n) {
  const double t = 8 * kUnitRoundoff * (std::sqrt(static_cast<double>(n > 0 ? n : 1)) + 16);
  return {0, t, "the row sum is added in a different order and fast exp (__expf) is a few ulp off",
          t};
}

/// Causal attention output for heads of size `head_dim` over `seq` key positions, whatever the
/// kernel structure (separate score/softmax/weighted-sum kernels, or an online softmax). The
/// score Q·Kᵀ carries the matmul error (about u·sqrt(h_d) of its size); exp turns an absolute
/// score error into the same relative error of a probability; the weighted sum over `seq`
/// positions adds u·sqrt(seq); the exp itself adds a few ulp. Allowed:
/// 16·u·(4·sqrt(h_d) + sqrt(seq) + 32), relative and in units of rms(expected). The data should
/// give scores of order 1 (Q, K ~ N(0, 1)); a masking or head-mapping mistake changes the output
/// by about its own size.
inline Tolerance attention(int64_t head_dim, int64_t seq) {
  const double t = 16 * kUnitRoundoff *
                   (4 * std::sqrt(static_cast<double>(head_dim > 0 ? head_dim : 1)) +
                    std::sqrt(static_cast<double>(seq > 0 ? seq : 1)) + 32);
  return {0, t,
          "scores are sums over h_d in a different order, exp turns their rounding into "
          "relative error, and the weighted sum over the sequence adds its own",
          t};
}

/// RoPE at positions up to `max_position`. The angle p·θ_i is as large as p (θ_0 = 1), so
/// forming it in fp32 (p times an fp32 θ_i that `powf` computed to 1-2 ulp) errs by a few u·p
/// radians, and that angle error becomes the same relative error of the rotated pair; `sinf` and
/// `cosf` add 2 ulp. Allowed: 8·u·(max_position + 16), relative and in units of rms(expected):
/// about 5e-4 at position 1000, while a wrong pairing or base changes values by O(1). Fast
/// `__sinf`/`__cosf` are only accurate for |angle| ≤ π and are not covered: use sinf/cosf or
/// tables computed in double.
inline Tolerance rope(int64_t max_position) {
  const double t =
      8 * kUnitRoundoff * (static_cast<double>(max_position > 0 ? max_position : 0) + 16);
  return {0, t,
          "the rotation angle p*theta_i reaches p radians, and fp32 rounding of such an angle "
          "(and of theta_i) is a few ulp of p",
          t};
}

/// The RoPE cos/sin tables, whose angle p·θ_i and its cos and sin are computed in double and
/// rounded to fp32 once. Two double computations differ by a few double ulp, so the rounded
/// values agree except where the double value sits next to a rounding boundary: at most one fp32
/// ulp, u for values below 1. Allowed: 4·u absolute. An angle formed in fp32 is off by a few
/// ulp of p radians instead: about 630·u at position 1000, 5000·u at 8192, 97000·u at 131071.
inline Tolerance rope_table() {
  return {4 * kUnitRoundoff, 0,
          "the angle and its cos/sin are computed in double and rounded to fp32 once: two such "
          "computations differ by at most one fp32 ulp",
          0};
}

/// RoPE's rotation alone, x_i·cos − x_{i+h_d/2}·sin and its partner, from given tables: two
/// products and one sum, each rounded once, with the tables exact. Allowed: 4·u relative and
/// 16·u·rms absolute (the sum can cancel; the products are as large as the inputs, a few rms).
inline Tolerance rope_rotation() {
  return {0, 4 * kUnitRoundoff,
          "two products and a sum per element, each rounded once in fp32; the tables themselves "
          "carry only one rounding",
          16 * kUnitRoundoff};
}

/// SwiGLU, silu(g)·u with silu(g) = g / (1 + e^(−g)). `__expf` is off by 2 + 1.2·|g| ulp, which
/// is about 14 ulp for |g| ≤ 10; the division (`__fdividef`: 2 ulp) and two products add a
/// few more. Allowed: 128·u ≈ 8e-6 relative, plus 8·u·rms absolute for results near zero.
inline Tolerance swiglu() {
  return {0, 128 * kUnitRoundoff,
          "fast exp (__expf) and fast division are a few ulp off; every element carries its own "
          "relative error",
          8 * kUnitRoundoff};
}

/// Element-wise residual add x + y. IEEE fp32 addition is correctly rounded and commutative, so
/// every correct kernel produces the reference's bits.
inline Tolerance residual_add() {
  return exact(
      "fp32 addition is correctly rounded and commutative: a correct kernel reproduces "
      "the reference bit for bit");
}

}  // namespace clockwork::tol
