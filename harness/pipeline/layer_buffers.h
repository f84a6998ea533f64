/// @file layer_buffers.h
/// One decoder layer's scratch buffers (LayerBuffers, DecodeBuffers) for a number of token rows,
/// sized from the model's shapes. Every pipeline needs them: for a prompt, for a decode step of one
/// token, for a batch of decode rows. Sizing them in one place keeps the widths right everywhere.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "kernels/model_config.h"
#include "kernels/steps.h"

namespace clockwork {

/// Fills `b`, a LayerBuffers or a DecodeBuffers (the same fields, for one token), with device
/// buffers for `rows` tokens; its other fields are left as they are. `allocate(count, name)`
/// returns device memory for `count` floats (the pipeline's allocator, which records it and names
/// `name` in its errors); each buffer is named `prefix` + its field ("prompt q"). A LayerBuffers
/// gets the [rows, rows] workspace of milestone 3's attention when `scores` is true, else
/// nullptr, which selects the fused attention (it needs no [s, s] buffer).
template <class Buffers, class Allocate>
void allocate_layer_buffers(Buffers& b, const ModelConfig& c, size_t rows, bool scores,
                            const std::string& prefix, Allocate&& allocate) {
  const size_t d = static_cast<size_t>(c.hidden_size),
               ff = static_cast<size_t>(c.intermediate_size);
  const size_t q_width = static_cast<size_t>(c.num_heads) * static_cast<size_t>(c.head_dim);
  const size_t kv_width = static_cast<size_t>(c.num_kv_heads) * static_cast<size_t>(c.head_dim);
  auto rows_of = [&](size_t width, const char* field) -> float* {
    return allocate(rows * width, prefix + field);
  };
  b.attn_norm = rows_of(d, "attn_norm");
  b.q = rows_of(q_width, "q");
  b.k = rows_of(kv_width, "k");
  b.v = rows_of(kv_width, "v");
  if constexpr (requires { b.scores; }) {
    b.scores = scores ? rows_of(rows, "attention scores") : nullptr;
  } else {
    if (scores) throw std::logic_error("allocate_layer_buffers: these buffers have no scores");
  }
  b.attn = rows_of(q_width, "attn");
  b.attn_out = rows_of(d, "attn_out");
  b.ffn_norm = rows_of(d, "ffn_norm");
  b.gate = rows_of(ff, "gate");
  b.up = rows_of(ff, "up");
  b.ffn_hidden = rows_of(ff, "ffn_hidden");
  b.ffn_out = rows_of(d, "ffn_out");
}

}  // namespace clockwork
