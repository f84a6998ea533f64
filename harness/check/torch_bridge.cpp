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

}  // namespace clockwork
