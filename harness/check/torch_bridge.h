/// @file torch_bridge.h
/// Between the host vectors a kernel test works with and the torch tensors of the reference, and
/// the known-mistake outputs (pitfalls) that matches_reference() compares a wrong output with.
///
///     const auto x = random_normal(m * k, seed);
///     const auto w = to_bf16(random_normal(n * k, seed + 1, 1.f / std::sqrt(k)));
///     const torch::Tensor xt = to_tensor(x, {m, k}), wt = to_tensor(w, {n, k});
///     const std::vector<float> expected = to_vector(ref::linear(xt, wt));
///     ... run the kernel into DeviceBuffer<float> y("y", {m, n}) ...
///     EXPECT_TRUE(matches_reference(y, expected, tol::matmul(k), linear_pitfalls(xt, wt)));
///
/// Part of clockwork_check_torch: kernels never include this header.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "harness/check/compare.h"
#include "reference/pitfalls.h"

namespace clockwork {

/// fp32 tensor of `shape` holding a copy of `values` (row-major). Throws std::invalid_argument
/// when the sizes disagree.
torch::Tensor to_tensor(const std::vector<float>& values, const std::vector<int64_t>& shape);
/// bf16 tensor (torch::kBFloat16) holding the same bits as `values`.
torch::Tensor to_tensor(const std::vector<__nv_bfloat16>& values,
                        const std::vector<int64_t>& shape);
/// int32 tensor holding a copy of `values` (token ids; the reference accepts int32 and int64).
torch::Tensor to_tensor(const std::vector<int32_t>& values, const std::vector<int64_t>& shape);
/// int64 tensor holding a copy of `values`.
torch::Tensor to_tensor(const std::vector<int64_t>& values, const std::vector<int64_t>& shape);

/// The tensor's values converted to fp32, flattened row-major (any dtype, device or layout).
std::vector<float> to_vector(const torch::Tensor& t);
/// The tensor's values as bf16 (rounded to nearest even when the tensor is not bf16 already).
std::vector<__nv_bfloat16> to_bf16_vector(const torch::Tensor& t);
/// The tensor's values converted to int32 (token ids).
std::vector<int32_t> to_int32_vector(const torch::Tensor& t);
/// The tensor's shape as the harness writes it.
std::vector<int64_t> shape_of(const torch::Tensor& t);

/// One candidate per entry of ref::pitfalls() for which `run` returns a tensor (std::nullopt:
/// the pitfall does not concern this operator). A pitfall whose computation throws (its
/// preconditions do not hold for these shapes) is left out.
std::vector<PitfallCandidate> pitfall_candidates(
    const std::function<std::optional<torch::Tensor>(const ref::Pitfall&)>& run);

/// Pitfalls of a projection x·Wᵀ: X·W (weights read as [k, n]).  x [m, k], w [n, k].
std::vector<PitfallCandidate> linear_pitfalls(const torch::Tensor& x, const torch::Tensor& w);

/// Pitfalls of RMSNorm: no γ; ε outside the square root.  x [s, d], gamma [d].
std::vector<PitfallCandidate> rms_norm_pitfalls(const torch::Tensor& x, const torch::Tensor& gamma,
                                                double eps);

/// Pitfalls of a row softmax: no max subtraction.  scores [..., n].
std::vector<PitfallCandidate> softmax_pitfalls(const torch::Tensor& scores);

/// Pitfalls of RoPE: even/odd pairing; base 10000.  x [s, n_heads·h_d], positions [s].
std::vector<PitfallCandidate> rope_pitfalls(
    const torch::Tensor& x, const torch::Tensor& positions, int64_t n_heads, double theta,
    const std::optional<RopeScaling>& scaling = std::nullopt);

/// Pitfalls of causal GQA attention: softmax without max, missing or off-by-one masks, KV head
/// i mod h_k, per-head memory layouts, no 1/sqrt(h_d) scale.
/// q [s_q, h·h_d], k and v [s_k, h_k·h_d].
std::vector<PitfallCandidate> attention_pitfalls(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& v, int64_t n_heads,
                                                 int64_t n_kv_heads);

/// Pitfalls of SwiGLU: SiLU on up instead of gate.  gate, up [..., d_ff].
std::vector<PitfallCandidate> swiglu_pitfalls(const torch::Tensor& gate, const torch::Tensor& up);

/// Pitfalls of the residual add: x overwritten by y.  x, y [s, d].
std::vector<PitfallCandidate> residual_pitfalls(const torch::Tensor& x, const torch::Tensor& y);

/// The candidates of each output of the Q/K/V step (RMSNorm of x, then three projections).
struct QkvCandidates {
  std::vector<PitfallCandidate> x_norm, q, k, v;
};

/// Pitfalls of the Q/K/V step: every RMSNorm and projection mistake carried through the step, Q
/// from the un-normalised x, V projected with W_K.  x [s, d], gamma [d], w_q [h·h_d, d],
/// w_k and w_v [h_k·h_d, d].
QkvCandidates qkv_pitfalls(const torch::Tensor& x, const torch::Tensor& gamma,
                           const torch::Tensor& w_q, const torch::Tensor& w_k,
                           const torch::Tensor& w_v, double eps);

/// The candidates of the two RoPE tables.
struct RopeTableCandidates {
  std::vector<PitfallCandidate> cos, sin;
};

/// Pitfalls of the cos/sin tables: the angle formed in fp32, base 10000 or 500000 whatever theta
/// says, positions counted from 1, the row index used instead of positions[r].  positions [s].
RopeTableCandidates rope_table_pitfalls(const torch::Tensor& positions, int64_t head_dim,
                                        double theta,
                                        const std::optional<RopeScaling>& scaling = std::nullopt);

/// Pitfalls of the final projection: every row projected ([s, V] instead of [V]).
/// x_normed [s, d], w [V, d].
std::vector<PitfallCandidate> lm_head_pitfalls(const torch::Tensor& x_normed,
                                               const torch::Tensor& w);

}  // namespace clockwork
