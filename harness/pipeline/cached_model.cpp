/// @file cached_model.cpp
/// CachedModel (cached_model.h): the model on the device with a KV cache.
///
/// Weights are loaded and validated by load_device_weights, as for Model (bf16, one allocation
/// each). Two sets of
/// activations: [capacity, ·] buffers for a whole sequence (prefill, and the uncached path),
/// grown when a longer sequence comes, and [1, ·] buffers for a decode step. The RoPE tables of
/// every position of the context are computed once, so a decode step only picks its row.
///
/// With CachedModelOptions::cuda_graphs a decode step's layers and output head run as one CUDA
/// graph (run_step_graph below says how the graph follows the position).
///
/// NVTX ranges (harness/profiling/nvtx.h) name the pieces for nsys: "prefill s=N" and
/// "decode pos=P" (and "forward s=N" without a cache) around "embedding", "layer 0" …
/// "layer L−1" (each with its steps, decoder.cpp and decode.cpp), "final_norm" and "lm_head".
#include "harness/pipeline/cached_model.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/cuda_check.h"
#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"
#include "harness/model/safetensors.h"
#include "kernels/steps.h"
#include "harness/model/weights.h"
#include "harness/pipeline/layer_buffers.h"

namespace clockwork {

int auto_split_size(int len, int n_kv_heads, int multiprocessors) {
  const int want_blocks = 2 * std::max(1, multiprocessors);
  if (len <= kMinSplitChunk || n_kv_heads >= want_blocks) return 0;
  const int chunks = std::min((want_blocks + n_kv_heads - 1) / n_kv_heads,
                              (len + kMinSplitChunk - 1) / kMinSplitChunk);
  if (chunks <= 1) return 0;
  const int size = (len + chunks - 1) / chunks;
  return (size + 31) / 32 * 32;  // whole tiles of the attention kernel
}

namespace {

bool is_poison(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits == 0xFFFFFFFFu;
}

}  // namespace

struct CachedModel::Impl {
  ModelConfig config;
  CachedModelOptions options;
  int multiprocessors = 1;

  // Weights (device, bf16); lm_head points at embed when the embeddings are tied.
  std::vector<void*> weight_memory;
  const __nv_bfloat16* embed = nullptr;    // [V, d]
  std::vector<LayerWeights> layers;        // [L]
  const __nv_bfloat16* norm = nullptr;     // [d]
  const __nv_bfloat16* lm_head = nullptr;  // [V, d]

  // Fixed buffers (device): RoPE tables of every position, the decode step, the output.
  std::vector<void*> fixed_memory;
  float* rope_cos = nullptr;     // [context, h_d/2]
  float* rope_sin = nullptr;     // [context, h_d/2]
  int32_t* token = nullptr;      // [1] the decode step's id
  float* x1 = nullptr;           // [1, d] the decode step's residual stream
  DecodeBuffers step;            // [1, ·] and the split-KV workspaces
  float* x_last_norm = nullptr;  // [d]
  float* logits = nullptr;       // [V]

  // Whole-sequence activations (device), sized for `capacity` tokens.
  int capacity = 0;
  std::vector<void*> activation_memory;
  int32_t* ids = nullptr;  // [capacity]
  float* x = nullptr;      // [capacity, d]
  LayerBuffers buffers;

  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> cached;  // the ids whose K and V the cache holds

  // CUDA graphs of the decode step: the stream they are captured on and replayed on, and one
  // executable graph per topology ([0] one-pass attention, [1] split-KV).
  cudaStream_t graph_stream = nullptr;
  cudaGraphExec_t graph_exec[2] = {nullptr, nullptr};
  DecodeGraphStats graph_stats;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    for (cudaGraphExec_t& e : graph_exec)  // errors ignored: a destructor cannot report them
      if (e) (void)cudaGraphExecDestroy(e);
    if (graph_stream) (void)cudaStreamDestroy(graph_stream);
    cache.reset();
    free_all(activation_memory);
    free_all(fixed_memory);
    free_all(weight_memory);
  }

  static void free_all(std::vector<void*>& memory) { free_device_memory(memory); }

  template <class T>
  static T* allocate(std::vector<void*>& memory, size_t count, const std::string& what) {
    return allocate_device<T>(memory, count, "CachedModel", what);
  }
  // allocate<float> into `memory`, for allocate_layer_buffers().
  static auto float_allocator(std::vector<void*>& memory) {
    return [&memory](size_t count, const std::string& what) {
      return allocate<float>(memory, count, what);
    };
  }

  int context() const { return static_cast<int>(config.max_position_embeddings); }

  int split_size_for(int len) const {
    if (options.split_size < 0) return 0;
    if (options.split_size > 0) return options.split_size;
    return auto_split_size(len, static_cast<int>(config.num_kv_heads), multiprocessors);
  }

  // The cache, the split-KV workspaces and the policy for `o`.
  void apply(const CachedModelOptions& o) {
    if (o.max_positions < 0 || o.max_positions > context()) {
      throw std::invalid_argument("CachedModel: max_positions must be in [0, " +
                                  std::to_string(context()) +
                                  "] (0: the context, max_position_embeddings); got " +
                                  std::to_string(o.max_positions));
    }
    if (o.page_size < 1) {
      throw std::invalid_argument("CachedModel: page_size must be at least 1 (got " +
                                  std::to_string(o.page_size) + ")");
    }
    const int positions = o.max_positions > 0 ? o.max_positions : context();
    cache.reset();
    cached.clear();
    if (o.fused_attention != options.fused_attention) {
      free_all(activation_memory);  // reallocated with (or without) the score workspace
      capacity = 0;
    }
    options = o;
    cache = make_kv_cache(o.cache, config, positions, o.page_size);

    // Chunks a decode step may split into: auto_split_size never makes more than
    // ceil(2·SMs / h_k); a forced size makes ceil(positions / size).
    const int h_k = static_cast<int>(config.num_kv_heads);
    const int splits = o.split_size > 0 ? (positions + o.split_size - 1) / o.split_size
                                        : (2 * multiprocessors + h_k - 1) / h_k;
    if (splits > step.max_splits) {
      const size_t q_width = static_cast<size_t>(config.num_heads * config.head_dim);
      step.partial_o = allocate<float>(fixed_memory, static_cast<size_t>(splits) * q_width,
                                       "split-KV partial outputs");
      step.partial_lse = allocate<float>(
          fixed_memory, static_cast<size_t>(splits) * static_cast<size_t>(config.num_heads),
          "split-KV partial log-sum-exps");
      step.max_splits = splits;
    }
  }

  void allocate_fixed() {
    const ModelConfig& c = config;
    const size_t d = static_cast<size_t>(c.hidden_size), half = static_cast<size_t>(c.head_dim / 2);
    const size_t n = static_cast<size_t>(context());
    auto& m = fixed_memory;
    rope_cos = allocate<float>(m, n * half, "RoPE cos table");
    rope_sin = allocate<float>(m, n * half, "RoPE sin table");
    token = allocate<int32_t>(m, 1, "the decode step's token");
    x1 = allocate<float>(m, d, "the decode step's residual stream");
    allocate_layer_buffers(step, c, 1, false, "decode ", float_allocator(m));
    x_last_norm = allocate<float>(m, d, "the last row's final norm");
    logits = allocate<float>(m, static_cast<size_t>(c.vocab_size), "logits");
  }

  // RoPE tables of positions 0 .. context−1, once.
  void compute_rope(const double* inv_freq_device) {
    const nvtx::Range range("rope tables");
    const int n = context();
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i;
    std::vector<void*> scratch;
    auto* positions = allocate<int32_t>(scratch, pos.size(), "positions");
    try {
      CUDA_CHECK(cudaMemcpy(positions, pos.data(), pos.size() * sizeof(int32_t),
                            cudaMemcpyHostToDevice));
      kernels::rope_tables(positions, inv_freq_device, rope_cos, rope_sin, n,
                           static_cast<int>(config.head_dim / 2));
      CUDA_CHECK(cudaDeviceSynchronize());
    } catch (...) {
      free_all(scratch);
      throw;
    }
    free_all(scratch);
  }

  // Makes the whole-sequence activations hold at least s tokens.
  void reserve(int s) {
    if (s <= capacity) return;
    const ModelConfig& c = config;
    const int cap = std::min(context(), std::max({s, 2 * capacity, 16}));
    free_all(activation_memory);
    capacity = 0;
    const size_t n = static_cast<size_t>(cap);
    auto& m = activation_memory;
    ids = allocate<int32_t>(m, n, "token ids");
    x = allocate<float>(m, n * static_cast<size_t>(c.hidden_size), "the residual stream");
    // The fused attention needs no [s, s] workspace (decoder_layer then runs flash_attention).
    allocate_layer_buffers(buffers, c, n, !options.fused_attention, "", float_allocator(m));
    capacity = cap;
  }

  RopeTablesView rope() const { return {rope_cos, rope_sin}; }

  // Embedding, the layers (each `layer(i)`), the output head, for s tokens already in `ids`.
  template <class Layer>
  void run_sequence(int s, ForwardCapture* capture, Layer layer) {
    const ModelConfig& c = config;
    const int d = static_cast<int>(c.hidden_size);
    {
      const nvtx::Range range("embedding");
      kernels::embedding(ids, embed, x, s, d, static_cast<int>(c.vocab_size));
    }
    if (capture) capture->layer_outputs.assign(static_cast<size_t>(c.num_layers), {});
    for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
      {
        const nvtx::Range range("layer ", i);
        layer(i);
      }
      if (capture) {
        std::vector<float>& out = capture->layer_outputs.at(static_cast<size_t>(i));
        out.resize(static_cast<size_t>(s) * d);
        CUDA_CHECK(cudaMemcpy(out.data(), x, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
      }
    }
    output_logits(c, x, s, norm, lm_head, x_last_norm, logits);
    if (capture) {
      capture->final_norm_last.resize(static_cast<size_t>(d));
      CUDA_CHECK(cudaMemcpy(capture->final_norm_last.data(), x_last_norm,
                            static_cast<size_t>(d) * sizeof(float), cudaMemcpyDeviceToHost));
    }
  }

  void upload_ids(const std::vector<int32_t>& tokens) {
    reserve(static_cast<int>(tokens.size()));
    CUDA_CHECK(cudaMemcpy(ids, tokens.data(), tokens.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice));
  }

  // A cache slot that still holds the poison after the step that should have written it means
  // the step wrote nothing there: stop before generating from a half-empty cache.
  void check_written(int pos, const char* step_name) const {
    if (!options.verify_cache_writes) return;
    const KvSlot slot = cache->slot_of(pos);
    const kernels::KvCacheView view = cache->layer(0);
    const size_t index =
        (static_cast<size_t>(slot.page) * view.page_size + slot.offset) * view.n_kv_heads *
        view.head_dim;
    float k = 0, v = 0;
    CUDA_CHECK(cudaMemcpy(&k, view.k + index, sizeof k, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&v, view.v + index, sizeof v, cudaMemcpyDeviceToHost));
    if (is_poison(k) || is_poison(v)) {
      throw KvCacheNotWritten(std::string(step_name) + " did not write position " +
                             std::to_string(pos) + " of layer 0 into the KV cache (page " +
                             std::to_string(slot.page) + ", offset " +
                             std::to_string(slot.offset) +
                             " still holds its poison): the cached pipeline of milestone 4 is "
                             "missing or broken; run generate and verify with --kv-cache none "
                             "until ctest -L milestone4 passes");
    }
  }

  std::vector<float> download_logits() const {
    std::vector<float> out(static_cast<size_t>(config.vocab_size));
    CUDA_CHECK(
        cudaMemcpy(out.data(), logits, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

  void require_cache(const char* who) const {
    if (!cache) {
      throw std::logic_error(std::string(who) +
                             ": this model was built without a KV cache (KvCacheKind::None)");
    }
  }

  std::vector<float> prefill(const std::vector<int32_t>& tokens, ForwardCapture* capture) {
    require_cache("CachedModel::prefill");
    check_token_ids(config, tokens, "CachedModel::prefill");
    const int s = static_cast<int>(tokens.size());
    cache->clear();
    cached.clear();
    if (s > cache->capacity()) {
      throw KvCacheFullError("CachedModel::prefill: a prompt of " + std::to_string(s) +
                             " tokens does not fit the " + cache->describe() + " (capacity " +
                             std::to_string(cache->capacity()) + " positions)");
    }
    cache->poison();  // so that check_written() sees a slot nobody wrote, as the tests do
    const nvtx::Range range("prefill s=", s);
    try {
      cache->extend(s);
      upload_ids(tokens);
      run_sequence(s, capture, [&](int i) {
        prefill_layer(config, layers[static_cast<size_t>(i)], rope(), cache->layer(i), x,
                      buffers, s);
      });
      check_written(0, "prefill");
      check_written(s - 1, "prefill");
    } catch (...) {
      cache->clear();
      throw;
    }
    cached = tokens;
    return download_logits();
  }

  std::vector<float> decode(int32_t id) {
    require_cache("CachedModel::decode");
    if (cached.empty()) {
      throw std::logic_error("CachedModel::decode: the cache is empty; prefill a prompt first");
    }
    check_token_id(config, id, cached.size(), "CachedModel::decode");
    const ModelConfig& c = config;
    const int d = static_cast<int>(c.hidden_size);
    const int pos = cache->extend(1);  // KvCacheFullError when full; nothing has changed then
    const nvtx::Range range("decode pos=", pos);
    try {
      const int split = split_size_for(pos + 1);
      if (split > 0 && kernels::decode_attention_splits(pos + 1, split) > step.max_splits) {
        throw std::logic_error("CachedModel: split size " + std::to_string(split) + " at " +
                               std::to_string(pos + 1) + " positions needs more chunks than the " +
                               std::to_string(step.max_splits) + " the workspace holds");
      }
      {
        const nvtx::Range embedding("embedding");
        CUDA_CHECK(cudaMemcpy(token, &id, sizeof id, cudaMemcpyHostToDevice));
        kernels::embedding(token, embed, x1, 1, d, static_cast<int>(c.vocab_size));
      }
      if (options.cuda_graphs) {
        run_step_graph(pos, split);
      } else {
        run_step_layers(pos, split, nullptr);
      }
      check_written(pos, "the decode step");
    } catch (...) {
      cache->clear();  // a half-written step leaves the cache inconsistent: start over
      cached.clear();
      throw;
    }
    cached.push_back(id);
    return download_logits();
  }

  // The layers and the output head of a decode step, launched on `stream`.
  void run_step_layers(int pos, int split, cudaStream_t stream) {
    for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
      const nvtx::Range layer_range("layer ", i);
      decode_layer(config, layers[static_cast<size_t>(i)], rope(), cache->layer(i), pos, split, x1,
                   step, stream);
    }
    output_logits(config, x1, 1, norm, lm_head, x_last_norm, logits, stream);
  }

  struct GraphDeleter {
    void operator()(cudaGraph_t g) const { (void)cudaGraphDestroy(g); }
  };

  // run_step_layers() as a CUDA graph. What changes from step to step is the position: it is a
  // by-value argument of milestone 4's kernels (kv_cache_append's slot, decode_attention's len,
  // the RoPE row, a paged cache's table length) and the split-KV grid grows with it, so a graph
  // recorded at one position is wrong at the next. Reading the position from device memory (a
  // scalar written by a copy node) would change those kernels' signatures, which the milestones
  // fix. Instead each step is captured again (recording only: nothing runs during the capture)
  // and cudaGraphExecUpdate moves the new arguments into the executable graph, which is
  // instantiated once per topology: far cheaper than instantiating every step, and the step
  // still goes to the device as one launch. The topology differs only between one-pass and
  // split-KV attention (the merge adds a launch per layer): two executable graphs at most.
  // The embedding stays outside: its launcher synchronises to check the id, which a capture
  // forbids, and the id has been checked on the host already.
  void run_step_graph(int pos, int split) {
    // A blocking stream: it waits for the legacy-stream work queued before it (the id's copy,
    // the embedding) and that work after it waits for the graph.
    if (!graph_stream) CUDA_CHECK(cudaStreamCreate(&graph_stream));
    CUDA_CHECK(cudaStreamBeginCapture(graph_stream, cudaStreamCaptureModeGlobal));
    cudaGraph_t captured = nullptr;
    try {
      run_step_layers(pos, split, graph_stream);
    } catch (...) {
      (void)cudaStreamEndCapture(graph_stream, &captured);  // ends the capture; nothing is kept
      if (captured) (void)cudaGraphDestroy(captured);
      (void)cudaGetLastError();
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(graph_stream, &captured));
    const std::unique_ptr<CUgraph_st, GraphDeleter> graph(captured);
    ++graph_stats.captures;
    cudaGraphExec_t& exec = graph_exec[split > 0 ? 1 : 0];
    if (exec) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(exec, graph.get(), &info) == cudaSuccess) {
        ++graph_stats.updates;
      } else {  // another topology after all: start again from this step's graph
        (void)cudaGetLastError();
        (void)cudaGraphExecDestroy(exec);
        exec = nullptr;
      }
    }
    if (!exec) {
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
      ++graph_stats.instantiations;
    }
    CUDA_CHECK(cudaGraphLaunch(exec, graph_stream));
    CUDA_CHECK(cudaStreamSynchronize(graph_stream));
    ++graph_stats.launches;
  }

  std::vector<float> forward_uncached(const std::vector<int32_t>& tokens,
                                      ForwardCapture* capture) {
    check_token_ids(config, tokens, "CachedModel::forward_uncached");
    const int s = static_cast<int>(tokens.size());
    const nvtx::Range range("forward s=", s);
    upload_ids(tokens);
    run_sequence(s, capture, [&](int i) {
      decoder_layer(config, layers[static_cast<size_t>(i)], rope(), x, buffers, s);
    });
    return download_logits();
  }
};

CachedModel CachedModel::load(const std::filesystem::path& dir, const CachedModelOptions& options,
                              const LoadProgress& progress) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.config = ModelConfig::from_file(dir / "config.json");
  DeviceWeights w = load_device_weights(dir, m.config, m.weight_memory, progress, "CachedModel");
  m.embed = w.embed;
  m.layers = std::move(w.layers);
  m.norm = w.norm;
  m.lm_head = w.lm_head;
  const double* inv_freq_device = w.inv_freq;

  if (cudaDeviceGetAttribute(&m.multiprocessors, cudaDevAttrMultiProcessorCount, 0) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    m.multiprocessors = 1;
  }
  m.allocate_fixed();
  m.compute_rope(inv_freq_device);
  m.apply(options);
  return CachedModel(std::move(impl));
}

CachedModel::CachedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CachedModel::CachedModel(CachedModel&&) noexcept = default;
CachedModel& CachedModel::operator=(CachedModel&&) noexcept = default;
CachedModel::~CachedModel() = default;

const ModelConfig& CachedModel::config() const {
  return impl_->config;
}

const CachedModelOptions& CachedModel::options() const {
  return impl_->options;
}

void CachedModel::set_options(const CachedModelOptions& options) {
  impl_->apply(options);
}

KvCache* CachedModel::cache() {
  return impl_->cache.get();
}

const std::vector<int32_t>& CachedModel::cached_ids() const {
  return impl_->cached;
}

int CachedModel::split_size_for(int len) const {
  return impl_->split_size_for(len);
}

const DecodeGraphStats& CachedModel::decode_graph_stats() const {
  return impl_->graph_stats;
}

std::vector<float> CachedModel::logits(const std::vector<int32_t>& ids) {
  Impl& m = *impl_;
  if (!m.cache) return m.forward_uncached(ids, nullptr);
  const std::vector<int32_t>& c = m.cached;
  if (!c.empty() && ids.size() == c.size() + 1 && std::equal(c.begin(), c.end(), ids.begin())) {
    return m.decode(ids.back());
  }
  return m.prefill(ids, nullptr);
}

std::vector<float> CachedModel::prefill(const std::vector<int32_t>& ids, ForwardCapture* capture) {
  return impl_->prefill(ids, capture);
}

std::vector<float> CachedModel::decode(int32_t token) {
  return impl_->decode(token);
}

std::vector<float> CachedModel::forward_uncached(const std::vector<int32_t>& ids,
                                                 ForwardCapture* capture) {
  return impl_->forward_uncached(ids, capture);
}

}  // namespace clockwork
