// The Gemma 3 model on the device (see gemma_model.h).
#include "harness/pipeline/gemma_model.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/check/cuda_check.h"
#include "harness/model/config_check.h"
#include "harness/model/safetensors.h"
#include "harness/pipeline/kv_cache.h"
#include "harness/pipeline/layer_buffers.h"
#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"
#include "kernels/steps.h"

namespace clockwork {

struct GemmaModel::Impl {
  ModelConfig config;
  std::vector<void*> weight_memory, activation_memory;
  const __nv_bfloat16* embed = nullptr;
  const __nv_bfloat16* norm = nullptr;
  const __nv_bfloat16* lm_head = nullptr;
  std::vector<GemmaLayerWeights> layers;
  double* local_inv_freq = nullptr;
  double* global_inv_freq = nullptr;
  float embed_scale = 1.f;

  int capacity = 0;       // tokens the activations hold
  int rope_capacity = 0;  // rows of the RoPE tables
  std::vector<void*> rope_memory;
  int32_t* ids = nullptr;
  int32_t* positions = nullptr;
  float *local_cos = nullptr, *local_sin = nullptr, *global_cos = nullptr, *global_sin = nullptr;
  float* x = nullptr;
  LayerBuffers buffers;
  float* x_last_norm = nullptr;
  float* logits = nullptr;

  // The KV cache (enable_cache): one ContiguousKvCache per layer type, each layer's index in its
  // own, and the decode step's one-row buffers.
  std::unique_ptr<ContiguousKvCache> local_cache, global_cache;
  std::vector<int> kind_index;  // [L] layer -> its index in local_cache or global_cache
  int max_positions = 0;
  std::vector<int32_t> cached;  // the ids the cache holds
  std::vector<void*> step_memory;
  float* x1 = nullptr;  // [1, d]
  DecodeBuffers step;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    local_cache.reset();
    global_cache.reset();
    free_device_memory(step_memory);
    free_device_memory(rope_memory);
    free_device_memory(activation_memory);
    free_device_memory(weight_memory);
  }

  kernels::KvCacheView cache_view(int layer) const {
    const int j = kind_index[static_cast<size_t>(layer)];
    return config.is_sliding(layer) ? local_cache->layer(j) : global_cache->layer(j);
  }

  // The embedding (times sqrt(d)) of the s ids in `ids` into `out`, the layers (`layer(i)`),
  // then the final norm of `out`'s last row and the lm_head.
  template <class Layer>
  std::vector<float> run(float* out, int s, ForwardCapture* capture, Layer layer) {
    const ModelConfig& c = config;
    const int d = static_cast<int>(c.hidden_size), V = static_cast<int>(c.vocab_size);
    {
      const nvtx::Range range("embedding");
      kernels::embedding(ids, embed, out, s, d, V);
      kernels::scale(out, embed_scale, static_cast<size_t>(s) * d);
    }
    if (capture) capture->layer_outputs.clear();
    for (int i = 0; i < static_cast<int>(c.num_layers); ++i) {
      const nvtx::Range range("layer", i);
      layer(i);
      if (capture) {
        std::vector<float> o(static_cast<size_t>(s) * d);
        CUDA_CHECK(cudaMemcpy(o.data(), out, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
        capture->layer_outputs.push_back(std::move(o));
      }
    }
    {
      const nvtx::Range range("output");
      kernels::rmsnorm_gemma(out + static_cast<size_t>(s - 1) * d, norm, x_last_norm, 1, d,
                             static_cast<float>(c.rms_norm_eps));
      kernels::lm_head(x_last_norm, lm_head, logits, V, d);
    }
    std::vector<float> result(static_cast<size_t>(V));
    CUDA_CHECK(cudaMemcpy(result.data(), logits, result.size() * sizeof(float),
                          cudaMemcpyDeviceToHost));
    if (capture) {
      capture->final_norm_last.resize(static_cast<size_t>(d));
      CUDA_CHECK(cudaMemcpy(capture->final_norm_last.data(), x_last_norm, d * sizeof(float),
                            cudaMemcpyDeviceToHost));
    }
    return result;
  }

  template <class T>
  T* activation(size_t count, const std::string& what) {
    return allocate_device<T>(activation_memory, count, "GemmaModel", what);
  }

  // Activations for at least s tokens, and the RoPE tables of both layer types for all of them.
  void reserve(int s) {
    if (s <= capacity) return;
    const ModelConfig& c = config;
    const int cap = std::min(static_cast<int>(c.max_position_embeddings),
                             std::max({s, 2 * capacity, 16}));
    free_device_memory(activation_memory);
    capacity = 0;
    const size_t n = static_cast<size_t>(cap), d = static_cast<size_t>(c.hidden_size);
    ids = activation<int32_t>(n, "token ids");
    x = activation<float>(n * d, "the residual stream");
    // The sliding-window attention needs no [s, s] workspace.
    allocate_layer_buffers(buffers, c, n, false, "", [&](size_t count, const std::string& what) {
      return activation<float>(count, what);
    });
    x_last_norm = activation<float>(d, "the last row's final norm");
    logits = activation<float>(static_cast<size_t>(c.vocab_size), "logits");
    capacity = cap;
    reserve_rope(cap);
  }

  // RoPE tables of both layer types for at least positions 0 .. n−1. Apart from the activations:
  // a decode step at position pos needs row pos of the tables but only one row of activations.
  void reserve_rope(int n) {
    if (n <= rope_capacity) return;
    const ModelConfig& c = config;
    const int cap = std::min(static_cast<int>(c.max_position_embeddings),
                             std::max({n, 2 * rope_capacity, 16}));
    free_device_memory(rope_memory);
    rope_capacity = 0;
    const size_t rows = static_cast<size_t>(cap), half = static_cast<size_t>(c.head_dim / 2);
    auto table = [&](size_t count, const char* what) {
      return allocate_device<float>(rope_memory, count, "GemmaModel", what);
    };
    positions = allocate_device<int32_t>(rope_memory, rows, "GemmaModel", "positions");
    local_cos = table(rows * half, "local RoPE cos table");
    local_sin = table(rows * half, "local RoPE sin table");
    global_cos = table(rows * half, "global RoPE cos table");
    global_sin = table(rows * half, "global RoPE sin table");
    std::vector<int32_t> pos(rows);
    for (size_t i = 0; i < rows; ++i) pos[i] = static_cast<int32_t>(i);
    CUDA_CHECK(cudaMemcpy(positions, pos.data(), rows * sizeof(int32_t), cudaMemcpyHostToDevice));
    kernels::rope_tables(positions, local_inv_freq, local_cos, local_sin, cap, static_cast<int>(half));
    kernels::rope_tables(positions, global_inv_freq, global_cos, global_sin, cap,
                         static_cast<int>(half));
    rope_capacity = cap;
  }
};

namespace {

double* upload_inv_freq(std::vector<void*>& memory, const std::vector<double>& inv) {
  double* p = allocate_device<double>(memory, inv.size(), "GemmaModel", "RoPE inverse frequencies");
  CUDA_CHECK(cudaMemcpy(p, inv.data(), inv.size() * sizeof(double), cudaMemcpyHostToDevice));
  return p;
}

}  // namespace

GemmaModel::GemmaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmaModel::GemmaModel(GemmaModel&&) noexcept = default;
GemmaModel& GemmaModel::operator=(GemmaModel&&) noexcept = default;
GemmaModel::~GemmaModel() = default;

const ModelConfig& GemmaModel::config() const { return impl_->config; }

GemmaModel GemmaModel::load(const std::filesystem::path& dir, const LoadProgress& progress) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.config = ModelConfig::from_file(dir / "config.json");
  const ModelConfig& c = m.config;
  if (!c.is_gemma3()) {
    throw CheckpointError("GemmaModel: " + (dir / "config.json").string() + " describes a " +
                          family_name(c.family) + " model; GemmaModel runs Gemma 3 only");
  }
  const Checkpoint ckpt = Checkpoint::open(dir);
  check_config_fits_checkpoint(c, ckpt);  // before anything is sized from the config

  // Every tensor with the shape config.json implies and where its device pointer goes; all are
  // checked (name, bf16, shape) before the first copy.
  struct Wanted {
    std::string name;
    std::vector<int64_t> shape;
    const __nv_bfloat16** slot;
  };
  const int64_t d = c.hidden_size, ff = c.intermediate_size, V = c.vocab_size, hd = c.head_dim;
  const int64_t qw = c.num_heads * hd, kvw = c.num_kv_heads * hd;
  m.layers.resize(static_cast<size_t>(c.num_layers));
  std::vector<Wanted> wanted{{"model.embed_tokens.weight", {V, d}, &m.embed}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    GemmaLayerWeights& w = m.layers[static_cast<size_t>(i)];
    auto add = [&](const char* suffix, std::vector<int64_t> shape, const __nv_bfloat16** slot) {
      wanted.push_back({"model.layers." + std::to_string(i) + "." + suffix, std::move(shape), slot});
    };
    add("input_layernorm.weight", {d}, &w.base.input_layernorm);
    add("self_attn.q_proj.weight", {qw, d}, &w.base.q_proj);
    add("self_attn.k_proj.weight", {kvw, d}, &w.base.k_proj);
    add("self_attn.v_proj.weight", {kvw, d}, &w.base.v_proj);
    add("self_attn.o_proj.weight", {d, qw}, &w.base.o_proj);
    add("self_attn.q_norm.weight", {hd}, &w.q_norm);
    add("self_attn.k_norm.weight", {hd}, &w.k_norm);
    add("post_attention_layernorm.weight", {d}, &w.base.post_attention_layernorm);
    add("pre_feedforward_layernorm.weight", {d}, &w.pre_feedforward_layernorm);
    add("post_feedforward_layernorm.weight", {d}, &w.post_feedforward_layernorm);
    add("mlp.gate_proj.weight", {ff, d}, &w.base.gate_proj);
    add("mlp.up_proj.weight", {ff, d}, &w.base.up_proj);
    add("mlp.down_proj.weight", {d, ff}, &w.base.down_proj);
  }
  wanted.push_back({"model.norm.weight", {d}, &m.norm});
  if (!c.tie_word_embeddings) wanted.push_back({"lm_head.weight", {V, d}, &m.lm_head});
  std::vector<const TensorInfo*> tensors;
  uint64_t total = 0, done = 0;
  for (const Wanted& w : wanted) {
    tensors.push_back(&ckpt.get(w.name, DType::BF16, w.shape));
    total += tensors.back()->nbytes;
  }
  for (size_t t = 0; t < wanted.size(); ++t) {
    const TensorInfo& info = *tensors[t];
    auto* dst = allocate_device<__nv_bfloat16>(m.weight_memory, static_cast<size_t>(info.numel()),
                                               "GemmaModel", info.name);
    CUDA_CHECK(cudaMemcpy(dst, info.data, info.nbytes, cudaMemcpyHostToDevice));
    done += info.nbytes;
    if (progress) progress(done, total, info.name);
    *wanted[t].slot = dst;
  }
  if (c.tie_word_embeddings) m.lm_head = m.embed;

  // Local layers: plain RoPE with rope_local_theta; global layers: rope_theta, divided by the
  // linear rope_scaling factor when there is one.
  m.local_inv_freq = upload_inv_freq(
      m.weight_memory, kernels::rope_inv_freq(static_cast<int>(hd), c.rope_local_theta));
  std::vector<double> global = kernels::rope_inv_freq(static_cast<int>(hd), c.rope_theta);
  if (c.rope_scaling) {
    for (double& f : global) f /= c.rope_scaling->factor;
  }
  m.global_inv_freq = upload_inv_freq(m.weight_memory, global);
  // sqrt(d) rounded to bf16, the checkpoint's dtype, as transformers scales the embeddings.
  m.embed_scale = __bfloat162float(__float2bfloat16(static_cast<float>(std::sqrt(
      static_cast<double>(c.hidden_size)))));
  return GemmaModel(std::move(impl));
}

std::vector<float> GemmaModel::forward(const std::vector<int32_t>& tokens, ForwardCapture* capture) {
  Impl& m = *impl_;
  check_token_ids(m.config, tokens, "GemmaModel::forward");
  const int s = static_cast<int>(tokens.size());
  m.reserve(s);
  CUDA_CHECK(cudaMemcpy(m.ids, tokens.data(), tokens.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  return m.run(m.x, s, capture, [&](int i) {
    gemma_decoder_layer(m.config, i, m.layers[static_cast<size_t>(i)], {m.local_cos, m.local_sin},
                        {m.global_cos, m.global_sin}, m.x, m.buffers, s);
  });
}

void GemmaModel::enable_cache(int max_positions) {
  Impl& m = *impl_;
  const ModelConfig& c = m.config;
  const int context = static_cast<int>(c.max_position_embeddings);
  if (max_positions < 0 || max_positions > context) {
    throw std::invalid_argument("GemmaModel::enable_cache: max_positions must be in [0, " +
                                std::to_string(context) + "] (0: the context); got " +
                                std::to_string(max_positions));
  }
  m.local_cache.reset();
  m.global_cache.reset();
  m.cached.clear();
  m.max_positions = max_positions > 0 ? max_positions : context;
  int local = 0, global = 0;
  m.kind_index.assign(static_cast<size_t>(c.num_layers), 0);
  for (int i = 0; i < static_cast<int>(c.num_layers); ++i)
    m.kind_index[static_cast<size_t>(i)] = c.is_sliding(i) ? local++ : global++;
  const int h_k = static_cast<int>(c.num_kv_heads), h_d = static_cast<int>(c.head_dim);
  // A local layer sees at most sliding_window positions: its ring needs no more slots (and no
  // more than the longest sequence).
  if (local > 0) {
    const int ring = std::min(static_cast<int>(c.sliding_window), m.max_positions);
    m.local_cache = std::make_unique<ContiguousKvCache>(KvCacheShape{local, h_k, h_d}, ring);
  }
  if (global > 0) {
    m.global_cache =
        std::make_unique<ContiguousKvCache>(KvCacheShape{global, h_k, h_d}, m.max_positions);
  }
  if (!m.x1) {
    const size_t d = static_cast<size_t>(c.hidden_size);
    auto one = [&](size_t n, const std::string& what) {
      return allocate_device<float>(m.step_memory, n, "GemmaModel", what);
    };
    m.x1 = one(d, "the decode step's residual stream");
    allocate_layer_buffers(m.step, c, 1, false, "decode ", one);
  }
}

bool GemmaModel::has_cache() const { return impl_->max_positions > 0; }

int GemmaModel::local_ring_slots() const {
  return impl_->local_cache ? impl_->local_cache->capacity() : 0;
}

std::string GemmaModel::describe_cache() const {
  const Impl& m = *impl_;
  if (!has_cache()) return "none (every step runs the whole sequence)";
  const size_t bytes = (m.local_cache ? m.local_cache->bytes() : 0) +
                       (m.global_cache ? m.global_cache->bytes() : 0);
  auto layers = [](int n, const char* kind) {
    return std::to_string(n) + " " + kind + (n == 1 ? " layer" : " layers");
  };
  return layers(m.local_cache ? m.local_cache->shape().num_layers : 0, "local") + " x a ring of " +
         std::to_string(local_ring_slots()) + " slots, " +
         layers(m.global_cache ? m.global_cache->shape().num_layers : 0, "global") + " x " +
         std::to_string(m.max_positions) + " positions; " + std::to_string((bytes + 1023) / 1024) +
         " KiB of K and V";
}

std::vector<float> GemmaModel::download_cache(int layer, bool values) const {
  const Impl& m = *impl_;
  if (!has_cache()) throw std::logic_error("GemmaModel::download_cache: no cache (enable_cache)");
  if (layer < 0 || layer >= m.config.num_layers) {
    throw std::out_of_range("GemmaModel::download_cache: layer " + std::to_string(layer) +
                            " outside [0, " + std::to_string(m.config.num_layers) + ")");
  }
  const int j = m.kind_index[static_cast<size_t>(layer)];
  return m.config.is_sliding(layer) ? m.local_cache->download(j, values)
                                    : m.global_cache->download(j, values);
}

const std::vector<int32_t>& GemmaModel::cached_ids() const { return impl_->cached; }

std::vector<float> GemmaModel::prefill(const std::vector<int32_t>& tokens, ForwardCapture* capture) {
  Impl& m = *impl_;
  if (!has_cache()) throw std::logic_error("GemmaModel::prefill: no cache; call enable_cache first");
  check_token_ids(m.config, tokens, "GemmaModel::prefill");
  m.cached.clear();
  const int s = static_cast<int>(tokens.size());
  if (s > m.max_positions) {
    throw std::length_error("GemmaModel::prefill: a prompt of " + std::to_string(s) +
                            " tokens does not fit the cache's " +
                            std::to_string(m.max_positions) + " positions");
  }
  const nvtx::Range range("prefill s=", s);
  m.reserve(s);
  CUDA_CHECK(cudaMemcpy(m.ids, tokens.data(), tokens.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  std::vector<float> out = m.run(m.x, s, capture, [&](int i) {
    gemma_prefill_layer(m.config, i, m.layers[static_cast<size_t>(i)], {m.local_cos, m.local_sin},
                        {m.global_cos, m.global_sin}, m.cache_view(i), m.x, m.buffers, s);
  });
  m.cached = tokens;
  return out;
}

std::vector<float> GemmaModel::decode(int32_t token) {
  Impl& m = *impl_;
  if (!has_cache()) throw std::logic_error("GemmaModel::decode: no cache; call enable_cache first");
  if (m.cached.empty()) {
    throw std::logic_error("GemmaModel::decode: the cache is empty; prefill a prompt first");
  }
  check_token_id(m.config, token, m.cached.size(), "GemmaModel::decode");
  const int pos = static_cast<int>(m.cached.size());
  if (pos >= m.max_positions) {
    throw std::length_error("GemmaModel::decode: position " + std::to_string(pos) +
                            " does not fit the cache's " + std::to_string(m.max_positions) +
                            " positions");
  }
  const nvtx::Range range("decode pos=", pos);
  m.reserve_rope(pos + 1);  // the tables' row pos; the activations of one token exist already
  CUDA_CHECK(cudaMemcpy(m.ids, &token, sizeof token, cudaMemcpyHostToDevice));
  std::vector<float> out;
  try {
    out = m.run(m.x1, 1, nullptr, [&](int i) {
      gemma_decode_layer(m.config, i, m.layers[static_cast<size_t>(i)], {m.local_cos, m.local_sin},
                         {m.global_cos, m.global_sin}, m.cache_view(i), pos, m.x1, m.step);
    });
  } catch (...) {
    m.cached.clear();  // a half-written step leaves the cache inconsistent: start over
    throw;
  }
  m.cached.push_back(token);
  return out;
}

std::vector<float> GemmaModel::logits(const std::vector<int32_t>& ids) {
  Impl& m = *impl_;
  if (!has_cache()) return forward(ids);
  const std::vector<int32_t>& c = m.cached;
  if (!c.empty() && ids.size() == c.size() + 1 && std::equal(c.begin(), c.end(), ids.begin())) {
    return decode(ids.back());
  }
  return prefill(ids);
}

}  // namespace clockwork
