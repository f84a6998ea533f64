// The reference Llama and Gemma 3 forward passes. Llama is chained from the operators in ops.h exactly in the course's
// block order:
//   x = embed(ids)
//   per layer:  a = RMSNorm(x; input_layernorm) -> q,k,v = a·W_{q,k,v}ᵀ -> RoPE(q), RoPE(k)
//               -> o = causal GQA attention -> x += o·W_oᵀ
//               -> f = RMSNorm(x; post_attention_layernorm) -> x += (silu(f·W_gateᵀ) ⊙
//               f·W_upᵀ)·W_downᵀ
//   out: RMSNorm(last row of x; model.norm) -> logits = x_last·W_lmᵀ -> next id = argmax.
//
// Gemma 3 (config.family == gemma3) differs in these places, every RMSNorm scaling by (1 + w):
//   x = embed(ids) · sqrt(d)            (the factor rounded to the table's dtype)
//   per layer:  a = RMSNorm(x; input_layernorm) -> q,k,v = a·W_{q,k,v}ᵀ
//               -> q = RMSNorm_per_head(q; q_norm), k = RMSNorm_per_head(k; k_norm)   (QK-norm)
//               -> RoPE(q), RoPE(k) with the layer's base (local: rope_local_theta)
//               -> o = causal GQA attention, scores · query_pre_attn_scalar^(-1/2), local layers
//                  seeing the last sliding_window positions only
//               -> x += RMSNorm(o·W_oᵀ; post_attention_layernorm)
//               -> f = RMSNorm(x; pre_feedforward_layernorm)
//               -> x += RMSNorm((gelu_tanh(f·W_gateᵀ) ⊙ f·W_upᵀ)·W_downᵀ; post_feedforward_layernorm)
//   out: as Llama, lm_head tied to the embeddings (not scaled).
//
// Precision policy: weights stay in the checkpoint's dtype (bf16 for Llama-3) wherever the lookup
// keeps them, and each weight is widened to fp32 only while its own op runs, so an 8B model needs
// its 16 GB of bf16 plus about one layer's worth of fp32 temporaries. Activations and every
// accumulation are fp32. Kernels are compared against these fp32 values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "kernels/model_config.h"
#include "reference/ops.h"

namespace clockwork {
class Checkpoint;
struct TensorInfo;
struct TensorData;
}  // namespace clockwork

namespace clockwork::ref {

/// Returns the tensor stored under a HuggingFace name (e.g. "model.layers.0.mlp.up_proj.weight"),
/// or an undefined tensor when there is none. Any floating dtype is accepted.
using WeightLookup = std::function<torch::Tensor(const std::string& name)>;

/// "model.layers.{layer}.{suffix}", e.g. layer_weight_name(3, "self_attn.q_proj.weight").
std::string layer_weight_name(int64_t layer, const std::string& suffix);

/// One checkpoint tensor: its HuggingFace name and shape.
struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
};

/// Every tensor a checkpoint of this configuration holds, in checkpoint order (lm_head.weight only
/// when the embeddings are not tied; Gemma 3 adds q_norm and k_norm [h_d] and the
/// pre_feedforward_layernorm and post_feedforward_layernorm [d] of every layer).
std::vector<WeightSpec> weight_specs(const ModelConfig& config);

/// Random bf16 weights for every name in weight_specs(config), seeded, scaled so that activations
/// stay O(1) through the layers: projections N(0, 1/in_features), norms 1 + N(0, 0.1²) (Gemma 3,
/// whose norms scale by 1 + w: N(0, 0.1²)), embeddings N(0, 1). For tests of small models.
std::map<std::string, torch::Tensor> random_weights(const ModelConfig& config, uint64_t seed);

/// A lookup over a name -> tensor map (undefined tensor for a missing name).
WeightLookup lookup_from_map(std::map<std::string, torch::Tensor> weights);

/// A checkpoint tensor as a torch tensor of its own dtype (bf16, f16 or f32) over the mapped
/// bytes, copied only when the file does not align it to its element size. The Checkpoint must
/// outlive the tensor.
torch::Tensor as_torch(const TensorInfo& tensor);

/// The other way: `tensor` as checkpoint data for write_safetensors(), F32 when it is fp32 and
/// BF16 otherwise (rounded to nearest even). For tests that write the weights they check against.
TensorData to_tensor_data(const std::string& name, const torch::Tensor& tensor);

/// Every tensor of an opened checkpoint through as_torch() (undefined tensor for a missing
/// name). `checkpoint` must outlive the lookup and the tensors it returns.
WeightLookup checkpoint_lookup(const Checkpoint& checkpoint);

/// What to keep besides the per-layer outputs.
struct ForwardOptions {
  bool capture = false;                 ///< fill ForwardResult::layers
  std::vector<int64_t> capture_layers;  ///< with capture: only these layers (empty = all)
};

/// Intermediate values inside one decoder layer (s = sequence length).
struct LayerCapture {
  int64_t layer = -1;
  torch::Tensor attn_norm;      // [s, d]        RMSNorm(x; input_layernorm)
  torch::Tensor q_proj;         // [s, h*h_d]    attn_norm · W_qᵀ, before RoPE
  torch::Tensor k_proj;         // [s, h_k*h_d]  attn_norm · W_kᵀ, before RoPE
  torch::Tensor q;              // [s, h*h_d]    after RoPE
  torch::Tensor k;              // [s, h_k*h_d]  after RoPE
  torch::Tensor v;              // [s, h_k*h_d]  attn_norm · W_vᵀ
  torch::Tensor attn;           // [s, h*h_d]    attention output, heads concatenated
  torch::Tensor attn_out;       // [s, d]        attn · W_oᵀ (before the residual add)
  torch::Tensor attn_residual;  // [s, d]        x + attn_out
  torch::Tensor ffn_norm;       // [s, d]        RMSNorm(attn_residual; post_attention_layernorm)
  torch::Tensor ffn_hidden;     // [s, d_ff]     silu(gate) ⊙ up
  torch::Tensor ffn_out;        // [s, d]        ffn_hidden · W_downᵀ (before the residual add)
  // Gemma 3 only (undefined for Llama). There attn_residual = x + attn_post_norm, ffn_norm is
  // RMSNorm(attn_residual; pre_feedforward_layernorm), ffn_hidden is gelu_tanh(gate) ⊙ up and the
  // layer's output is attn_residual + ffn_post_norm.
  torch::Tensor q_normed;        // [s, h*h_d]    QK-norm of q_proj, before RoPE
  torch::Tensor k_normed;        // [s, h_k*h_d]  QK-norm of k_proj, before RoPE
  torch::Tensor attn_post_norm;  // [s, d]        RMSNorm(attn_out; post_attention_layernorm)
  torch::Tensor ffn_post_norm;   // [s, d]        RMSNorm(ffn_out; post_feedforward_layernorm)
};

/// Result of one full forward pass over s tokens.
struct ForwardResult {
  torch::Tensor embeddings;           // [s, d]  input of layer 0
  std::vector<torch::Tensor> hidden;  // L × [s, d]  residual stream after each decoder layer
  std::vector<LayerCapture> layers;   // captured layers, in layer order (empty without capture)
  torch::Tensor final_norm_last;      // [d]  RMSNorm(last row; model.norm.weight)
  torch::Tensor logits;               // [V]  logits of the last position
  int64_t next_token = -1;            // argmax(logits)
};

/// Greedy generation without a KV cache.
struct GenerateResult {
  std::vector<int64_t> tokens;        // the new tokens, in order
  std::vector<torch::Tensor> logits;  // [V] per step: the logits each token was chosen from
};

/// A Llama or Gemma 3 model (config.family) over a weight lookup. Shapes are checked on every use against the config; a
/// missing or misshapen weight throws std::invalid_argument with the name, Expected and Actual.
class Model {
 public:
  Model(ModelConfig config, WeightLookup weights);

  const ModelConfig& config() const { return config_; }
  int64_t head_dim() const { return head_dim_; }

  /// Full forward pass.  ids [s] int64 (s >= 1).
  ForwardResult forward(const torch::Tensor& ids, const ForwardOptions& options = {}) const;
  ForwardResult forward(const std::vector<int64_t>& ids, const ForwardOptions& options = {}) const;

  /// Appends up to n_new argmax tokens, re-running the whole sequence for each one (s, s+1, ...).
  /// Stops early after emitting any id in stop_ids (that id is included in the result).
  GenerateResult generate_greedy(const std::vector<int64_t>& prompt, int64_t n_new,
                                 const std::vector<int64_t>& stop_ids = {}) const;

  /// The named weight, checked against `shape`.
  torch::Tensor weight(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  ForwardResult forward_gemma3(const torch::Tensor& ids, const ForwardOptions& options) const;

  ModelConfig config_;
  WeightLookup weights_;
  int64_t head_dim_ = 0;
};

}  // namespace clockwork::ref
