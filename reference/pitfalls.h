// Known student mistakes, computed on purpose. Each entry of pitfalls() computes the WRONG result
// a typical bug produces, so a checker that finds a student's output far from the reference can
// test whether it matches one of these and say why ("your output equals X·W instead of X·Wᵀ").
//
// Every entry fills only the callables of the operator(s) its mistake affects; the others are
// empty. Each callable takes the same arguments as its correct counterpart:
//   linear    ↔ ref::linear(x, w)
//   rms_norm  ↔ ref::rms_norm(x, gamma, eps)
//   softmax   ↔ ref::softmax_rows(scores)
//   rope      ↔ ref::apply_rope(x, ref::rope_tables(positions, h_d, theta, scaling), n_heads)
//   attention ↔ ref::causal_gqa_attention(q, k, v, h, h_k)
//   lm_head   ↔ ref::lm_head(ref::last_row(x_normed), w)   (the pitfall returns [s, V])
//   swiglu    ↔ ref::swiglu(gate, up)
//   residual  ↔ ref::residual_add(x, y)
//   weights   ↔ the unchanged lookup (model level: Model(config, p.weights(lookup)))
// and `wiring` says how a layer connects the ops (which input feeds Q, which weight V, whether the
// final norm runs); a default Wiring is the correct layer. Entries marked `kernel_only` describe
// a mistake inside one kernel's loops that its own test already separates (a dropped k-tile, bf16
// accumulation): model-level checks leave them out, since a kernel that has them fails first.
// correct_ops() is the same table row filled with the correct operators.
//
// A wrong result can coincide with the correct one for some inputs; choose inputs that separate
// them (tests/test_model_pitfalls.cpp shows one for each):
//   * linear_no_transpose: any shape; for a square W it is exactly X·W.
//   * rms_norm_eps_outside: only visible when mean(x²) is comparable to ε (rows with values around
//     1e-3, like Llama-3's embedding rows); for O(1) rows it differs by ~ε/2 relative.
//   * softmax_no_max: only different when exp overflows (scores above ~88 in fp32).
//   * rope_*: position 0 is never rotated; use s > 1. rope_base_10000 equals RoPE when theta is
//   1e4.
//   * gqa_head_modulo: needs 1 < h_k < h. layout_*: needs s > 1 and h > 1. masks: need s > 1.
//   * mask_includes_diagonal makes the first row NaN (every score masked); its _zero_rows form
//     gives zeros there instead, as a kernel that loops over the visible keys only does.
//   * rms_norm_eps_fixed_*: only when the caller's ε differs from the fixed one and mean(x²) is not
//     far above ε (rows around 1e-3, or ε = 1e-2).
//   * rope_theta_fixed_500000: only when theta is not 500000. rope_positions_from_one: any s > 0.
//   * linear_k_tail_*: k not a multiple of the tile; linear_k_loads_unbounded: the same and m, n > 1
//     (the extra terms come from the next row of x and of W).
//   * swiglu_silu_on_up: gate and up drawn differently. residual_overwritten: any x != 0.
//   * q_from_unnormalised_x, v_from_k_proj: whole layers (wiring), or the Q/K/V step's outputs.
//   * online_*_not_rescaled_T: s > T, and a row maximum that grows after the first key tile
//     (random scores do); causal_diagonal_tile_*_T: s > 1 (skipped) or s > 1 with a query tile
//     holding two positions (unmasked). These four are kernel_only and their wrong result depends
//     on the tile T: the table holds them for T = 16, 32 and 64.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <torch/types.h>

#include "reference/model.h"
#include "reference/ops.h"

namespace clockwork::ref {

using LinearFn = std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& w)>;
using RmsNormFn =
    std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& gamma, double eps)>;
using SoftmaxFn = std::function<torch::Tensor(const torch::Tensor& scores)>;
using RopeFn = std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& positions,
                                           int64_t n_heads, double theta,
                                           const std::optional<RopeScaling>& scaling)>;
using AttentionFn =
    std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads)>;
using LmHeadFn =
    std::function<torch::Tensor(const torch::Tensor& x_normed, const torch::Tensor& w)>;
using WeightsFn = std::function<WeightLookup(WeightLookup)>;
using SwigluFn = std::function<torch::Tensor(const torch::Tensor& gate, const torch::Tensor& up)>;
using ResidualFn = std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& y)>;

/// How a decoder layer connects its ops; the defaults are Llama's.
struct Wiring {
  bool q_from_unnormalised_x = false;  ///< Q = x·W_Qᵀ instead of RMSNorm(x)·W_Qᵀ
  bool v_from_k_proj = false;          ///< V = x_norm·W_Kᵀ instead of x_norm·W_Vᵀ
  bool final_norm_skipped = false;     ///< logits from the last row of x, not RMSNorm(x)
  /// True when nothing differs from Llama's wiring.
  bool is_default() const { return !q_from_unnormalised_x && !v_from_k_proj && !final_norm_skipped; }
};

/// One known mistake: a short name, the message a student sees, and the wrong computation.
struct Pitfall {
  std::string name;     // e.g. "linear_no_transpose"
  std::string message;  // one student-facing sentence saying what is wrong and what is right
  int course_item = 0;  // number in the course's pitfall list (0: not in the list)
  bool kernel_only = false;  // a mistake inside one kernel's loops: not substituted into models

  LinearFn linear;
  RmsNormFn rms_norm;
  SoftmaxFn softmax;
  RopeFn rope;
  AttentionFn attention;
  LmHeadFn lm_head;
  WeightsFn weights;
  SwigluFn swiglu;
  ResidualFn residual;
  Wiring wiring;
};

/// Every known pitfall, in a fixed order.
const std::vector<Pitfall>& pitfalls();

/// The pitfall with this name; throws std::invalid_argument for an unknown name.
const Pitfall& find_pitfall(std::string_view name);

/// The correct operators in the same form (name "correct"), for side-by-side use.
const Pitfall& correct_ops();

/// The wrong computations themselves. Shapes are those of the correct op unless stated.
namespace wrong {

/// X·W with W's memory read as [k, n] (a kernel indexing w[kk*n + j]): for square W exactly X·W.
///   x [m, k], w [n, k] -> [m, n].
torch::Tensor linear_no_transpose(const torch::Tensor& x, const torch::Tensor& w);

/// x / sqrt(mean(x²) + eps), no γ.  x [s, d], gamma [d] (unused) -> [s, d].
torch::Tensor rms_norm_no_gamma(const torch::Tensor& x, const torch::Tensor& gamma, double eps);

/// x / (sqrt(mean(x²)) + eps) · γ: ε added to the root instead of under it.  -> [s, d].
torch::Tensor rms_norm_eps_outside(const torch::Tensor& x, const torch::Tensor& gamma, double eps);

/// RMSNorm with a fixed ε whatever the caller passes (Llama 3's 1e-5, Llama 2's 1e-6).
torch::Tensor rms_norm_eps_fixed(const torch::Tensor& x, const torch::Tensor& gamma, double fixed);

/// X·Wᵀ summed over only the first ⌊k/tile⌋·tile terms: a tile loop `k0 + tile <= k` that drops
/// the remainder.  x [m, k], w [n, k] -> [m, n]. This and the next throw std::invalid_argument
/// when k is a multiple of the tile (the mistake changes nothing; no candidate is made).
torch::Tensor linear_k_tail_dropped(const torch::Tensor& x, const torch::Tensor& w, int64_t tile);

/// A tiled X·Wᵀ whose loads have no `kk < k` test: the last tile reads on into the next row of X
/// and of W (row-major memory), and past the end of each buffer into DeviceBuffer's guard bytes
/// (0xA5), up to ⌈k/tile⌉·tile terms.  x [m, k], w [n, k] -> [m, n].
torch::Tensor linear_k_loads_unbounded(const torch::Tensor& x, const torch::Tensor& w,
                                       int64_t tile);

/// X·Wᵀ with the running sum held in bf16: acc = bf16(acc + x·w), k in order; with
/// `round_products` each product is rounded to bf16 before it is added.  -> [m, n]. Throws
/// std::invalid_argument beyond 2^24 multiply-adds (the emulation takes one step per k).
torch::Tensor linear_bf16_accumulation(const torch::Tensor& x, const torch::Tensor& w,
                                       bool round_products = false);

/// RoPE tables whose angle p·θ_i is formed in fp32 (fp32 θ_i times fp32 p, one rounding) and
/// whose cos/sin are taken of that fp32 angle.  positions [s] -> cos, sin [s, h_d/2].
RopeTables rope_tables_fp32_angle(const torch::Tensor& positions, int64_t head_dim, double theta,
                                  const std::optional<RopeScaling>& scaling);

/// exp(x) / Σ exp(x) without subtracting the row max (overflows to inf/NaN).  [..., n].
torch::Tensor softmax_no_max(const torch::Tensor& scores);

/// RoPE pairing (x_{2i}, x_{2i+1}) with angle p·θ_i.  x [s, n*h_d] -> [s, n*h_d].
torch::Tensor rope_interleaved(const torch::Tensor& x, const torch::Tensor& positions,
                               int64_t n_heads, double theta,
                               const std::optional<RopeScaling>& scaling);

/// Correct pairing but base 10000 whatever theta says.  x [s, n*h_d] -> [s, n*h_d].
torch::Tensor rope_base_10000(const torch::Tensor& x, const torch::Tensor& positions,
                              int64_t n_heads, double theta,
                              const std::optional<RopeScaling>& scaling);

/// Correct pairing but base 500000 (Llama 3's) whatever theta says.
torch::Tensor rope_theta_fixed_500000(const torch::Tensor& x, const torch::Tensor& positions,
                                      int64_t n_heads, double theta,
                                      const std::optional<RopeScaling>& scaling);

/// Rotation by −p·θ_i: the signs of the sin terms swapped.  x [s, n*h_d] -> [s, n*h_d].
torch::Tensor rope_sign_flipped(const torch::Tensor& x, const torch::Tensor& positions,
                                int64_t n_heads, double theta,
                                const std::optional<RopeScaling>& scaling);

/// Every position one too large (counted from 1).  x [s, n*h_d] -> [s, n*h_d].
torch::Tensor rope_positions_from_one(const torch::Tensor& x, const torch::Tensor& positions,
                                      int64_t n_heads, double theta,
                                      const std::optional<RopeScaling>& scaling);

/// silu(up) ⊙ gate: SiLU applied to the wrong projection.  [..., d_ff].
torch::Tensor swiglu_silu_on_up(const torch::Tensor& gate, const torch::Tensor& up);

/// y instead of x + y: the residual stream overwritten by the block's output.
torch::Tensor residual_overwritten(const torch::Tensor& x, const torch::Tensor& y);

/// A lookup that answers every layer's weights with layer 0's.
WeightLookup first_layer_weights(WeightLookup weights);

/// Attention mistakes; all take q [s_q, h*h_d], k, v [s_k, h_k*h_d] and return [s_q, h*h_d].
torch::Tensor attention_gqa_modulo(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads);
torch::Tensor attention_no_mask(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads);
torch::Tensor attention_mask_diagonal_only(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, int64_t n_heads,
                                           int64_t n_kv_heads);
torch::Tensor attention_mask_includes_diagonal(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v, int64_t n_heads,
                                               int64_t n_kv_heads);
/// The same mask, from a kernel that sums only the visible keys: the empty first row is 0.
torch::Tensor attention_mask_includes_diagonal_zero_rows(const torch::Tensor& q,
                                                         const torch::Tensor& k,
                                                         const torch::Tensor& v, int64_t n_heads,
                                                         int64_t n_kv_heads);
torch::Tensor attention_softmax_no_max(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads);
torch::Tensor attention_no_scale(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads);
/// Scores divided by h_d instead of sqrt(h_d).
torch::Tensor attention_scale_one_over_hd(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, int64_t n_heads,
                                          int64_t n_kv_heads);
/// Q, K, V and O all addressed as if the memory were per-head [h, s, h_d].
torch::Tensor attention_per_head_memory(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, int64_t n_heads,
                                        int64_t n_kv_heads);
/// Inputs read correctly, but O written per head [h, s_q, h_d] and returned as that memory.
torch::Tensor attention_output_per_head(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, int64_t n_heads,
                                        int64_t n_kv_heads);

/// What a tiled online-softmax attention (milestone 5's fused kernel) gets wrong, if anything.
enum class OnlineSoftmaxMistake {
  kNone,                  ///< the correct tiled computation (equals causal_gqa_attention)
  kOutputNotRescaled,     ///< acc += p·V without multiplying acc by exp(m_old − m_new) first
  kSumNotRescaled,        ///< l += Σ p without multiplying l by exp(m_old − m_new) first
  kDiagonalTileSkipped,   ///< query tile t walks key tiles 0 .. t−1 (the first tile sees nothing)
  kDiagonalTileUnmasked,  ///< key tiles 0 .. t, but the diagonal tile t without the element mask
};

/// Causal GQA attention computed the way a fused kernel does: key tiles of `tile` positions in
/// order, a running maximum m, sum l and output acc per query row, with `mistake` made. Query
/// tiles are aligned with key tiles (tile t holds positions t·tile .. t·tile + tile − 1).
/// q [s, h*h_d], k, v [s, h_k*h_d] (prefill: as many queries as keys) -> [s, h*h_d]. A row that
/// sees no key gets 0/0 = NaN, as the kernel would.
torch::Tensor attention_online_tiled(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads,
                                     int64_t tile, OnlineSoftmaxMistake mistake);

/// Every row projected: x_normed [s, d], w [V, d] -> [s, V] (the shape gives it away).
/// Logits of row 0 of x_normed [s, d] instead of the last row: [V].
torch::Tensor lm_head_first_row(const torch::Tensor& x_normed, const torch::Tensor& w);
torch::Tensor lm_head_all_rows(const torch::Tensor& x_normed, const torch::Tensor& w);

/// A lookup that answers post_attention_layernorm.weight with the same layer's
/// input_layernorm.weight (one norm weight for both norms).
WeightLookup norm_weight_reused(WeightLookup weights);

}  // namespace wrong

}  // namespace clockwork::ref
