/// @file cached_model.h
/// The whole model with a KV cache (milestone 4 on): prefill the prompt once, then one decode step
/// per new token, plus the uncached path of milestone 3 on the same weights for comparison.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernels/model_config.h"
#include "harness/pipeline/model.h"
#include "harness/pipeline/kv_cache.h"

namespace clockwork {

/// The split size decode steps use when none is forced: 0 (one pass) while the h_k blocks of
/// the one-pass kernel are enough to fill the device or the cache is short, otherwise chunks of
/// a multiple of 32 positions, at least kMinSplitChunk, so that h_k·chunks ≈ 2·multiprocessors.
/// @param len              cached positions the step attends to
/// @param n_kv_heads       h_k
/// @param multiprocessors  the device's SM count
int auto_split_size(int len, int n_kv_heads, int multiprocessors);

/// The shortest chunk auto_split_size() chooses: below it the merge costs more than it saves.
inline constexpr int kMinSplitChunk = 64;

/// Thrown when a prefill or decode step left its cache slot unwritten: milestone 4 is not done
/// (or is broken). Generation without a cache (KvCacheKind::None) still works.
class KvCacheNotWritten : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// How CachedModel caches and attends.
struct CachedModelOptions {
  KvCacheKind cache = KvCacheKind::Contiguous;  ///< None runs every step uncached
  int max_positions = 0;  ///< positions the cache holds; 0: the context (max_position_embeddings)
  int page_size = 16;     ///< positions per page of a paged cache
  /// Decode attention: 0 chooses per step (auto_split_size), −1 never splits (one pass), > 0
  /// always splits into chunks of this many positions.
  int split_size = 0;
  /// After each prefill and decode step, read back one value of the slot it should have written
  /// (layer 0) and throw KvCacheNotWritten if it still holds the poison: generation stops with a
  /// clear message instead of producing text from a half-empty cache. The slot-by-slot tests
  /// turn it off to inspect a wrong cache themselves.
  bool verify_cache_writes = true;
  /// Prefill (and the uncached steps of KvCacheKind::None) with milestone 5's fused
  /// flash_attention: no [s, s] score workspace is allocated.
  bool fused_attention = false;
  /// Run the layers and the output head of each decode step as one CUDA graph (milestone 5):
  /// one cudaGraphLaunch instead of a launch per kernel. Same kernels, same arguments, same
  /// logits as without.
  bool cuda_graphs = false;
};

/// What the CUDA graphs of the decode step (CachedModelOptions::cuda_graphs) did so far.
struct DecodeGraphStats {
  uint64_t captures = 0;        ///< decode steps recorded by stream capture
  uint64_t instantiations = 0;  ///< executable graphs made (one per topology, see cached_model.cpp)
  uint64_t updates = 0;         ///< steps that updated an executable graph in place instead
  uint64_t launches = 0;        ///< cudaGraphLaunch calls: decode steps run from a graph
};

/// A Llama model on the device (bf16 weights, fp32 activations) that generates with a KV cache.
///
///     CachedModel m = CachedModel::load(dir, {.cache = KvCacheKind::Paged});
///     std::vector<float> l = m.prefill(prompt);  // positions 0 .. s−1 into the cache
///     l = m.decode(next);                        // position s, then s+1, ...
class CachedModel {
 public:
  /// Loads config.json and the checkpoint in `dir` (validated like Model::load) and builds the
  /// cache `options` asks for. Throws CheckpointError, ConfigError, std::invalid_argument for bad
  /// options, CudaError when the device has no room.
  static CachedModel load(const std::filesystem::path& dir, const CachedModelOptions& options = {},
                          const LoadProgress& progress = {});

  CachedModel(CachedModel&&) noexcept;
  CachedModel& operator=(CachedModel&&) noexcept;
  ~CachedModel();

  /// The configuration read from config.json.
  const ModelConfig& config() const;
  /// The options in effect.
  const CachedModelOptions& options() const;
  /// Replaces the cache (and the decode policy) with the one `options` describes; the sequence
  /// held so far is forgotten.
  void set_options(const CachedModelOptions& options);

  /// The cache, or nullptr with KvCacheKind::None.
  KvCache* cache();
  /// The ids whose K and V the cache holds (empty without a cache).
  const std::vector<int32_t>& cached_ids() const;

  /// Logits [V] of the token after `ids`, the one call a generation loop needs. With a cache:
  /// one decode step when `ids` is the cached sequence plus one token, otherwise a fresh prefill
  /// of `ids`. Without: the whole sequence (milestone 3).
  std::vector<float> logits(const std::vector<int32_t>& ids);

  /// Clears the cache and runs the prompt through every layer (positions 0 .. s−1 go into the
  /// cache); returns the logits [V] of the last position. `capture` as in Model::forward.
  /// Throws std::logic_error without a cache, std::invalid_argument for bad ids,
  /// KvCacheFullError when the prompt does not fit.
  std::vector<float> prefill(const std::vector<int32_t>& ids, ForwardCapture* capture = nullptr);

  /// One decode step: `token` at position cached_ids().size(); returns its logits [V].
  /// Throws std::logic_error without a cache or before a prefill, std::invalid_argument for an
  /// id outside the vocabulary, KvCacheFullError when the cache is full (nothing changes then).
  std::vector<float> decode(int32_t token);

  /// Milestone 3's forward pass over the whole sequence, no cache (the cache is untouched).
  std::vector<float> forward_uncached(const std::vector<int32_t>& ids,
                                      ForwardCapture* capture = nullptr);

  /// The split size the next decode step at cache length `len` uses (0: one pass).
  int split_size_for(int len) const;

  /// Counts of the decode step's CUDA graphs since the model was loaded.
  const DecodeGraphStats& decode_graph_stats() const;

 private:
  struct Impl;
  explicit CachedModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace clockwork
