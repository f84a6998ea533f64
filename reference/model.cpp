// The reference Llama forward pass (see model.h for the block order and the precision policy).
#include "reference/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/model/safetensors.h"
#include "reference/detail.h"

namespace clockwork::ref {

using detail::require;
using detail::shape_str;

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

bool captured(const ForwardOptions& options, int64_t layer) {
  if (!options.capture) return false;
  const auto& only = options.capture_layers;
  return only.empty() || std::find(only.begin(), only.end(), layer) != only.end();
}

int64_t derived_head_dim(const ModelConfig& c) {
  return c.head_dim > 0 ? c.head_dim : (c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
}

}  // namespace

std::string layer_weight_name(int64_t layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<WeightSpec> weight_specs(const ModelConfig& c) {
  const int64_t d = c.hidden_size;
  const int64_t hd = derived_head_dim(c);
  std::vector<WeightSpec> specs{{"model.embed_tokens.weight", {c.vocab_size, d}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto add = [&](const std::string& suffix, std::vector<int64_t> shape) {
      specs.push_back({layer_weight_name(i, suffix), std::move(shape)});
    };
    add("input_layernorm.weight", {d});
    add("self_attn.q_proj.weight", {c.num_heads * hd, d});
    add("self_attn.k_proj.weight", {c.num_kv_heads * hd, d});
    add("self_attn.v_proj.weight", {c.num_kv_heads * hd, d});
    add("self_attn.o_proj.weight", {d, c.num_heads * hd});
    if (c.is_gemma3()) {
      add("self_attn.q_norm.weight", {hd});
      add("self_attn.k_norm.weight", {hd});
    }
    add("post_attention_layernorm.weight", {d});
    if (c.is_gemma3()) {
      add("pre_feedforward_layernorm.weight", {d});
      add("post_feedforward_layernorm.weight", {d});
    }
    add("mlp.gate_proj.weight", {c.intermediate_size, d});
    add("mlp.up_proj.weight", {c.intermediate_size, d});
    add("mlp.down_proj.weight", {d, c.intermediate_size});
  }
  specs.push_back({"model.norm.weight", {d}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, d}});
  return specs;
}

std::map<std::string, torch::Tensor> random_weights(const ModelConfig& config, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::map<std::string, torch::Tensor> out;
  for (const WeightSpec& spec : weight_specs(config)) {
    torch::Tensor t = torch::randn(spec.shape, gen, torch::kFloat);
    if (spec.shape.size() == 1) {
      // Norm weights: a scale near 1 but not 1, so a missing γ shows. Gemma stores the scale
      // minus 1.
      t = (config.is_gemma3() ? 0.0 : 1.0) + 0.1 * t;
    } else if (spec.name != "model.embed_tokens.weight") {
      t = t / std::sqrt(static_cast<double>(spec.shape[1]));  // keeps x·wᵀ at the scale of x
    }
    out.emplace(spec.name, t.to(torch::kBFloat16));
  }
  return out;
}

WeightLookup lookup_from_map(std::map<std::string, torch::Tensor> weights) {
  return [w = std::move(weights)](const std::string& name) -> torch::Tensor {
    const auto it = w.find(name);
    return it == w.end() ? torch::Tensor() : it->second;
  };
}

torch::Tensor as_torch(const TensorInfo& t) {
  const torch::ScalarType type = t.dtype == DType::BF16  ? torch::kBFloat16
                                 : t.dtype == DType::F16 ? torch::kHalf
                                                         : torch::kFloat;
  const auto options = torch::TensorOptions().dtype(type);
  if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0) {
    return torch::from_blob(const_cast<std::byte*>(t.data), t.shape, options);
  }
  torch::Tensor copy = torch::empty(t.shape, options);
  std::memcpy(copy.data_ptr(), t.data, t.nbytes);
  return copy;
}

TensorData to_tensor_data(const std::string& name, const torch::Tensor& tensor) {
  const bool f32 = tensor.scalar_type() == torch::kFloat;
  const torch::Tensor t = tensor.to(torch::kCPU, f32 ? torch::kFloat : torch::kBFloat16).contiguous();
  TensorData td;
  td.name = name;
  td.dtype = f32 ? DType::F32 : DType::BF16;
  td.shape.assign(t.sizes().begin(), t.sizes().end());
  td.bytes.resize(static_cast<size_t>(t.numel()) * t.element_size());
  std::memcpy(td.bytes.data(), t.data_ptr(), td.bytes.size());
  return td;
}

WeightLookup checkpoint_lookup(const Checkpoint& checkpoint) {
  return [&checkpoint](const std::string& name) -> torch::Tensor {
    if (!checkpoint.contains(name)) return {};
    return as_torch(checkpoint.get(name));
  };
}

Model::Model(ModelConfig config, WeightLookup weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      head_dim_(derived_head_dim(config_)) {
  const ModelConfig& c = config_;
  require(static_cast<bool>(weights_), "Model: no weight lookup given");
  require(c.hidden_size > 0 && c.num_layers > 0 && c.num_heads > 0 && c.num_kv_heads > 0 &&
              c.intermediate_size > 0 && c.vocab_size > 0,
          "Model: hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size and "
          "vocab_size must all be positive");
  require(c.num_heads % c.num_kv_heads == 0, "Model: num_heads must be a multiple of num_kv_heads");
  require(head_dim_ > 0 && head_dim_ % 2 == 0, "Model: head_dim must be positive and even");
}

torch::Tensor Model::weight(const std::string& name, const std::vector<int64_t>& shape) const {
  const torch::Tensor w = weights_(name);
  if (!w.defined()) throw std::invalid_argument("weight " + name + ": missing");
  if (w.sizes() != c10::IntArrayRef(shape)) {
    throw std::invalid_argument("weight " + name + ": Expected: " + shape_str(shape) +
                                " Actual: " + shape_str(w));
  }
  require(w.is_floating_point(), "weight " + name + ": expected a floating-point tensor");
  return w;
}

ForwardResult Model::forward(const std::vector<int64_t>& ids, const ForwardOptions& options) const {
  return forward(torch::tensor(ids, torch::kLong), options);
}

ForwardResult Model::forward(const torch::Tensor& ids, const ForwardOptions& options) const {
  require(ids.dim() == 1 && ids.size(0) >= 1,
          "forward: ids must be [s] with s >= 1, got " + shape_str(ids));
  if (config_.is_gemma3()) return forward_gemma3(ids, options);
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size;
  const int64_t h = c.num_heads;
  const int64_t hk = c.num_kv_heads;
  const int64_t hd = head_dim_;
  const int64_t s = ids.size(0);

  ForwardResult r;
  const torch::Tensor embed = weight("model.embed_tokens.weight", {c.vocab_size, d});
  torch::Tensor x = ref::embedding(ids, embed);  // [s, d]
  r.embeddings = x;
  // One table for every layer: positions 0 .. s−1 for Q and K alike.
  const RopeTables rope = ref::rope_tables(s, hd, c.rope_theta, c.rope_scaling);

  auto captured = [&](int64_t layer) {
    if (!options.capture) return false;
    const auto& only = options.capture_layers;
    return only.empty() || std::find(only.begin(), only.end(), layer) != only.end();
  };

  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto w = [&](const std::string& suffix, std::vector<int64_t> shape) {
      return weight(layer_weight_name(i, suffix), shape);
    };
    // Attention block.
    const torch::Tensor attn_norm =
        ref::rms_norm(x, w("input_layernorm.weight", {d}), c.rms_norm_eps);
    const torch::Tensor q_proj = ref::linear(attn_norm, w("self_attn.q_proj.weight", {h * hd, d}));
    const torch::Tensor k_proj = ref::linear(attn_norm, w("self_attn.k_proj.weight", {hk * hd, d}));
    const torch::Tensor v = ref::linear(attn_norm, w("self_attn.v_proj.weight", {hk * hd, d}));
    const torch::Tensor q = ref::apply_rope(q_proj, rope, h);
    const torch::Tensor k = ref::apply_rope(k_proj, rope, hk);
    const torch::Tensor attn = ref::causal_gqa_attention(q, k, v, h, hk);
    const torch::Tensor attn_out = ref::linear(attn, w("self_attn.o_proj.weight", {d, h * hd}));
    const torch::Tensor attn_residual = ref::residual_add(x, attn_out);

    // FFN block.
    const torch::Tensor ffn_norm =
        ref::rms_norm(attn_residual, w("post_attention_layernorm.weight", {d}), c.rms_norm_eps);
    const int64_t ff = c.intermediate_size;
    const torch::Tensor ffn_hidden =
        ref::swiglu(ref::linear(ffn_norm, w("mlp.gate_proj.weight", {ff, d})),
                    ref::linear(ffn_norm, w("mlp.up_proj.weight", {ff, d})));
    const torch::Tensor ffn_out = ref::linear(ffn_hidden, w("mlp.down_proj.weight", {d, ff}));
    x = ref::residual_add(attn_residual, ffn_out);
    r.hidden.push_back(x);

    if (captured(i)) {
      r.layers.push_back(LayerCapture{i, attn_norm, q_proj, k_proj, q, k, v, attn, attn_out,
                                      attn_residual, ffn_norm, ffn_hidden, ffn_out});
    }
  }

  // Output: only the last position is normed and projected (a GEMV, not a GEMM).
  r.final_norm_last =
      ref::rms_norm(ref::last_row(x), weight("model.norm.weight", {d}), c.rms_norm_eps);
  const torch::Tensor lm_w =
      c.tie_word_embeddings ? embed : weight("lm_head.weight", {c.vocab_size, d});
  r.logits = ref::lm_head(r.final_norm_last, lm_w);
  r.next_token = ref::argmax(r.logits);
  return r;
}

ForwardResult Model::forward_gemma3(const torch::Tensor& ids, const ForwardOptions& options) const {
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size;
  const int64_t h = c.num_heads;
  const int64_t hk = c.num_kv_heads;
  const int64_t hd = head_dim_;
  const int64_t s = ids.size(0);
  const double eps = c.rms_norm_eps;

  ForwardResult r;
  const torch::Tensor embed = weight("model.embed_tokens.weight", {c.vocab_size, d});
  torch::Tensor x =
      ref::embedding(ids, embed) * ref::embedding_scale(d, embed.scalar_type());  // [s, d]
  r.embeddings = x;
  // Two tables: local layers rotate with rope_local_theta, global ones with rope_theta (and the
  // global layers' rope_scaling).
  const RopeTables global_rope = ref::rope_tables(s, hd, c.rope_theta, c.rope_scaling);
  const RopeTables local_rope = ref::rope_tables(s, hd, c.rope_local_theta);

  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto w = [&](const std::string& suffix, std::vector<int64_t> shape) {
      return weight(layer_weight_name(i, suffix), shape);
    };
    const bool local = c.is_sliding(i);
    const RopeTables& rope = local ? local_rope : global_rope;
    const AttentionOptions attention{c.attention_scale(), local ? c.sliding_window : 0};

    // Attention block: QK-norm before RoPE, a norm after the output projection too.
    const torch::Tensor attn_norm = ref::rms_norm_gemma(x, w("input_layernorm.weight", {d}), eps);
    const torch::Tensor q_proj = ref::linear(attn_norm, w("self_attn.q_proj.weight", {h * hd, d}));
    const torch::Tensor k_proj = ref::linear(attn_norm, w("self_attn.k_proj.weight", {hk * hd, d}));
    const torch::Tensor v = ref::linear(attn_norm, w("self_attn.v_proj.weight", {hk * hd, d}));
    const torch::Tensor q_normed =
        ref::head_rms_norm(q_proj, w("self_attn.q_norm.weight", {hd}), eps, h);
    const torch::Tensor k_normed =
        ref::head_rms_norm(k_proj, w("self_attn.k_norm.weight", {hd}), eps, hk);
    const torch::Tensor q = ref::apply_rope(q_normed, rope, h);
    const torch::Tensor k = ref::apply_rope(k_normed, rope, hk);
    const torch::Tensor attn = ref::windowed_gqa_attention(q, k, v, h, hk, attention);
    const torch::Tensor attn_out = ref::linear(attn, w("self_attn.o_proj.weight", {d, h * hd}));
    const torch::Tensor attn_post_norm =
        ref::rms_norm_gemma(attn_out, w("post_attention_layernorm.weight", {d}), eps);
    const torch::Tensor attn_residual = ref::residual_add(x, attn_post_norm);

    // FFN block: GeGLU between a pre- and a post-norm.
    const int64_t ff = c.intermediate_size;
    const torch::Tensor ffn_norm =
        ref::rms_norm_gemma(attn_residual, w("pre_feedforward_layernorm.weight", {d}), eps);
    const torch::Tensor ffn_hidden =
        ref::geglu(ref::linear(ffn_norm, w("mlp.gate_proj.weight", {ff, d})),
                   ref::linear(ffn_norm, w("mlp.up_proj.weight", {ff, d})));
    const torch::Tensor ffn_out = ref::linear(ffn_hidden, w("mlp.down_proj.weight", {d, ff}));
    const torch::Tensor ffn_post_norm =
        ref::rms_norm_gemma(ffn_out, w("post_feedforward_layernorm.weight", {d}), eps);
    x = ref::residual_add(attn_residual, ffn_post_norm);
    r.hidden.push_back(x);

    if (captured(options, i)) {
      LayerCapture cap{i, attn_norm, q_proj, k_proj, q, k, v, attn, attn_out,
                       attn_residual, ffn_norm, ffn_hidden, ffn_out};
      cap.q_normed = q_normed;
      cap.k_normed = k_normed;
      cap.attn_post_norm = attn_post_norm;
      cap.ffn_post_norm = ffn_post_norm;
      r.layers.push_back(std::move(cap));
    }
  }

  r.final_norm_last = ref::rms_norm_gemma(ref::last_row(x), weight("model.norm.weight", {d}), eps);
  const torch::Tensor lm_w =
      c.tie_word_embeddings ? embed : weight("lm_head.weight", {c.vocab_size, d});
  r.logits = ref::lm_head(r.final_norm_last, lm_w);
  r.next_token = ref::argmax(r.logits);
  return r;
}

GenerateResult Model::generate_greedy(const std::vector<int64_t>& prompt, int64_t n_new,
                                      const std::vector<int64_t>& stop_ids) const {
  require(!prompt.empty(), "generate_greedy: empty prompt");
  require(n_new >= 0, "generate_greedy: negative token count");
  std::vector<int64_t> ids = prompt;
  GenerateResult g;
  for (int64_t step = 0; step < n_new; ++step) {
    ForwardResult r = forward(ids);  // no KV cache: the whole sequence again
    g.tokens.push_back(r.next_token);
    g.logits.push_back(r.logits);
    ids.push_back(r.next_token);
    if (std::find(stop_ids.begin(), stop_ids.end(), r.next_token) != stop_ids.end()) break;
  }
  return g;
}

}  // namespace clockwork::ref
