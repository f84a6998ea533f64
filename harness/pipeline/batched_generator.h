/// @file batched_generator.h
/// Greedy generation for many requests at once over one shared page pool (milestone 5):
/// continuous batching.
///
///     BatchedGenerator g = BatchedGenerator::load(dir, {.max_batch = 8});
///     for (const auto& p : prompts) g.submit(p, 32);
///     while (!g.idle())
///       for (const BatchToken& t : g.step()) print(t.request, t.token);
///
/// Each step() first admits waiting requests (in the order they were submitted) while the batch
/// has room and the pool has the pages they will need: a new request's prompt is prefilled alone
/// (milestone 4's prefill_layer, written through its own page table into the pool) and gives its
/// first token. Then one batched decode step runs every running request's newest token through
/// the model with each kernel launched ONCE for the whole batch: the embedding, the projections
/// and the FFN as matmuls over [batch, d], RoPE at each request's own position, the append into
/// each request's own pages and the batched paged decode attention (kernels.h, milestone 5).
/// A request that reaches a stop token, its token budget or the end of the context leaves the
/// batch and its pages go back to the pool at once; waiting requests take its place in the next
/// step. The requests' page tables and lengths reach the kernels as device index arrays.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness/model/weights.h"
#include "harness/pipeline/page_pool.h"
#include "harness/pipeline/split_kv_plan.h"
#include "kernels/model_config.h"

namespace clockwork {

/// How BatchedGenerator batches and attends.
struct BatchedGeneratorOptions {
  int max_batch = 8;   ///< requests decoded together at most
  int page_size = 16;  ///< positions per page
  int num_pages = 0;   ///< pages in the pool; 0: enough for max_batch requests of the whole context
  /// Decode attention: 0 splits per step with plan_split_kv() for split_kv_target_blocks()
  /// blocks (4 per multiprocessor) when some request is longer than its share; −1 never
  /// splits (one block per KV head and request); > 0 always plans for this many blocks.
  int split_blocks = 0;
  int min_chunk = 64;            ///< the shortest chunk a split makes (plan_split_kv)
  bool fused_attention = false;  ///< prefill with milestone 5's flash_attention
  std::vector<int32_t> stop_ids;  ///< a request ends after one of these (it is reported)
  int32_t choosable = 0;          ///< tokens >= this are never chosen; 0: the whole vocabulary
};

/// One new token of one request.
struct BatchToken {
  int request = 0;     ///< the number submit() returned
  int32_t token = 0;   ///< the token chosen (greedy)
  bool last = false;   ///< the request finished with it
};

/// Counts of the last step().
struct BatchStepStats {
  int admitted = 0;      ///< requests prefilled
  int decoded = 0;       ///< requests in the batched decode step (its batch size)
  int chunks = 0;        ///< attention chunks (== decoded when nothing was split)
};

class BatchedGenerator {
 public:
  /// Loads config.json and the checkpoint in `dir` and builds the pool. Throws CheckpointError,
  /// ConfigError, std::invalid_argument for bad options, CudaError when the device has no room.
  static BatchedGenerator load(const std::filesystem::path& dir,
                               const BatchedGeneratorOptions& options = {},
                               const LoadProgress& progress = {});
  BatchedGenerator(BatchedGenerator&&) noexcept;
  BatchedGenerator& operator=(BatchedGenerator&&) noexcept;
  ~BatchedGenerator();

  const ModelConfig& config() const;
  const BatchedGeneratorOptions& options() const;
  const PagePool& pool() const;

  /// Queues a request: `prompt` (1 .. context tokens, ids in the vocabulary), at most
  /// max_new_tokens (>= 1) new tokens. Returns its number (0, 1, 2, ... in submission order).
  /// Throws std::invalid_argument naming the request for a bad prompt, PagePoolExhausted when
  /// the request could never fit the pool, even alone.
  int submit(const std::vector<int32_t>& prompt, int max_new_tokens);

  /// Admits waiting requests, then runs one batched decode step; returns the tokens chosen, in
  /// request order within each phase. Empty when idle(). Throws PagePoolExhausted (naming the
  /// pool and the request) when a waiting request cannot be admitted although nothing runs, which
  /// means pages were lost.
  std::vector<BatchToken> step();

  /// No request waits or runs.
  bool idle() const;
  /// Requests in the decode batch.
  int running() const;
  /// Requests not yet admitted.
  int waiting() const;
  /// Requests finished so far.
  int finished() const;
  /// The tokens request `request` has generated so far.
  const std::vector<int32_t>& generated(int request) const;
  /// What the last step() did.
  const BatchStepStats& last_step() const;

 private:
  struct Impl;
  explicit BatchedGenerator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace clockwork
