// The substitutable reference chain (see chain.h).
#include "milestones/milestone3/tests/chain.h"

#include <optional>

#include "harness/check/torch_bridge.h"
#include "reference/ops.h"

namespace clockwork {

Chain run_chain(const ModelConfig& c, const ref::WeightLookup& lookup, const ref::Pitfall& p,
                const torch::Tensor& x0, int64_t n_layers) {
  const ref::Pitfall& ok = ref::correct_ops();
  const auto& linear = p.linear ? p.linear : ok.linear;
  const auto& rms_norm = p.rms_norm ? p.rms_norm : ok.rms_norm;
  const auto& rope = p.rope ? p.rope : ok.rope;
  const auto& attention = p.attention ? p.attention : ok.attention;
  const auto& lm_head = p.lm_head ? p.lm_head : ok.lm_head;
  const auto& swiglu = p.swiglu ? p.swiglu : ok.swiglu;
  const auto& residual = p.residual ? p.residual : ok.residual;
  const ref::Wiring& wiring = p.wiring;
  const ref::WeightLookup w = p.weights ? p.weights(lookup) : lookup;
  auto layer_w = [&](int64_t i, const std::string& suffix) {
    return w(ref::layer_weight_name(i, suffix));
  };

  const int64_t s = x0.size(0), h = c.num_heads, hk = c.num_kv_heads;
  const torch::Tensor positions = torch::arange(s, torch::kLong);
  const int64_t layers = n_layers < 0 ? c.num_layers : n_layers;
  Chain out;
  torch::Tensor x = x0.to(torch::kFloat);
  for (int64_t i = 0; i < layers; ++i) {
    const torch::Tensor attn_norm =
        rms_norm(x, layer_w(i, "input_layernorm.weight"), c.rms_norm_eps);
    const torch::Tensor q =
        rope(linear(wiring.q_from_unnormalised_x ? x : attn_norm,
                    layer_w(i, "self_attn.q_proj.weight")),
             positions, h, c.rope_theta, c.rope_scaling);
    const torch::Tensor k = rope(linear(attn_norm, layer_w(i, "self_attn.k_proj.weight")),
                                 positions, hk, c.rope_theta, c.rope_scaling);
    const torch::Tensor v = linear(
        attn_norm,
        layer_w(i, wiring.v_from_k_proj ? "self_attn.k_proj.weight" : "self_attn.v_proj.weight"));
    const torch::Tensor attn = attention(q, k, v, h, hk);
    const torch::Tensor attn_out = linear(attn, layer_w(i, "self_attn.o_proj.weight"));
    x = residual(x, attn_out);
    const torch::Tensor ffn_norm =
        rms_norm(x, layer_w(i, "post_attention_layernorm.weight"), c.rms_norm_eps);
    const torch::Tensor ffn_hidden =
        swiglu(linear(ffn_norm, layer_w(i, "mlp.gate_proj.weight")),
               linear(ffn_norm, layer_w(i, "mlp.up_proj.weight")));
    const torch::Tensor ffn_out = linear(ffn_hidden, layer_w(i, "mlp.down_proj.weight"));
    x = residual(x, ffn_out);
    out.hidden.push_back(x);
    if (i == 0) {
      out.first = {{"attn_norm", attn_norm},
                   {"q", q},
                   {"k", k},
                   {"v", v},
                   {"attn", attn},
                   {"attn_out", attn_out},
                   {"ffn_norm", ffn_norm},
                   {"ffn_hidden", ffn_hidden},
                   {"ffn_out", ffn_out}};
    }
  }
  if (layers == c.num_layers) {
    out.final_norm = wiring.final_norm_skipped
                         ? x
                         : rms_norm(x, w("model.norm.weight"), c.rms_norm_eps);
    const torch::Tensor head =
        c.tie_word_embeddings ? w("model.embed_tokens.weight") : w("lm_head.weight");
    out.logits = lm_head(out.final_norm, head);
  }
  return out;
}

std::vector<PitfallCandidate> chain_pitfalls(
    const ModelConfig& config, const ref::WeightLookup& lookup, const torch::Tensor& x0,
    int64_t n_layers, const std::function<torch::Tensor(const Chain&)>& pick) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (p.kernel_only) return std::nullopt;  // the kernel's own test names these
    return pick(run_chain(config, lookup, p, x0, n_layers));
  });
}

}  // namespace clockwork
