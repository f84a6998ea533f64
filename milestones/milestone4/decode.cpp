/// @file decode.cpp
/// Milestone 4: prefill and decode of one layer with the KV cache, as calls of the kernels.
///
/// The steps that are milestone 3's, run on one row, are given; the three that the cache
/// changes (RoPE at the token's position, the append, attention over the cache) are yours.
/// Every step sits in a named NVTX range (harness/profiling/nvtx.h) outside the parts you write,
/// so an nsys timeline of a decode step reads "decode pos=12 > layer 3 > decode attention".
#include "kernels/steps.h"

#include <cstddef>

#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"

namespace clockwork {

void prefill_layer(const ModelConfig& c, const LayerWeights& w, const RopeTablesView& rope,
                   const kernels::KvCacheView& cache, float* x, const LayerBuffers& b, int s,
                   cudaStream_t stream) {
  // Milestone 3's layer over the whole prompt; it leaves this layer's K (rotated) and V in b.k
  // and b.v, [s, h_k·h_d] each.
  decoder_layer(c, w, rope, x, b, s, stream);
  {
    const nvtx::Range range("kv append");
    // BEGIN SOLUTION(m4): Copy the layer's K and V of positions 0 .. s−1 into the cache with
    // kernels::kv_cache_append (first_pos 0, n = s). b.k holds K after RoPE, which is what the
    // cache must keep: a decode step never rotates the old keys again.
    kernels::kv_cache_append(b.k, b.v, cache, 0, s, stream);
    // STUB: (void)cache;
    // END SOLUTION
  }
}

void decode_layer(const ModelConfig& c, const LayerWeights& w, const RopeTablesView& rope,
                  const kernels::KvCacheView& cache, int pos, int split_size, float* x,
                  const DecodeBuffers& b, cudaStream_t stream) {
  const int d = static_cast<int>(c.hidden_size);
  const int h = static_cast<int>(c.num_heads), h_k = static_cast<int>(c.num_kv_heads);
  const int h_d = static_cast<int>(c.head_dim), d_ff = static_cast<int>(c.intermediate_size);
  const float eps = static_cast<float>(c.rms_norm_eps);
  {
    const nvtx::Range range("qkv");
    // Milestone 2 on one row: q, k and v of the new token.
    qkv_projection(c, {w.input_layernorm, w.q_proj, w.k_proj, w.v_proj}, x, b.attn_norm, b.q,
                   b.k, b.v, 1, stream);
  }
  {
    const nvtx::Range range("rope");
    // BEGIN SOLUTION(m4): Rotate q (h heads) and k (h_k heads) in place with kernels::rope_apply
    // for ONE row (s = 1) at position pos: the tables' row pos starts at rope.cos + pos·h_d/2
    // and rope.sin + pos·h_d/2. Passing rope.cos itself would rotate every new token as if it
    // were at position 0.
    const size_t row = static_cast<size_t>(pos) * static_cast<size_t>(h_d / 2);
    kernels::rope_apply(b.q, rope.cos + row, rope.sin + row, 1, h, h_d, stream);
    kernels::rope_apply(b.k, rope.cos + row, rope.sin + row, 1, h_k, h_d, stream);
    // STUB: (void)rope; (void)pos; (void)h_k;
    // END SOLUTION
  }
  {
    const nvtx::Range range("kv append");
    // BEGIN SOLUTION(m4): The new token's k and v into slot pos and nowhere else:
    // kernels::kv_cache_append with first_pos = pos and n = 1. Append before attending: the
    // token attends to itself too.
    kernels::kv_cache_append(b.k, b.v, cache, pos, 1, stream);
    // STUB: (void)cache;
    // END SOLUTION
  }
  {
    const nvtx::Range range("decode attention");
    // BEGIN SOLUTION(m4): Attention of the one query to positions 0 .. pos, len = pos + 1, into
    // b.attn: kernels::decode_attention when split_size is 0, otherwise
    // kernels::decode_attention_split with chunks of split_size and the workspaces b.partial_o
    // and b.partial_lse.
    if (split_size > 0) {
      kernels::decode_attention_split(b.q, cache, pos + 1, b.attn, h, split_size, b.partial_o,
                                      b.partial_lse, stream);
    } else {
      kernels::decode_attention(b.q, cache, pos + 1, b.attn, h, stream);
    }
    // STUB: (void)split_size;
    // END SOLUTION
  }
  // The rest of the layer is milestone 3's on one row.
  {
    const nvtx::Range range("o_proj");
    kernels::matmul(b.attn, w.o_proj, b.attn_out, 1, d, h * h_d, stream);
  }
  {
    const nvtx::Range range("residual");
    kernels::residual_add(x, b.attn_out, static_cast<size_t>(d), stream);
  }
  {
    const nvtx::Range range("ffn_norm");
    kernels::rmsnorm(x, w.post_attention_layernorm, b.ffn_norm, 1, d, eps, stream);
  }
  {
    const nvtx::Range range("gate_proj");
    kernels::matmul(b.ffn_norm, w.gate_proj, b.gate, 1, d_ff, d, stream);
  }
  {
    const nvtx::Range range("up_proj");
    kernels::matmul(b.ffn_norm, w.up_proj, b.up, 1, d_ff, d, stream);
  }
  {
    const nvtx::Range range("swiglu");
    kernels::swiglu(b.gate, b.up, b.ffn_hidden, static_cast<size_t>(d_ff), stream);
  }
  {
    const nvtx::Range range("down_proj");
    kernels::matmul(b.ffn_hidden, w.down_proj, b.ffn_out, 1, d, d_ff, stream);
  }
  {
    const nvtx::Range range("residual");
    kernels::residual_add(x, b.ffn_out, static_cast<size_t>(d), stream);
  }
}

}  // namespace clockwork
