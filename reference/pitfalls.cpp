// Wrong-on-purpose versions of the reference operators (see pitfalls.h).
#include "reference/pitfalls.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <limits>
#include <stdexcept>
#include <utility>

#include "reference/detail.h"

namespace clockwork::ref {

using detail::require;
using detail::shape_str;

namespace {

torch::Tensor f32(const torch::Tensor& t) {
  return t.to(torch::kFloat);
}

// Which columns of each score row get −inf.
enum class Mask {
  kCausal,            // column > row position (correct)
  kNone,              // nothing
  kDiagonalOnly,      // column == row position
  kIncludesDiagonal,  // column >= row position (off by one)
};

// One attention with switchable mistakes; the defaults give the correct result.
struct AttentionVariant {
  Mask mask = Mask::kCausal;
  bool stable_softmax = true;
  bool kv_modulo = false;     // query head i uses KV head i mod h_k
  bool per_head_in = false;   // q, k, v memory read as [n, s, h_d]
  bool per_head_out = false;  // O memory [h, s, h_d] returned as [s, h*h_d]
  bool scale = true;          // divide scores by sqrt(h_d)
  bool scale_by_hd = false;   // divide scores by h_d instead
  bool empty_rows_zero = false;  // a row with every key masked comes out as zeros, not NaN
};

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        int64_t n_heads, int64_t n_kv_heads, const AttentionVariant& var) {
  detail::check_attention_shapes("attention pitfall", q, k, v, n_heads, n_kv_heads);
  const int64_t s_q = q.size(0);
  const int64_t s_k = k.size(0);
  const int64_t head_dim = q.size(1) / n_heads;

  auto split = [&](const torch::Tensor& t, int64_t n) {  // -> [n, s, h_d]
    return var.per_head_in ? f32(t).contiguous().reshape({n, t.size(0), head_dim})
                           : ref::to_heads(f32(t), n);
  };
  const torch::Tensor qh = split(q, n_heads);
  const torch::Tensor kh = split(k, n_kv_heads);
  const torch::Tensor vh = split(v, n_kv_heads);

  std::vector<int64_t> group(static_cast<size_t>(n_heads));
  for (int64_t i = 0; i < n_heads; ++i) {
    group[i] = var.kv_modulo ? i % n_kv_heads : ref::kv_head_for(i, n_heads, n_kv_heads);
  }
  const torch::Tensor g = torch::tensor(group, torch::kLong).to(q.device());
  const torch::Tensor kg = kh.index_select(0, g);
  const torch::Tensor vg = vh.index_select(0, g);

  torch::Tensor scores = torch::matmul(qh, kg.transpose(1, 2));  // [h, s_q, s_k]
  if (var.scale_by_hd) {
    scores = scores / static_cast<double>(head_dim);
  } else if (var.scale) {
    scores = scores / std::sqrt(static_cast<double>(head_dim));
  }

  const auto idx = torch::TensorOptions().dtype(torch::kLong).device(q.device());
  const torch::Tensor row_pos = (torch::arange(s_q, idx) + (s_k - s_q)).unsqueeze(1);  // [s_q, 1]
  const torch::Tensor col = torch::arange(s_k, idx).unsqueeze(0);                      // [1, s_k]
  torch::Tensor masked;
  switch (var.mask) {
    case Mask::kCausal:
      masked = col > row_pos;
      break;
    case Mask::kNone:
      masked = torch::zeros({s_q, s_k}, idx.dtype(torch::kBool));
      break;
    case Mask::kDiagonalOnly:
      masked = col == row_pos;
      break;
    case Mask::kIncludesDiagonal:
      masked = col >= row_pos;
      break;
  }
  scores = scores.masked_fill(masked, -std::numeric_limits<float>::infinity());

  torch::Tensor probs =
      var.stable_softmax ? ref::softmax_rows(scores) : wrong::softmax_no_max(scores);
  // A kernel that sums only the visible keys leaves an empty row at 0 (0 · 1/0 is never formed);
  // torch's softmax of an all −inf row is NaN.
  if (var.empty_rows_zero) probs = probs.nan_to_num(0.0);
  const torch::Tensor o = torch::matmul(probs, vg).contiguous();  // [h, s_q, h_d]
  return var.per_head_out ? o.reshape({s_q, n_heads * head_dim}) : ref::from_heads(o);
}

torch::Tensor correct_rope(const torch::Tensor& x, const torch::Tensor& positions, int64_t n_heads,
                           double theta, const std::optional<RopeScaling>& scaling) {
  require(x.dim() == 2 && n_heads > 0 && x.size(1) % n_heads == 0,
          "rope: expected x [s, n_heads*h_d], got " + shape_str(x));
  return ref::apply_rope(x, ref::rope_tables(positions, x.size(1) / n_heads, theta, scaling),
                         n_heads);
}

// DeviceBuffer's guard bytes (0xA5A5…) read as a value: what a load past the end of a buffer gets.
float guard_float() {
  const uint32_t bits = 0xA5A5A5A5u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float guard_bf16_as_float() {
  const uint32_t bits = 0xA5A50000u;  // bf16 0xA5A5 widened
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Columns k .. width−1 of every row when the flat memory of t [rows, k] is read as rows of
// `width` > k starting every k elements: element (i, c) is flat[i·k + k + c], and `pad` past the
// end. Only these few columns are gathered, so a large weight is not copied.
torch::Tensor overrun_columns(const torch::Tensor& t, int64_t width, float pad) {
  const int64_t rows = t.size(0), k = t.size(1), over = width - k;
  const torch::Tensor flat = t.contiguous().reshape({rows * k});
  const torch::Tensor idx =
      (torch::arange(rows, torch::kLong).unsqueeze(1) * k + k + torch::arange(over, torch::kLong))
          .reshape({rows * over})
          .to(t.device());
  const torch::Tensor inside = idx < rows * k;
  const torch::Tensor got = f32(flat.index_select(0, idx.clamp_max(rows * k - 1)));
  return torch::where(inside, got, torch::full_like(got, pad)).reshape({rows, over});
}

std::vector<Pitfall> make_table() {
  std::vector<Pitfall> t;
  t.reserve(64);  // add() hands out references into t
  auto add = [&t](std::string name, int item, std::string message) -> Pitfall& {
    Pitfall p;
    p.name = std::move(name);
    p.course_item = item;
    p.message = std::move(message);
    t.push_back(std::move(p));
    return t.back();
  };

  add("linear_no_transpose", 6,
      "Your output equals X·W instead of X·Wᵀ: checkpoint weights are stored (out_features, "
      "in_features), so output element (i, j) is row i of X dotted with row j of W.")
      .linear = wrong::linear_no_transpose;
  add("rms_norm_no_gamma", 5,
      "Your RMSNorm output is missing the multiply by γ: scale element j of every row by "
      "weight[j] of the layer's norm.")
      .rms_norm = wrong::rms_norm_no_gamma;
  add("rms_norm_eps_outside", 5,
      "You added ε outside the square root, x / (sqrt(mean(x²)) + ε); RMSNorm is "
      "x / sqrt(mean(x²) + ε) · γ.")
      .rms_norm = wrong::rms_norm_eps_outside;

  // One message for every fixed ε: the student-facing point is that the argument was ignored.
  const std::string eps_message =
      "It looks like epsilon is not the one passed in: your RMSNorm matches a fixed ε (%s) "
      "while this call passes another; add the eps argument (the config's rms_norm_eps) under "
      "the square root.";
  for (const auto& [name, value, text] :
       {std::tuple{"rms_norm_eps_fixed_1e-5", 1e-5, "1e-5, Llama 3's value"},
        std::tuple{"rms_norm_eps_fixed_1e-6", 1e-6, "1e-6, Llama 2's value"},
        std::tuple{"rms_norm_eps_zero", 0.0, "none at all"}}) {
    std::string m = eps_message;
    m.replace(m.find("%s"), 2, text);
    add(name, 5, m).rms_norm = [v = value](const torch::Tensor& x, const torch::Tensor& g,
                                           double) { return wrong::rms_norm_eps_fixed(x, g, v); };
  }

  for (int64_t tile : {32, 16}) {
    Pitfall& p = add("linear_k_tail_dropped_" + std::to_string(tile), 0,
                     "Your product leaves out the last terms of every dot product, those past "
                     "the last full tile of k: loop while k0 < k and load 0 for the elements "
                     "past k.");
    p.linear = [tile](const torch::Tensor& x, const torch::Tensor& w) {
      return wrong::linear_k_tail_dropped(x, w, tile);
    };
    p.kernel_only = true;
  }
  for (int64_t tile : {32, 16}) {
    Pitfall& p = add("linear_k_loads_unbounded_" + std::to_string(tile), 0,
                     "Your tile loads have no bounds test along k: the last tile of a row reads on "
                     "into the next row of x and of W (and past the end of the buffer). Load 0 "
                     "for kk >= k (and for rows past m or n).");
    p.linear = [tile](const torch::Tensor& x, const torch::Tensor& w) {
      return wrong::linear_k_loads_unbounded(x, w, tile);
    };
    p.kernel_only = true;
  }
  for (bool round_products : {false, true}) {
    Pitfall& p = add(round_products ? "linear_bf16_accumulation_bf16_products"
                                    : "linear_bf16_accumulation",
                     0,
                     "Your dot products were summed in bf16 (8 significant bits): keep the "
                     "accumulator in fp32 and widen each bf16 weight with __bfloat162float.");
    p.linear = [round_products](const torch::Tensor& x, const torch::Tensor& w) {
      return wrong::linear_bf16_accumulation(x, w, round_products);
    };
    p.kernel_only = true;
  }

  Pitfall& softmax = add("softmax_no_max", 1,
                         "Your softmax exponentiates the raw scores: subtract each row's maximum "
                         "before exp, otherwise large scores overflow to inf and NaN.");
  softmax.softmax = wrong::softmax_no_max;
  softmax.attention = wrong::attention_softmax_no_max;

  add("rope_interleaved", 2,
      "Your RoPE rotates even/odd pairs (x_2i, x_2i+1); Llama pairs element i with element "
      "i + h_d/2 of the same head (first half with second half).")
      .rope = wrong::rope_interleaved;
  add("rope_base_10000", 3,
      "Your RoPE uses base 10000; use the model's rope_theta (500000 for Llama 3): "
      "θ_i = rope_theta^(−2i/h_d).")
      .rope = wrong::rope_base_10000;

  add("rope_theta_fixed_500000", 3,
      "Your RoPE uses base 500000 whatever the model says: take θ from the rope_theta argument "
      "(the config's rope_theta), θ_i = rope_theta^(−2i/h_d).")
      .rope = wrong::rope_theta_fixed_500000;
  add("rope_sign_flipped", 2,
      "Your RoPE rotates the wrong way (by −p·θ_i): x'_i = x_i·cos − x_{i+h_d/2}·sin and "
      "x'_{i+h_d/2} = x_i·sin + x_{i+h_d/2}·cos.")
      .rope = wrong::rope_sign_flipped;
  add("rope_positions_from_one", 0,
      "Your RoPE angles use positions counted from 1: the first token of a prompt is at "
      "position 0 (it is not rotated at all).")
      .rope = wrong::rope_positions_from_one;

  add("swiglu_silu_on_up", 0,
      "You applied SiLU to up instead of gate: the FFN computes SiLU(gate) ⊙ up, with "
      "gate = x·W_gateᵀ and up = x·W_upᵀ.")
      .swiglu = wrong::swiglu_silu_on_up;
  add("residual_overwritten", 0,
      "Your residual step overwrote x with the block's output: the residual stream keeps x and "
      "adds the output to it, x ← x + out.")
      .residual = wrong::residual_overwritten;

  add("q_from_unnormalised_x", 0,
      "Your Q was projected from x itself: Q, K and V are all projections of the normalised "
      "x_norm = RMSNorm(x, input_layernorm).")
      .wiring.q_from_unnormalised_x = true;
  add("v_from_k_proj", 0,
      "Your V equals x_norm·W_Kᵀ: V is projected with v_proj.weight, not k_proj.weight.")
      .wiring.v_from_k_proj = true;
  add("final_norm_skipped", 0,
      "Your logits come from x without the final RMSNorm: normalise the last row with "
      "model.norm.weight before lm_head.")
      .wiring.final_norm_skipped = true;
  add("first_layer_weights", 0,
      "Every layer ran with layer 0's weights: layer i must use model.layers.i.* (pass "
      "layers[i], not layers[0]).")
      .weights = wrong::first_layer_weights;

  add("norm_weight_reused", 4,
      "Both norms of a layer used input_layernorm.weight; the norm before the FFN must use "
      "post_attention_layernorm.weight.")
      .weights = wrong::norm_weight_reused;

  add("mask_missing", 7,
      "No causal mask reached the scores: row p must not see columns q > p (masking only the "
      "last row has this same effect, since the last row has nothing to hide).")
      .attention = wrong::attention_no_mask;
  add("mask_diagonal_only", 7,
      "Your mask hides only the diagonal (column p of row p); it must hide every column q > p "
      "and keep q = p.")
      .attention = wrong::attention_mask_diagonal_only;
  add("mask_includes_diagonal", 7,
      "Your mask also hides the diagonal (q >= p instead of q > p): every position must attend "
      "to itself, and the first row becomes all −inf, hence NaN.")
      .attention = wrong::attention_mask_includes_diagonal;
  add("mask_includes_diagonal_zero_rows", 7,
      "Your mask also hides the diagonal (q >= p instead of q > p): every position must attend "
      "to itself. The first row then has no key left to see, and your kernel wrote zeros there.")
      .attention = wrong::attention_mask_includes_diagonal_zero_rows;

  add("lm_head_first_row", 8,
      "Your logits are those of row 0, the first position: the next token is predicted from the "
      "LAST row, s−1 (normalise x + (s−1)·d, then one GEMV). Projecting all s rows into the [V] "
      "buffer also leaves row 0's logits there, and overruns the buffer.")
      .lm_head = wrong::lm_head_first_row;
  add("lm_head_all_rows", 8,
      "You projected all s rows through lm_head (an [s, V] result); only the last row is needed: "
      "one GEMV giving [V] logits.")
      .lm_head = wrong::lm_head_all_rows;

  add("gqa_head_modulo", 9,
      "Query head i used KV head i mod h_k; it must use KV head ⌊i / (h/h_k)⌋, so that "
      "consecutive groups of h/h_k query heads share one KV head.")
      .attention = wrong::attention_gqa_modulo;
  add("layout_per_head_memory", 9,
      "You addressed Q, K, V and the output as if their memory were per-head [h, s, h_d]; the "
      "projections write the flat layout [s, h·h_d], where head j of row p starts at "
      "p·h·h_d + j·h_d.")
      .attention = wrong::attention_per_head_memory;
  add("layout_output_per_head", 9,
      "Your attention output was written per head [h, s, h_d], but o_proj reads the flat layout "
      "[s, h·h_d]: row p holds every head of position p, one after the other.")
      .attention = wrong::attention_output_per_head;

  // The fused attention of milestone 5: one entry per mistake and tile size, since where the
  // wrong result differs depends on where the tiles begin.
  for (int64_t tile : {16, 32, 64}) {
    const std::string suffix = "_" + std::to_string(tile);
    for (const auto& [name, mistake, message] :
         {std::tuple{"online_output_not_rescaled", wrong::OnlineSoftmaxMistake::kOutputNotRescaled,
                     "Your fused attention did not rescale the running output when a row's "
                     "maximum grew: when a key tile raises m to m', multiply acc by exp(m − m') "
                     "before adding the tile's p·V, exactly as you rescale the running sum l."},
          std::tuple{"online_sum_not_rescaled", wrong::OnlineSoftmaxMistake::kSumNotRescaled,
                     "Your fused attention did not rescale the running sum when a row's maximum "
                     "grew: l must become l·exp(m − m') + Σ exp(score − m'), the same factor that "
                     "rescales the running output."},
          std::tuple{"causal_diagonal_tile_skipped",
                     wrong::OnlineSoftmaxMistake::kDiagonalTileSkipped,
                     "Your fused attention stops one key tile too early: query tile t must visit "
                     "key tiles 0 .. t, the diagonal tile t included (with the mask key <= query); "
                     "without it the first query tile sees no key at all (0/0 = NaN) and every "
                     "row misses itself and its tile's earlier positions."},
          std::tuple{"causal_diagonal_tile_unmasked",
                     wrong::OnlineSoftmaxMistake::kDiagonalTileUnmasked,
                     "Your fused attention skips the tiles after the diagonal but processes the "
                     "diagonal key tile without the element mask: in that tile, query position p "
                     "may only see keys <= p (the tiles before it need no mask, that one does)."}}) {
      Pitfall& p = add(name + suffix, 0, message);
      p.attention = [tile, which = mistake](const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, int64_t h, int64_t h_k) {
        return wrong::attention_online_tiled(q, k, v, h, h_k, tile, which);
      };
      p.kernel_only = true;
    }
  }

  add("attention_no_scale", 0,
      "Your attention scores were not divided by sqrt(h_d) before the softmax.")
      .attention = wrong::attention_no_scale;
  add("attention_scale_one_over_hd", 0,
      "Your attention scores were divided by h_d; the scale is 1/sqrt(h_d).")
      .attention = wrong::attention_scale_one_over_hd;
  return t;
}

Pitfall make_correct() {
  Pitfall p;
  p.name = "correct";
  p.message = "the reference operators";
  p.linear = ref::linear;
  p.rms_norm = ref::rms_norm;
  p.softmax = ref::softmax_rows;
  p.rope = correct_rope;
  p.attention = ref::causal_gqa_attention;
  p.lm_head = [](const torch::Tensor& x, const torch::Tensor& w) {
    return ref::lm_head(ref::last_row(x), w);
  };
  p.weights = [](WeightLookup w) { return w; };
  p.swiglu = ref::swiglu;
  p.residual = ref::residual_add;
  return p;
}

}  // namespace

const std::vector<Pitfall>& pitfalls() {
  static const std::vector<Pitfall> table = make_table();
  return table;
}

const Pitfall& find_pitfall(std::string_view name) {
  for (const Pitfall& p : pitfalls()) {
    if (p.name == name) return p;
  }
  throw std::invalid_argument("find_pitfall: no pitfall named '" + std::string(name) + "'");
}

const Pitfall& correct_ops() {
  static const Pitfall p = make_correct();
  return p;
}

namespace wrong {

torch::Tensor linear_no_transpose(const torch::Tensor& x, const torch::Tensor& w) {
  require(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
          "linear_no_transpose: expected x [m, k] and w [n, k], got x " + shape_str(x) + " and w " +
              shape_str(w));
  // The n·k weights read row-major as a [k, n] matrix.
  return torch::matmul(f32(x), f32(w).contiguous().reshape({w.size(1), w.size(0)}));
}

torch::Tensor rms_norm_no_gamma(const torch::Tensor& x, const torch::Tensor& gamma, double eps) {
  return ref::rms_norm(x, torch::ones_like(f32(gamma)), eps);
}

torch::Tensor rms_norm_eps_outside(const torch::Tensor& x, const torch::Tensor& gamma, double eps) {
  require(x.dim() >= 1 && gamma.dim() == 1 && x.size(-1) == gamma.size(0),
          "rms_norm_eps_outside: expected x [s, d] and gamma [d], got x " + shape_str(x) +
              " and gamma " + shape_str(gamma));
  const torch::Tensor xf = f32(x);
  const torch::Tensor rms = xf.pow(2).mean(-1, /*keepdim=*/true).sqrt();
  return xf / (rms + eps) * f32(gamma).to(xf.device());
}

torch::Tensor rms_norm_eps_fixed(const torch::Tensor& x, const torch::Tensor& gamma, double fixed) {
  require(x.dim() >= 1 && gamma.dim() == 1 && x.size(-1) == gamma.size(0),
          "rms_norm_eps_fixed: expected x [s, d] and gamma [d], got x " + shape_str(x) +
              " and gamma " + shape_str(gamma));
  const torch::Tensor xf = f32(x);
  const torch::Tensor mean_sq = xf.pow(2).mean(-1, /*keepdim=*/true);
  return xf * torch::rsqrt(mean_sq + fixed) * f32(gamma).to(xf.device());
}

torch::Tensor linear_k_tail_dropped(const torch::Tensor& x, const torch::Tensor& w, int64_t tile) {
  require(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && tile > 0,
          "linear_k_tail_dropped: expected x [m, k] and w [n, k], got x " + shape_str(x) +
              " and w " + shape_str(w));
  const int64_t kept = x.size(1) / tile * tile;
  // Nothing is dropped when k is a multiple of the tile: not applicable (no candidate).
  require(kept != x.size(1), "linear_k_tail_dropped: k is a multiple of the tile");
  return torch::matmul(f32(x).narrow(1, 0, kept), f32(w).narrow(1, 0, kept).t());
}

torch::Tensor linear_k_loads_unbounded(const torch::Tensor& x, const torch::Tensor& w,
                                       int64_t tile) {
  require(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && tile > 0,
          "linear_k_loads_unbounded: expected x [m, k] and w [n, k], got x " + shape_str(x) +
              " and w " + shape_str(w));
  const int64_t k = x.size(1), width = (k + tile - 1) / tile * tile;
  // Nothing is read past k when k is a multiple of the tile: not applicable (no candidate).
  require(width != k, "linear_k_loads_unbounded: k is a multiple of the tile");
  const torch::Tensor in_bounds = ref::linear(x, w);
  // The terms past k: the next row's first elements of x times those of W. The guard bytes read
  // as about −3e-16: their products vanish next to real terms, but they keep a row that reads
  // past the end finite, as on the device.
  const torch::Tensor xs = overrun_columns(x, width, guard_float());
  const torch::Tensor ws = overrun_columns(w, width, guard_bf16_as_float());
  return in_bounds + torch::matmul(xs, ws.t());
}

torch::Tensor linear_bf16_accumulation(const torch::Tensor& x, const torch::Tensor& w,
                                       bool round_products) {
  require(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
          "linear_bf16_accumulation: expected x [m, k] and w [n, k], got x " + shape_str(x) +
              " and w " + shape_str(w));
  // One step per k on [m, n]: emulating a large product takes seconds, and the small shapes of
  // the same tests show the mistake first, so larger products are left out (the candidate is
  // skipped like any pitfall that does not apply).
  require(x.size(0) * w.size(0) * x.size(1) <= (int64_t{1} << 24),
          "linear_bf16_accumulation: emulated only up to 2^24 multiply-adds, got x " +
              shape_str(x) + " and w " + shape_str(w));
  const torch::Tensor xf = f32(x), wt = f32(w).t().contiguous();  // [k, n]
  torch::Tensor acc = torch::zeros({x.size(0), w.size(0)}, xf.options());
  for (int64_t kk = 0; kk < x.size(1); ++kk) {
    // The running sum rounded to bf16 after every term, as `acc += x*w` does with a bf16 acc;
    // with a bf16 += operator the product is rounded to bf16 first as well.
    torch::Tensor prod = xf.narrow(1, kk, 1) * wt.narrow(0, kk, 1);
    if (round_products) prod = prod.to(torch::kBFloat16).to(torch::kFloat);
    acc = (acc + prod).to(torch::kBFloat16).to(torch::kFloat);
  }
  return acc;
}

RopeTables rope_tables_fp32_angle(const torch::Tensor& positions, int64_t head_dim, double theta,
                                  const std::optional<RopeScaling>& scaling) {
  require(positions.dim() == 1 && !positions.is_floating_point(),
          "rope_tables_fp32_angle: positions must be [s] integers, got " + shape_str(positions));
  const torch::Tensor inv = ref::rope_inv_freq(head_dim, theta, scaling).to(torch::kFloat);
  const torch::Tensor pos = positions.to(torch::kCPU).to(torch::kFloat);
  const torch::Tensor angle = pos.unsqueeze(1) * inv.unsqueeze(0);  // fp32, one rounding
  // cos/sin of the fp32 angle itself, taken accurately: only the angle's rounding is the mistake.
  const torch::Tensor a = angle.to(torch::kDouble);
  return RopeTables{a.cos().to(torch::kFloat), a.sin().to(torch::kFloat)};
}

torch::Tensor rope_theta_fixed_500000(const torch::Tensor& x, const torch::Tensor& positions,
                                      int64_t n_heads, double /*theta*/,
                                      const std::optional<RopeScaling>& scaling) {
  return correct_rope(x, positions, n_heads, 500000.0, scaling);
}

torch::Tensor rope_sign_flipped(const torch::Tensor& x, const torch::Tensor& positions,
                                int64_t n_heads, double theta,
                                const std::optional<RopeScaling>& scaling) {
  require(x.dim() == 2 && n_heads > 0 && x.size(1) % n_heads == 0,
          "rope_sign_flipped: expected x [s, n_heads*h_d], got " + shape_str(x));
  RopeTables tab = ref::rope_tables(positions, x.size(1) / n_heads, theta, scaling);
  tab.sin = -tab.sin;
  return ref::apply_rope(x, tab, n_heads);
}

torch::Tensor rope_positions_from_one(const torch::Tensor& x, const torch::Tensor& positions,
                                      int64_t n_heads, double theta,
                                      const std::optional<RopeScaling>& scaling) {
  return correct_rope(x, positions + 1, n_heads, theta, scaling);
}

torch::Tensor swiglu_silu_on_up(const torch::Tensor& gate, const torch::Tensor& up) {
  return ref::swiglu(up, gate);
}

torch::Tensor residual_overwritten(const torch::Tensor& x, const torch::Tensor& y) {
  require(x.sizes() == y.sizes(),
          "residual_overwritten: shapes differ: " + shape_str(x) + " and " + shape_str(y));
  return f32(y).clone();
}

WeightLookup first_layer_weights(WeightLookup weights) {
  static const std::string kPrefix = "model.layers.";
  return [w = std::move(weights)](const std::string& name) {
    if (name.compare(0, kPrefix.size(), kPrefix) != 0) return w(name);
    const size_t dot = name.find('.', kPrefix.size());
    if (dot == std::string::npos) return w(name);
    return w(kPrefix + "0" + name.substr(dot));
  };
}

torch::Tensor softmax_no_max(const torch::Tensor& scores) {
  const torch::Tensor e = f32(scores).exp();
  return e / e.sum(-1, /*keepdim=*/true);
}

torch::Tensor rope_interleaved(const torch::Tensor& x, const torch::Tensor& positions,
                               int64_t n_heads, double theta,
                               const std::optional<RopeScaling>& scaling) {
  require(x.dim() == 2 && n_heads > 0 && x.size(1) % n_heads == 0 && (x.size(1) / n_heads) % 2 == 0,
          "rope_interleaved: expected x [s, n_heads*h_d] with h_d even, got " + shape_str(x));
  const int64_t s = x.size(0);
  const int64_t head_dim = x.size(1) / n_heads;
  const RopeTables tab = ref::rope_tables(positions, head_dim, theta, scaling);
  require(tab.cos.size(0) == s, "rope_interleaved: one position per row expected");
  // [s, n, h_d/2, 2]: element 2i and 2i+1 of each head side by side.
  const torch::Tensor pairs = f32(x).reshape({s, n_heads, head_dim / 2, 2});
  const torch::Tensor even = pairs.select(3, 0);
  const torch::Tensor odd = pairs.select(3, 1);
  const torch::Tensor c = tab.cos.to(x.device()).unsqueeze(1);  // [s, 1, h_d/2]
  const torch::Tensor sn = tab.sin.to(x.device()).unsqueeze(1);
  return torch::stack({even * c - odd * sn, even * sn + odd * c}, 3).reshape({s, x.size(1)});
}

torch::Tensor rope_base_10000(const torch::Tensor& x, const torch::Tensor& positions,
                              int64_t n_heads, double /*theta*/,
                              const std::optional<RopeScaling>& scaling) {
  return correct_rope(x, positions, n_heads, 10000.0, scaling);
}

torch::Tensor attention_gqa_modulo(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads) {
  AttentionVariant var;
  var.kv_modulo = true;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_no_mask(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads) {
  AttentionVariant var;
  var.mask = Mask::kNone;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_mask_diagonal_only(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, int64_t n_heads,
                                           int64_t n_kv_heads) {
  AttentionVariant var;
  var.mask = Mask::kDiagonalOnly;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_mask_includes_diagonal(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v, int64_t n_heads,
                                               int64_t n_kv_heads) {
  AttentionVariant var;
  var.mask = Mask::kIncludesDiagonal;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_mask_includes_diagonal_zero_rows(const torch::Tensor& q,
                                                         const torch::Tensor& k,
                                                         const torch::Tensor& v, int64_t n_heads,
                                                         int64_t n_kv_heads) {
  AttentionVariant var;
  var.mask = Mask::kIncludesDiagonal;
  var.empty_rows_zero = true;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_softmax_no_max(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, int64_t n_heads,
                                       int64_t n_kv_heads) {
  AttentionVariant var;
  var.stable_softmax = false;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_no_scale(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads) {
  AttentionVariant var;
  var.scale = false;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_scale_one_over_hd(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, int64_t n_heads,
                                          int64_t n_kv_heads) {
  AttentionVariant var;
  var.scale_by_hd = true;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_per_head_memory(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, int64_t n_heads,
                                        int64_t n_kv_heads) {
  AttentionVariant var;
  var.per_head_in = true;
  var.per_head_out = true;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_output_per_head(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, int64_t n_heads,
                                        int64_t n_kv_heads) {
  AttentionVariant var;
  var.per_head_out = true;
  return attention(q, k, v, n_heads, n_kv_heads, var);
}

torch::Tensor attention_online_tiled(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, int64_t n_heads, int64_t n_kv_heads,
                                     int64_t tile, OnlineSoftmaxMistake mistake) {
  detail::check_attention_shapes("attention_online_tiled", q, k, v, n_heads, n_kv_heads);
  require(q.size(0) == k.size(0), "attention_online_tiled: a prefill has as many queries as keys, "
                                  "got q " + shape_str(q) + " and k " + shape_str(k));
  require(tile > 0, "attention_online_tiled: tile must be positive");
  const int64_t s = q.size(0), head_dim = q.size(1) / n_heads;
  std::vector<int64_t> group(static_cast<size_t>(n_heads));
  for (int64_t i = 0; i < n_heads; ++i) group[i] = ref::kv_head_for(i, n_heads, n_kv_heads);
  const torch::Tensor g = torch::tensor(group, torch::kLong).to(q.device());
  const torch::Tensor qh = ref::to_heads(f32(q), n_heads) / std::sqrt(static_cast<double>(head_dim));
  const torch::Tensor kh = ref::to_heads(f32(k), n_kv_heads).index_select(0, g);  // [h, s, h_d]
  const torch::Tensor vh = ref::to_heads(f32(v), n_kv_heads).index_select(0, g);

  const auto idx = torch::TensorOptions().dtype(torch::kLong).device(q.device());
  const torch::Tensor row = torch::arange(s, idx).unsqueeze(1);  // [s, 1] query positions
  const torch::Tensor row_tile = torch::floor_divide(row, tile);
  const float inf = std::numeric_limits<float>::infinity();
  torch::Tensor m = torch::full({n_heads, s, 1}, -inf, qh.options());
  torch::Tensor l = torch::zeros({n_heads, s, 1}, qh.options());
  torch::Tensor acc = torch::zeros({n_heads, s, head_dim}, qh.options());
  for (int64_t k0 = 0; k0 < s; k0 += tile) {
    const int64_t n = std::min(tile, s - k0);
    const torch::Tensor key = torch::arange(k0, k0 + n, idx).unsqueeze(0);  // [1, n]
    const int64_t u = k0 / tile;                                             // this key tile
    torch::Tensor visible;
    switch (mistake) {
      case OnlineSoftmaxMistake::kDiagonalTileSkipped:
        visible = (key <= row) & (row_tile > u);
        break;
      case OnlineSoftmaxMistake::kDiagonalTileUnmasked:
        visible = (row_tile >= u).expand({s, n});
        break;
      default:
        visible = key <= row;
        break;
    }
    const torch::Tensor scores =
        torch::matmul(qh, kh.narrow(1, k0, n).transpose(1, 2)).masked_fill(~visible, -inf);
    const torch::Tensor m_new = torch::maximum(m, std::get<0>(scores.max(2, true)));
    // A row with nothing visible yet keeps p = 0 and its (empty) state.
    const torch::Tensor shift = torch::where(torch::isinf(m_new), torch::zeros_like(m_new), m_new);
    const torch::Tensor p = torch::exp(scores - shift);
    const torch::Tensor rescale = torch::exp(m - shift);
    const torch::Tensor pv = torch::matmul(p, vh.narrow(1, k0, n));
    l = (mistake == OnlineSoftmaxMistake::kSumNotRescaled ? l : l * rescale) + p.sum(2, true);
    acc = (mistake == OnlineSoftmaxMistake::kOutputNotRescaled ? acc : acc * rescale) + pv;
    m = m_new;
  }
  return ref::from_heads(acc / l);
}

torch::Tensor lm_head_first_row(const torch::Tensor& x_normed, const torch::Tensor& w) {
  return ref::lm_head(x_normed.dim() == 1 ? x_normed : x_normed[0], w);
}

torch::Tensor lm_head_all_rows(const torch::Tensor& x_normed, const torch::Tensor& w) {
  return ref::linear(x_normed, w);
}

WeightLookup norm_weight_reused(WeightLookup weights) {
  static const std::string kPost = "post_attention_layernorm.weight";
  static const std::string kInput = "input_layernorm.weight";
  return [w = std::move(weights)](const std::string& name) {
    const bool post = name.size() >= kPost.size() &&
                      name.compare(name.size() - kPost.size(), kPost.size(), kPost) == 0;
    return post ? w(name.substr(0, name.size() - kPost.size()) + kInput) : w(name);
  };
}

}  // namespace wrong

}  // namespace clockwork::ref
