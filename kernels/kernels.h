/// @file kernels.h
/// The launchers of every student kernel, as the framework calls them.
///
/// Precision policy of the course: **weights stay bf16** on the device, exactly as the checkpoint
/// stores them (Llama-3-8B is 16 GB in bf16 and fits a 24 GB card; in fp32 it would need 32 GB);
/// **activations and every accumulation are fp32**. A kernel reads a bf16 weight, widens it to
/// fp32 (`__bfloat162float`) and accumulates in fp32.
///
/// Layouts are row-major. Linear weights are stored (out_features, in_features), so a projection
/// computes y = x·Wᵀ. Every launcher checks its arguments (throwing std::invalid_argument naming
/// the argument), launches on `stream`, and checks the launch (throwing std::runtime_error).
///
/// This header is included by kernels and by host code alike: keep it free of libtorch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace clockwork::kernels {

// ---- milestone 1 ------------------------------------------------------------------------------

/// Embedding lookup: x[i, :] = float(table[ids[i], :]) for i < s.
/// An id outside [0, vocab) is an error: the kernel flags it and the launcher throws
/// std::out_of_range naming the position and the id (the launcher synchronises `stream` to see it).
/// @param ids     [s] token ids on the device
/// @param table   [vocab, d] bf16 embedding table (`model.embed_tokens.weight`)
/// @param x       [s, d] fp32 output
/// @param s       number of tokens
/// @param d       hidden size
/// @param vocab   rows of the table
/// @param stream  stream to run on
void embedding(const int32_t* ids, const __nv_bfloat16* table, float* x, int s, int d, int vocab,
               cudaStream_t stream = nullptr);

/// The matmul kernels of milestone 1, kept side by side for the profiling exercises.
enum class MatmulVariant {
  Naive = 0,  ///< one thread per output element, operands straight from global memory
  Tiled = 1,  ///< shared-memory tiles with coalesced loads (the handout's design; the default)
};

/// Projection with bf16 weights: y[m, n] = x[m, k] · w[n, k]ᵀ.
/// @param x        [m, k] fp32 activations
/// @param w        [n, k] bf16 weight, as stored (out_features, in_features)
/// @param y        [m, n] fp32 output
/// @param m        rows of x (tokens)
/// @param n        output features
/// @param k        input features
/// @param stream   stream to run on
/// @param variant  which kernel (the tiled one unless profiling the naive one)
void matmul(const float* x, const __nv_bfloat16* w, float* y, int m, int n, int k,
            cudaStream_t stream = nullptr, MatmulVariant variant = MatmulVariant::Tiled);

/// fp32 matmul for attention: c[m, n] = a[m, k] · b[k, n], or a[m, k] · b[n, k]ᵀ when
/// `transpose_b` (scores Q·Kᵀ use the transposed form, P·V the plain one).
/// @param a            [m, k] fp32
/// @param b            [k, n] fp32, or [n, k] when transpose_b
/// @param c            [m, n] fp32 output
/// @param m            rows of a and c
/// @param n            columns of c
/// @param k            length of the sums
/// @param transpose_b  whether b is stored [n, k]
/// @param stream       stream to run on
/// @param lda          row stride of a in elements (0: packed, k)
/// @param ldb          row stride of b in elements (0: packed, n or k)
/// @param ldc          row stride of c in elements (0: packed, n); the strides let one head of a
///                     [s, h·h_d] activation be used in place
void matmul_f32(const float* a, const float* b, float* c, int m, int n, int k, bool transpose_b,
                cudaStream_t stream = nullptr, int lda = 0, int ldb = 0, int ldc = 0);

// ---- milestone 2 ------------------------------------------------------------------------------

/// RMSNorm of each row: y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) ⊙ gamma.
/// @param x       [rows, d] fp32
/// @param gamma   [d] bf16 (`input_layernorm.weight` or `post_attention_layernorm.weight`)
/// @param y       [rows, d] fp32 (may not alias x)
/// @param rows    number of rows
/// @param d       row length (hidden size)
/// @param eps     added to the mean square inside the square root (`rms_norm_eps`)
/// @param stream  stream to run on
void rmsnorm(const float* x, const __nv_bfloat16* gamma, float* y, int rows, int d, float eps,
             cudaStream_t stream = nullptr);

}  // namespace clockwork::kernels
