/// @file model.cpp
/// Milestone 3: Model (model.h): loading a checkpoint onto the device and running it.
///
/// Loading validates every tensor (name, dtype bf16, shape from config.json) before the first
/// byte is copied, so a bad checkpoint fails in a second, not after minutes of copying. Weights
/// stay bf16 on the device (one allocation each). Activations are fp32 and sized for a capacity
/// of tokens that grows when a longer sequence comes (generation re-runs s, s+1, ... tokens), and
/// the RoPE tables of positions 0 .. capacity−1 are computed once per growth.
#include "milestones/milestone3/model.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"
#include "milestones/milestone1/safetensors.h"
#include "milestones/milestone3/decoder.h"

namespace clockwork {

namespace {

// Host-to-device copies go in pieces of this size so that progress moves during large tensors
// (Llama-3-8B's embedding table and lm_head are 1 GB each).
constexpr size_t kCopyChunk = size_t{64} << 20;

std::string layer_name(int64_t layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

}  // namespace

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
  int capacity = 0;
  std::vector<void*> activation_memory;
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

  static void free_all(std::vector<void*>& memory) {
    for (void* p : memory) cudaFree(p);  // errors ignored: a destructor cannot report them
    memory.clear();
  }

  template <class T>
  static T* allocate(std::vector<void*>& memory, size_t count, const std::string& what) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, count * sizeof(T));
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      throw CudaError(err, "Model: cannot allocate " + std::to_string(count * sizeof(T)) +
                               " bytes on the device for " + what + ": " + cudaGetErrorString(err));
    }
    memory.push_back(p);
    return static_cast<T*>(p);
  }

  // Makes the activations hold at least s tokens.
  void reserve(int s) {
    if (s <= capacity) return;
    const ModelConfig& c = config;
    const int max_tokens = static_cast<int>(c.max_position_embeddings);
    const int cap = std::min(max_tokens, std::max({s, 2 * capacity, 16}));
    free_all(activation_memory);
    capacity = 0;
    const size_t n = static_cast<size_t>(cap);
    const size_t d = static_cast<size_t>(c.hidden_size),
                 ff = static_cast<size_t>(c.intermediate_size);
    const size_t q_width = static_cast<size_t>(c.num_heads * c.head_dim);
    const size_t kv_width = static_cast<size_t>(c.num_kv_heads * c.head_dim);
    const size_t half = static_cast<size_t>(c.head_dim / 2);
    auto& m = activation_memory;
    ids = allocate<int32_t>(m, n, "token ids");
    positions = allocate<int32_t>(m, n, "positions");
    rope_cos = allocate<float>(m, n * half, "RoPE cos table");
    rope_sin = allocate<float>(m, n * half, "RoPE sin table");
    x = allocate<float>(m, n * d, "the residual stream");
    buffers.attn_norm = allocate<float>(m, n * d, "attn_norm");
    buffers.q = allocate<float>(m, n * q_width, "q");
    buffers.k = allocate<float>(m, n * kv_width, "k");
    buffers.v = allocate<float>(m, n * kv_width, "v");
    buffers.scores = allocate<float>(m, n * n, "attention scores");
    buffers.attn = allocate<float>(m, n * q_width, "attn");
    buffers.attn_out = allocate<float>(m, n * d, "attn_out");
    buffers.ffn_norm = allocate<float>(m, n * d, "ffn_norm");
    buffers.gate = allocate<float>(m, n * ff, "gate");
    buffers.up = allocate<float>(m, n * ff, "up");
    buffers.ffn_hidden = allocate<float>(m, n * ff, "ffn_hidden");
    buffers.ffn_out = allocate<float>(m, n * d, "ffn_out");
    x_last_norm = allocate<float>(m, d, "the last row's final norm");
    logits = allocate<float>(m, static_cast<size_t>(c.vocab_size), "logits");
    next = allocate<int32_t>(m, 1, "the next token");

    // The tables of a position do not depend on the sequence length: compute them for all of
    // the capacity once.
    std::vector<int32_t> pos(n);
    for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i);
    CUDA_CHECK(cudaMemcpy(positions, pos.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
    kernels::rope_tables(positions, inv_freq, rope_cos, rope_sin, cap, static_cast<int>(half));
    capacity = cap;
  }

  void check_ids(const std::vector<int32_t>& tokens) const {
    if (tokens.empty())
      throw std::invalid_argument("Model::forward: ids is empty; give at least one token");
    if (static_cast<int64_t>(tokens.size()) > config.max_position_embeddings) {
      throw std::invalid_argument(
          "Model::forward: " + std::to_string(tokens.size()) + " tokens exceed the context of " +
          std::to_string(config.max_position_embeddings) + " positions (max_position_embeddings)");
    }
    for (size_t p = 0; p < tokens.size(); ++p) {
      if (tokens[p] < 0 || tokens[p] >= config.vocab_size) {
        throw std::invalid_argument("Model::forward: token id " + std::to_string(tokens[p]) +
                                    " at position " + std::to_string(p) +
                                    " is outside the vocabulary [0, " +
                                    std::to_string(config.vocab_size) + ")");
      }
    }
  }

  // The whole forward pass; the logits stay on the device (in `logits`).
  void run(const std::vector<int32_t>& tokens, ForwardCapture* capture) {
    check_ids(tokens);
    const ModelConfig& c = config;
    const int s = static_cast<int>(tokens.size());
    const int d = static_cast<int>(c.hidden_size);
    reserve(s);
    CUDA_CHECK(
        cudaMemcpy(ids, tokens.data(), tokens.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    kernels::embedding(ids, embed, x, s, d, static_cast<int>(c.vocab_size));

    AfterLayer after_layer;
    if (capture) {
      capture->layer_outputs.assign(static_cast<size_t>(c.num_layers), {});
      after_layer = [&](int layer) {
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
  const ModelConfig& c = m.config;
  const Checkpoint ckpt = Checkpoint::open(dir);

  // Every tensor the model reads, with the shape config.json implies and where its device
  // pointer goes.
  struct Wanted {
    std::string name;
    std::vector<int64_t> shape;
    const __nv_bfloat16** slot;
  };
  const int64_t d = c.hidden_size, ff = c.intermediate_size, V = c.vocab_size;
  const int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
  m.layers.resize(static_cast<size_t>(c.num_layers));
  std::vector<Wanted> wanted{{"model.embed_tokens.weight", {V, d}, &m.embed}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& w = m.layers[static_cast<size_t>(i)];
    wanted.push_back({layer_name(i, "input_layernorm.weight"), {d}, &w.input_layernorm});
    wanted.push_back({layer_name(i, "self_attn.q_proj.weight"), {q_width, d}, &w.q_proj});
    wanted.push_back({layer_name(i, "self_attn.k_proj.weight"), {kv_width, d}, &w.k_proj});
    wanted.push_back({layer_name(i, "self_attn.v_proj.weight"), {kv_width, d}, &w.v_proj});
    wanted.push_back({layer_name(i, "self_attn.o_proj.weight"), {d, q_width}, &w.o_proj});
    wanted.push_back(
        {layer_name(i, "post_attention_layernorm.weight"), {d}, &w.post_attention_layernorm});
    wanted.push_back({layer_name(i, "mlp.gate_proj.weight"), {ff, d}, &w.gate_proj});
    wanted.push_back({layer_name(i, "mlp.up_proj.weight"), {ff, d}, &w.up_proj});
    wanted.push_back({layer_name(i, "mlp.down_proj.weight"), {d, ff}, &w.down_proj});
  }
  wanted.push_back({"model.norm.weight", {d}, &m.norm});
  // Tied checkpoints (Llama 3.2 1B/3B) reuse the embedding table; Llama-3-8B has its own head.
  if (!c.tie_word_embeddings) wanted.push_back({"lm_head.weight", {V, d}, &m.lm_head});

  // Validate everything first: get() throws CheckpointError naming the file and the tensor, with
  // the expected and actual dtype and shape.
  std::vector<const TensorInfo*> tensors;
  uint64_t total = 0;
  for (const Wanted& w : wanted) {
    tensors.push_back(&ckpt.get(w.name, DType::BF16, w.shape));
    total += tensors.back()->nbytes;
  }

  uint64_t done = 0;
  for (size_t t = 0; t < wanted.size(); ++t) {
    const TensorInfo& info = *tensors[t];
    auto* dst = Impl::allocate<__nv_bfloat16>(m.weight_memory, static_cast<size_t>(info.numel()),
                                              info.name);
    auto* bytes = reinterpret_cast<unsigned char*>(dst);
    for (size_t off = 0; off < info.nbytes; off += kCopyChunk) {
      const size_t n = std::min(kCopyChunk, info.nbytes - off);
      CUDA_CHECK(cudaMemcpy(bytes + off, info.data + off, n, cudaMemcpyHostToDevice));
      done += n;
      if (progress) progress(done, total, info.name);
    }
    *wanted[t].slot = dst;
  }
  if (c.tie_word_embeddings) m.lm_head = m.embed;

  kernels::RopeScalingParams scaling;
  if (c.rope_scaling) {
    scaling.factor = c.rope_scaling->factor;
    scaling.low_freq_factor = c.rope_scaling->low_freq_factor;
    scaling.high_freq_factor = c.rope_scaling->high_freq_factor;
    scaling.original_max_position_embeddings =
        static_cast<double>(c.rope_scaling->original_max_position_embeddings);
  }
  const std::vector<double> inv_freq = kernels::rope_inv_freq(
      static_cast<int>(c.head_dim), c.rope_theta, c.rope_scaling ? &scaling : nullptr);
  m.inv_freq = Impl::allocate<double>(m.weight_memory, inv_freq.size(), "RoPE inverse frequencies");
  CUDA_CHECK(cudaMemcpy(m.inv_freq, inv_freq.data(), inv_freq.size() * sizeof(double),
                        cudaMemcpyHostToDevice));
  return Model(std::move(impl));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const ModelConfig& Model::config() const {
  return impl_->config;
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
  kernels::argmax(impl_->logits, vocab, impl_->next);
  int32_t id = -1;
  CUDA_CHECK(cudaMemcpy(&id, impl_->next, sizeof(int32_t), cudaMemcpyDeviceToHost));
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
