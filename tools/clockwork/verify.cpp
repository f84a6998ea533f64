// `clockwork verify`: the model built from the course's kernels against the libtorch reference
// (reference/model.h) on the same weights and prompt.
//
//   1. per-layer diagnosis: cosine similarity and max |Δ| of each decoder layer's output over the
//      whole prompt, so a wrong answer can be traced to the first layer that departs;
//   2. the logits of the last position and the two next tokens;
//   3. a top-5 inclusion gate over N greedy steps: each side's argmax must be among the other
//      side's five most likely tokens. fp32 rounding can swap two close logits between correct
//      implementations, but rarely pushes a token out of the top 5, so the gate tells drift from
//      bugs. The sequence grows with the reference's choice, so both always see the same ids;
//   4. with a KV cache (--kv-cache, milestone 4): the same sequence again, prefilled once and
//      then decoded one token per step, each step's logits against the uncached ones of step 3
//      (cosine similarity, max |Δ|, and the same top-5 gate).
//
// This is the only file of the program that includes libtorch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>

#include <torch/types.h>
#include <torch/utils.h>

#include "harness/pipeline/model.h"
#include "harness/pipeline/cached_model.h"
#include "harness/pipeline/gemma_model.h"
#include "reference/model.h"
#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"
#include "tools/clockwork/kv_cache_args.h"
#include "harness/model/model_dir.h"
#include "tools/clockwork/npy.h"

namespace clockwork::cli {

namespace fs = std::filesystem;

namespace {

const CommandSpec kSpec{
    "verify",
    "--model DIR [--prompt TEXT] [--steps N] [options]",
    "Runs the model (your kernels) and the libtorch reference on the same weights and prompt.\n"
    "Prints each layer's cosine similarity and max |Δ| against the reference, the logits\n"
    "error and both next tokens, then checks over N greedy steps that each side's chosen\n"
    "token is in the other side's top 5. Exits 0 only when every step passes.",
    {
        {"model", "DIR", "model directory"},
        {"prompt", "TEXT", "the prompt (default: \"The capital of France is\")"},
        {"ids", "LIST",
         "the prompt as comma-separated token ids instead of text (no tokenizer needed: for "
         "checkpoints without one)"},
        {"chat", "", "wrap the prompt in the Llama 3 Instruct chat template"},
        {"steps", "N", "greedy steps of the top-5 gate (default 4)"},
        {"backend", "NAME", "cuda or sim; must match the binary"},
        {"kv-cache", "KIND",
         "none, contiguous or paged (default contiguous): after the gate, run the same steps "
         "with this cache and compare them with the uncached ones; none skips that check"},
        {"page-size", "N", "with --kv-cache paged: positions per page (default 16)"},
        {"dump-logits", "FILE",
         "write the model's logits of each gate step (last position) to FILE as a float32 .npy "
         "array of shape [steps, V]"},
        {"dump-reference-logits", "FILE", "the same for the reference's logits"},
    },
    "",
    "The reference runs on the CPU in fp32 with the checkpoint's bf16 weights; for an 8B model\n"
    "it needs about as much memory as the checkpoint and takes a while per step."};

constexpr int kGateK = 5;
// Cached and uncached runs differ only in the order attention adds up: their logits agree to
// about 1e-6 relative, far above this bound; a cache bug (a wrong slot, a missing rotation)
// moves them by percents.
constexpr double kCacheCosine = 0.9999;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Diff {
  double cosine = 0;
  double max_abs = 0;
  double max_ref = 0;
  bool finite = true;
};

Diff compare(const float* device, const float* reference, size_t n) {
  Diff d;
  double dot = 0, dd = 0, rr = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = device[i], b = reference[i];
    if (!std::isfinite(a)) d.finite = false;
    dot += a * b;
    dd += a * a;
    rr += b * b;
    d.max_abs = std::max(d.max_abs, std::fabs(a - b));
    d.max_ref = std::max(d.max_ref, std::fabs(b));
  }
  d.cosine = dd > 0 && rr > 0 ? dot / std::sqrt(dd * rr) : (dd == rr ? 1.0 : 0.0);
  if (!d.finite) d.cosine = NAN;
  return d;
}

std::vector<float> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// The k largest logits' ids, most likely first (ties by id).
std::vector<int32_t> top_ids(const std::vector<float>& logits, int k) {
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  k = std::min<int>(k, static_cast<int>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ids.resize(k);
  return ids;
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string show_token(const std::optional<Tokenizer>& maybe, int32_t id) {
  if (!maybe) return std::to_string(id);
  const Tokenizer& tok = *maybe;
  if (id < 0 || id >= tok.vocab_size()) return std::to_string(id) + " (no token)";
  const std::string& bytes = tok.token_bytes(id);
  return std::to_string(id) + " " + (tok.is_special(id) ? bytes : quote_bytes(bytes));
}

void print_diff_row(const std::string& label, const Diff& d) {
  std::printf("  %-22s %10.6f  %10.3e  %10.3e%s\n", label.c_str(), d.cosine, d.max_abs, d.max_ref,
              !d.finite          ? "   <- NaN/inf"
              : d.cosine < 0.999 ? "   <- departs"
                                 : "");
}

}  // namespace

int run_verify(const std::vector<std::string>& argv) {
  const Args args = parse_args(kSpec, argv);
  if (args.help) {
    std::cout << help_text(kSpec);
    return 0;
  }
  const std::string model_arg = args.require("model");
  const std::string prompt = args.get("prompt").value_or("The capital of France is");
  const int64_t steps = args.get_int("steps", 4, 1, 4096);
  check_backend(args.get("backend").value_or(backend_name()));
  const KvCacheArgs cache_args = kv_cache_args(args);
  const std::optional<std::string> dump_model = args.get("dump-logits");
  const std::optional<std::string> dump_reference = args.get("dump-reference-logits");
  if (dump_model) check_writable_file(*dump_model, "--dump-logits");
  if (dump_reference) check_writable_file(*dump_reference, "--dump-reference-logits");
  if (dump_model && dump_reference && fs::path(*dump_model) == fs::path(*dump_reference)) {
    throw UsageError("--dump-logits and --dump-reference-logits name the same file " +
                     *dump_model);
  }

  const fs::path dir = require_model_dir(model_arg);
  const ModelConfig config = load_config(dir);
  const std::optional<std::string> ids_arg = args.get("ids");
  if (ids_arg && (args.get("prompt") || args.has("chat"))) {
    throw UsageError("--ids gives the prompt as token ids: leave out --prompt and --chat");
  }
  // With --ids no tokenizer is needed, and tokens are shown as ids only.
  std::optional<Tokenizer> tokenizer;
  if (!ids_arg) {
    tokenizer.emplace(load_tokenizer(dir));
    check_tokenizer_fits(*tokenizer, config);
  }
  const Checkpoint checkpoint = Checkpoint::open(dir);
  check_tensors(checkpoint, config, /*any_float=*/false);
  std::vector<int32_t> ids =
      ids_arg ? parse_id_list(*ids_arg, config.vocab_size, "--ids")
              : encode_prompt(*tokenizer, prompt, args.has("chat"), "");
  check_prompt_fits(ids.size(), config);
  // Gemma 3 runs on GemmaModel (milestone 6), whose cache is contiguous: every position on
  // global layers, a ring of sliding_window slots on local ones (it has no paged form).
  const bool gemma = config.is_gemma3();
  const KvCacheKind cache_kind = cache_args.kind;

  require_device();
  auto t0 = Clock::now();
  // Optional so that it can be released before the cached model loads: one copy of the weights
  // on the device at a time.
  std::optional<Model> model;
  std::optional<GemmaModel> gemma_model;
  {
    ProgressBar bar(std::string("loading (") + backend_name() + ")");
    auto progress = [&](uint64_t done, uint64_t total, const std::string& tensor) {
      bar.update(done, total, tensor);
    };
    if (gemma) {
      gemma_model.emplace(GemmaModel::load(dir, progress));
    } else {
      model.emplace(Model::load(dir, progress));
    }
  }
  auto forward = [&](const std::vector<int32_t>& seq, ForwardCapture* capture = nullptr) {
    return gemma ? gemma_model->forward(seq, capture) : model->forward(seq, capture);
  };
  const std::vector<int32_t> prompt_ids = ids;
  std::printf("model: %s (%s, %lld layers, d=%lld, V=%lld), loaded on the %s backend in %.2f s\n",
              dir.string().c_str(), gemma ? "Gemma 3" : "Llama",
              static_cast<long long>(config.num_layers),
              static_cast<long long>(config.hidden_size), static_cast<long long>(config.vocab_size),
              backend_name(), ms_since(t0) / 1e3);
  std::printf("reference: libtorch on the CPU, fp32 activations, the checkpoint's bf16 weights\n");
  std::printf("prompt: %zu tokens\n\n", ids.size());

  std::map<std::string, torch::Tensor> weights;
  for (const ExpectedTensor& e : expected_tensors(config)) {
    weights.emplace(e.name, ref::as_torch(checkpoint.get(e.name)));
  }
  const ref::Model reference(config, ref::lookup_from_map(std::move(weights)));
  torch::NoGradGuard no_grad;

  // Step 0 with the per-layer capture.
  const size_t s = ids.size();
  const size_t d = static_cast<size_t>(config.hidden_size);
  ForwardCapture capture;
  t0 = Clock::now();
  std::vector<float> device_logits = forward(ids, &capture);
  const double device_ms = ms_since(t0);
  t0 = Clock::now();
  const std::vector<int64_t> ids64(ids.begin(), ids.end());
  ref::ForwardResult ref_result = reference.forward(ids64);
  const double ref_ms = ms_since(t0);
  std::vector<float> ref_logits = to_vector(ref_result.logits);

  std::printf("per-layer diagnosis: each layer's output X [%zu x %zu] against the reference\n", s,
              d);
  // "Δ" is two bytes but one column, so this header is padded by hand.
  std::printf("  %-22s %10s     max |Δ|   %10s\n", "", "cosine", "max |ref|");
  int first_departure = -1;
  if (capture.layer_outputs.size() != static_cast<size_t>(config.num_layers)) {
    std::printf("  (the model captured %zu layer outputs for %lld layers; no per-layer table)\n",
                capture.layer_outputs.size(), static_cast<long long>(config.num_layers));
  } else {
    for (size_t i = 0; i < capture.layer_outputs.size(); ++i) {
      const std::vector<float>& dev = capture.layer_outputs[i];
      const std::vector<float> ref = to_vector(ref_result.hidden[i]);
      if (dev.size() != ref.size()) {
        throw std::runtime_error("the model's capture of layer " + std::to_string(i) + " has " +
                                 std::to_string(dev.size()) +
                                 " values, expected s*d = " + std::to_string(ref.size()));
      }
      const Diff diff = compare(dev.data(), ref.data(), ref.size());
      if (first_departure < 0 && !(diff.cosine >= 0.999)) first_departure = static_cast<int>(i);
      print_diff_row("layer " + std::to_string(i), diff);
    }
  }
  if (capture.final_norm_last.size() == d) {
    const std::vector<float> ref = to_vector(ref_result.final_norm_last);
    print_diff_row("final norm (last row)", compare(capture.final_norm_last.data(), ref.data(), d));
  }
  if (device_logits.size() != ref_logits.size()) {
    throw std::runtime_error("the model returned " + std::to_string(device_logits.size()) +
                             " logits, expected V = " + std::to_string(ref_logits.size()));
  }
  const Diff logit_diff = compare(device_logits.data(), ref_logits.data(), ref_logits.size());
  print_diff_row("logits (last row)", logit_diff);
  const int32_t device_next = top_ids(device_logits, 1)[0];
  const int32_t reference_next = top_ids(ref_logits, 1)[0];
  std::printf("  next token: model %s, reference %s%s\n",
              show_token(tokenizer, device_next).c_str(),
              show_token(tokenizer, reference_next).c_str(),
              device_next == reference_next ? " (the same)" : " (they differ)");
  if (first_departure >= 0) {
    std::printf("  first layer that departs from the reference: layer %d (look inside it first)\n",
                first_departure);
  }
  std::printf("\nforward pass: %.1f ms on the %s backend, %.1f ms for the reference\n", device_ms,
              backend_name(), ref_ms);

  // The gate.
  std::printf(
      "\ntop-%d gate over %lld greedy steps (each side's choice must be in the other's "
      "top %d):\n",
      kGateK, static_cast<long long>(steps), kGateK);
  std::printf("  %4s  %-34s %-34s %s\n", "step", "model", "reference", "in each other's top 5");
  int failures = 0;
  std::string first_failure;
  std::vector<std::vector<float>> uncached;  // the model's logits of each step, for the cache check
  std::vector<int32_t> appended;             // the token appended after each step
  std::vector<std::vector<float>> reference_rows;  // with --dump-reference-logits
  for (int64_t step = 0; step < steps; ++step) {
    if (step > 0) {
      if (static_cast<int64_t>(ids.size()) >= config.max_position_embeddings) {
        std::printf("  (the context is full after %lld steps)\n", static_cast<long long>(step));
        break;
      }
      device_logits = forward(ids);
      const std::vector<int64_t> seq(ids.begin(), ids.end());
      ref_logits = to_vector(reference.forward(seq).logits);
    }
    const std::vector<int32_t> dev_top = top_ids(device_logits, kGateK);
    const std::vector<int32_t> ref_top = top_ids(ref_logits, kGateK);
    const bool finite = std::all_of(device_logits.begin(), device_logits.end(),
                                    [](float v) { return std::isfinite(v); });
    const bool dev_ok = finite && contains(ref_top, dev_top[0]);
    const bool ref_ok = finite && contains(dev_top, ref_top[0]);
    const char* verdict = !finite            ? "no: NaN/inf in the model's logits"
                          : dev_ok && ref_ok ? "yes"
                          : !dev_ok          ? "no: model's token not in reference top 5"
                                             : "no: reference token not in model's top 5";
    std::printf("  %4lld  %-34s %-34s %s\n", static_cast<long long>(step + 1),
                show_token(tokenizer, dev_top[0]).c_str(),
                show_token(tokenizer, ref_top[0]).c_str(), verdict);
    if (!(dev_ok && ref_ok)) {
      if (failures++ == 0) {
        first_failure = "step " + std::to_string(step + 1) + ": model chose " +
                        show_token(tokenizer, dev_top[0]) + ", reference chose " +
                        show_token(tokenizer, ref_top[0]);
      }
    }
    uncached.push_back(device_logits);
    if (dump_reference) reference_rows.push_back(ref_logits);
    appended.push_back(ref_top[0]);
    ids.push_back(ref_top[0]);
  }
  // Both sides saw the same ids at every step (the reference's choices), so row i of the two
  // files is the same question.
  const uint64_t vocab = static_cast<uint64_t>(config.vocab_size);
  if (dump_model) {
    write_npy_f32(*dump_model, uncached, vocab);
    std::printf("  the model's logits of %zu steps: %s\n", uncached.size(), dump_model->c_str());
  }
  if (dump_reference) {
    write_npy_f32(*dump_reference, reference_rows, vocab);
    std::printf("  the reference's logits of %zu steps: %s\n", reference_rows.size(),
                dump_reference->c_str());
  }

  // The cache check: the same steps with a KV cache, against the uncached logits above.
  int cache_failures = 0;
  std::string first_cache_failure;
  if (gemma && cache_kind == KvCacheKind::Paged) {
    std::printf("\n(the KV-cache check runs with Gemma 3's contiguous cache: it has no paged "
                "form)\n");
  }
  if (cache_kind != KvCacheKind::None) {
    const int max_positions = static_cast<int>(prompt_ids.size() + uncached.size());
    std::optional<CachedModel> cached;
    std::string cache_description;
    if (gemma) {
      gemma_model->enable_cache(max_positions);
      cache_description = gemma_model->describe_cache();
    } else {
      model.reset();
      CachedModelOptions options;
      options.cache = cache_args.kind;
      options.page_size = cache_args.page_size;
      options.max_positions = max_positions;
      ProgressBar bar(std::string("loading (") + backend_name() + ", KV cache)");
      auto progress = [&](uint64_t done, uint64_t total, const std::string& tensor) {
        bar.update(done, total, tensor);
      };
      cached.emplace(CachedModel::load(dir, options, progress));
      cache_description = cached->cache()->describe();
    }
    auto prefill = [&](const std::vector<int32_t>& p) {
      return gemma ? gemma_model->prefill(p) : cached->prefill(p);
    };
    auto decode = [&](int32_t id) { return gemma ? gemma_model->decode(id) : cached->decode(id); };
    std::printf(
        "\nKV-cache check (%s): the same %zu steps, the prompt prefilled\n"
        "once, then one decode step per token; each step's logits against the uncached ones\n"
        "above (cosine >= %.4f, each side's token in the other's top %d):\n",
        cache_description.c_str(), uncached.size(), kCacheCosine, kGateK);
    std::printf("  %4s  %-34s %-34s %10s  %10s  %s\n", "step", "cached", "uncached", "cosine",
                "max |Δ|", "ok");
    for (size_t step = 0; step < uncached.size(); ++step) {
      const std::vector<float> logits =
          step == 0 ? prefill(prompt_ids) : decode(appended[step - 1]);
      const Diff diff = compare(logits.data(), uncached[step].data(), logits.size());
      const std::vector<int32_t> c_top = top_ids(logits, kGateK);
      const std::vector<int32_t> u_top = top_ids(uncached[step], kGateK);
      const bool ok = diff.finite && diff.cosine >= kCacheCosine && contains(u_top, c_top[0]) &&
                      contains(c_top, u_top[0]);
      std::printf("  %4zu  %-34s %-34s %10.6f  %10.3e  %s\n", step + 1,
                  show_token(tokenizer, c_top[0]).c_str(),
                  show_token(tokenizer, u_top[0]).c_str(), diff.cosine, diff.max_abs,
                  ok ? "yes" : (diff.finite ? "no" : "no: NaN/inf"));
      if (!ok && cache_failures++ == 0) {
        first_cache_failure = "step " + std::to_string(step + 1) + (step == 0 ? " (prefill)" : "") +
                              ": cosine " + std::to_string(diff.cosine) + ", cached chose " +
                              show_token(tokenizer, c_top[0]) + ", uncached chose " +
                              show_token(tokenizer, u_top[0]);
      }
    }
  }

  std::cout.flush();
  if (failures > 0) {
    throw std::runtime_error("top-5 gate failed in " + std::to_string(failures) + " of " +
                             std::to_string(steps) + " steps (first: " + first_failure + ")");
  }
  if (cache_failures > 0) {
    throw std::runtime_error("the KV-cache check failed in " + std::to_string(cache_failures) +
                             " of " + std::to_string(uncached.size()) + " steps (first: " +
                             first_cache_failure + "); run ctest -L " +
                             (gemma ? "milestone6" : "milestone4") + " for details");
  }
  std::printf("\nverify: PASS\n");
  return 0;
}

}  // namespace clockwork::cli
