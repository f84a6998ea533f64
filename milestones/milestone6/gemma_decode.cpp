/// @file gemma_decode.cpp
/// Milestone 6: Gemma 3 with the KV cache: prefill and decode of one layer, as calls of the
/// kernels. The steps the cache does not change are given (they are gemma_layer.cpp's on one
/// row); the three it changes are yours: RoPE at the token's position with the layer type's
/// tables, where k and v go (a local layer's cache is a ring, see kernels/steps.h), and the
/// attention over what the layer sees.
#include <algorithm>
#include <cstddef>

#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"
#include "kernels/steps.h"

namespace clockwork {

void gemma_prefill_layer(const ModelConfig& c, int layer, const GemmaLayerWeights& w,
                         const RopeTablesView& local_rope, const RopeTablesView& global_rope,
                         const kernels::KvCacheView& cache, float* x, const LayerBuffers& b, int s,
                         cudaStream_t stream) {
  // The layer over the whole prompt; it leaves K (after QK-norm and RoPE) and V in b.k and b.v.
  gemma_decoder_layer(c, layer, w, local_rope, global_rope, x, b, s, stream);
  const nvtx::Range range("kv append");
  // BEGIN SOLUTION(m6): A global layer keeps every position: kernels::kv_cache_append of rows
  // 0 .. s−1 from slot 0. A local layer's ring has C = kernels::kv_cache_capacity(cache) slots:
  // only the last min(s, C) positions first = s − min(s, C) .. s−1 are kept, position p in slot
  // p mod C. kv_cache_append takes its first_pos as the slot of row 0 and writes consecutive
  // slots, so split the rows where the ring wraps: rows first .. from slot first mod C up to
  // slot C − 1, the rest from slot 0. Row r of b.k starts at b.k + r·h_k·h_d.
  if (!c.is_sliding(layer)) {
    kernels::kv_cache_append(b.k, b.v, cache, 0, s, stream);
    return;
  }
  const int ring = kernels::kv_cache_capacity(cache);
  const int first = s - std::min(s, ring);
  const size_t width = static_cast<size_t>(c.num_kv_heads * c.head_dim);
  const int start = first % ring;
  const int n1 = std::min(s - first, ring - start);  // up to the ring's end
  kernels::kv_cache_append(b.k + first * width, b.v + first * width, cache, start, n1, stream);
  if (s - first > n1) {  // the rest wraps round to slot 0
    kernels::kv_cache_append(b.k + (first + n1) * width, b.v + (first + n1) * width, cache, 0,
                             s - first - n1, stream);
  }
  // STUB: (void)cache; (void)s;
  // END SOLUTION
}

void gemma_decode_layer(const ModelConfig& c, int layer, const GemmaLayerWeights& w,
                        const RopeTablesView& local_rope, const RopeTablesView& global_rope,
                        const kernels::KvCacheView& cache, int pos, float* x,
                        const DecodeBuffers& b, cudaStream_t stream) {
  const int d = static_cast<int>(c.hidden_size);
  const int h = static_cast<int>(c.num_heads), h_k = static_cast<int>(c.num_kv_heads);
  const int h_d = static_cast<int>(c.head_dim), d_ff = static_cast<int>(c.intermediate_size);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const LayerWeights& p = w.base;
  {
    const nvtx::Range range("qkv");
    kernels::rmsnorm_gemma(x, p.input_layernorm, b.attn_norm, 1, d, eps, stream);
    kernels::matmul(b.attn_norm, p.q_proj, b.q, 1, h * h_d, d, stream);
    kernels::matmul(b.attn_norm, p.k_proj, b.k, 1, h_k * h_d, d, stream);
    kernels::matmul(b.attn_norm, p.v_proj, b.v, 1, h_k * h_d, d, stream);
    kernels::qk_norm(b.q, w.q_norm, 1, h, h_d, eps, stream);
    kernels::qk_norm(b.k, w.k_norm, 1, h_k, h_d, eps, stream);
  }
  {
    const nvtx::Range range("rope");
    // BEGIN SOLUTION(m6): Rotate q and k for ONE row at position pos with this layer type's
    // tables (local_rope on a local layer, global_rope on a global one): their row pos starts at
    // cos + pos·h_d/2 and sin + pos·h_d/2.
    const RopeTablesView& rope = c.is_sliding(layer) ? local_rope : global_rope;
    const size_t row = static_cast<size_t>(pos) * static_cast<size_t>(h_d / 2);
    kernels::rope_apply(b.q, rope.cos + row, rope.sin + row, 1, h, h_d, stream);
    kernels::rope_apply(b.k, rope.cos + row, rope.sin + row, 1, h_k, h_d, stream);
    // STUB: (void)layer; (void)local_rope; (void)global_rope; (void)pos;
    // END SOLUTION
  }
  {
    const nvtx::Range range("kv append");
    // BEGIN SOLUTION(m6): The new k and v into slot pos mod C, C = kernels::kv_cache_capacity
    // (cache) (for a global layer C > pos, so slot pos), with kernels::kv_cache_append (n = 1).
    // Slot pos mod C held position pos − C, which no query sees any more; any other slot holds a
    // position this token must still see.
    kernels::kv_cache_append(b.k, b.v, cache, pos % kernels::kv_cache_capacity(cache), 1, stream);
    // STUB: (void)cache;
    // END SOLUTION
  }
  {
    const nvtx::Range range("decode attention");
    // BEGIN SOLUTION(m6): kernels::sliding_window_decode_attention of b.q over len = pos + 1
    // positions into b.attn, with the score scale c.attention_scale() and a window of
    // c.sliding_window on a local layer, 0 on a global one.
    const int window = c.is_sliding(layer) ? static_cast<int>(c.sliding_window) : 0;
    kernels::sliding_window_decode_attention(
        b.q, cache, pos + 1, b.attn, h, static_cast<float>(c.attention_scale()), window, stream);
    // END SOLUTION
  }
  {
    const nvtx::Range range("o_proj_norm_residual");
    kernels::matmul(b.attn, p.o_proj, b.attn_out, 1, d, h * h_d, stream);
    kernels::rmsnorm_gemma(b.attn_out, p.post_attention_layernorm, b.attn_out, 1, d, eps, stream);
    kernels::residual_add(x, b.attn_out, static_cast<size_t>(d), stream);
  }
  {
    const nvtx::Range range("ffn");
    kernels::rmsnorm_gemma(x, w.pre_feedforward_layernorm, b.ffn_norm, 1, d, eps, stream);
    kernels::matmul(b.ffn_norm, p.gate_proj, b.gate, 1, d_ff, d, stream);
    kernels::matmul(b.ffn_norm, p.up_proj, b.up, 1, d_ff, d, stream);
    kernels::geglu(b.gate, b.up, b.ffn_hidden, static_cast<size_t>(d_ff), stream);
    kernels::matmul(b.ffn_hidden, p.down_proj, b.ffn_out, 1, d, d_ff, stream);
    kernels::rmsnorm_gemma(b.ffn_out, w.post_feedforward_layernorm, b.ffn_out, 1, d, eps, stream);
    kernels::residual_add(x, b.ffn_out, static_cast<size_t>(d), stream);
  }
}

}  // namespace clockwork
