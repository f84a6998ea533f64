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

  int capacity = 0;
  int32_t* ids = nullptr;
  int32_t* positions = nullptr;
  float *local_cos = nullptr, *local_sin = nullptr, *global_cos = nullptr, *global_sin = nullptr;
  float* x = nullptr;
  LayerBuffers buffers;
  float* x_last_norm = nullptr;
  float* logits = nullptr;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    free_device_memory(activation_memory);
    free_device_memory(weight_memory);
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
    const size_t n = static_cast<size_t>(cap), d = static_cast<size_t>(c.hidden_size),
                 ff = static_cast<size_t>(c.intermediate_size),
                 qw = static_cast<size_t>(c.num_heads * c.head_dim),
                 kvw = static_cast<size_t>(c.num_kv_heads * c.head_dim),
                 half = static_cast<size_t>(c.head_dim / 2);
    ids = activation<int32_t>(n, "token ids");
    positions = activation<int32_t>(n, "positions");
    local_cos = activation<float>(n * half, "local RoPE cos table");
    local_sin = activation<float>(n * half, "local RoPE sin table");
    global_cos = activation<float>(n * half, "global RoPE cos table");
    global_sin = activation<float>(n * half, "global RoPE sin table");
    x = activation<float>(n * d, "the residual stream");
    buffers.attn_norm = activation<float>(n * d, "attn_norm");
    buffers.q = activation<float>(n * qw, "q");
    buffers.k = activation<float>(n * kvw, "k");
    buffers.v = activation<float>(n * kvw, "v");
    buffers.scores = nullptr;  // the sliding-window attention needs no [s, s] workspace
    buffers.attn = activation<float>(n * qw, "attn");
    buffers.attn_out = activation<float>(n * d, "attn_out");
    buffers.ffn_norm = activation<float>(n * d, "ffn_norm");
    buffers.gate = activation<float>(n * ff, "gate");
    buffers.up = activation<float>(n * ff, "up");
    buffers.ffn_hidden = activation<float>(n * ff, "ffn_hidden");
    buffers.ffn_out = activation<float>(n * d, "ffn_out");
    x_last_norm = activation<float>(d, "the last row's final norm");
    logits = activation<float>(static_cast<size_t>(c.vocab_size), "logits");

    std::vector<int32_t> pos(n);
    for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i);
    CUDA_CHECK(cudaMemcpy(positions, pos.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
    kernels::rope_tables(positions, local_inv_freq, local_cos, local_sin, cap, static_cast<int>(half));
    kernels::rope_tables(positions, global_inv_freq, global_cos, global_sin, cap,
                         static_cast<int>(half));
    capacity = cap;
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
  const ModelConfig& c = m.config;
  if (tokens.empty()) throw std::invalid_argument("GemmaModel::forward: ids is empty");
  if (static_cast<int64_t>(tokens.size()) > c.max_position_embeddings) {
    throw std::invalid_argument("GemmaModel::forward: " + std::to_string(tokens.size()) +
                                " tokens, more than the context of " +
                                std::to_string(c.max_position_embeddings));
  }
  for (size_t p = 0; p < tokens.size(); ++p) {
    if (tokens[p] < 0 || tokens[p] >= c.vocab_size) {
      throw std::invalid_argument("GemmaModel::forward: token id " + std::to_string(tokens[p]) +
                                  " at position " + std::to_string(p) +
                                  " is outside the vocabulary [0, " +
                                  std::to_string(c.vocab_size) + ")");
    }
  }
  const int s = static_cast<int>(tokens.size());
  const int d = static_cast<int>(c.hidden_size), V = static_cast<int>(c.vocab_size);
  m.reserve(s);
  CUDA_CHECK(cudaMemcpy(m.ids, tokens.data(), tokens.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  {
    const nvtx::Range range("embedding");
    kernels::embedding(m.ids, m.embed, m.x, s, d, V);
    kernels::scale(m.x, m.embed_scale, static_cast<size_t>(s) * d);
  }
  if (capture) capture->layer_outputs.clear();
  for (int i = 0; i < static_cast<int>(c.num_layers); ++i) {
    const nvtx::Range range("layer", i);
    gemma_decoder_layer(c, i, m.layers[static_cast<size_t>(i)], {m.local_cos, m.local_sin},
                        {m.global_cos, m.global_sin}, m.x, m.buffers, s);
    if (capture) {
      std::vector<float> out(static_cast<size_t>(s) * d);
      CUDA_CHECK(cudaMemcpy(out.data(), m.x, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
      capture->layer_outputs.push_back(std::move(out));
    }
  }
  {
    const nvtx::Range range("output");
    kernels::rmsnorm_gemma(m.x + static_cast<size_t>(s - 1) * d, m.norm, m.x_last_norm, 1, d,
                           static_cast<float>(c.rms_norm_eps));
    kernels::lm_head(m.x_last_norm, m.lm_head, m.logits, V, d);
  }
  std::vector<float> logits(static_cast<size_t>(V));
  CUDA_CHECK(cudaMemcpy(logits.data(), m.logits, logits.size() * sizeof(float), cudaMemcpyDeviceToHost));
  if (capture) {
    capture->final_norm_last.resize(static_cast<size_t>(d));
    CUDA_CHECK(cudaMemcpy(capture->final_norm_last.data(), m.x_last_norm, d * sizeof(float),
                          cudaMemcpyDeviceToHost));
  }
  return logits;
}

}  // namespace clockwork
