/// @file split_kv_plan.cpp
/// The balanced split-KV planner (split_kv_plan.h).
#include "harness/pipeline/split_kv_plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>

namespace clockwork {

int SplitKvPlan::max_chunk_tokens() const {
  int m = 0;
  for (size_t c = 0; c < chunk_request.size(); ++c) m = std::max(m, chunk_end[c] - chunk_begin[c]);
  return m;
}

double SplitKvPlan::mean_chunk_tokens() const {
  if (chunk_request.empty()) return 0.0;
  long long total = 0;
  for (size_t c = 0; c < chunk_request.size(); ++c) total += chunk_end[c] - chunk_begin[c];
  return static_cast<double>(total) / static_cast<double>(chunk_request.size());
}

std::string SplitKvPlan::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d chunks of at most %d positions (longest %d, mean %.1f)",
                n_chunks(), chunk_limit, max_chunk_tokens(), mean_chunk_tokens());
  return buf;
}

namespace {
int blocks_per_head(int n_kv_heads, int target_blocks) {
  return std::max(1, target_blocks / n_kv_heads);
}
}  // namespace

int split_kv_target_blocks(int multiprocessors) {
  return kSplitKvBlocksPerMultiprocessor * std::max(1, multiprocessors);
}

int max_split_kv_chunks(int max_batch, int n_kv_heads, int target_blocks) {
  return blocks_per_head(std::max(1, n_kv_heads), target_blocks) + max_batch;
}

SplitKvPlan plan_split_kv(const std::vector<int>& lens, int n_kv_heads, int target_blocks,
                          int min_chunk) {
  if (lens.empty()) throw std::invalid_argument("plan_split_kv: the batch is empty");
  if (n_kv_heads < 1 || target_blocks < 1 || min_chunk < 1) {
    throw std::invalid_argument(
        "plan_split_kv: n_kv_heads, target_blocks and min_chunk must be positive (got " +
        std::to_string(n_kv_heads) + ", " + std::to_string(target_blocks) + " and " +
        std::to_string(min_chunk) + ")");
  }
  long long total = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    if (lens[b] < 1) {
      throw std::invalid_argument("plan_split_kv: request " + std::to_string(b) + " has length " +
                                  std::to_string(lens[b]) + " (every request attends to >= 1)");
    }
    total += lens[b];
  }
  const long long per_head = blocks_per_head(n_kv_heads, target_blocks);
  // The balanced limit: no chunk longer than the ideal share of a block.
  const int balanced =
      static_cast<int>(std::max<long long>(min_chunk, (total + per_head - 1) / per_head));
  // More chunks than one wave of blocks would run in two waves, about 2·balanced long. If a
  // longer limit, at most twice the balanced one, brings the chunks down to one wave, it is
  // faster (and needs fewer merges): the smallest such limit, by bisection (chunks(C) only
  // falls as C grows).
  auto chunks = [&](long long c) {
    long long n = 0;
    for (int len : lens) n += (len + c - 1) / c;
    return n;
  };
  int limit = balanced;
  if (chunks(balanced) > per_head && static_cast<long long>(lens.size()) <= per_head) {
    long long lo = balanced, hi = *std::max_element(lens.begin(), lens.end());
    while (lo < hi) {
      const long long mid = lo + (hi - lo) / 2;
      if (chunks(mid) <= per_head) hi = mid; else lo = mid + 1;
    }
    if (lo <= 2LL * balanced) limit = static_cast<int>(lo);
  }

  SplitKvPlan plan;
  plan.chunk_limit = limit;
  plan.first_chunk.reserve(lens.size() + 1);
  for (size_t b = 0; b < lens.size(); ++b) {
    plan.first_chunk.push_back(plan.n_chunks());
    const int len = lens[b];
    const int pieces = (len + limit - 1) / limit;
    // Nearly equal pieces: the first len % pieces of them one position longer.
    const int base = len / pieces, longer = len % pieces;
    int begin = 0;
    for (int p = 0; p < pieces; ++p) {
      const int size = base + (p < longer ? 1 : 0);
      plan.chunk_request.push_back(static_cast<int32_t>(b));
      plan.chunk_begin.push_back(begin);
      plan.chunk_end.push_back(begin + size);
      begin += size;
    }
  }
  plan.first_chunk.push_back(plan.n_chunks());
  return plan;
}

}  // namespace clockwork
