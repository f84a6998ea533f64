// The libtorch reference of every operator in the course: what a student's kernel is checked
// against. Each function is the formula from the handout written with whole-tensor torch ops, in
// fp32, with no cleverness: clarity first, speed second.
//
// Conventions
//   * Inputs may be bf16 (weights straight from the checkpoint) or fp32; every function converts to
//     fp32 before computing and returns fp32. Accumulation is fp32 (torch's CPU matmul).
//   * Shapes are written as [rows, cols]; "flat" activations are [s, n_heads * head_dim], the
//     layout every kernel in the course uses (head j of row p is the slice j*h_d .. (j+1)*h_d).
//   * Invalid shapes throw std::invalid_argument naming the function and both shapes.
//   * Call these as ref::linear(...), never unqualified: argument-dependent lookup on a tensor
//     argument also finds ATen's own linear, embedding, matmul, silu... and the call is ambiguous.
//
// This header includes torch: kernels and the headers they include must never include it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "kernels/model_config.h"

namespace clockwork::ref {

// ---------------------------------------------------------------------------------------------
// Milestone 1: embedding and matrix multiply
// ---------------------------------------------------------------------------------------------

/// Gathers rows of the embedding table: out[p] = table[ids[p]].
///   ids [s] int64, table [V, d] -> [s, d] fp32.
/// An id outside [0, V) throws std::out_of_range naming the id, its position and V.
torch::Tensor embedding(const torch::Tensor& ids, const torch::Tensor& table);

/// A projection with a checkpoint weight stored (out_features, in_features): x · wᵀ.
///   x [m, k], w [n, k] -> [m, n].
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w);

/// Plain matrix product a · b.  a [m, k], b [k, n] -> [m, n].
torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b);

/// Product with the second operand transposed, a · bᵀ (attention scores Q·Kᵀ).
///   a [m, k], b [n, k] -> [m, n].  Same arithmetic as linear(); named for where it is used.
torch::Tensor matmul_bt(const torch::Tensor& a, const torch::Tensor& b);

// ---------------------------------------------------------------------------------------------
// Milestone 2: RMSNorm
// ---------------------------------------------------------------------------------------------

/// Per row: y = x / sqrt(mean(x²) + eps) ⊙ gamma (eps inside the square root).
///   x [s, d], gamma [d] -> [s, d].
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& gamma, double eps);

// ---------------------------------------------------------------------------------------------
// Milestone 3: RoPE
// ---------------------------------------------------------------------------------------------

/// RoPE inverse frequencies θ_i = theta^(−2i/h_d), i in [0, h_d/2), in float64, then, when
/// `scaling` is given, rescaled. Type "linear" (Gemma 3's global layers): θ_i / factor.
/// Type "llama3", as Llama 3.1 does:
///   wavelen = 2π/θ_i; low = original/low_freq_factor; high = original/high_freq_factor;
///   wavelen > low            -> θ_i / factor         (long wavelengths: slowed down)
///   wavelen < high           -> θ_i                  (short wavelengths: unchanged)
///   otherwise                -> (1 − a)·θ_i/factor + a·θ_i,
///                               a = (original/wavelen − low_freq_factor)
///                                   / (high_freq_factor − low_freq_factor).
///   -> [h_d/2] float64.
torch::Tensor rope_inv_freq(int64_t head_dim, double theta,
                            const std::optional<RopeScaling>& scaling = std::nullopt);

/// cos and sin of the rotation angle p·θ_i, row r for position positions[r].
struct RopeTables {
  torch::Tensor cos;  // [s, h_d/2] fp32
  torch::Tensor sin;  // [s, h_d/2] fp32
};

/// Tables for the given positions.  positions [s] int64 -> cos, sin [s, h_d/2].
/// Angles are formed in float64 and rounded once to fp32 (HuggingFace forms them in fp32; the two
/// differ by at most about 1e-4 in the angle at position 1000, well inside any kernel tolerance).
RopeTables rope_tables(const torch::Tensor& positions, int64_t head_dim, double theta,
                       const std::optional<RopeScaling>& scaling = std::nullopt);

/// Tables for positions 0 .. s−1 (a prompt).  -> cos, sin [s, h_d/2].
RopeTables rope_tables(int64_t s, int64_t head_dim, double theta,
                       const std::optional<RopeScaling>& scaling = std::nullopt);

/// Rotates each head of each row, pairing element i with element i + h_d/2 (first half with
/// second half, NOT even/odd):
///   x'_i        = x_i·cos − x_{i+h_d/2}·sin
///   x'_{i+h_d/2} = x_i·sin + x_{i+h_d/2}·cos
///   x [s, n_heads*h_d] flat, tables [s, h_d/2] -> [s, n_heads*h_d].
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables, int64_t n_heads);

// ---------------------------------------------------------------------------------------------
// Milestone 3: attention
// ---------------------------------------------------------------------------------------------

/// Flat -> per-head view.  x [s, n*h_d] -> [n, s, h_d] (a copy, contiguous).
torch::Tensor to_heads(const torch::Tensor& x, int64_t n_heads);

/// Per-head -> flat (heads concatenated along each row).  x [n, s, h_d] -> [s, n*h_d].
torch::Tensor from_heads(const torch::Tensor& x);

/// The KV head used by query head i: ⌊i / (h/h_k)⌋ (groups of h/h_k consecutive query heads).
int64_t kv_head_for(int64_t query_head, int64_t n_heads, int64_t n_kv_heads);

/// What differs between the attention of Llama and Gemma 3 layers.
struct AttentionOptions {
  /// Factor of the scores Q·Kᵀ; 0 means 1/sqrt(h_d) (Llama). Gemma 3: query_pre_attn_scalar^(-1/2).
  double scale = 0.0;
  /// 0: every earlier position (global). w > 0: a query at position p sees positions
  /// p − w + 1 .. p only, w keys including its own (a Gemma 3 local layer).
  int64_t window = 0;
};

/// Numerically stable softmax of every row (last dimension): subtract the row max, exponentiate,
/// divide by the sum. −inf entries give 0. Each row needs at least one finite entry.
///   x [..., n] -> [..., n].
torch::Tensor softmax_rows(const torch::Tensor& x);

/// Everything attention computes, for diagnosis of a wrong output.
struct AttentionDetail {
  torch::Tensor scores;  // [h, s_q, s_k] Q·Kᵀ/sqrt(h_d), −inf where masked
  torch::Tensor probs;   // [h, s_q, s_k] softmax of each row of scores
  torch::Tensor out;     // [s_q, h*h_d] heads concatenated (input of o_proj)
};

/// Causal grouped-query attention:
///   for every query head i with g = kv_head_for(i): S = Q_i·K_gᵀ / sqrt(h_d), masked to −inf
///   where column > row's position, P = softmax_rows(S), O_i = P·V_g; heads concatenated.
///   q [s_q, h*h_d], k [s_k, h_k*h_d], v [s_k, h_k*h_d] -> [s_q, h*h_d].
/// Usually s_q == s_k (a prompt). With s_q < s_k the query rows are the LAST s_q positions
/// (row r is at position s_k − s_q + r), which is what a decode step with a KV cache computes.
torch::Tensor causal_gqa_attention(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads);

/// Same computation, also returning the per-head scores and probabilities.
AttentionDetail causal_gqa_attention_detail(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, int64_t n_heads,
                                            int64_t n_kv_heads);

/// Causal attention with a scale and an optional sliding window (options above); with the default
/// options it is exactly causal_gqa_attention.
AttentionDetail windowed_gqa_attention_detail(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, int64_t n_heads,
                                              int64_t n_kv_heads, const AttentionOptions& options);
torch::Tensor windowed_gqa_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads,
                                     const AttentionOptions& options);

// ---------------------------------------------------------------------------------------------
// Milestone 4: attention states (decode attention with a KV cache, split-KV)
// ---------------------------------------------------------------------------------------------

/// The attention state of one query row per head over a set of keys, all of them visible:
///   out_i = softmax(q_i·K_gᵀ / sqrt(h_d))·V_g   and   lse_i = log Σ_keys exp(q_i·k / sqrt(h_d)).
/// A decode step's output is the state over positions 0 .. pos; states of disjoint key sets
/// merge into the state of their union (merge_attention_states).
struct AttentionState {
  torch::Tensor out;  // [1, h*h_d] fp32
  torch::Tensor lse;  // [h] fp32 (−inf for an empty key set)
};

/// The state of q over the keys k, v (no mask).  q [1, h*h_d], k and v [n, h_k*h_d] with n >= 0
/// (n = 0 gives out = 0, lse = −inf).  Computed in float64 and rounded once to fp32.
AttentionState attention_state(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads);

/// The associative merge: lse = log Σ_j e^{lse_j}, out = Σ_j e^{lse_j − lse}·out_j, with the
/// largest lse_j subtracted before exp; empty states (lse = −inf) weigh nothing.
/// At least one state; all with the same shapes.
AttentionState merge_attention_states(const std::vector<AttentionState>& states);

// ---------------------------------------------------------------------------------------------
// Milestone 3: FFN, residual, output
// ---------------------------------------------------------------------------------------------

/// SiLU(z) = z / (1 + e^(−z)), elementwise.
torch::Tensor silu(const torch::Tensor& z);

/// SwiGLU: silu(gate) ⊙ up.  gate [s, d_ff], up [s, d_ff] -> [s, d_ff].
torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);

/// Residual connection x + y.  x [s, d], y [s, d] -> [s, d].
torch::Tensor residual_add(const torch::Tensor& x, const torch::Tensor& y);

/// The last row of x.  x [s, d] -> [d].
torch::Tensor last_row(const torch::Tensor& x);

/// Logits of ONE position (a GEMV, never a GEMM over all rows): w · x_last.
///   x_last [d], w [V, d] -> [V].
torch::Tensor lm_head(const torch::Tensor& x_last, const torch::Tensor& w);

/// Index of the largest logit; ties go to the lowest index.  logits [V] -> id.
int64_t argmax(const torch::Tensor& logits);

/// The k largest logits, largest first; ties broken by the lower id so the order is reproducible.
struct TopK {
  std::vector<int64_t> ids;
  std::vector<float> values;
};
TopK top_k(const torch::Tensor& logits, int64_t k);

// ---------------------------------------------------------------------------------------------
// Milestone 6: Gemma 3
// ---------------------------------------------------------------------------------------------

/// Gemma's RMSNorm: per row y = x / sqrt(mean(x²) + eps) ⊙ (1 + w). The checkpoint stores w, the
/// offset from 1 (a freshly initialised norm has w = 0); 1 + w is formed in fp32.
///   x [..., d], w [d] -> [..., d].
torch::Tensor rms_norm_gemma(const torch::Tensor& x, const torch::Tensor& w, double eps);

/// QK-norm: rms_norm_gemma applied to every head of every row separately, all heads sharing the
/// one weight of h_d values.  x [s, n_heads*h_d], w [h_d] -> [s, n_heads*h_d].
torch::Tensor head_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps,
                            int64_t n_heads);

/// GELU with the tanh approximation (transformers' "gelu_pytorch_tanh"), elementwise:
///   0.5·z·(1 + tanh(sqrt(2/π)·(z + 0.044715·z³))).
torch::Tensor gelu_tanh(const torch::Tensor& z);

/// GeGLU: gelu_tanh(gate) ⊙ up.  gate [s, d_ff], up [s, d_ff] -> [s, d_ff].
torch::Tensor geglu(const torch::Tensor& gate, const torch::Tensor& up);

/// The factor Gemma multiplies its embeddings by: sqrt(d) rounded to the embedding table's dtype,
/// as transformers does (bf16 for the real checkpoints: sqrt(1152) = 33.94 becomes 34).
double embedding_scale(int64_t hidden_size, torch::ScalarType table_dtype);

}  // namespace clockwork::ref
