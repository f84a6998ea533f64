/// @file decode_bench.h
/// What the KV cache of milestone 4 buys, measured. Generation is timed at growing prompt lengths
/// with and without the cache: without it every new token re-runs the whole sequence, so its
/// cost grows with the length; with it a step runs one token through the layers and only the
/// attention's reads of the cache grow (slowly: it is one row of K and V per position and layer).
/// `clockwork bench --op decode` prints these rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/model_config.h"
#include "harness/pipeline/cached_model.h"
#include "harness/pipeline/kv_cache.h"

namespace clockwork {

/// One timed generation: `tokens` decode steps after a prompt of `prompt_length` tokens.
struct DecodeTiming {
  int prompt_length = 0;
  KvCacheKind mode = KvCacheKind::None;
  bool cuda_graphs = false;   ///< each decode step ran as one CUDA graph (CachedModelOptions)
  int tokens = 0;             ///< decode steps timed (each produces one new token's logits)
  double prefill_ms = 0;      ///< the prompt (cached: prefill; none: the first full forward)
  double ms_per_token = 0;    ///< mean wall-clock time of a step, logits copied to the host
  double tokens_per_s = 0;    ///< 1000 / ms_per_token
  /// Bytes of K and V the steps' decode attention read per token, summed over the layers (0
  /// without a cache): divide by the attention's own time for its bandwidth.
  double cache_bytes_per_token = 0;
};

/// Bytes decode attention moves at one layer for a cache of `len` positions: K and V of every
/// position (2·len·h_k·h_d fp32) plus the query read and the output written (2·h·h_d fp32).
double decode_attention_bytes(int len, int n_heads, int n_kv_heads, int head_dim);

/// Times generation with each of `modes` at each prompt length: a prompt of pseudo-random ids
/// (fixed by `seed`), then `tokens` greedy steps. The model's options are changed for each mode
/// (the cache sized to the prompt plus the new tokens) and restored afterwards. With
/// `with_cuda_graphs`, every mode with a cache is timed a second time with the decode step run
/// as a CUDA graph (a row with cuda_graphs set, right after the one without).
/// Throws std::invalid_argument when a prompt length plus `tokens` exceeds the context.
std::vector<DecodeTiming> time_decode(CachedModel& model, const std::vector<int>& prompt_lengths,
                                      int tokens, const std::vector<KvCacheKind>& modes,
                                      int page_size = 16, uint64_t seed = 1,
                                      bool with_cuda_graphs = false);

}  // namespace clockwork
