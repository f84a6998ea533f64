// Host vectors <-> torch tensors, and pitfall candidates from the reference's table
// (see torch_bridge.h).
#include "harness/check/torch_bridge.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "harness/check/random.h"
#include "harness/check/shape.h"

namespace clockwork {

namespace {

template <class T>
torch::Tensor copy_to_tensor(const std::vector<T>& values, const std::vector<int64_t>& shape,
                             torch::Dtype dtype, const char* what) {
  const size_t n = element_count(shape);
  if (values.size() != n) {
    throw std::invalid_argument(std::string("to_tensor(") + what +
                                "): " + std::to_string(values.size()) + " values for the shape " +
                                shape_string(shape) + " (" + std::to_string(n) + " elements)");
  }
  torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
  if (n) std::memcpy(t.data_ptr(), values.data(), n * sizeof(T));
  return t;
}

torch::Tensor cpu_contiguous(const torch::Tensor& t, torch::Dtype dtype) {
  return t.detach().to(torch::kCPU, dtype).contiguous();
}

}  // namespace

torch::Tensor to_tensor(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  return copy_to_tensor(values, shape, torch::kFloat, "float");
}

torch::Tensor to_tensor(const std::vector<__nv_bfloat16>& values,
                        const std::vector<int64_t>& shape) {
  static_assert(sizeof(__nv_bfloat16) == sizeof(c10::BFloat16), "bf16 is two bytes in both");
  return copy_to_tensor(values, shape, torch::kBFloat16, "bf16");
}

torch::Tensor to_tensor(const std::vector<int32_t>& values, const std::vector<int64_t>& shape) {
  return copy_to_tensor(values, shape, torch::kInt, "int32");
}

torch::Tensor to_tensor(const std::vector<int64_t>& values, const std::vector<int64_t>& shape) {
  return copy_to_tensor(values, shape, torch::kLong, "int64");
}

std::vector<float> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = cpu_contiguous(t, torch::kFloat);
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

std::vector<__nv_bfloat16> to_bf16_vector(const torch::Tensor& t) {
  if (t.scalar_type() != torch::kBFloat16) return to_bf16(to_vector(t));
  const torch::Tensor c = cpu_contiguous(t, torch::kBFloat16);
  std::vector<__nv_bfloat16> out(static_cast<size_t>(c.numel()));
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size() * sizeof(__nv_bfloat16));
  return out;
}

std::vector<int32_t> to_int32_vector(const torch::Tensor& t) {
  const torch::Tensor c = cpu_contiguous(t, torch::kInt);
  const int32_t* p = c.data_ptr<int32_t>();
  return std::vector<int32_t>(p, p + c.numel());
}

std::vector<int64_t> shape_of(const torch::Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
}

std::vector<PitfallCandidate> pitfall_candidates(
    const std::function<std::optional<torch::Tensor>(const ref::Pitfall&)>& run) {
  std::vector<PitfallCandidate> out;
  for (const ref::Pitfall& p : ref::pitfalls()) {
    std::optional<torch::Tensor> wrong;
    try {
      wrong = run(p);
    } catch (const std::exception&) {
      continue;  // e.g. a layout mistake that needs h > 1: not applicable to these shapes
    }
    if (!wrong || !wrong->defined()) continue;
    out.push_back({p.name, p.message, to_vector(*wrong)});
  }
  return out;
}

std::vector<PitfallCandidate> linear_pitfalls(const torch::Tensor& x, const torch::Tensor& w) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.linear) return std::nullopt;
    return p.linear(x, w);
  });
}

std::vector<PitfallCandidate> rms_norm_pitfalls(const torch::Tensor& x, const torch::Tensor& gamma,
                                                double eps) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.rms_norm) return std::nullopt;
    return p.rms_norm(x, gamma, eps);
  });
}

std::vector<PitfallCandidate> softmax_pitfalls(const torch::Tensor& scores) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.softmax) return std::nullopt;
    return p.softmax(scores);
  });
}

std::vector<PitfallCandidate> rope_pitfalls(const torch::Tensor& x, const torch::Tensor& positions,
                                            int64_t n_heads, double theta,
                                            const std::optional<RopeScaling>& scaling) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.rope) return std::nullopt;
    return p.rope(x, positions, n_heads, theta, scaling);
  });
}

std::vector<PitfallCandidate> attention_pitfalls(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& v, int64_t n_heads,
                                                 int64_t n_kv_heads) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.attention) return std::nullopt;
    return p.attention(q, k, v, n_heads, n_kv_heads);
  });
}

std::vector<PitfallCandidate> lm_head_pitfalls(const torch::Tensor& x_normed,
                                               const torch::Tensor& w) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.lm_head) return std::nullopt;
    return p.lm_head(x_normed, w);
  });
}

std::vector<PitfallCandidate> swiglu_pitfalls(const torch::Tensor& gate, const torch::Tensor& up) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.swiglu) return std::nullopt;
    return p.swiglu(gate, up);
  });
}

std::vector<PitfallCandidate> residual_pitfalls(const torch::Tensor& x, const torch::Tensor& y) {
  return pitfall_candidates([&](const ref::Pitfall& p) -> std::optional<torch::Tensor> {
    if (!p.residual) return std::nullopt;
    return p.residual(x, y);
  });
}

QkvCandidates qkv_pitfalls(const torch::Tensor& x, const torch::Tensor& gamma,
                           const torch::Tensor& w_q, const torch::Tensor& w_k,
                           const torch::Tensor& w_v, double eps) {
  QkvCandidates out;
  const ref::Pitfall& ok = ref::correct_ops();
  for (const ref::Pitfall& p : ref::pitfalls()) {
    const ref::Wiring& wiring = p.wiring;
    if (!p.rms_norm && !p.linear && !wiring.q_from_unnormalised_x && !wiring.v_from_k_proj)
      continue;
    try {
      const auto& norm = p.rms_norm ? p.rms_norm : ok.rms_norm;
      const auto& linear = p.linear ? p.linear : ok.linear;
      const torch::Tensor xn = norm(x, gamma, eps);
      if (p.rms_norm) out.x_norm.push_back({p.name, p.message, to_vector(xn)});
      out.q.push_back(
          {p.name, p.message, to_vector(linear(wiring.q_from_unnormalised_x ? x : xn, w_q))});
      out.k.push_back({p.name, p.message, to_vector(linear(xn, w_k))});
      out.v.push_back({p.name, p.message, to_vector(linear(xn, wiring.v_from_k_proj ? w_k : w_v))});
    } catch (const std::exception&) {
      continue;  // not applicable to these shapes
    }
  }
  return out;
}

RopeTableCandidates rope_table_pitfalls(const torch::Tensor& positions, int64_t head_dim,
                                        double theta, const std::optional<RopeScaling>& scaling) {
  RopeTableCandidates out;
  const torch::Tensor rows = torch::arange(positions.size(0), torch::kLong);
  auto add = [&](const std::string& name, const std::string& message, const ref::RopeTables& t) {
    out.cos.push_back({name, message, to_vector(t.cos)});
    out.sin.push_back({name, message, to_vector(t.sin)});
  };
  auto add_named = [&](const char* name, const ref::RopeTables& t) {
    add(name, ref::find_pitfall(name).message, t);
  };
  add("rope_fp32_angle",
      "Your RoPE angles p·θ_i were formed in fp32: at position p an fp32 angle is only good to "
      "about p·6e-8 radians. Form p·θ_i and take its cos and sin in double, then round once.",
      ref::wrong::rope_tables_fp32_angle(positions, head_dim, theta, scaling));
  add("rope_row_index_as_position",
      "Your RoPE tables use the row index r as the position: the angle of row r is "
      "positions[r]·θ_i (a decode step or a continued prompt does not start at 0).",
      ref::rope_tables(rows, head_dim, theta, scaling));
  add_named("rope_base_10000", ref::rope_tables(positions, head_dim, 10000.0, scaling));
  add_named("rope_theta_fixed_500000", ref::rope_tables(positions, head_dim, 500000.0, scaling));
  add_named("rope_positions_from_one", ref::rope_tables(positions + 1, head_dim, theta, scaling));
  return out;
}

}  // namespace clockwork
