/// @file steps.h
/// The steps of the forward pass that students chain from the kernels of kernels.h, in the C++
/// files of milestones/ (qkv.cpp, decoder.cpp, decode.cpp, page_table.cpp). The framework's
/// pipelines (harness/pipeline: Model, CachedModel) call them; the tests call them one by one.
/// Like kernels.h, this header is the contract between the framework and student code: the
/// framework never includes a milestone file, it links the student's definitions of these.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/model_config.h"

namespace clockwork {

// ---- milestone 2: milestones/milestone2/qkv.cpp ------------------------------------------------

/// Device pointers to the weights of one layer that the step reads (bf16, as stored).
struct QkvWeights {
  const __nv_bfloat16* input_layernorm;  ///< [d] γ of the layer's first RMSNorm
  const __nv_bfloat16* q_proj;           ///< [h·h_d, d]
  const __nv_bfloat16* k_proj;           ///< [h_k·h_d, d]
  const __nv_bfloat16* v_proj;           ///< [h_k·h_d, d]
};

/// x_norm = RMSNorm(x; input_layernorm), then Q = x_norm·W_Qᵀ, K = x_norm·W_Kᵀ, V = x_norm·W_Vᵀ.
/// All activations are fp32 device buffers.
/// @param config  the model's shapes and rms_norm_eps
/// @param w       the layer's weights
/// @param x       [s, d] input of the layer
/// @param x_norm  [s, d] normalised input (kept: the tests look at it)
/// @param q       [s, h·h_d]
/// @param k       [s, h_k·h_d]
/// @param v       [s, h_k·h_d]
/// @param s       number of tokens
/// @param stream  stream to run on
void qkv_projection(const ModelConfig& config, const QkvWeights& w, const float* x, float* x_norm, float* q,
                    float* k, float* v, int s, cudaStream_t stream = nullptr);

// ---- milestone 3: milestones/milestone3/decoder.cpp --------------------------------------------

/// Device pointers to the weights of one decoder layer (bf16, as the checkpoint stores them;
/// projections are (out_features, in_features)).
struct LayerWeights {
  const __nv_bfloat16* input_layernorm = nullptr;           ///< [d] γ of the norm before attention
  const __nv_bfloat16* q_proj = nullptr;                    ///< [h·h_d, d]
  const __nv_bfloat16* k_proj = nullptr;                    ///< [h_k·h_d, d]
  const __nv_bfloat16* v_proj = nullptr;                    ///< [h_k·h_d, d]
  const __nv_bfloat16* o_proj = nullptr;                    ///< [d, h·h_d]
  const __nv_bfloat16* post_attention_layernorm = nullptr;  ///< [d] γ of the norm before the FFN
  const __nv_bfloat16* gate_proj = nullptr;                 ///< [d_ff, d]
  const __nv_bfloat16* up_proj = nullptr;                   ///< [d_ff, d]
  const __nv_bfloat16* down_proj = nullptr;                 ///< [d, d_ff]
};

/// The RoPE tables of positions 0 .. s−1 (or more: only the first s rows are read).
struct RopeTablesView {
  const float* cos = nullptr;  ///< [≥ s, h_d/2]
  const float* sin = nullptr;  ///< [≥ s, h_d/2]
};

/// Device scratch buffers for one layer at sequence length s, fp32. After decoder_layer() they
/// hold that layer's intermediate values (the tests compare them with the reference).
struct LayerBuffers {
  float* attn_norm = nullptr;   ///< [s, d]       RMSNorm(x; input_layernorm)
  float* q = nullptr;           ///< [s, h·h_d]   attn_norm·W_qᵀ, then rotated (RoPE)
  float* k = nullptr;           ///< [s, h_k·h_d] attn_norm·W_kᵀ, then rotated (RoPE)
  float* v = nullptr;           ///< [s, h_k·h_d] attn_norm·W_vᵀ
  float* scores = nullptr;      ///< [s, s]       attention workspace (one head at a time);
                                ///<               nullptr: use the fused flash_attention
  float* attn = nullptr;        ///< [s, h·h_d]   attention output, heads concatenated
  float* attn_out = nullptr;    ///< [s, d]       attn·W_oᵀ
  float* ffn_norm = nullptr;    ///< [s, d]       RMSNorm(x + attn_out; post_attention_layernorm)
  float* gate = nullptr;        ///< [s, d_ff]    ffn_norm·W_gateᵀ
  float* up = nullptr;          ///< [s, d_ff]    ffn_norm·W_upᵀ
  float* ffn_hidden = nullptr;  ///< [s, d_ff]    SiLU(gate) ⊙ up
  float* ffn_out = nullptr;     ///< [s, d]       ffn_hidden·W_downᵀ
};

/// One decoder layer in place on the residual stream x [s, d]:
///   RMSNorm → Q, K, V → RoPE(Q), RoPE(K) → causal GQA attention → O proj → x += ·
///   → RMSNorm(post_attention_layernorm) → gate, up → SwiGLU → down → x += ·
/// @param config  shapes, rms_norm_eps
/// @param w       this layer's weights
/// @param rope    cos/sin tables of positions 0 .. s−1
/// @param x       [s, d] residual stream, updated in place
/// @param b       scratch buffers (see LayerBuffers)
/// @param s       number of tokens
/// @param stream  stream to run on
void decoder_layer(const ModelConfig& config, const LayerWeights& w, const RopeTablesView& rope,
                   float* x, const LayerBuffers& b, int s, cudaStream_t stream = nullptr);

/// Called after each layer with its index (e.g. to copy x for a per-layer diagnosis).
using AfterLayer = std::function<void(int layer)>;

/// Every decoder layer in order, each with its own weights, on the residual stream x [s, d].
/// @param config       shapes, rms_norm_eps
/// @param layers       one entry per layer (config.num_layers of them)
/// @param rope         cos/sin tables of positions 0 .. s−1
/// @param x            [s, d] residual stream, updated in place
/// @param b            scratch buffers (see LayerBuffers)
/// @param s            number of tokens
/// @param stream       stream to run on
/// @param after_layer  called after layer i has updated x (may be empty)
void run_layers(const ModelConfig& config, const std::vector<LayerWeights>& layers,
                const RopeTablesView& rope, float* x, const LayerBuffers& b, int s,
                cudaStream_t stream = nullptr, const AfterLayer& after_layer = {});

/// The output head: x_last_norm = RMSNorm(last row of x; model.norm), logits = x_last_norm·W_lmᵀ
/// (a GEMV over that one row, never all s rows).
/// @param config       shapes, rms_norm_eps, vocab_size
/// @param x            [s, d] residual stream after the last layer
/// @param s            number of tokens (only row s−1 is used)
/// @param norm         [d] `model.norm.weight`
/// @param lm_head      [V, d] `lm_head.weight` (or the embedding table when tied)
/// @param x_last_norm  [d] output: the normalised last row
/// @param logits       [V] output
/// @param stream       stream to run on
void output_logits(const ModelConfig& config, const float* x, int s, const __nv_bfloat16* norm,
                   const __nv_bfloat16* lm_head, float* x_last_norm, float* logits,
                   cudaStream_t stream = nullptr);

// ---- milestone 4: milestones/milestone4/decode.cpp ---------------------------------------------

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

// ---- milestone 4: milestones/milestone4/page_table.cpp -----------------------------------------

/// Gives a paged cache's sequence the pages that positions 0 .. new_length − 1 need: while
/// `table` (logical page → physical page) holds fewer than ceil(new_length / page_size)
/// entries, the next free page (free_pages.back()) moves from the pool to the end of the table.
/// When the table changed, its new contents are copied to `device_table` ([≥ table.size()]
/// int32 on the device) so that the kernels see them. The caller (PagedKvCache) has checked
/// that the pool holds enough free pages.
void grow_page_table(std::vector<int32_t>& table, std::vector<int32_t>& free_pages, int new_length,
                     int page_size, int32_t* device_table);

// ---- milestone 6 (extension): milestones/milestone6/gemma_layer.cpp --------------------------

/// Device pointers to the weights of one Gemma 3 decoder layer (bf16, as stored). Every norm
/// weight w scales by (1 + w).
struct GemmaLayerWeights {
  /// The projections, input_layernorm (before attention) and post_attention_layernorm, which in
  /// Gemma normalises the attention's OUTPUT before the residual add (Llama's FFN-input norm is
  /// pre_feedforward_layernorm here).
  LayerWeights base;
  const __nv_bfloat16* q_norm = nullptr;                      ///< [h_d] QK-norm of every query head
  const __nv_bfloat16* k_norm = nullptr;                      ///< [h_d] QK-norm of every key head
  const __nv_bfloat16* pre_feedforward_layernorm = nullptr;   ///< [d] before the FFN
  const __nv_bfloat16* post_feedforward_layernorm = nullptr;  ///< [d] after the FFN
};

/// One Gemma 3 decoder layer in place on the residual stream x [s, d]:
///   a = N(x; input) → q, k, v → QK-norm(q), QK-norm(k) → RoPE with the layer type's tables
///   → attention (local layers: the last sliding_window keys; scale query_pre_attn_scalar^-1/2)
///   → o_proj → x += N(·; post_attention) → f = N(x; pre_feedforward) → GeGLU FFN
///   → x += N(·; post_feedforward)
/// The scratch buffers are LayerBuffers (b.scores unused): afterwards b.q and b.k hold Q and K
/// after QK-norm and RoPE, b.attn_out the normalised attention output (what was added to x),
/// b.ffn_hidden GELU(gate) ⊙ up and b.ffn_out the normalised FFN output.
/// @param config       Gemma 3 shapes, rms_norm_eps, layer types, window, score scale
/// @param layer        the layer's index (its type: config.is_sliding(layer))
/// @param w            this layer's weights
/// @param local_rope   cos/sin tables of positions 0 .. s−1 with base rope_local_theta
/// @param global_rope  the same with base rope_theta (and the global rope_scaling)
/// @param x            [s, d] residual stream, updated in place
/// @param b            scratch buffers (see above)
/// @param s            number of tokens
/// @param stream       stream to run on
void gemma_decoder_layer(const ModelConfig& config, int layer, const GemmaLayerWeights& w,
                         const RopeTablesView& local_rope, const RopeTablesView& global_rope,
                         float* x, const LayerBuffers& b, int s, cudaStream_t stream = nullptr);

// ---- milestone 6 (extension): milestones/milestone6/gemma_decode.cpp -------------------------

/// Gemma 3's layer caches differ by type. A global layer's cache holds every position (slot p).
/// A local layer never looks back further than sliding_window positions, so its cache is a ring
/// of C = kv_cache_capacity(cache) slots (sliding_window of them, or fewer when the whole
/// sequence is shorter): position p lives in slot p mod C, and a new position overwrites the one
/// C positions before it, which no later query sees.

/// Prefill of one Gemma 3 layer, in place on x [s, d]: gemma_decoder_layer over the prompt, then
/// the layer's K (after QK-norm and RoPE) and V into its cache: every position of a global layer;
/// on a local layer the last min(s, C) positions, each into slot p mod C.
/// @param config       Gemma 3 shapes and layer types
/// @param layer        the layer's index (its type: config.is_sliding(layer))
/// @param w            this layer's weights
/// @param local_rope   cos/sin tables of positions 0 .. s−1 with base rope_local_theta
/// @param global_rope  the same with base rope_theta
/// @param cache        this layer's cache (a ring on a local layer, see above)
/// @param x            [s, d] residual stream, updated in place
/// @param b            scratch buffers for s tokens
/// @param s            prompt length
/// @param stream       stream to run on
void gemma_prefill_layer(const ModelConfig& config, int layer, const GemmaLayerWeights& w,
                         const RopeTablesView& local_rope, const RopeTablesView& global_rope,
                         const kernels::KvCacheView& cache, float* x, const LayerBuffers& b, int s,
                         cudaStream_t stream = nullptr);

/// One decode step of one Gemma 3 layer for the token at position pos, in place on x [1, d]:
///   a = N(x; input) → q, k, v → QK-norm → RoPE at row pos of the layer type's tables
///   → k, v into slot pos mod C → sliding_window_decode_attention over the positions the layer
///   sees (len = pos + 1; window sliding_window on a local layer, 0 on a global one)
///   → o_proj → x += N(·; post_attention) → GeGLU FFN between its two norms → x += ·
/// @param config       Gemma 3 shapes, layer types, window, score scale
/// @param layer        the layer's index
/// @param w            this layer's weights
/// @param local_rope   tables with base rope_local_theta, rows 0 .. pos (or more)
/// @param global_rope  tables with base rope_theta, rows 0 .. pos (or more)
/// @param cache        this layer's cache, holding what the layer sees of positions < pos
/// @param pos          the token's position (the prompt length for the first step)
/// @param x            [1, d] the token's residual stream, updated in place
/// @param b            scratch buffers for one token (milestone 4's DecodeBuffers; the split-KV
///                     workspaces are unused)
/// @param stream       stream to run on
void gemma_decode_layer(const ModelConfig& config, int layer, const GemmaLayerWeights& w,
                        const RopeTablesView& local_rope, const RopeTablesView& global_rope,
                        const kernels::KvCacheView& cache, int pos, float* x,
                        const DecodeBuffers& b, cudaStream_t stream = nullptr);

}  // namespace clockwork
