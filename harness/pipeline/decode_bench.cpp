/// @file decode_bench.cpp
/// Timing generation with and without the KV cache (decode_bench.h).
#include "harness/pipeline/decode_bench.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace clockwork {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Every row of time_decode(); changes the model's options.
std::vector<DecodeTiming> time_all(CachedModel& model, const std::vector<int>& prompt_lengths,
                                   int tokens, const std::vector<KvCacheKind>& modes,
                                   int page_size, uint64_t seed, bool with_cuda_graphs) {
  const ModelConfig& c = model.config();
  const CachedModelOptions base = model.options();
  std::vector<DecodeTiming> rows;
  for (int p : prompt_lengths) {
    // The same prompt for every mode: a splitmix-style sequence of ids.
    std::vector<int32_t> prompt(static_cast<size_t>(p));
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(p);
    for (int32_t& id : prompt) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      id = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(c.vocab_size));
    }
    for (KvCacheKind mode : modes) {
      for (bool graphs : {false, true}) {
        if (graphs && (!with_cuda_graphs || mode == KvCacheKind::None)) continue;
        CachedModelOptions o = base;
        o.cache = mode;
        o.max_positions = p + tokens;
        o.page_size = page_size;
        o.cuda_graphs = graphs;
        model.set_options(o);

        DecodeTiming row;
        row.prompt_length = p;
        row.mode = mode;
        row.cuda_graphs = graphs;
        row.tokens = tokens;
        std::vector<int32_t> seq = prompt;
        auto t0 = Clock::now();
        std::vector<float> logits = mode == KvCacheKind::None ? model.forward_uncached(seq)
                                                              : model.prefill(seq);
        row.prefill_ms = ms_since(t0);
        double total_ms = 0;
        for (int t = 0; t < tokens; ++t) {
          const int32_t next = argmax(logits);
          seq.push_back(next);
          t0 = Clock::now();
          logits = mode == KvCacheKind::None ? model.forward_uncached(seq) : model.decode(next);
          total_ms += ms_since(t0);
          if (mode != KvCacheKind::None) {
            row.cache_bytes_per_token +=
                c.num_layers * decode_attention_bytes(static_cast<int>(seq.size()),
                                                      static_cast<int>(c.num_heads),
                                                      static_cast<int>(c.num_kv_heads),
                                                      static_cast<int>(c.head_dim));
          }
        }
        row.ms_per_token = total_ms / tokens;
        row.tokens_per_s = row.ms_per_token > 0 ? 1000.0 / row.ms_per_token : 0;
        row.cache_bytes_per_token /= tokens;
        rows.push_back(row);
      }
    }
  }
  return rows;
}

}  // namespace

double decode_attention_bytes(int len, int n_heads, int n_kv_heads, int head_dim) {
  return 4.0 * (2.0 * len * n_kv_heads * head_dim + 2.0 * n_heads * head_dim);
}

std::vector<DecodeTiming> time_decode(CachedModel& model, const std::vector<int>& prompt_lengths,
                                      int tokens, const std::vector<KvCacheKind>& modes,
                                      int page_size, uint64_t seed, bool with_cuda_graphs) {
  const ModelConfig& c = model.config();
  if (tokens < 1) throw std::invalid_argument("time_decode: tokens must be at least 1");
  for (int p : prompt_lengths) {
    if (p < 1 || p + tokens > c.max_position_embeddings) {
      throw std::invalid_argument("time_decode: a prompt of " + std::to_string(p) + " tokens and " +
                                  std::to_string(tokens) + " new ones do not fit the context of " +
                                  std::to_string(c.max_position_embeddings) + " positions");
    }
  }
  const CachedModelOptions saved = model.options();
  std::vector<DecodeTiming> rows;
  try {
    rows = time_all(model, prompt_lengths, tokens, modes, page_size, seed, with_cuda_graphs);
  } catch (...) {
    model.set_options(saved);
    throw;
  }
  model.set_options(saved);
  return rows;
}

}  // namespace clockwork
