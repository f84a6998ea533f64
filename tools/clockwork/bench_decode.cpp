// The `decode` group of `clockwork bench`: what the KV cache of milestone 4 costs and saves.
//
//   * decode_attention rows: one query per head against a cache of len positions, in one pass and
//     split across blocks (flash-decoding), at the shape's widths. Each K and V byte is read once,
//     so the bytes are 2·len·h_k·h_d fp32 plus the query and the output: the GB/s column against
//     the device's peak says how close the kernel comes to reading the cache at memory speed.
//   * decode rows (with --model DIR): generation from prompts of each length, timed per new
//     token, without a cache (every step re-runs the whole sequence), with the contiguous cache
//     and with the paged one. The uncached cost grows with the prompt; the cached one stays flat.
//     The variant `graphs` adds, for each cache, the same generation with each decode step run
//     as one CUDA graph (milestone 5): the launch overhead of the step's many small kernels is
//     what it removes on a GPU. On the CPU backend a launch costs a hand-over to the thread pool,
//     not a GPU's launch latency, so the rows there show the cost of capturing and replaying,
//     not what a GPU gains.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/kernels.h"
#include "harness/pipeline/cached_model.h"
#include "kernels/steps.h"
#include "harness/pipeline/decode_bench.h"
#include "tools/clockwork/bench.h"
#include "harness/model/model_dir.h"

namespace clockwork::cli::bench {

namespace {

std::vector<int> lengths_from(const Context& ctx) {
  const std::string text = ctx.options().args->get("decode-lengths").value_or(
      ctx.simulation() ? "32,64,128,256" : "256,1024,4096");
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const auto v = parse_int(text.substr(start, comma - start));
    if (!v || *v < 1 || *v > 1 << 20) {
      throw UsageError("--decode-lengths '" + text +
                       "': expected whole numbers from 1 to 1048576, comma-separated");
    }
    out.push_back(static_cast<int>(*v));
    start = comma + 1;
  }
  return out;
}

int multiprocessors() {
  int sms = 1;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 1;
  }
  return sms;
}

void run_attention_rows(Context& ctx, const std::vector<int>& lengths) {
  const Options& o = ctx.options();
  const bool one_pass = o.wants("one-pass"), split = o.wants("split");
  if (!one_pass && !split) return;
  const int sms = multiprocessors();
  std::set<std::tuple<int, int, int>> done;  // attention depends on h, h_k and h_d only
  for (const Shape& sh : o.shapes) {
    if (!done.insert({sh.n_heads, sh.n_kv_heads, sh.head_dim}).second) continue;
    const int width = sh.n_kv_heads * sh.head_dim, q_width = sh.n_heads * sh.head_dim;
    const int longest = *std::max_element(lengths.begin(), lengths.end());
    DeviceBuffer<float> k(static_cast<size_t>(longest) * width),
        v(static_cast<size_t>(longest) * width);
    DeviceBuffer<float> q(q_width), out(q_width);
    for (int len : lengths) {
      kernels::KvCacheView cache;
      cache.k = k.get();
      cache.v = v.get();
      cache.table_pages = 1;
      cache.num_pages = 1;
      cache.page_size = len;
      cache.n_kv_heads = sh.n_kv_heads;
      cache.head_dim = sh.head_dim;
      const double bytes = decode_attention_bytes(len, sh.n_heads, sh.n_kv_heads, sh.head_dim);
      const double flops = 4.0 * sh.n_heads * sh.head_dim * len;  // q·k and p·v, 2 FLOP each
      const std::string size = "len=" + std::to_string(len) + " h=" + std::to_string(sh.n_heads) +
                               " h_k=" + std::to_string(sh.n_kv_heads) +
                               " h_d=" + std::to_string(sh.head_dim);
      auto add = [&](const char* variant, const std::string& dims, double b, const Timing& t) {
        Row r;
        r.op = "decode_attention";
        r.variant = variant;
        r.case_name = "cache";
        r.shape = sh.name;
        r.dims = dims;
        r.bytes = b;
        r.flops = flops;
        r.peak = Peak::Fp32;
        r.time = t;
        ctx.add(r);
        if (len == longest && t.median_ms > 0) {
          ctx.leaderboard("decode attention GB/s (" + std::string(variant) + ", len=" +
                              std::to_string(len) + ", " + sh.name + ")",
                          b / (t.median_ms * 1e-3) / 1e9, Order::Descending);
        }
      };
      if (one_pass) {
        const Timing t = ctx.time(
            [&] { kernels::decode_attention(q.get(), cache, len, out.get(), sh.n_heads); });
        add("one-pass", size, bytes, t);
      }
      if (split) {
        // The chunk the model would choose here; where it would not split, the shortest chunk
        // it ever uses, to show what splitting costs on a short cache.
        int chunk = auto_split_size(len, sh.n_kv_heads, sms);
        if (chunk == 0) chunk = std::min(len, kMinSplitChunk);
        const int chunks = kernels::decode_attention_splits(len, chunk);
        DeviceBuffer<float> po(static_cast<size_t>(chunks) * q_width),
            pl(static_cast<size_t>(chunks) * sh.n_heads);
        const Timing t = ctx.time([&] {
          kernels::decode_attention_split(q.get(), cache, len, out.get(), sh.n_heads, chunk,
                                          po.get(), pl.get());
        });
        // The partial states are written once and read once by the merge.
        const double partial = 2.0 * chunks * sh.n_heads * (sh.head_dim + 1) * 4.0;
        add("split", size + " chunk=" + std::to_string(chunk), bytes + partial, t);
      }
    }
  }
}

void run_generation_rows(Context& ctx, const std::vector<int>& lengths) {
  const Options& o = ctx.options();
  std::vector<KvCacheKind> modes;
  for (KvCacheKind k : {KvCacheKind::None, KvCacheKind::Contiguous, KvCacheKind::Paged}) {
    if (o.wants(kv_cache_kind_name(k))) modes.push_back(k);
  }
  if (modes.empty()) return;
  const std::optional<std::string> model_arg = o.args->get("model");
  if (!model_arg) {
    ctx.note("decode: pass --model DIR (e.g. a model written by `clockwork tiny-model`) to time "
             "generation with and without the KV cache");
    return;
  }
  const int tokens = static_cast<int>(o.args->get_int("decode-tokens", 8, 1, 4096));
  const bool graphs = o.wants("graphs");
  if (graphs && ctx.simulation()) {
    ctx.note("decode: the +graphs rows are a CPU simulation: a launch here is a hand-over to the "
             "thread pool, not a GPU's launch latency, so they measure capture and replay, not "
             "what graphs save on a GPU");
  }
  CachedModel model = CachedModel::load(require_model_dir(*model_arg));
  const int context = static_cast<int>(model.config().max_position_embeddings);
  std::vector<int> prompts;
  for (int p : lengths) {
    if (p + tokens <= context) {
      prompts.push_back(p);
    } else {
      ctx.note("decode: prompt length " + std::to_string(p) + " skipped: with " +
               std::to_string(tokens) + " new tokens it exceeds the model's context of " +
               std::to_string(context));
    }
  }
  for (const DecodeTiming& d : time_decode(model, prompts, tokens, modes, 16, 1, graphs)) {
    Row r;
    r.op = "decode";
    r.variant = std::string(kv_cache_kind_name(d.mode)) + (d.cuda_graphs ? "+graphs" : "");
    r.case_name = "generate";
    r.shape = model_arg->substr(model_arg->find_last_of('/') + 1);
    r.dims = "prompt=" + std::to_string(d.prompt_length) + " tokens=" + std::to_string(d.tokens);
    r.peak = Peak::None;
    r.time.median_ms = r.time.min_ms = r.time.max_ms = r.time.p10_ms = r.time.p90_ms =
        d.ms_per_token;
    r.time.repetitions = d.tokens;
    r.extra_name = "tokens_per_s";
    r.extra_value = d.tokens_per_s;
    r.plot_x = d.prompt_length;
    ctx.add(r);
    ctx.leaderboard("decode ms/token (" + r.variant + ", prompt=" +
                        std::to_string(d.prompt_length) + ")",
                    d.ms_per_token, Order::Ascending);
  }
}

void run_decode(Context& ctx) {
  const std::vector<int> lengths = lengths_from(ctx);
  run_attention_rows(ctx, lengths);
  run_generation_rows(ctx, lengths);
}

}  // namespace

CLOCKWORK_BENCH_GROUP("decode",
                      "KV-cache decode: decode attention's bandwidth, and ms/token with and "
                      "without the cache (--model)",
                      run_decode, {"one-pass", "split", "none", "contiguous", "paged", "graphs"},
                      {{"model", "DIR",
                        "decode: time generation with and without the KV cache on this model "
                        "(e.g. one written by clockwork tiny-model)"},
                       {"decode-lengths", "LIST",
                        "decode: cache and prompt lengths, comma-separated (default 32,64,128,256 "
                        "on the CPU, 256,1024,4096 on the GPU)"},
                       {"decode-tokens", "N", "decode: new tokens timed per row (default 8)"}});

}  // namespace clockwork::cli::bench
