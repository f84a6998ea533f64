// ReferenceCachedModel (cached_reference.h): a decode step written with the reference operators.
#include "milestones/milestone4/tests/cached_reference.h"

#include <stdexcept>
#include <string>

#include "reference/ops.h"

namespace clockwork {

ReferenceCachedModel::ReferenceCachedModel(const ref::Model& model, CacheMistakes mistakes)
    : model_(model), mistakes_(mistakes) {}

torch::Tensor ReferenceCachedModel::prefill(const std::vector<int64_t>& ids) {
  ref::ForwardOptions options;
  options.capture = true;
  const ref::ForwardResult r = model_.forward(ids, options);
  k_.clear();
  v_.clear();
  for (const ref::LayerCapture& layer : r.layers) {
    k_.push_back(mistakes_.prefill_k_before_rope ? layer.k_proj : layer.k);
    v_.push_back(layer.v);
  }
  length_ = static_cast<int64_t>(ids.size());
  return r.logits;
}

torch::Tensor ReferenceCachedModel::decode(int64_t token) {
  if (length_ == 0) throw std::logic_error("ReferenceCachedModel::decode before prefill");
  const ModelConfig& c = model_.config();
  const int64_t d = c.hidden_size, h = c.num_heads, hk = c.num_kv_heads, hd = model_.head_dim();
  const int64_t ff = c.intermediate_size, pos = length_;
  const torch::Tensor embed = model_.weight("model.embed_tokens.weight", {c.vocab_size, d});
  torch::Tensor x = ref::embedding(torch::tensor({token}, torch::kLong), embed);  // [1, d]
  const torch::Tensor position =
      torch::tensor({mistakes_.rope_position_zero ? int64_t{0} : pos}, torch::kLong);
  const ref::RopeTables rope = ref::rope_tables(position, hd, c.rope_theta, c.rope_scaling);

  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto w = [&](const std::string& suffix, std::vector<int64_t> shape) {
      return model_.weight(ref::layer_weight_name(i, suffix), shape);
    };
    const torch::Tensor a = ref::rms_norm(x, w("input_layernorm.weight", {d}), c.rms_norm_eps);
    const torch::Tensor q_proj = ref::linear(a, w("self_attn.q_proj.weight", {h * hd, d}));
    const torch::Tensor k_proj = ref::linear(a, w("self_attn.k_proj.weight", {hk * hd, d}));
    const torch::Tensor v = ref::linear(a, w("self_attn.v_proj.weight", {hk * hd, d}));
    const torch::Tensor q = ref::apply_rope(q_proj, rope, h);
    const torch::Tensor k = ref::apply_rope(k_proj, rope, hk);
    torch::Tensor& kc = k_[static_cast<size_t>(i)];
    torch::Tensor& vc = v_[static_cast<size_t>(i)];
    kc = torch::cat({kc, mistakes_.decode_k_before_rope ? k_proj : k});
    vc = torch::cat({vc, v});
    const int64_t n = mistakes_.excludes_current ? pos : pos + 1;
    const torch::Tensor attn =
        ref::causal_gqa_attention(q, kc.narrow(0, 0, n), vc.narrow(0, 0, n), h, hk);
    x = ref::residual_add(x, ref::linear(attn, w("self_attn.o_proj.weight", {d, h * hd})));
    const torch::Tensor f =
        ref::rms_norm(x, w("post_attention_layernorm.weight", {d}), c.rms_norm_eps);
    const torch::Tensor hidden = ref::swiglu(ref::linear(f, w("mlp.gate_proj.weight", {ff, d})),
                                             ref::linear(f, w("mlp.up_proj.weight", {ff, d})));
    x = ref::residual_add(x, ref::linear(hidden, w("mlp.down_proj.weight", {d, ff})));
  }
  ++length_;
  const torch::Tensor norm =
      ref::rms_norm(ref::last_row(x), model_.weight("model.norm.weight", {d}), c.rms_norm_eps);
  const torch::Tensor lm_w =
      c.tie_word_embeddings ? embed : model_.weight("lm_head.weight", {c.vocab_size, d});
  return ref::lm_head(norm, lm_w);
}

}  // namespace clockwork
