// `clockwork generate`: runs the model built from the course's kernels on a prompt and streams
// the new text. There is no KV cache yet: every step runs the whole sequence again (s, s+1, ...),
// as the required milestones do.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <random>
#include <stdexcept>

#include "milestones/milestone3/model.h"
#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"
#include "tools/clockwork/model_dir.h"
#include "tools/clockwork/sampling.h"

namespace clockwork::cli {

namespace fs = std::filesystem;

namespace {

const CommandSpec kSpec{
    "generate",
    "--model DIR --prompt TEXT [options]",
    "Loads the model onto the device, encodes the prompt, and appends one token per forward\n"
    "pass until <|eot_id|> or <|end_of_text|>, --max-new-tokens or the end of the context.\n"
    "The text is printed as it is generated; timings go to stderr. Greedy (argmax) unless\n"
    "--temperature is above 0.",
    {
        {"model", "DIR", "model directory (config.json, safetensors, tokenizer)"},
        {"prompt", "TEXT", "the prompt"},
        {"chat", "", "wrap the prompt in the Llama 3 Instruct chat template"},
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
    },
    "",
    "examples:\n"
    "  clockwork generate --model tiny --chat --prompt 'Tell me about clocks.'\n"
    "  clockwork generate --model Meta-Llama-3-8B-Instruct --chat --prompt 'Hi!' --temperature 0.6 "
    "--top-p 0.9"};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int cmd_generate(const std::vector<std::string>& argv) {
  const Args args = parse_args(kSpec, argv);
  if (args.help) {
    std::cout << help_text(kSpec);
    return 0;
  }
  const std::string model_arg = args.require("model");
  const std::string prompt = args.require("prompt");
  const bool chat = args.has("chat");
  if (args.has("system") && !chat) throw UsageError("--system needs --chat");
  const int64_t max_new = args.get_int("max-new-tokens", 32, 0, 1 << 24);
  const SamplingOptions sampling = sampling_from_args(args);
  check_backend(args.get("backend").value_or(backend_name()));

  // Everything cheap is checked before the weights are copied to the device.
  const fs::path dir = require_model_dir(model_arg);
  const ModelConfig config = load_config(dir);
  const Tokenizer tokenizer = load_tokenizer(dir);
  check_tokenizer_fits(tokenizer, config);
  uint64_t weight_bytes = 0;
  {
    const Checkpoint checkpoint = Checkpoint::open(dir);
    check_tensors(checkpoint, config, /*any_float=*/false);
    weight_bytes = checkpoint.total_bytes();
  }
  std::vector<int32_t> ids =
      encode_prompt(tokenizer, prompt, chat, args.get("system").value_or(""));
  check_prompt_fits(ids.size(), config);
  const std::vector<int32_t> stops = stop_ids(config, tokenizer);
  require_device();
  std::fprintf(stderr, "model: %s, %lld layers, d=%lld, V=%lld, %s of bf16 weights\n",
               dir.string().c_str(), static_cast<long long>(config.num_layers),
               static_cast<long long>(config.hidden_size),
               static_cast<long long>(config.vocab_size), human_bytes(weight_bytes).c_str());

  const auto load_start = Clock::now();
  Model model = [&] {
    ProgressBar bar(std::string("loading (") + backend_name() + ")");
    return Model::load(dir, [&](uint64_t done, uint64_t total, const std::string& tensor) {
      bar.update(done, total, tensor);
    });
  }();
  const double load_s = seconds_since(load_start);
  std::fprintf(stderr, "loaded in %.2f s on the %s backend; prompt: %zu tokens%s; %s\n", load_s,
               backend_name(), ids.size(), chat ? " (chat template)" : "",
               describe(sampling).c_str());

  Sampler sampler(sampling);
  StreamDecoder decoder(tokenizer);
  // A model may have more embedding rows than the tokenizer has tokens; never pick those.
  const int32_t choosable =
      std::min<int32_t>(tokenizer.vocab_size(), static_cast<int32_t>(config.vocab_size));
  std::vector<int32_t> generated;
  std::vector<double> step_ms;
  std::string stop_reason = "--max-new-tokens reached";
  for (int64_t step = 0; step < max_new; ++step) {
    if (static_cast<int64_t>(ids.size()) >= config.max_position_embeddings) {
      stop_reason = "the context is full";
      break;
    }
    const auto t0 = Clock::now();
    const std::vector<float> logits = model.forward(ids);
    if (!std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); })) {
      std::cout << decoder.flush() << "\n";
      throw std::runtime_error("the model's logits hold NaN or infinity at step " +
                               std::to_string(step + 1) + "; run clockwork verify --model " +
                               model_arg + " to find the first layer that goes wrong");
    }
    const int32_t next = sampler.pick(logits, choosable);
    step_ms.push_back(seconds_since(t0) * 1e3);
    generated.push_back(next);
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
      stop_reason = "stopped at " + tokenizer.token_bytes(next);
      break;
    }
    ids.push_back(next);
    std::cout << decoder.push(next) << std::flush;
  }
  std::cout << decoder.flush() << "\n";
  if (args.has("print-ids")) {
    std::cout << "ids:";
    for (int32_t id : generated) std::cout << " " << id;
    std::cout << "\n";
  }
  std::cout.flush();

  if (step_ms.empty()) {
    std::fprintf(stderr, "generated no tokens (%s)\n", stop_reason.c_str());
  } else {
    const double total_ms = std::accumulate(step_ms.begin(), step_ms.end(), 0.0);
    std::fprintf(stderr,
                 "generated %zu tokens in %.2f s: first %.1f ms (the prompt), %.1f ms/token "
                 "on average (%s)\n",
                 step_ms.size(), total_ms / 1e3, step_ms.front(), total_ms / step_ms.size(),
                 stop_reason.c_str());
  }
  return 0;
}

}  // namespace clockwork::cli
