/// @file decode.h
/// Milestone 4: the two phases of generation with a KV cache, one layer at a time.
///
/// - Prefill: the whole prompt through a layer, exactly as milestone 3 runs it, and that layer's
///   K (after RoPE) and V of positions 0 .. s−1 into the cache.
/// - Decode: one new token at position pos through a layer: its q, k, v (a single row), RoPE at
///   position pos, its k and v into slot pos, attention from its one query to positions 0 .. pos
///   read from the cache, then the rest of the layer on one row.
/// CachedModel (cached_model.h) runs these over all layers.
#pragma once

#include <cuda_runtime.h>

#include "kernels/kernels.h"
#include "milestones/milestone1/config.h"
#include "milestones/milestone3/decoder.h"

namespace clockwork {

/// Device scratch buffers for one decode step (one token), fp32. After decode_layer() they hold
/// that layer's intermediate values.
struct DecodeBuffers {
  float* attn_norm = nullptr;    ///< [d]       RMSNorm(x; input_layernorm)
  float* q = nullptr;            ///< [h·h_d]   attn_norm·W_qᵀ, then RoPE at position pos
  float* k = nullptr;            ///< [h_k·h_d] attn_norm·W_kᵀ, then RoPE at position pos
  float* v = nullptr;            ///< [h_k·h_d] attn_norm·W_vᵀ
  float* attn = nullptr;         ///< [h·h_d]   decode attention output, heads concatenated
  float* attn_out = nullptr;     ///< [d]       attn·W_oᵀ
  float* ffn_norm = nullptr;     ///< [d]       RMSNorm(x + attn_out; post_attention_layernorm)
  float* gate = nullptr;         ///< [d_ff]    ffn_norm·W_gateᵀ
  float* up = nullptr;           ///< [d_ff]    ffn_norm·W_upᵀ
  float* ffn_hidden = nullptr;   ///< [d_ff]    SiLU(gate) ⊙ up
  float* ffn_out = nullptr;      ///< [d]       ffn_hidden·W_downᵀ
  float* partial_o = nullptr;    ///< [max_splits, h·h_d] split-KV workspace
  float* partial_lse = nullptr;  ///< [max_splits, h]     split-KV workspace
  int max_splits = 0;            ///< chunks the workspaces hold
};

/// Prefill of one layer, in place on the residual stream x [s, d]: milestone 3's decoder_layer
/// over the prompt, then the layer's K (after RoPE) and V of positions 0 .. s−1 into `cache`.
/// @param config  shapes, rms_norm_eps
/// @param w       this layer's weights
/// @param rope    cos/sin tables of positions 0 .. s−1 (or more)
/// @param cache   this layer's cache (room for at least s positions)
/// @param x       [s, d] residual stream, updated in place
/// @param b       scratch buffers for s tokens; b.k and b.v hold the layer's K and V afterwards
/// @param s       prompt length
/// @param stream  stream to run on
void prefill_layer(const ModelConfig& config, const LayerWeights& w, const RopeTablesView& rope,
                   const kernels::KvCacheView& cache, float* x, const LayerBuffers& b, int s,
                   cudaStream_t stream = nullptr);

/// One decode step of one layer for the token at position pos, in place on its row x [1, d]:
///   RMSNorm → q, k, v (one row) → RoPE(q), RoPE(k) at position pos → k, v into slot pos
///   → decode attention over positions 0 .. pos → O proj → x += · → RMSNorm → FFN → x += ·
/// @param config      shapes, rms_norm_eps
/// @param w           this layer's weights
/// @param rope        cos/sin tables of positions 0 .. pos (or more): row pos is this token's
/// @param cache       this layer's cache, holding positions 0 .. pos−1, with room for pos
/// @param pos         the token's position (the prompt length for the first decode step)
/// @param split_size  0: decode_attention in one pass; > 0: decode_attention_split with chunks
///                    of this many positions (b.max_splits must hold them)
/// @param x           [1, d] the token's residual stream, updated in place
/// @param b           scratch buffers
/// @param stream      stream to run on
void decode_layer(const ModelConfig& config, const LayerWeights& w, const RopeTablesView& rope,
                  const kernels::KvCacheView& cache, int pos, int split_size, float* x,
                  const DecodeBuffers& b, cudaStream_t stream = nullptr);

/// The split size decode steps use when none is forced: 0 (one pass) while the h_k blocks of
/// the one-pass kernel are enough to fill the device or the cache is short, otherwise chunks of
/// a multiple of 32 positions, at least kMinSplitChunk, so that h_k·chunks ≈ 2·multiprocessors.
/// @param len              cached positions the step attends to
/// @param n_kv_heads       h_k
/// @param multiprocessors  the device's SM count
int auto_split_size(int len, int n_kv_heads, int multiprocessors);

/// The shortest chunk auto_split_size() chooses: below it the merge costs more than it saves.
inline constexpr int kMinSplitChunk = 64;

}  // namespace clockwork
