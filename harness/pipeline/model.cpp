/// @file model.cpp
/// Model (model.h): loading a checkpoint onto the device and running it.
///
/// Loading validates every tensor (name, dtype bf16, shape from config.json) before the first
/// byte is copied, so a bad checkpoint fails in a second, not after minutes of copying. Weights
/// stay bf16 on the device (one allocation each). Activations are fp32 and sized for a capacity
/// of tokens that grows when a longer sequence comes (generation re-runs s, s+1, ... tokens), and
/// the RoPE tables of positions 0 .. capacity−1 are computed once per growth.
///
/// NVTX ranges (harness/profiling/nvtx.h) name the pieces of a forward pass for nsys:
/// "forward s=N" around "embedding", "layer 0" … "layer L−1" (each with its steps, decoder.cpp),
/// "final_norm" and "lm_head"; "argmax" in next_token(); "rope tables" and "load checkpoint".
#include "harness/pipeline/model.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
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

namespace {


}  // namespace

void check_token_id(const ModelConfig& config, int32_t id, size_t position, const char* who) {
  if (id < 0 || id >= config.vocab_size) {
    throw std::invalid_argument(std::string(who) + ": token id " + std::to_string(id) +
                                " at position " + std::to_string(position) +
                                " is outside the vocabulary [0, " +
                                std::to_string(config.vocab_size) + ")");
  }
}

void check_token_ids(const ModelConfig& config, const std::vector<int32_t>& ids, const char* who) {
  if (ids.empty()) {
    throw std::invalid_argument(std::string(who) + ": ids is empty; give at least one token");
  }
  if (static_cast<int64_t>(ids.size()) > config.max_position_embeddings) {
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(ids.size()) +
                                " tokens exceed the context of " +
                                std::to_string(config.max_position_embeddings) +
                                " positions (max_position_embeddings)");
  }
  for (size_t p = 0; p < ids.size(); ++p) check_token_id(config, ids[p], p, who);
}

struct Model::Impl {
  ModelConfig config;

  // Weights (device, bf16). lm_head points at embed when the embeddings are tied.
  std::vector<void*> weight_memory;
  const __nv_bfloat16* embed = nullptr;    // [V, d]
  std::vector<LayerWeights> layers;        // [L]
  const __nv_bfloat16* norm = nullptr;     // [d]
  const __nv_bfloat16* lm_head = nullptr;  // [V, d]
  double* inv_freq = nullptr;              // [h_d/2] RoPE inverse frequencies

  // Activations (device, fp32), sized for `capacity` tokens.
  bool fused_attention = false;  // no [s, s] scores: decoder_layer runs flash_attention
  int capacity = 0;
  std::vector<void*> activation_memory;
  size_t activation_bytes = 0;  // sum of the sizes in activation_memory
  int32_t* ids = nullptr;        // [capacity]
  int32_t* positions = nullptr;  // [capacity] 0, 1, 2, ...
  float* rope_cos = nullptr;     // [capacity, h_d/2]
  float* rope_sin = nullptr;     // [capacity, h_d/2]
  float* x = nullptr;            // [capacity, d] residual stream
  LayerBuffers buffers;
  float* x_last_norm = nullptr;  // [d]
  float* logits = nullptr;       // [V]
  int32_t* next = nullptr;       // [1] argmax

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    free_all(activation_memory);
    free_all(weight_memory);
  }

  static void free_all(std::vector<void*>& memory) { free_device_memory(memory); }

  void free_activations() {
    free_all(activation_memory);
    activation_bytes = 0;
    capacity = 0;
  }

  // An activation buffer, counted in activation_bytes.
  template <class T>
  T* activation(size_t count, const std::string& what) {
    T* p = allocate<T>(activation_memory, count, what);
    activation_bytes += count * sizeof(T);
    return p;
  }

  template <class T>
  static T* allocate(std::vector<void*>& memory, size_t count, const std::string& what) {
    return allocate_device<T>(memory, count, "Model", what);
  }

  // Makes the activations hold at least s tokens.
  void reserve(int s) {
    if (s <= capacity) return;
    const ModelConfig& c = config;
    const int max_tokens = static_cast<int>(c.max_position_embeddings);
    const int cap = std::min(max_tokens, std::max({s, 2 * capacity, 16}));
    free_activations();
    const size_t n = static_cast<size_t>(cap);
    const size_t d = static_cast<size_t>(c.hidden_size);
    const size_t half = static_cast<size_t>(c.head_dim / 2);
    ids = activation<int32_t>(n, "token ids");
    positions = activation<int32_t>(n, "positions");
    rope_cos = activation<float>(n * half, "RoPE cos table");
    rope_sin = activation<float>(n * half, "RoPE sin table");
    x = activation<float>(n * d, "the residual stream");
    // The fused attention needs no [s, s] workspace: the memory of a forward pass is O(s).
    allocate_layer_buffers(
        buffers, c, n, !fused_attention, "",
        [&](size_t count, const std::string& what) { return activation<float>(count, what); });
    x_last_norm = activation<float>(d, "the last row's final norm");
    logits = activation<float>(static_cast<size_t>(c.vocab_size), "logits");
    next = activation<int32_t>(1, "the next token");

    // The tables of a position do not depend on the sequence length: compute them for all of
    // the capacity once.
    const nvtx::Range range("rope tables");
    std::vector<int32_t> pos(n);
    for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i);
    CUDA_CHECK(cudaMemcpy(positions, pos.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
    kernels::rope_tables(positions, inv_freq, rope_cos, rope_sin, cap, static_cast<int>(half));
    capacity = cap;
  }

  // The whole forward pass; the logits stay on the device (in `logits`).
  void run(const std::vector<int32_t>& tokens, ForwardCapture* capture) {
    check_token_ids(config, tokens, "Model::forward");
    const ModelConfig& c = config;
    const int s = static_cast<int>(tokens.size());
    const int d = static_cast<int>(c.hidden_size);
    const nvtx::Range range("forward s=", s);
    reserve(s);
    {
      const nvtx::Range step("embedding");
      CUDA_CHECK(
          cudaMemcpy(ids, tokens.data(), tokens.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      kernels::embedding(ids, embed, x, s, d, static_cast<int>(c.vocab_size));
    }

    AfterLayer after_layer;
    if (capture) {
      capture->layer_outputs.assign(static_cast<size_t>(c.num_layers), {});
      after_layer = [&](int layer) {
        const nvtx::Range step("capture");
        std::vector<float>& out = capture->layer_outputs.at(static_cast<size_t>(layer));
        out.resize(static_cast<size_t>(s) * d);
        CUDA_CHECK(cudaMemcpy(out.data(), x, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
      };
    }
    run_layers(c, layers, {rope_cos, rope_sin}, x, buffers, s, nullptr, after_layer);
    output_logits(c, x, s, norm, lm_head, x_last_norm, logits);
    if (capture) {
      capture->final_norm_last.resize(static_cast<size_t>(d));
      CUDA_CHECK(cudaMemcpy(capture->final_norm_last.data(), x_last_norm,
                            static_cast<size_t>(d) * sizeof(float), cudaMemcpyDeviceToHost));
    }
  }
};

Model Model::load(const std::filesystem::path& dir, const LoadProgress& progress) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.config = ModelConfig::from_file(dir / "config.json");
  DeviceWeights w = load_device_weights(dir, m.config, m.weight_memory, progress, "Model");
  m.embed = w.embed;
  m.layers = std::move(w.layers);
  m.norm = w.norm;
  m.lm_head = w.lm_head;
  m.inv_freq = w.inv_freq;
  return Model(std::move(impl));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const ModelConfig& Model::config() const {
  return impl_->config;
}

void Model::use_fused_attention(bool fused) {
  if (fused == impl_->fused_attention) return;
  impl_->free_activations();
  impl_->fused_attention = fused;
}

bool Model::fused_attention() const {
  return impl_->fused_attention;
}

size_t Model::activation_bytes() const {
  return impl_->activation_bytes;
}

std::vector<float> Model::forward(const std::vector<int32_t>& ids, ForwardCapture* capture) {
  impl_->run(ids, capture);
  std::vector<float> logits(static_cast<size_t>(impl_->config.vocab_size));
  CUDA_CHECK(cudaMemcpy(logits.data(), impl_->logits, logits.size() * sizeof(float),
                        cudaMemcpyDeviceToHost));
  return logits;
}

int32_t Model::next_token(const std::vector<int32_t>& ids) {
  impl_->run(ids, nullptr);
  const int vocab = static_cast<int>(impl_->config.vocab_size);
  int32_t id = -1;
  {
    const nvtx::Range range("argmax");
    kernels::argmax(impl_->logits, vocab, impl_->next);
    CUDA_CHECK(cudaMemcpy(&id, impl_->next, sizeof(int32_t), cudaMemcpyDeviceToHost));
  }
  if (id < 0 || id >= vocab) {
    // argmax never picks NaN: an index outside the vocabulary means every logit was NaN, or
    // argmax did not write its result.
    throw std::runtime_error("Model::next_token: argmax gave index " + std::to_string(id) +
                             ", outside the vocabulary [0, " + std::to_string(vocab) +
                             "): the logits are all NaN or argmax wrote nothing");
  }
  return id;
}

}  // namespace clockwork
