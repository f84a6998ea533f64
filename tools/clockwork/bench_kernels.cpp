// The benchmark groups of `clockwork bench` for the launchers of kernels/kernels.h, one group per
// operator, in the order a decoder layer uses them. Each states the bytes and FLOPs it counts:
// bytes are the compulsory traffic (every operand read once, every output written once, bf16
// weights 2 bytes, fp32 activations 4), FLOPs count a multiply-add as 2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "tools/clockwork/bench.h"

namespace clockwork::cli::bench {

namespace {

using bf16 = __nv_bfloat16;

std::string dims(std::initializer_list<int64_t> sizes) {
  std::string out;
  for (int64_t v : sizes) out += (out.empty() ? "" : "x") + std::to_string(v);
  return out;
}

// "s=16 d=256": sizes of an op that is not a matmul.
std::string kv(std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  std::string out;
  for (const auto& [name, v] : sizes)
    out += (out.empty() ? "" : " ") + std::string(name) + "=" + std::to_string(v);
  return out;
}

Row make_row(const char* op, const std::string& variant, const std::string& case_name,
             const Shape& shape, std::string dims_text, double bytes, double flops, Peak peak,
             const Timing& t) {
  Row r;
  r.op = op;
  r.variant = variant;
  r.case_name = case_name;
  r.shape = shape.name;
  r.dims = std::move(dims_text);
  r.bytes = bytes;
  r.flops = flops;
  r.peak = flops > 0 ? peak : Peak::None;
  r.time = t;
  return r;
}

// ---- embedding ---------------------------------------------------------------------------------

void run_embedding(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  for (const Shape& sh : ctx.options().shapes) {
    const size_t s = sh.s, d = sh.d;
    DeviceBuffer<int32_t> ids(s);
    std::vector<int32_t> host(s);
    // Ids spread over the table, so every row gathered is a different part of memory.
    for (size_t i = 0; i < s; ++i) host[i] = static_cast<int32_t>((i * 7919 + 13) % sh.vocab);
    ids.upload(host);
    DeviceBuffer<bf16> table(static_cast<size_t>(sh.vocab) * d);
    DeviceBuffer<float> x(s * d);
    const Timing t = ctx.time(
        [&] { kernels::embedding(ids.get(), table.get(), x.get(), sh.s, sh.d, sh.vocab); });
    // s int32 ids + s bf16 rows of the table read, s fp32 rows written; no arithmetic.
    ctx.add(make_row("embedding", "kernel", "embed_tokens", sh, kv({{"s", sh.s}, {"d", sh.d}}),
                     s * 4.0 + s * d * 2.0 + s * d * 4.0, 0, Peak::None, t));
  }
}

// ---- matmul ------------------------------------------------------------------------------------

// The distinct projection shapes of a decoder layer (o_proj has q_proj's, v_proj k_proj's, up_proj
// gate_proj's, since d = h·h_d).
struct Projection {
  const char* name;
  int n, k;
};

std::vector<Projection> projections(const Shape& sh) {
  const int q = sh.n_heads * sh.head_dim, kv = sh.n_kv_heads * sh.head_dim;
  return {{"q_proj", q, sh.d},
          {"k_proj", kv, sh.d},
          {"gate_proj", sh.d_ff, sh.d},
          {"down_proj", sh.d, sh.d_ff}};
}

void run_matmul(Context& ctx) {
  const Options& o = ctx.options();
  const bool want_blas = o.wants("cublas") || o.wants("cublas-fp32");
  Blas* blas = want_blas ? ctx.blas() : nullptr;
  if (!blas && want_blas && (o.wants("naive") || o.wants("tiled"))) {
    ctx.note("matmul: no cuBLAS on the CPU backend; compare naive with tiled instead");
  }
  for (const Shape& sh : o.shapes) {
    const std::vector<Projection> projs = projections(sh);
    size_t max_k = 0, max_n = 0, max_w = 0;
    for (const Projection& p : projs) {
      max_k = std::max<size_t>(max_k, p.k);
      max_n = std::max<size_t>(max_n, p.n);
      max_w = std::max(max_w, static_cast<size_t>(p.n) * p.k);
    }
    const size_t m = sh.s;
    DeviceBuffer<float> x(m * max_k), y(m * max_n);
    DeviceBuffer<bf16> w(max_w);
    // cuBLAS takes both operands in one type: a bf16 copy of x, an fp32 copy of w.
    std::unique_ptr<DeviceBuffer<bf16>> x16;
    std::unique_ptr<DeviceBuffer<float>> w32;
    if (blas && o.wants("cublas")) x16 = std::make_unique<DeviceBuffer<bf16>>(m * max_k);
    if (blas && o.wants("cublas-fp32")) w32 = std::make_unique<DeviceBuffer<float>>(max_w);

    for (const Projection& p : projs) {
      const double n = p.n, k = p.k, rows = static_cast<double>(m);
      const double flops = 2 * rows * n * k;
      // bf16 weight + fp32 x + fp32 y.
      const double bytes = n * k * 2 + rows * k * 4 + rows * n * 4;
      const std::string size = dims({sh.s, p.n, p.k});
      auto one = [&](const std::string& variant, const std::function<void()>& launch,
                     double variant_bytes, Peak peak, bool reference) {
        Row r = make_row("matmul", variant, p.name, sh, size, variant_bytes, flops, peak,
                         ctx.time(launch));
        r.reference = reference;
        ctx.add(r);
        return r;
      };
      if (o.wants("naive")) {
        one(
            "naive",
            [&] {
              kernels::matmul(x.get(), w.get(), y.get(), sh.s, p.n, p.k, nullptr,
                              kernels::MatmulVariant::Naive);
            },
            bytes, Peak::Fp32, false);
      }
      if (o.wants("tiled")) {
        const Row r = one(
            "tiled",
            [&] {
              kernels::matmul(x.get(), w.get(), y.get(), sh.s, p.n, p.k, nullptr,
                              kernels::MatmulVariant::Tiled);
            },
            bytes, Peak::Fp32, false);
        // One leaderboard figure per shape, on the largest projection: at one row a matmul is a
        // GEMV bound by the weight bytes, with many rows it can be bound by arithmetic.
        if (std::string(p.name) == "gate_proj" && r.time.median_ms > 0) {
          const double secs = r.time.median_ms * 1e-3;
          if (sh.s == 1) {
            ctx.leaderboard("matmul tiled GB/s (gate_proj, " + sh.name + ")", bytes / secs / 1e9,
                            Order::Descending);
          } else {
            ctx.leaderboard("matmul tiled TFLOP/s (gate_proj, " + sh.name + ")",
                            flops / secs / 1e12, Order::Descending);
          }
        }
      }
      if (x16) {
        // bf16 weight + bf16 x + fp32 y; tensor cores.
        one(
            "cublas", [&] { blas->gemm_bf16(x16->get(), w.get(), y.get(), sh.s, p.n, p.k); },
            n * k * 2 + rows * k * 2 + rows * n * 4, Peak::Bf16Tensor, true);
      }
      if (w32) {
        // fp32 weight + fp32 x + fp32 y; CUDA cores.
        one(
            "cublas-fp32", [&] { blas->gemm_f32(x.get(), w32->get(), y.get(), sh.s, p.n, p.k); },
            n * k * 4 + rows * k * 4 + rows * n * 4, Peak::Fp32, false);
      }
    }
  }
}

// ---- rmsnorm -----------------------------------------------------------------------------------

void run_rmsnorm(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  for (const Shape& sh : ctx.options().shapes) {
    const double s = sh.s, d = sh.d;
    DeviceBuffer<float> x(static_cast<size_t>(sh.s) * sh.d), y(x.count());
    DeviceBuffer<bf16> gamma(sh.d);
    const Timing t =
        ctx.time([&] { kernels::rmsnorm(x.get(), gamma.get(), y.get(), sh.s, sh.d, 1e-5f); });
    // x read, y written (fp32), gamma (bf16) read once. Per element: square, add, scale, gamma.
    ctx.add(make_row("rmsnorm", "kernel", "input_layernorm", sh, kv({{"rows", sh.s}, {"d", sh.d}}),
                     2 * s * d * 4 + d * 2, 4 * s * d, Peak::Fp32, t));
  }
}

// ---- rope --------------------------------------------------------------------------------------

void run_rope(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  for (const Shape& sh : ctx.options().shapes) {
    const int half = sh.head_dim / 2;
    // Real tables: a rotation keeps the norm, so repeated runs in place never drift to denormals.
    const std::vector<double> inv_freq = kernels::rope_inv_freq(sh.head_dim, 500000.0);
    std::vector<float> cos_host(static_cast<size_t>(sh.s) * half), sin_host(cos_host.size());
    for (int p = 0; p < sh.s; ++p) {
      for (int i = 0; i < half; ++i) {
        cos_host[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(p * inv_freq[i]));
        sin_host[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(p * inv_freq[i]));
      }
    }
    DeviceBuffer<float> cos_table(cos_host.size()), sin_table(sin_host.size());
    cos_table.upload(cos_host);
    sin_table.upload(sin_host);
    const std::pair<const char*, int> cases[] = {{"q", sh.n_heads}, {"k", sh.n_kv_heads}};
    for (const auto& [name, heads] : cases) {
      DeviceBuffer<float> x(static_cast<size_t>(sh.s) * heads * sh.head_dim);
      const Timing t = ctx.time([&] {
        kernels::rope_apply(x.get(), cos_table.get(), sin_table.get(), sh.s, heads, sh.head_dim);
      });
      const double elems = static_cast<double>(x.count());
      // x read and written, both tables read; a pair takes 4 multiplies and 2 adds.
      ctx.add(make_row("rope", "kernel", name, sh,
                       kv({{"s", sh.s}, {"heads", heads}, {"h_d", sh.head_dim}}),
                       2 * elems * 4 + 2.0 * sh.s * half * 4, 3 * elems, Peak::Fp32, t));
    }
  }
}

// ---- attention and its softmax -----------------------------------------------------------------

// Attention of one query row needs the keys of a whole prompt; without a KV cache that is the
// prefill shape, so s = 1 has nothing to measure.
bool skip_single_row(Context& ctx, const Shape& sh, const char* op, bool& noted) {
  if (sh.s > 1) return false;
  if (!noted) {
    ctx.note(std::string(op) + ": skipped at s=1 (" + sh.name +
             "): one row attends to a KV cache, which is the decode group's job");
    noted = true;
  }
  return true;
}

void run_softmax(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  bool noted = false;
  for (const Shape& sh : ctx.options().shapes) {
    if (skip_single_row(ctx, sh, "softmax", noted)) continue;
    const double s = sh.s;
    DeviceBuffer<float> scores(static_cast<size_t>(sh.s) * sh.s);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    const Timing t = ctx.time([&] { kernels::causal_softmax(scores.get(), sh.s, sh.s, scale); });
    // One head's s x s scores read and written in place. The s(s+1)/2 visible entries each take
    // a scale, a subtraction, an exp, an add and a divide (counted as 5).
    ctx.add(make_row("softmax", "kernel", "one_head", sh, kv({{"rows", sh.s}, {"cols", sh.s}}),
                     2 * s * s * 4, 5 * s * (s + 1) / 2, Peak::Fp32, t));
  }
}

// Seeded values in [-1, 1), the same on every machine. Attention's work depends on its inputs:
// with every score equal no row's maximum ever moves, so the online softmax never rescales, and
// tensor cores multiplying constants draw less power and may hold a higher clock.
void fill_uniform(DeviceBuffer<float>& buffer, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> host(buffer.count());
  for (float& x : host) x = dist(gen);
  buffer.upload(host);
}

void fill_attention_inputs(DeviceBuffer<float>& q, DeviceBuffer<float>& k, DeviceBuffer<float>& v) {
  fill_uniform(q, 1);
  fill_uniform(k, 2);
  fill_uniform(v, 3);
}

void run_attention(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  bool noted = false;
  for (const Shape& sh : ctx.options().shapes) {
    if (skip_single_row(ctx, sh, "attention", noted)) continue;
    const size_t s = sh.s, q_width = static_cast<size_t>(sh.n_heads) * sh.head_dim,
                 kv_width = static_cast<size_t>(sh.n_kv_heads) * sh.head_dim;
    DeviceBuffer<float> q(s * q_width), k(s * kv_width), v(s * kv_width), out(s * q_width),
        scores(s * s);
    fill_attention_inputs(q, k, v);
    const Timing t = ctx.time([&] {
      kernels::attention(q.get(), k.get(), v.get(), out.get(), scores.get(), sh.s, sh.n_heads,
                         sh.n_kv_heads, sh.head_dim);
    });
    const double sd = static_cast<double>(s), heads = sh.n_heads, hd = sh.head_dim;
    // Q·Kᵀ and P·V over the full s x s square (the masked half is computed, then zeroed):
    // 2·s·s·h_d each, per query head.
    const double flops = heads * 4 * sd * sd * hd;
    // q, k, v read and out written once, plus the unfused design's traffic through each head's
    // s x s score matrix: written by Q·Kᵀ, read and written by the softmax, read by P·V.
    const double bytes = 4.0 * (2 * s * q_width + 2 * s * kv_width) + heads * 4 * sd * sd * 4;
    // Device memory the call needs: q, k, v, out and the [s, s] workspace.
    const int64_t memory = static_cast<int64_t>(4 * (2 * s * q_width + 2 * s * kv_width + s * s));
    ctx.add(make_row("attention", "kernel", "causal_gqa", sh,
                     kv({{"s", sh.s},
                         {"h", sh.n_heads},
                         {"h_k", sh.n_kv_heads},
                         {"h_d", sh.head_dim},
                         {"mem_KiB", memory / 1024}}),
                     bytes, flops, Peak::Fp32, t));
  }
}

// Milestone 5's fused attention on the same shapes: compare its time and its memory (no [s, s]
// workspace) with the rows of `attention` above. "tensor-cores" and "mma" are its bf16 versions on
// tensor cores (wmma, and mma.sync as FlashAttention-2 issues them), the form FlashAttention's
// published figures are measured in.
void run_flash_attention(Context& ctx) {
  // The two tensor-core kernels, wmma ("tensor-cores") and mma.sync ("mma"): same blocks, same
  // FLOPs and bytes.
  using TensorCoreKernel =
      void (*)(const float*, const float*, const float*, float*, int, int, int, int, cudaStream_t);
  const std::pair<const char*, TensorCoreKernel> tensor_core_variants[] = {
      {"tensor-cores", kernels::flash_attention_tensor_cores},
      {"mma", kernels::flash_attention_mma}};
  const bool fp32 = ctx.options().wants("kernel");
  if (!fp32 && !ctx.options().wants("tensor-cores") && !ctx.options().wants("mma")) return;
  bool noted = false, noted_tc = false;
  for (const Shape& sh : ctx.options().shapes) {
    if (skip_single_row(ctx, sh, "flash_attention", noted)) continue;
    const size_t s = sh.s, q_width = static_cast<size_t>(sh.n_heads) * sh.head_dim,
                 kv_width = static_cast<size_t>(sh.n_kv_heads) * sh.head_dim;
    DeviceBuffer<float> q(s * q_width), k(s * kv_width), v(s * kv_width), out(s * q_width);
    fill_attention_inputs(q, k, v);
    const double sd = static_cast<double>(s), heads = sh.n_heads, hd = sh.head_dim;
    const int64_t memory = static_cast<int64_t>(4 * (2 * s * q_width + 2 * s * kv_width));
    const std::string dims = kv({{"s", sh.s},
                                 {"h", sh.n_heads},
                                 {"h_k", sh.n_kv_heads},
                                 {"h_d", sh.head_dim},
                                 {"mem_KiB", memory / 1024}});
    if (fp32) {
      const Timing t = ctx.time([&] {
        kernels::flash_attention(q.get(), k.get(), v.get(), out.get(), sh.s, sh.n_heads,
                                 sh.n_kv_heads, sh.head_dim);
      });
      const double tile = kernels::flash_attention_tile(sh.n_heads, sh.n_kv_heads, sh.head_dim);
      const double tiles = std::ceil(sd / tile);
      // Q·Kᵀ and P·V over the tile pairs on and below the diagonal only: n(n+1)/2 of n² for
      // n = ceil(s / tile), 2·tile²·h_d each per query head.
      const double pairs = tiles * (tiles + 1) / 2;
      const double flops = heads * pairs * 4 * tile * tile * hd;
      // q read and out written once; each block reads the K and V tiles up to its diagonal, once
      // for its whole GQA group.
      const double bytes = 4.0 * (2 * sd * q_width) + sh.n_kv_heads * pairs * 2 * tile * hd * 4;
      ctx.add(make_row("flash_attention", "kernel", "causal_gqa", sh, dims, bytes, flops,
                       Peak::Fp32, t));
    }
    for (const auto& [variant, kernel] : tensor_core_variants) {
      if (!ctx.options().wants(variant)) continue;
      const Timing t = [&]() -> Timing {
        try {
          return ctx.time([&] {
            kernel(q.get(), k.get(), v.get(), out.get(), sh.s, sh.n_heads, sh.n_kv_heads,
                   sh.head_dim, nullptr);
          });
        } catch (const std::exception& e) {  // a shape or a GPU it does not take
          if (!noted_tc)
            ctx.note(std::string("flash_attention ") + variant + ": skipped: " + e.what());
          noted_tc = true;
          return {};
        }
      }();
      if (t.repetitions == 0) continue;
      // FlashAttention's own count, so that the TFLOP/s compare with its published figures:
      // 4·s²·h·h_d for the two products, halved for causality.
      const double flops = 2 * sd * sd * heads * hd;
      // q read and out written once; K and V read, as fp32, once per block of `positions` up
      // to its last position.
      const double positions =
          kernels::flash_attention_tensor_cores_tile(sh.n_heads, sh.n_kv_heads, sh.head_dim);
      const double blocks = std::ceil(sd / positions);
      const double kv_reads = sh.n_kv_heads * blocks * (blocks + 1) / 2 * positions * 2 * hd * 4;
      ctx.add(make_row("flash_attention", variant, "causal_gqa", sh, dims,
                       4.0 * (2 * sd * q_width) + kv_reads, flops, Peak::Bf16Tensor, t));
    }
  }
}

// ---- swiglu and residual -----------------------------------------------------------------------

void run_swiglu(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  for (const Shape& sh : ctx.options().shapes) {
    const size_t n = static_cast<size_t>(sh.s) * sh.d_ff;
    DeviceBuffer<float> gate(n), up(n), out(n);
    const Timing t = ctx.time([&] { kernels::swiglu(gate.get(), up.get(), out.get(), n); });
    // gate and up read, out written; z / (1 + e^-z) · u counted as 4 operations.
    ctx.add(make_row("swiglu", "kernel", "ffn", sh, kv({{"s", sh.s}, {"d_ff", sh.d_ff}}),
                     3.0 * n * 4, 4.0 * n, Peak::Fp32, t));
  }
}

void run_residual(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  for (const Shape& sh : ctx.options().shapes) {
    const size_t n = static_cast<size_t>(sh.s) * sh.d;
    DeviceBuffer<float> x(n), y(n);
    const Timing t = ctx.time([&] { kernels::residual_add(x.get(), y.get(), n); });
    // x read and written, y read; one add per element.
    ctx.add(make_row("residual", "kernel", "add", sh, kv({{"s", sh.s}, {"d", sh.d}}), 3.0 * n * 4,
                     static_cast<double>(n), Peak::Fp32, t));
  }
}

// ---- lm_head and argmax ------------------------------------------------------------------------

// Both work on the last row only, so they depend on d and V, not on s: each distinct (V, d) is
// measured once.
void run_lm_head(Context& ctx) {
  const Options& o = ctx.options();
  Blas* blas = o.wants("cublas") ? ctx.blas() : nullptr;
  std::set<std::pair<int, int>> done;
  for (const Shape& sh : o.shapes) {
    if (!done.insert({sh.vocab, sh.d}).second) continue;
    const double vocab = sh.vocab, d = sh.d;
    DeviceBuffer<float> x(sh.d), logits(sh.vocab);
    DeviceBuffer<bf16> w(static_cast<size_t>(sh.vocab) * sh.d);
    const std::string size = dims({1, sh.vocab, sh.d});
    // The bf16 weight dominates: V·d·2 bytes (1 GB for Llama-3-8B), then x and the logits.
    const double flops = 2 * vocab * d;
    if (o.wants("kernel")) {
      const Timing t =
          ctx.time([&] { kernels::lm_head(x.get(), w.get(), logits.get(), sh.vocab, sh.d); });
      const double bytes = vocab * d * 2 + d * 4 + vocab * 4;
      ctx.add(make_row("lm_head", "kernel", "gemv", sh, size, bytes, flops, Peak::Fp32, t));
      if (t.median_ms > 0) {
        ctx.leaderboard("lm_head GB/s (" + sh.name + ")", bytes / (t.median_ms * 1e-3) / 1e9,
                        Order::Descending);
      }
    }
    if (blas) {
      DeviceBuffer<bf16> x16(sh.d);
      const Timing t =
          ctx.time([&] { blas->gemm_bf16(x16.get(), w.get(), logits.get(), 1, sh.vocab, sh.d); });
      Row r = make_row("lm_head", "cublas", "gemv", sh, size, vocab * d * 2 + d * 2 + vocab * 4,
                       flops, Peak::Bf16Tensor, t);
      r.reference = true;
      ctx.add(r);
    }
  }
}

void run_argmax(Context& ctx) {
  if (!ctx.options().wants("kernel")) return;
  std::set<int> done;
  for (const Shape& sh : ctx.options().shapes) {
    if (!done.insert(sh.vocab).second) continue;
    DeviceBuffer<float> values(sh.vocab);
    DeviceBuffer<int32_t> index(1);
    const Timing t = ctx.time([&] { kernels::argmax(values.get(), sh.vocab, index.get()); });
    // V logits read, one index written; comparisons are not floating-point arithmetic.
    ctx.add(make_row("argmax", "kernel", "logits", sh, kv({{"V", sh.vocab}}), sh.vocab * 4.0 + 4, 0,
                     Peak::None, t));
  }
}

const std::vector<std::string> kOneKernel = {"kernel"};

}  // namespace

CLOCKWORK_BENCH_GROUP("embedding", "gather token rows of the bf16 table (memory-bound)",
                      run_embedding, kOneKernel);
CLOCKWORK_BENCH_GROUP("rmsnorm", "RMSNorm of s rows of d (memory-bound)", run_rmsnorm, kOneKernel);
CLOCKWORK_BENCH_GROUP("matmul",
                      "the projections x·Wᵀ with bf16 W: q/o, k/v, gate/up and down shapes",
                      run_matmul, {"naive", "tiled", "cublas", "cublas-fp32"});
CLOCKWORK_BENCH_GROUP("rope", "RoPE in place on Q (h heads) and K (h_k heads)", run_rope,
                      kOneKernel);
CLOCKWORK_BENCH_GROUP("softmax", "causal softmax of one head's s x s scores", run_softmax,
                      kOneKernel);
CLOCKWORK_BENCH_GROUP("attention", "causal GQA attention over the prompt, all heads", run_attention,
                      kOneKernel);
CLOCKWORK_BENCH_GROUP(
    "flash_attention",
    "fused causal GQA attention over the prompt (online softmax, no s x s buffer)",
    run_flash_attention, {"kernel", "tensor-cores", "mma"});
CLOCKWORK_BENCH_GROUP("swiglu", "SiLU(gate) * up over s x d_ff (memory-bound)", run_swiglu,
                      kOneKernel);
CLOCKWORK_BENCH_GROUP("residual", "x += y over s x d (memory-bound)", run_residual, kOneKernel);
CLOCKWORK_BENCH_GROUP("lm_head", "the last row's logits, a GEMV over the V x d bf16 weight",
                      run_lm_head, {"kernel", "cublas"});
CLOCKWORK_BENCH_GROUP("argmax", "index of the largest of V logits", run_argmax, kOneKernel);

}  // namespace clockwork::cli::bench
