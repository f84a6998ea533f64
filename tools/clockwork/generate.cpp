// `clockwork generate`: runs the model built from the course's kernels on a prompt and streams
// the new text. With a KV cache (milestone 4, the default) the prompt is prefilled once and every
// new token is one decode step; with --kv-cache none every step runs the whole sequence again
// (s, s+1, ...), as the required milestones do. With --batch FILE every line of FILE is a
// request, and milestone 5's BatchedGenerator serves them together over one page pool.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>

#include "harness/pipeline/batched_generator.h"
#include "harness/pipeline/cached_model.h"
#include "harness/pipeline/gemma_model.h"
#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"
#include "tools/clockwork/kv_cache_args.h"
#include "harness/model/model_dir.h"
#include "tools/clockwork/npy.h"
#include "tools/clockwork/sampling.h"

namespace clockwork::cli {

namespace fs = std::filesystem;

namespace {

const CommandSpec kSpec{
    "generate",
    "--model DIR (--prompt TEXT | --ids LIST | --batch FILE) [options]",
    "Loads the model onto the device, encodes the prompt, and appends one token per step\n"
    "until an end-of-sequence token (<|eot_id|>, <|end_of_text|>, or config.json's\n"
    "eos_token_id), --max-new-tokens or the end of the context. Llama checkpoints run on the\n"
    "course's Llama pipeline, Gemma 3 checkpoints on milestone 6's GemmaModel.\n"
    "With a KV cache the prompt is run once (prefill) and each step runs only the new token\n"
    "(decode); without one each step runs the whole sequence. The text is printed as it is\n"
    "generated; timings go to stderr. Greedy (argmax) unless --temperature is above 0.",
    {
        {"model", "DIR", "model directory (config.json, safetensors, tokenizer)"},
        {"prompt", "TEXT", "the prompt"},
        {"ids", "LIST",
         "instead of --prompt: the prompt as comma-separated token ids (no tokenizer needed; "
         "the new tokens are then printed as ids)"},
        {"batch", "FILE",
         "instead of --prompt: one prompt per line of FILE (empty lines skipped), generated "
         "together by the batched pipeline of milestone 5 over one shared page pool (greedy "
         "only); every piece of text is printed as it comes, prefixed by its request number "
         "[0], [1], ..., and each request's whole text at the end"},
        {"max-batch", "N", "with --batch: requests decoded together at most (default 8)"},
        {"split-blocks", "N",
         "with --batch: plan the split decode attention for about N blocks (-1: never split; "
         "0, the default: 4 per multiprocessor, splitting only when a request is longer than "
         "its share)"},
        {"chat", "",
         "wrap the prompt in the chat template of the model's family (Llama 3 Instruct or "
         "Gemma 3)"},
        {"system", "TEXT", "with --chat: a system message before the prompt"},
        {"max-new-tokens", "N", "stop after N new tokens (default 32)"},
        {"backend", "NAME",
         "cuda or sim; must match the binary (clockwork: sim, clockwork-cuda: cuda)"},
        {"temperature", "T", "sample from softmax(logits / T); 0 = greedy (default 0)"},
        {"top-k", "K", "with --temperature: sample only among the K most likely tokens"},
        {"top-p", "P",
         "with --temperature: sample among the most likely tokens whose "
         "probabilities add up to P (nucleus sampling)"},
        {"seed", "S", "with --temperature: seed of the sampler (default: random, printed)"},
        {"print-ids", "", "after the text, print the generated ids (stop token included)"},
        {"kv-cache", "KIND",
         "none, contiguous or paged (default contiguous): how keys and values of earlier "
         "positions are kept between steps; none re-runs the whole sequence every step. "
         "Gemma 3: contiguous (every position on global layers, a ring of sliding_window "
         "slots on local ones) or none"},
        {"page-size", "N",
         "with --kv-cache paged or --batch: positions per page (default 16)"},
        {"fused-attention", "",
         "prefill with the fused attention of milestone 5 (no s x s score buffer) instead of "
         "milestone 3's"},
        {"cuda-graphs", "",
         "run each decode step's layers as one CUDA graph (milestone 5): one graph launch "
         "instead of a launch per kernel; the same tokens as without"},
        {"dump-logits", "FILE",
         "write each step's logits (of the last position, before temperature) to FILE as a "
         "float32 .npy array of shape [steps, V], for comparison with another implementation"},
    },
    "",
    "examples:\n"
    "  clockwork generate --model tiny --chat --prompt 'Tell me about clocks.'\n"
    "  clockwork generate --model tiny --prompt 'The clock' --kv-cache paged --page-size 4\n"
    "  clockwork generate --model tiny --batch prompts.txt --max-batch 4 --page-size 4\n"
    "  clockwork generate --model gemma-tiny --ids 2,17,40 --max-new-tokens 8\n"
    "  clockwork generate --model Meta-Llama-3-8B-Instruct --chat --prompt 'Hi!' --temperature 0.6 "
    "--top-p 0.9"};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Prints text so that it stays on one line after its request number.
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--batch " + path + ": cannot open the file");
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(line);
  }
  if (prompts.empty()) throw UsageError("--batch " + path + ": the file holds no prompt");
  return prompts;
}

// --batch FILE: every prompt a request of one BatchedGenerator.
int generate_batch(const Args& args) {
  const std::string model_arg = args.require("model");
  if (args.has("prompt")) throw UsageError("give --prompt or --batch, not both");
  for (const char* no : {"temperature", "top-k", "top-p", "seed", "kv-cache", "dump-logits"}) {
    if (args.has(no)) throw UsageError(std::string("--") + no + " does not apply to --batch");
  }
  const std::string path = *args.get("batch");
  const bool chat = args.has("chat");
  if (args.has("system") && !chat) throw UsageError("--system needs --chat");
  const int64_t max_new = args.get_int("max-new-tokens", 32, 1, 1 << 24);
  const int64_t max_batch = args.get_int("max-batch", 8, 1, 65535);
  const int64_t page_size = args.get_int("page-size", 16, 1, 1 << 20);
  const int64_t split_blocks = args.get_int("split-blocks", 0, -1, 1 << 20);
  check_backend(args.get("backend").value_or(backend_name()));
  const std::vector<std::string> prompts = read_prompts(path);

  const fs::path dir = require_model_dir(model_arg);
  const ModelConfig config = load_config(dir);
  if (config.is_gemma3()) {
    throw UsageError("--batch: the batched pipeline runs the Llama family only; generate from a "
                     "Gemma 3 checkpoint with --prompt or --ids");
  }
  const Tokenizer tokenizer = load_tokenizer(dir);
  check_tokenizer_fits(tokenizer, config);
  {
    const Checkpoint checkpoint = Checkpoint::open(dir);
    check_tensors(checkpoint, config, /*any_float=*/false);
  }
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(encode_prompt(tokenizer, prompts[i], chat, args.get("system").value_or("")));
    try {
      check_prompt_fits(ids.back().size(), config);
    } catch (const std::exception& e) {
      throw std::runtime_error("request " + std::to_string(i) + " (line " + std::to_string(i + 1) +
                               " of " + path + "): " + e.what());
    }
  }
  require_device();

  BatchedGeneratorOptions options;
  options.max_batch = static_cast<int>(max_batch);
  options.page_size = static_cast<int>(page_size);
  options.split_blocks = static_cast<int>(split_blocks);
  options.fused_attention = args.has("fused-attention");
  options.stop_ids = stop_ids(config, tokenizer);
  options.choosable =
      std::min<int32_t>(tokenizer.vocab_size(), static_cast<int32_t>(config.vocab_size));
  const auto load_start = Clock::now();
  BatchedGenerator gen = [&] {
    ProgressBar bar(std::string("loading (") + backend_name() + ")");
    return BatchedGenerator::load(dir, options,
                                  [&](uint64_t done, uint64_t total, const std::string& tensor) {
                                    bar.update(done, total, tensor);
                                  });
  }();
  std::fprintf(stderr, "loaded in %.2f s on the %s backend; %zu requests, at most %d at once; %s\n",
               seconds_since(load_start), backend_name(), prompts.size(), options.max_batch,
               gen.pool().describe().c_str());
  for (const std::vector<int32_t>& p : ids) gen.submit(p, static_cast<int>(max_new));

  std::vector<StreamDecoder> decoders(prompts.size(), StreamDecoder(tokenizer));
  std::vector<std::string> texts(prompts.size());
  const auto start = Clock::now();
  long long tokens = 0, steps = 0, decoded = 0;
  while (!gen.idle()) {
    const std::vector<BatchToken> out = gen.step();
    ++steps;
    decoded += gen.last_step().decoded;
    for (const BatchToken& t : out) {
      ++tokens;
      const bool stop = std::find(options.stop_ids.begin(), options.stop_ids.end(), t.token) !=
                        options.stop_ids.end();
      auto& dec = decoders[static_cast<size_t>(t.request)];
      std::string piece = stop ? std::string() : dec.push(t.token);
      if (t.last) piece += dec.flush();
      texts[static_cast<size_t>(t.request)] += piece;
      if (!piece.empty()) std::cout << "[" << t.request << "] " << one_line(piece) << "\n";
    }
    std::cout.flush();
  }
  const double seconds = seconds_since(start);
  for (size_t r = 0; r < prompts.size(); ++r) {
    const std::vector<int32_t>& g = gen.generated(static_cast<int>(r));
    const bool stopped = !g.empty() && std::find(options.stop_ids.begin(), options.stop_ids.end(),
                                                 g.back()) != options.stop_ids.end();
    const std::string why = stopped ? "stopped at " + tokenizer.token_bytes(g.back())
                            : static_cast<int64_t>(g.size()) >= max_new ? "--max-new-tokens reached"
                                                                        : "the context is full";
    std::cout << "[" << r << "] done, " << g.size() << " tokens (" << why
              << "): " << one_line(texts[r]) << "\n";
    if (args.has("print-ids")) {
      std::cout << "[" << r << "] ids:";
      for (int32_t id : g) std::cout << " " << id;
      std::cout << "\n";
    }
  }
  std::cout.flush();
  std::fprintf(stderr,
               "generated %lld tokens for %zu requests in %.2f s (%lld steps, %.1f requests per "
               "decode step on average); pool: %d of %d pages free at the end\n",
               tokens, prompts.size(), seconds, steps,
               steps ? static_cast<double>(decoded) / static_cast<double>(steps) : 0.0,
               gen.pool().free_pages(), gen.pool().num_pages());
  return 0;
}

}  // namespace

int cmd_generate(const std::vector<std::string>& argv) {
  const Args args = parse_args(kSpec, argv);
  if (args.help) {
    std::cout << help_text(kSpec);
    return 0;
  }
  if (args.has("batch")) {
    if (args.has("ids")) throw UsageError("give --ids or --batch, not both");
    return generate_batch(args);
  }
  for (const char* only : {"max-batch", "split-blocks"}) {
    if (args.has(only)) throw UsageError(std::string("--") + only + " needs --batch");
  }
  const std::string model_arg = args.require("model");
  const std::optional<std::string> ids_arg = args.get("ids");
  if (ids_arg && (args.has("prompt") || args.has("chat"))) {
    throw UsageError("--ids gives the prompt as token ids: leave out --prompt and --chat");
  }
  const std::string prompt = ids_arg ? std::string() : args.require("prompt");
  const bool chat = args.has("chat");
  if (args.has("system") && !chat) throw UsageError("--system needs --chat");
  const int64_t max_new = args.get_int("max-new-tokens", 32, 0, 1 << 24);
  const SamplingOptions sampling = sampling_from_args(args);
  check_backend(args.get("backend").value_or(backend_name()));
  const KvCacheArgs cache_args = kv_cache_args(args);
  const bool cuda_graphs = args.has("cuda-graphs");
  if (cuda_graphs && cache_args.kind == KvCacheKind::None)
    throw UsageError(
        "--cuda-graphs needs a KV cache (graphs run the decode step): drop --kv-cache none");
  const std::optional<std::string> dump_path = args.get("dump-logits");
  if (dump_path) check_writable_file(*dump_path, "--dump-logits");

  // Everything cheap is checked before the weights are copied to the device.
  const fs::path dir = require_model_dir(model_arg);
  const ModelConfig config = load_config(dir);
  const bool gemma = config.is_gemma3();
  if (gemma) {
    // What milestone 6's GemmaModel does not have (yet): say so rather than run the Llama
    // pipeline's version of it.
    if (cache_args.kind == KvCacheKind::Paged)
      throw UsageError("--kv-cache paged: Gemma 3 runs with a contiguous cache (or none)");
    if (cuda_graphs) throw UsageError("--cuda-graphs: the Gemma 3 model runs without graphs");
    if (args.has("fused-attention"))
      throw UsageError("--fused-attention: the Gemma 3 model prefills with milestone 6's "
                       "sliding-window attention");
  }
  // With --ids no tokenizer is needed, and the new tokens are printed as ids.
  std::optional<Tokenizer> tokenizer;
  if (!ids_arg) {
    tokenizer.emplace(load_tokenizer(dir, config.family));
    check_tokenizer_fits(*tokenizer, config);
  }
  uint64_t weight_bytes = 0;
  {
    const Checkpoint checkpoint = Checkpoint::open(dir);
    check_tensors(checkpoint, config, /*any_float=*/false);
    weight_bytes = checkpoint.total_bytes();
  }
  std::vector<int32_t> ids =
      ids_arg ? parse_id_list(*ids_arg, config.vocab_size, "--ids")
              : encode_prompt(*tokenizer, prompt, chat, args.get("system").value_or(""));
  check_prompt_fits(ids.size(), config);
  std::vector<int32_t> stops;
  if (tokenizer) {
    stops = stop_ids(config, *tokenizer);
  } else {
    for (int64_t id : config.eos_token_ids) stops.push_back(static_cast<int32_t>(id));
  }
  require_device();
  std::fprintf(stderr, "model: %s (%s), %lld layers, d=%lld, V=%lld, %s of bf16 weights\n",
               dir.string().c_str(), gemma ? "Gemma 3" : "Llama",
               static_cast<long long>(config.num_layers),
               static_cast<long long>(config.hidden_size),
               static_cast<long long>(config.vocab_size), human_bytes(weight_bytes).c_str());

  // The cache holds the prompt and every new token but the last (which is never run).
  const int max_positions = static_cast<int>(std::min<int64_t>(
      config.max_position_embeddings, static_cast<int64_t>(ids.size()) + std::max<int64_t>(max_new, 1)));
  CachedModelOptions options;
  options.cache = cache_args.kind;
  options.page_size = cache_args.page_size;
  options.fused_attention = args.has("fused-attention");
  options.cuda_graphs = cuda_graphs;
  options.max_positions = max_positions;
  const auto load_start = Clock::now();
  std::optional<CachedModel> llama;
  std::optional<GemmaModel> gemma_model;
  {
    ProgressBar bar(std::string("loading (") + backend_name() + ")");
    auto progress = [&](uint64_t done, uint64_t total, const std::string& tensor) {
      bar.update(done, total, tensor);
    };
    if (gemma) {
      gemma_model.emplace(GemmaModel::load(dir, progress));
      if (cache_args.kind != KvCacheKind::None) gemma_model->enable_cache(max_positions);
    } else {
      llama.emplace(CachedModel::load(dir, options, progress));
    }
  }
  auto next_logits = [&](const std::vector<int32_t>& seq) {
    return gemma ? gemma_model->logits(seq) : llama->logits(seq);
  };
  const double load_s = seconds_since(load_start);
  std::fprintf(stderr, "loaded in %.2f s on the %s backend; prompt: %zu tokens%s; %s\n", load_s,
               backend_name(), ids.size(),
               chat ? " (chat template)" : ids_arg ? " (token ids)" : "",
               describe(sampling).c_str());
  std::string cache_line;
  if (gemma) {
    cache_line = gemma_model->has_cache() ? gemma_model->describe_cache()
                                          : "none (every step runs the whole sequence)";
  } else {
    cache_line = llama->cache() ? llama->cache()->describe()
                                : "none (every step runs the whole sequence)";
  }
  std::fprintf(stderr, "KV cache: %s\n", cache_line.c_str());

  Sampler sampler(sampling);
  std::optional<StreamDecoder> decoder;
  if (tokenizer) decoder.emplace(*tokenizer);
  // A model may have more embedding rows than the tokenizer has tokens; never pick those.
  const int32_t choosable =
      tokenizer ? std::min<int32_t>(tokenizer->vocab_size(), static_cast<int32_t>(config.vocab_size))
                : static_cast<int32_t>(config.vocab_size);
  auto flush = [&] { return decoder ? decoder->flush() : std::string(); };
  std::vector<int32_t> generated;
  std::vector<std::vector<float>> dumped;  // with --dump-logits: each step's logits
  auto dump = [&] {
    if (!dump_path) return;
    write_npy_f32(*dump_path, dumped, static_cast<uint64_t>(config.vocab_size));
    std::fprintf(stderr, "logits of %zu steps written to %s ([%zu, %lld] float32)\n",
                 dumped.size(), dump_path->c_str(), dumped.size(),
                 static_cast<long long>(config.vocab_size));
  };
  std::vector<double> step_ms;
  std::string stop_reason = "--max-new-tokens reached";
  for (int64_t step = 0; step < max_new; ++step) {
    if (static_cast<int64_t>(ids.size()) >= config.max_position_embeddings) {
      stop_reason = "the context is full";
      break;
    }
    const auto t0 = Clock::now();
    const std::vector<float> logits = next_logits(ids);
    if (dump_path) dumped.push_back(logits);
    if (!std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); })) {
      std::cout << flush() << "\n";
      dump();  // the bad step included: it is what one wants to look at
      throw std::runtime_error("the model's logits hold NaN or infinity at step " +
                               std::to_string(step + 1) + "; run clockwork verify --model " +
                               model_arg + " to find the first layer that goes wrong");
    }
    const int32_t next = sampler.pick(logits, choosable);
    step_ms.push_back(seconds_since(t0) * 1e3);
    generated.push_back(next);
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
      stop_reason = "stopped at " + (tokenizer ? tokenizer->token_bytes(next)
                                               : "id " + std::to_string(next));
      break;
    }
    ids.push_back(next);
    if (decoder) {
      std::cout << decoder->push(next) << std::flush;
    } else {
      std::cout << (generated.size() > 1 ? " " : "") << next << std::flush;
    }
  }
  std::cout << flush() << "\n";
  if (args.has("print-ids")) {
    std::cout << "ids:";
    for (int32_t id : generated) std::cout << " " << id;
    std::cout << "\n";
  }
  std::cout.flush();
  dump();

  if (step_ms.empty()) {
    std::fprintf(stderr, "generated no tokens (%s)\n", stop_reason.c_str());
  } else {
    const double total_ms = std::accumulate(step_ms.begin(), step_ms.end(), 0.0);
    // The first step runs the prompt; the others are the per-token cost.
    const double rest_ms = total_ms - step_ms.front();
    const size_t rest = step_ms.size() - 1;
    std::fprintf(stderr,
                 "generated %zu tokens in %.2f s: first %.1f ms (the prompt), then %.1f ms/token "
                 "on average (%s)\n",
                 step_ms.size(), total_ms / 1e3, step_ms.front(),
                 rest ? rest_ms / static_cast<double>(rest) : step_ms.front(), stop_reason.c_str());
  }
  if (options.cuda_graphs && llama) {
    const DecodeGraphStats& g = llama->decode_graph_stats();
    std::fprintf(stderr,
                 "CUDA graphs: %llu decode steps run as graph launches; %llu executable graphs "
                 "instantiated, updated in place %llu times\n",
                 static_cast<unsigned long long>(g.launches),
                 static_cast<unsigned long long>(g.instantiations),
                 static_cast<unsigned long long>(g.updates));
  }
  return 0;
}

}  // namespace clockwork::cli
