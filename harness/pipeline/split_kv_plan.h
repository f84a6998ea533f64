/// @file split_kv_plan.h
/// Balanced split-KV for a batch of decode requests: which chunk of which request each block of
/// batched_decode_attention_split() attends to.
///
/// A decode step's attention reads every cached key of every request once, so its cost is the
/// batch's total KV length T = Σ_b len_b, spread over however many blocks the launch has. With
/// one block per (KV head, request) a batch mixing a request of 4000 positions with requests of
/// 1 position waits for the one block that reads 4000 keys while the others finished long ago.
/// The planner instead fixes a chunk length C from the total and cuts each request into
/// ceil(len_b / C) nearly equal chunks. target_blocks is one wave: the blocks that run at once,
/// blocks_per_head = target_blocks / h_k of them per KV head. The balanced length is
/// C_b = max(min_chunk, ceil(T / blocks_per_head)), the ideal share of a block. When C_b makes
/// more chunks than one wave holds, the extra ones run in a second wave (about 2·C_b in all), so
/// the planner takes the smallest C with at most blocks_per_head chunks if that C is at most
/// 2·C_b: one wave of longer chunks, and fewer states to merge. Every chunk holds at most C
/// keys, the number of chunks is at most blocks_per_head + batch, and the per-request merge of
/// the chunks' (O, LSE) states restores the exact softmax. (This is the idea of FlashInfer's
/// decode scheduler: plan on the host from the lengths, once per step, before the launch.)
///
/// How many blocks to aim for: decode attention only streams K and V, so the launch must keep
/// every multiprocessor busy reading until the end, and each block pays a start (its first
/// loads) and an end (its merge and store), so few long chunks beat many short ones.
/// split_kv_target_blocks() gives kSplitKvBlocksPerMultiprocessor blocks per multiprocessor:
/// the attention kernel's 4-warp blocks fit 4 at a time on one (their registers are held to
/// that), one wave. min_chunk keeps a chunk long enough (callers use 64 positions) that writing
/// and merging its (O, LSE) state stays small next to reading its keys and values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace clockwork {

/// The chunks of one step, as host arrays; the kernels get device copies (kernels::SplitKvWork).
struct SplitKvPlan {
  std::vector<int32_t> chunk_request;  ///< [n_chunks] request of chunk c
  std::vector<int32_t> chunk_begin;    ///< [n_chunks] first position of chunk c
  std::vector<int32_t> chunk_end;      ///< [n_chunks] one past its last position
  std::vector<int32_t> first_chunk;    ///< [batch + 1] request b owns chunks first..first[b+1]−1
  int chunk_limit = 0;                 ///< C: no chunk is longer

  /// Number of chunks.
  int n_chunks() const { return static_cast<int>(chunk_request.size()); }
  /// Whether some request was cut (otherwise the one-pass kernel does the same work).
  bool splits() const { return n_chunks() > static_cast<int>(first_chunk.size()) - 1; }
  /// Keys of the longest chunk.
  int max_chunk_tokens() const;
  /// Keys per chunk on average.
  double mean_chunk_tokens() const;
  /// One line: chunks, C, longest and mean.
  std::string describe() const;
};

/// Plans the chunks of a batch with KV lengths `lens` (every one >= 1) for one wave of about
/// `target_blocks` blocks in all (h_k of them per chunk), no chunk shorter than `min_chunk`
/// unless its request is. Throws std::invalid_argument naming the request of a bad length or
/// the bad argument.
SplitKvPlan plan_split_kv(const std::vector<int>& lens, int n_kv_heads, int target_blocks,
                          int min_chunk);

/// Blocks per multiprocessor that split_kv_target_blocks() plans for.
inline constexpr int kSplitKvBlocksPerMultiprocessor = 4;

/// The target_blocks for plan_split_kv() on a GPU with `multiprocessors` multiprocessors.
int split_kv_target_blocks(int multiprocessors);

/// The most chunks plan_split_kv() can make for up to `max_batch` requests: blocks_per_head +
/// max_batch (workspaces are sized with it).
int max_split_kv_chunks(int max_batch, int n_kv_heads, int target_blocks);

}  // namespace clockwork
