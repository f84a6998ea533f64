// The libtorch reference operators (see ops.h for the formulas and shapes).
#include "reference/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <string>

#include "reference/detail.h"

namespace clockwork::ref {

using detail::require;
using detail::shape_str;

namespace {

// Rows of the tied/untied lm_head converted to fp32 at a time: converting all 128256 rows of the
// Llama-3 table at once would allocate 2 GB just for the copy.
constexpr int64_t kLmHeadChunkRows = 16384;

torch::Tensor f32(const torch::Tensor& t) {
  return t.to(torch::kFloat);
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// Milestone 1
// ----------------------------------------------------------------------------------------------

torch::Tensor embedding(const torch::Tensor& ids, const torch::Tensor& table) {
  require(ids.defined() && table.defined(), "embedding: undefined tensor");
  require(ids.dim() == 1, "embedding: ids must be [s], got " + shape_str(ids));
  require(!ids.is_floating_point(), "embedding: ids must be integers");
  require(table.dim() == 2, "embedding: table must be [V, d], got " + shape_str(table));
  const torch::Tensor ids64 = ids.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t vocab = table.size(0);
  const int64_t* id = ids64.data_ptr<int64_t>();
  for (int64_t p = 0; p < ids64.numel(); ++p) {
    if (id[p] < 0 || id[p] >= vocab) {
      std::ostringstream msg;
      msg << "embedding: token id " << id[p] << " at position " << p
          << " is outside the vocabulary [0, " << vocab << ") (V = " << vocab << ")";
      throw std::out_of_range(msg.str());
    }
  }
  // Gather first, convert after: only s rows are widened to fp32, not the whole table.
  return f32(table.index_select(0, ids64.to(table.device())));
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w) {
  require(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
          "linear: expected x [m, k] and w [n, k] (weights are stored (out, in)), got x " +
              shape_str(x) + " and w " + shape_str(w));
  return torch::matmul(f32(x), f32(w).t());
}

torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b) {
  require(
      a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
      "matmul: expected a [m, k] and b [k, n], got a " + shape_str(a) + " and b " + shape_str(b));
  return torch::matmul(f32(a), f32(b));
}

torch::Tensor matmul_bt(const torch::Tensor& a, const torch::Tensor& b) {
  require(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1),
          "matmul_bt: expected a [m, k] and b [n, k], got a " + shape_str(a) + " and b " +
              shape_str(b));
  return torch::matmul(f32(a), f32(b).t());
}

// ----------------------------------------------------------------------------------------------
// Milestone 2
// ----------------------------------------------------------------------------------------------

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& gamma, double eps) {
  require(x.dim() >= 1 && gamma.dim() == 1 && x.size(-1) == gamma.size(0),
          "rms_norm: expected x [s, d] and gamma [d], got x " + shape_str(x) + " and gamma " +
              shape_str(gamma));
  const torch::Tensor xf = f32(x);
  const torch::Tensor mean_sq = xf.pow(2).mean(-1, /*keepdim=*/true);  // [s, 1]
  return xf * torch::rsqrt(mean_sq + eps) * f32(gamma).to(xf.device());
}

// ----------------------------------------------------------------------------------------------
// RoPE
// ----------------------------------------------------------------------------------------------

torch::Tensor rope_inv_freq(int64_t head_dim, double theta,
                            const std::optional<RopeScaling>& scaling) {
  require(head_dim > 0 && head_dim % 2 == 0,
          "rope_inv_freq: head_dim must be positive and even, got " + std::to_string(head_dim));
  require(theta > 0, "rope_inv_freq: theta must be positive");
  const int64_t half = head_dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  if (scaling && scaling->type == "linear") {
    require(scaling->factor > 0, "rope_inv_freq: linear rope_scaling needs factor > 0");
    for (double& f : inv) f /= scaling->factor;
  } else if (scaling) {
    const RopeScaling& sc = *scaling;
    require(sc.type == "llama3" || sc.type.empty(),
            "rope_inv_freq: unsupported rope_scaling type '" + sc.type + "' (llama3 or linear)");
    require(sc.factor > 0 && sc.original_max_position_embeddings > 0 && sc.low_freq_factor > 0 &&
                sc.high_freq_factor > sc.low_freq_factor,
            "rope_inv_freq: llama3 rope_scaling needs factor > 0, original_max_position_embeddings"
            " > 0 and high_freq_factor > low_freq_factor > 0");
    const double original = static_cast<double>(sc.original_max_position_embeddings);
    const double low_freq_wavelen = original / sc.low_freq_factor;
    const double high_freq_wavelen = original / sc.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f = f / sc.factor;  // low frequencies: stretched by the full factor
      } else if (wavelen >= high_freq_wavelen) {
        // In between: blend the scaled and unscaled frequency.
        const double smooth =
            (original / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        f = (1.0 - smooth) * f / sc.factor + smooth * f;
      }  // high frequencies (wavelen < high_freq_wavelen) are left as they are
    }
  }
  return torch::tensor(inv, torch::kDouble);
}

RopeTables rope_tables(const torch::Tensor& positions, int64_t head_dim, double theta,
                       const std::optional<RopeScaling>& scaling) {
  require(positions.dim() == 1 && !positions.is_floating_point(),
          "rope_tables: positions must be [s] integers, got " + shape_str(positions));
  const torch::Tensor inv = ref::rope_inv_freq(head_dim, theta, scaling);  // [h_d/2]
  const torch::Tensor pos = positions.to(torch::kCPU).to(torch::kDouble);  // [s]
  const torch::Tensor angle = pos.unsqueeze(1) * inv.unsqueeze(0);         // [s, h_d/2]
  return RopeTables{angle.cos().to(torch::kFloat), angle.sin().to(torch::kFloat)};
}

RopeTables rope_tables(int64_t s, int64_t head_dim, double theta,
                       const std::optional<RopeScaling>& scaling) {
  require(s >= 0, "rope_tables: negative sequence length");
  return ref::rope_tables(torch::arange(s, torch::kLong), head_dim, theta, scaling);
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables, int64_t n_heads) {
  require(x.dim() == 2 && n_heads > 0 && x.size(1) % n_heads == 0,
          "apply_rope: expected x [s, n_heads*h_d] with n_heads = " + std::to_string(n_heads) +
              ", got " + shape_str(x));
  const int64_t s = x.size(0);
  const int64_t head_dim = x.size(1) / n_heads;
  const int64_t half = head_dim / 2;
  require(head_dim % 2 == 0, "apply_rope: head_dim must be even");
  require(tables.cos.dim() == 2 && tables.cos.size(0) == s && tables.cos.size(1) == half &&
              tables.sin.sizes() == tables.cos.sizes(),
          "apply_rope: tables must be [s, h_d/2] = [" + std::to_string(s) + ", " +
              std::to_string(half) + "], got cos " + shape_str(tables.cos) + " and sin " +
              shape_str(tables.sin));
  const torch::Tensor xh = f32(x).reshape({s, n_heads, head_dim});
  const torch::Tensor x1 = xh.narrow(2, 0, half);     // first half of every head
  const torch::Tensor x2 = xh.narrow(2, half, half);  // its partner: the second half
  const torch::Tensor c = f32(tables.cos).to(x.device()).unsqueeze(1);  // [s, 1, h_d/2]
  const torch::Tensor sn = f32(tables.sin).to(x.device()).unsqueeze(1);
  return torch::cat({x1 * c - x2 * sn, x1 * sn + x2 * c}, 2).reshape({s, n_heads * head_dim});
}

// ----------------------------------------------------------------------------------------------
// Attention
// ----------------------------------------------------------------------------------------------

torch::Tensor to_heads(const torch::Tensor& x, int64_t n_heads) {
  require(x.dim() == 2 && n_heads > 0 && x.size(1) % n_heads == 0,
          "to_heads: expected [s, n_heads*h_d] with n_heads = " + std::to_string(n_heads) +
              ", got " + shape_str(x));
  return x.reshape({x.size(0), n_heads, x.size(1) / n_heads}).permute({1, 0, 2}).contiguous();
}

torch::Tensor from_heads(const torch::Tensor& x) {
  require(x.dim() == 3, "from_heads: expected [n, s, h_d], got " + shape_str(x));
  return x.permute({1, 0, 2}).reshape({x.size(1), x.size(0) * x.size(2)});
}

int64_t kv_head_for(int64_t query_head, int64_t n_heads, int64_t n_kv_heads) {
  require(n_kv_heads > 0 && n_heads % n_kv_heads == 0,
          "kv_head_for: n_heads (" + std::to_string(n_heads) +
              ") must be a multiple of n_kv_heads (" + std::to_string(n_kv_heads) + ")");
  require(query_head >= 0 && query_head < n_heads, "kv_head_for: query head out of range");
  return query_head / (n_heads / n_kv_heads);
}

torch::Tensor softmax_rows(const torch::Tensor& x) {
  const torch::Tensor xf = f32(x);
  // Subtracting the row max keeps every exponent <= 0, so exp never overflows.
  const torch::Tensor e = (xf - xf.amax(-1, /*keepdim=*/true)).exp();
  return e / e.sum(-1, /*keepdim=*/true);
}

AttentionDetail windowed_gqa_attention_detail(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, int64_t n_heads,
                                              int64_t n_kv_heads, const AttentionOptions& options) {
  detail::check_attention_shapes("causal_gqa_attention", q, k, v, n_heads, n_kv_heads);
  const int64_t s_q = q.size(0);
  const int64_t s_k = k.size(0);
  const int64_t head_dim = q.size(1) / n_heads;

  const torch::Tensor qh = ref::to_heads(f32(q), n_heads);     // [h, s_q, h_d]
  const torch::Tensor kh = ref::to_heads(f32(k), n_kv_heads);  // [h_k, s_k, h_d]
  const torch::Tensor vh = ref::to_heads(f32(v), n_kv_heads);  // [h_k, s_k, h_d]

  // KV head of every query head, then K and V repeated to one slice per query head.
  std::vector<int64_t> group(static_cast<size_t>(n_heads));
  for (int64_t i = 0; i < n_heads; ++i) group[i] = ref::kv_head_for(i, n_heads, n_kv_heads);
  const torch::Tensor g = torch::tensor(group, torch::kLong).to(q.device());
  const torch::Tensor kg = kh.index_select(0, g);  // [h, s_k, h_d]
  const torch::Tensor vg = vh.index_select(0, g);  // [h, s_k, h_d]

  require(options.scale >= 0 && options.window >= 0,
          "causal_gqa_attention: scale and window must not be negative");
  const double scale =
      options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
  torch::Tensor scores = torch::matmul(qh, kg.transpose(1, 2)) * scale;  // [h, s_q, s_k]
  // Row r sits at position s_k − s_q + r and may look at columns up to that position only.
  const auto bools = torch::TensorOptions().dtype(torch::kBool).device(q.device());
  torch::Tensor hidden = torch::ones({s_q, s_k}, bools).triu(s_k - s_q + 1);
  if (options.window > 0) {
    // ... and, in a window of w, not at columns w or more behind it.
    hidden = hidden | torch::ones({s_q, s_k}, bools).tril(s_k - s_q - options.window);
  }
  scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());

  const torch::Tensor probs = ref::softmax_rows(scores);                // [h, s_q, s_k]
  const torch::Tensor out = ref::from_heads(torch::matmul(probs, vg));  // [s_q, h*h_d]
  return AttentionDetail{scores, probs, out};
}

torch::Tensor windowed_gqa_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads,
                                     const AttentionOptions& options) {
  return ref::windowed_gqa_attention_detail(q, k, v, n_heads, n_kv_heads, options).out;
}

AttentionDetail causal_gqa_attention_detail(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, int64_t n_heads,
                                            int64_t n_kv_heads) {
  return ref::windowed_gqa_attention_detail(q, k, v, n_heads, n_kv_heads, AttentionOptions{});
}

torch::Tensor causal_gqa_attention(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads) {
  return ref::windowed_gqa_attention_detail(q, k, v, n_heads, n_kv_heads, AttentionOptions{}).out;
}

// ----------------------------------------------------------------------------------------------
// Attention states (milestone 4)
// ----------------------------------------------------------------------------------------------

AttentionState attention_state(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads) {
  require(q.dim() == 2 && q.size(0) == 1, "attention_state: expected q [1, h*h_d], got " + shape_str(q));
  require(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0 && q.size(1) % n_heads == 0,
          "attention_state: h must be a positive multiple of h_k and divide q's width");
  const int64_t head_dim = q.size(1) / n_heads;
  require(k.dim() == 2 && k.size(1) == n_kv_heads * head_dim && v.sizes() == k.sizes(),
          "attention_state: expected k and v [n, h_k*h_d] (got k " + shape_str(k) + ", v " +
              shape_str(v) + ")");
  if (k.size(0) == 0) {
    return {torch::zeros({1, q.size(1)}, torch::kFloat),
            torch::full({n_heads}, -std::numeric_limits<float>::infinity(), torch::kFloat)};
  }
  const torch::Tensor qh = ref::to_heads(q.to(torch::kDouble), n_heads);     // [h, 1, h_d]
  const torch::Tensor kh = ref::to_heads(k.to(torch::kDouble), n_kv_heads);  // [h_k, n, h_d]
  const torch::Tensor vh = ref::to_heads(v.to(torch::kDouble), n_kv_heads);  // [h_k, n, h_d]
  std::vector<int64_t> group(static_cast<size_t>(n_heads));
  for (int64_t i = 0; i < n_heads; ++i) group[i] = ref::kv_head_for(i, n_heads, n_kv_heads);
  const torch::Tensor g = torch::tensor(group, torch::kLong);
  const torch::Tensor scores = torch::matmul(qh, kh.index_select(0, g).transpose(1, 2)) /
                               std::sqrt(static_cast<double>(head_dim));  // [h, 1, n]
  const torch::Tensor lse = torch::logsumexp(scores, -1);                 // [h, 1]
  const torch::Tensor out = torch::matmul(torch::exp(scores - lse.unsqueeze(-1)),
                                          vh.index_select(0, g));  // [h, 1, h_d]
  return {ref::from_heads(out).to(torch::kFloat), lse.reshape({n_heads}).to(torch::kFloat)};
}

AttentionState merge_attention_states(const std::vector<AttentionState>& states) {
  require(!states.empty(), "merge_attention_states: need at least one state");
  std::vector<torch::Tensor> lses, outs;
  for (const AttentionState& st : states) {
    require(st.lse.dim() == 1 && st.out.dim() == 2 && st.out.size(0) == 1 &&
                st.out.size(1) % st.lse.size(0) == 0 && st.lse.sizes() == states[0].lse.sizes() &&
                st.out.sizes() == states[0].out.sizes(),
            "merge_attention_states: every state needs out [1, h*h_d] and lse [h] of the same h");
    lses.push_back(st.lse.to(torch::kDouble));
    outs.push_back(ref::to_heads(st.out.to(torch::kDouble), st.lse.size(0)));  // [h, 1, h_d]
  }
  const torch::Tensor lse = torch::stack(lses);                      // [n, h]
  const torch::Tensor merged_lse = torch::logsumexp(lse, 0);        // [h]
  torch::Tensor w = torch::exp(lse - merged_lse.unsqueeze(0));       // [n, h]
  w = torch::nan_to_num(w, 0.0);                                     // all states empty: weight 0
  const torch::Tensor o = torch::stack(outs);                        // [n, h, 1, h_d]
  // An empty state's out may be anything: multiply only where the weight is non-zero.
  const torch::Tensor weighted =
      torch::where(w.reshape({w.size(0), w.size(1), 1, 1}) > 0,
                   w.reshape({w.size(0), w.size(1), 1, 1}) * o, torch::zeros_like(o));
  return {ref::from_heads(weighted.sum(0)).to(torch::kFloat), merged_lse.to(torch::kFloat)};
}

// ----------------------------------------------------------------------------------------------
// FFN, residual, output
// ----------------------------------------------------------------------------------------------

torch::Tensor silu(const torch::Tensor& z) {
  const torch::Tensor zf = f32(z);
  return zf * torch::sigmoid(zf);  // = z / (1 + e^(−z)), without overflow for very negative z
}

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  require(gate.sizes() == up.sizes(), "swiglu: gate and up must have the same shape, got " +
                                          shape_str(gate) + " and " + shape_str(up));
  return ref::silu(gate) * f32(up);
}

torch::Tensor residual_add(const torch::Tensor& x, const torch::Tensor& y) {
  require(x.sizes() == y.sizes(),
          "residual_add: shapes differ: " + shape_str(x) + " and " + shape_str(y));
  return f32(x) + f32(y);
}

torch::Tensor last_row(const torch::Tensor& x) {
  require(x.dim() == 2 && x.size(0) > 0, "last_row: expected [s, d], got " + shape_str(x));
  return x[x.size(0) - 1];
}

torch::Tensor lm_head(const torch::Tensor& x_last, const torch::Tensor& w) {
  require(w.dim() == 2, "lm_head: w must be [V, d], got " + shape_str(w));
  require(x_last.numel() == w.size(1) && (x_last.dim() == 1 || x_last.size(0) == 1),
          "lm_head: expected one row x_last [d] with d = " + std::to_string(w.size(1)) +
              " (only the last position is projected), got " + shape_str(x_last));
  const torch::Tensor x = f32(x_last).reshape({w.size(1)}).to(w.device());
  std::vector<torch::Tensor> parts;
  for (int64_t r = 0; r < w.size(0); r += kLmHeadChunkRows) {
    const int64_t n = std::min(kLmHeadChunkRows, w.size(0) - r);
    parts.push_back(torch::mv(f32(w.narrow(0, r, n)), x));
  }
  return torch::cat(parts, 0);
}

int64_t argmax(const torch::Tensor& logits) {
  require(logits.dim() == 1 && logits.numel() > 0,
          "argmax: expected logits [V], got " + shape_str(logits));
  const torch::Tensor l = logits.to(torch::kCPU, torch::kFloat).contiguous();
  const float* p = l.data_ptr<float>();
  int64_t best = 0;
  for (int64_t i = 0; i < l.numel(); ++i) {
    if (std::isnan(p[i])) {
      throw std::invalid_argument("argmax: logit " + std::to_string(i) + " is NaN");
    }
    if (p[i] > p[best]) best = i;  // strict: the first of equal maxima wins
  }
  return best;
}

TopK top_k(const torch::Tensor& logits, int64_t k) {
  require(logits.dim() == 1, "top_k: expected logits [V], got " + shape_str(logits));
  require(k >= 0 && k <= logits.numel(), "top_k: k out of range");
  const torch::Tensor l = logits.to(torch::kCPU, torch::kFloat).contiguous();
  const float* p = l.data_ptr<float>();
  for (int64_t i = 0; i < l.numel(); ++i) {
    if (std::isnan(p[i]))
      throw std::invalid_argument("top_k: logit " + std::to_string(i) + " is NaN");
  }
  std::vector<int64_t> order(static_cast<size_t>(l.numel()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [p](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  TopK result;
  for (int64_t i = 0; i < k; ++i) {
    result.ids.push_back(order[i]);
    result.values.push_back(p[order[i]]);
  }
  return result;
}

// ----------------------------------------------------------------------------------------------
// Gemma 3
// ----------------------------------------------------------------------------------------------

torch::Tensor rms_norm_gemma(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  require(x.dim() >= 1 && w.dim() == 1 && x.size(-1) == w.size(0),
          "rms_norm_gemma: expected x [s, d] and w [d], got x " + shape_str(x) + " and w " +
              shape_str(w));
  const torch::Tensor xf = f32(x);
  const torch::Tensor mean_sq = xf.pow(2).mean(-1, /*keepdim=*/true);
  return xf * torch::rsqrt(mean_sq + eps) * (1.0 + f32(w).to(xf.device()));
}

torch::Tensor head_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps,
                            int64_t n_heads) {
  require(x.dim() == 2 && n_heads > 0 && x.size(1) % n_heads == 0 && w.dim() == 1 &&
              w.size(0) == x.size(1) / n_heads,
          "head_rms_norm: expected x [s, n_heads*h_d] with n_heads = " + std::to_string(n_heads) +
              " and w [h_d], got x " + shape_str(x) + " and w " + shape_str(w));
  const int64_t s = x.size(0);
  return ref::rms_norm_gemma(x.reshape({s, n_heads, w.size(0)}), w, eps).reshape(x.sizes());
}

torch::Tensor gelu_tanh(const torch::Tensor& z) {
  return torch::gelu(f32(z), "tanh");
}

torch::Tensor geglu(const torch::Tensor& gate, const torch::Tensor& up) {
  require(gate.sizes() == up.sizes(), "geglu: gate and up must have the same shape, got " +
                                          shape_str(gate) + " and " + shape_str(up));
  return ref::gelu_tanh(gate) * f32(up);
}

double embedding_scale(int64_t hidden_size, torch::ScalarType table_dtype) {
  require(hidden_size > 0, "embedding_scale: hidden_size must be positive");
  const torch::Tensor scale =
      torch::tensor(std::sqrt(static_cast<double>(hidden_size)), torch::kDouble);
  return scale.to(table_dtype).to(torch::kDouble).item<double>();
}

}  // namespace clockwork::ref
