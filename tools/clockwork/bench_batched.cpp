// The `batched` group of `clockwork bench`: what decoding a batch of requests at once buys
// (milestone 5).
//
//   * batched_decode_attention rows: one launch for a batch of B requests over one shared page
//     pool, at B = 1, 4, 16, 64. Case "uniform": every request holds L positions; case "skewed":
//     one request holds B·L positions and the others 1, the batch where one block per request
//     leaves the GPU idle and the balanced split (plan_split_kv) helps. Each K and V byte is
//     read once, so the GB/s column against the device's peak says how close the kernel comes
//     to memory speed; tokens/s is B per launch.
//   * batched_generate rows (with --model DIR): BatchedGenerator decoding B requests at once,
//     timed over the steps that only decode (no prefill): new tokens per second against B. The
//     weights are read once per step whatever B is, so the rate grows with B until the step is
//     no longer bound by reading them.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "harness/model/model_dir.h"
#include "harness/pipeline/batched_generator.h"
#include "harness/pipeline/decode_bench.h"
#include "harness/pipeline/kv_cache.h"
#include "harness/pipeline/split_kv_plan.h"
#include "kernels/kernels.h"
#include "tools/clockwork/bench.h"

namespace clockwork::cli::bench {

namespace {

std::vector<int> list_option(const Context& ctx, const char* name, const char* fallback) {
  const std::string text = ctx.options().args->get(name).value_or(fallback);
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const auto v = parse_int(text.substr(start, comma - start));
    if (!v || *v < 1 || *v > 65535) {
      throw UsageError(std::string("--") + name + " '" + text +
                       "': expected whole numbers from 1 to 65535, comma-separated");
    }
    out.push_back(static_cast<int>(*v));
    start = comma + 1;
  }
  return out;
}

// A prompt of pseudo-random ids (a fixed LCG: the same on every machine).
std::vector<int32_t> prompt_ids(int n, int vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t x = seed;
  for (int32_t& id : ids) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

int multiprocessors() {
  int sms = 1;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 1;
  }
  return sms;
}

void run_attention_rows(Context& ctx, const std::vector<int>& batches, int len) {
  const Options& o = ctx.options();
  const bool one_pass = o.wants("one-pass"), split = o.wants("split");
  if (!one_pass && !split) return;
  const int target_blocks = split_kv_target_blocks(multiprocessors());
  const int page_size = 16;
  std::set<std::tuple<int, int, int>> done;
  for (const Shape& sh : o.shapes) {
    if (!done.insert({sh.n_heads, sh.n_kv_heads, sh.head_dim}).second) continue;
    const int width = sh.n_kv_heads * sh.head_dim, q_width = sh.n_heads * sh.head_dim;
    for (const char* case_name : {"uniform", "skewed"}) {
      for (int B : batches) {
        std::vector<int> lens(static_cast<size_t>(B), len);
        if (std::string(case_name) == "skewed") {
          if (B == 1) continue;  // the same as uniform
          std::fill(lens.begin(), lens.end(), 1);
          lens[0] = B * len;
        }
        int stride = 0, pages = 0;
        for (int l : lens) {
          stride = std::max(stride, (l + page_size - 1) / page_size);
          pages += (l + page_size - 1) / page_size;
        }
        const std::vector<int32_t> order = shuffled_page_order(pages);
        std::vector<int32_t> tables(static_cast<size_t>(B) * stride, -1);
        size_t next = 0;
        for (int b = 0; b < B; ++b) {
          for (int p = 0; p < (lens[static_cast<size_t>(b)] + page_size - 1) / page_size; ++p)
            tables[static_cast<size_t>(b) * stride + p] = order[next++];
        }
        DeviceBuffer<float> k(static_cast<size_t>(pages) * page_size * width),
            v(static_cast<size_t>(pages) * page_size * width);
        DeviceBuffer<int32_t> d_tables(tables.size()), d_lens(lens.size());
        d_tables.upload(tables);
        d_lens.upload(std::vector<int32_t>(lens.begin(), lens.end()));
        DeviceBuffer<float> q(static_cast<size_t>(B) * q_width), out(static_cast<size_t>(B) * q_width);
        kernels::BatchedKvView view;
        view.k = k.get();
        view.v = v.get();
        view.page_tables = d_tables.get();
        view.lens = d_lens.get();
        view.batch = B;
        view.table_stride = stride;
        view.num_pages = pages;
        view.page_size = page_size;
        view.n_kv_heads = sh.n_kv_heads;
        view.head_dim = sh.head_dim;

        const long long total = std::accumulate(lens.begin(), lens.end(), 0LL);
        const double bytes = 2.0 * static_cast<double>(total) * width * 4.0 +
                             2.0 * B * q_width * 4.0 + static_cast<double>(B) * 4.0 * (stride + 1);
        const double flops = 4.0 * sh.n_heads * sh.head_dim * static_cast<double>(total);
        const std::string dims = "B=" + std::to_string(B) + " len=" +
                                 (std::string(case_name) == "uniform"
                                      ? std::to_string(len)
                                      : std::to_string(lens[0]) + "+1x" + std::to_string(B - 1)) +
                                 " h=" + std::to_string(sh.n_heads) +
                                 " h_k=" + std::to_string(sh.n_kv_heads) +
                                 " h_d=" + std::to_string(sh.head_dim);
        auto add = [&](const char* variant, const std::string& d, double b, const Timing& t) {
          Row r;
          r.op = "batched_decode_attention";
          r.variant = variant;
          r.case_name = case_name;
          r.shape = sh.name;
          r.dims = d;
          r.bytes = b;
          r.flops = flops;
          r.peak = Peak::Fp32;
          r.time = t;
          r.extra_name = "tokens_per_s";
          r.extra_value = t.median_ms > 0 ? B / (t.median_ms * 1e-3) : 0;
          r.plot_x = B;
          ctx.add(r);
          if (B == batches.back() && t.median_ms > 0) {
            ctx.leaderboard("batched decode attention GB/s (" + std::string(variant) + ", " +
                                case_name + ", B=" + std::to_string(B) + ", " + sh.name + ")",
                            b / (t.median_ms * 1e-3) / 1e9, Order::Descending);
          }
        };
        if (one_pass) {
          const Timing t = ctx.time(
              [&] { kernels::batched_decode_attention(q.get(), view, out.get(), sh.n_heads); });
          add("one-pass", dims, bytes, t);
        }
        if (split) {
          const SplitKvPlan plan = plan_split_kv(lens, sh.n_kv_heads, target_blocks, 64);
          const int n = plan.n_chunks();
          DeviceBuffer<int32_t> cr(static_cast<size_t>(n)), cb(static_cast<size_t>(n)),
              ce(static_cast<size_t>(n)), fc(plan.first_chunk.size());
          cr.upload(plan.chunk_request);
          cb.upload(plan.chunk_begin);
          ce.upload(plan.chunk_end);
          fc.upload(plan.first_chunk);
          DeviceBuffer<float> po(static_cast<size_t>(n) * q_width),
              pl(static_cast<size_t>(n) * sh.n_heads);
          const kernels::SplitKvWork work{cr.get(), cb.get(), ce.get(), fc.get(), n};
          const Timing t = ctx.time([&] {
            kernels::batched_decode_attention_split(q.get(), view, work, out.get(), sh.n_heads,
                                                    po.get(), pl.get());
          });
          // The partial states are written once and read once by the merge.
          const double partial = 2.0 * n * sh.n_heads * (sh.head_dim + 1) * 4.0;
          add("split", dims + " chunks=" + std::to_string(n) + " (longest " +
                           std::to_string(plan.max_chunk_tokens()) + ")",
              bytes + partial, t);
        }
      }
    }
  }
}

void run_generation_rows(Context& ctx, const std::vector<int>& batches) {
  const Options& o = ctx.options();
  if (!o.wants("generate")) return;
  const std::optional<std::string> model_arg = o.args->get("model");
  if (!model_arg) {
    ctx.note("batched: pass --model DIR (e.g. a model written by `clockwork tiny-model`) to time "
             "batched generation in tokens/s against the batch size");
    return;
  }
  const int prompt = static_cast<int>(o.args->get_int("batched-prompt", ctx.simulation() ? 8 : 128, 1, 1 << 20));
  const int tokens = static_cast<int>(o.args->get_int("decode-tokens", 8, 2, 4096));
  const std::filesystem::path dir = require_model_dir(*model_arg);
  for (int B : batches) {
    BatchedGeneratorOptions opt;
    opt.max_batch = B;
    opt.page_size = 16;
    opt.num_pages = B * ((prompt + tokens + 15) / 16);
    BatchedGenerator gen = BatchedGenerator::load(dir, opt);
    const int context = static_cast<int>(gen.config().max_position_embeddings);
    if (prompt + tokens > context) {
      ctx.note("batched: a prompt of " + std::to_string(prompt) + " plus " +
               std::to_string(tokens) + " tokens exceeds the model's context of " +
               std::to_string(context));
      return;
    }
    const int vocab = static_cast<int>(gen.config().vocab_size);
    for (int r = 0; r < B; ++r)
      gen.submit(prompt_ids(prompt, vocab, 77 + static_cast<uint64_t>(r)), tokens);
    std::vector<double> step_ms;
    long long decoded = 0;
    while (!gen.idle()) {
      const auto t0 = std::chrono::steady_clock::now();
      gen.step();
      CUDA_CHECK(cudaDeviceSynchronize());
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (gen.last_step().admitted == 0 && gen.last_step().decoded == B) {
        step_ms.push_back(ms);
        decoded += gen.last_step().decoded;
      }
    }
    if (step_ms.empty()) continue;
    std::vector<double> sorted = step_ms;
    std::sort(sorted.begin(), sorted.end());
    const double total_ms = std::accumulate(step_ms.begin(), step_ms.end(), 0.0);
    Row r;
    r.op = "batched_generate";
    r.variant = "generate";
    r.case_name = "decode steps";
    r.shape = model_arg->substr(model_arg->find_last_of('/') + 1);
    r.dims = "B=" + std::to_string(B) + " prompt=" + std::to_string(prompt) +
             " steps=" + std::to_string(step_ms.size());
    r.peak = Peak::None;
    r.time.median_ms = sorted[sorted.size() / 2];
    r.time.min_ms = sorted.front();
    r.time.max_ms = sorted.back();
    r.time.p10_ms = sorted[sorted.size() / 10];
    r.time.p90_ms = sorted[sorted.size() * 9 / 10];
    r.time.repetitions = static_cast<int>(step_ms.size());
    r.extra_name = "tokens_per_s";
    r.extra_value = static_cast<double>(decoded) / (total_ms * 1e-3);
    r.plot_x = B;
    ctx.add(r);
    ctx.leaderboard("batched generation tokens/s (B=" + std::to_string(B) + ")", r.extra_value,
                    Order::Descending);
  }
}

void run_batched(Context& ctx) {
  const std::vector<int> batches = list_option(ctx, "batch-sizes", "1,4,16,64");
  const int len = static_cast<int>(
      ctx.options().args->get_int("batched-len", ctx.simulation() ? 16 : 1024, 1, 1 << 20));
  run_attention_rows(ctx, batches, len);
  run_generation_rows(ctx, batches);
}

}  // namespace

CLOCKWORK_BENCH_GROUP("batched",
                      "batched decode (milestone 5): one attention launch for B requests over a "
                      "shared page pool, and generation tokens/s against B (--model)",
                      run_batched, {"one-pass", "split", "generate"},
                      {{"batch-sizes", "LIST",
                        "batched: batch sizes, comma-separated (default 1,4,16,64)"},
                       {"batched-len", "N",
                        "batched: positions per request in the attention rows (default 16 on the "
                        "CPU, 1024 on the GPU)"},
                       {"batched-prompt", "N",
                        "batched: prompt length of each request with --model (default 8 on the "
                        "CPU, 128 on the GPU)"}});

}  // namespace clockwork::cli::bench
