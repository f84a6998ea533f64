/// @file weights.cpp
/// load_device_weights (weights.h): a checkpoint validated, then copied to the device.
#include "harness/model/weights.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/check/cuda_check.h"
#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"
#include "harness/model/config_check.h"
#include "harness/model/safetensors.h"

namespace clockwork {

namespace {

// Host-to-device copies go in pieces of this size so that progress moves during large tensors
// (Llama-3-8B's embedding table and lm_head are 1 GB each).
constexpr size_t kCopyChunk = size_t{64} << 20;

std::string layer_name(int64_t layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}


}  // namespace

DeviceWeights load_device_weights(const std::filesystem::path& dir, const ModelConfig& c,
                                  std::vector<void*>& memory, const LoadProgress& progress,
                                  const std::string& owner) {
  const nvtx::Range range("load checkpoint");
  // The Llama pipeline would run a Gemma checkpoint without its extra norms and masks and print
  // plausible nonsense: refuse it instead.
  if (c.family != ModelFamily::llama) {
    throw CheckpointError(owner + ": " + (dir / "config.json").string() + " describes a " +
                          family_name(c.family) +
                          " model (model_type); this pipeline runs the Llama family only");
  }
  const Checkpoint ckpt = Checkpoint::open(dir);
  check_config_fits_checkpoint(c, ckpt);  // before anything is sized from the config
  DeviceWeights m;

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
    auto* dst = allocate_device<__nv_bfloat16>(memory, static_cast<size_t>(info.numel()), owner, info.name);
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
  m.inv_freq = allocate_device<double>(memory, inv_freq.size(), owner, "RoPE inverse frequencies");
  CUDA_CHECK(cudaMemcpy(m.inv_freq, inv_freq.data(), inv_freq.size() * sizeof(double),
                        cudaMemcpyHostToDevice));
  return m;
}

}  // namespace clockwork
