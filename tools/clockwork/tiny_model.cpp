// `clockwork tiny-model`: writes a random-weight Llama checkpoint in exactly the layout of the
// released Llama-3 models (config.json, bf16 safetensors, tokenizer.json and
// original/tokenizer.model), small enough for tests or, with --preset llama3-8b, with the real
// model's per-layer sizes.
//
// Weights are streamed: each tensor is generated chunk by chunk and written straight to its
// shard, so a preset checkpoint of several GB never sits in memory. Every chunk has its own seed
// derived from (seed, tensor name, chunk), so a tensor's values depend neither on the sharding
// nor on the order in which tensors are written.
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/model_config.h"
#include "harness/model/safetensors.h"
#include "harness/model/tokenizer.h"
#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"
#include "tools/clockwork/corpus.h"
#include "harness/model/model_dir.h"
#include "harness/check/temp_dir.h"

namespace clockwork::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

const CommandSpec kSpec{
    "tiny-model",
    "--out DIR [options]",
    "Writes a Llama-3-format checkpoint with random bf16 weights and a small byte-level BPE\n"
    "tokenizer trained on built-in English text: config.json, generation_config.json,\n"
    "tokenizer_config.json, model.safetensors (or shards and model.safetensors.index.json),\n"
    "tokenizer.json and original/tokenizer.model. The vocabulary is the 256 byte tokens, the\n"
    "merges learned from the text (topped up with made-up words when the text has no more to\n"
    "learn) and Llama 3's 256 special tokens: exactly --vocab tokens in all.\n"
    "The directory is written under a temporary name and renamed into place when complete.",
    {
        {"out", "DIR", "directory to create (must not exist or be empty, unless --force)"},
        {"layers", "N", "decoder layers (default 2; 1 with --preset)"},
        {"hidden", "D", "hidden size d (default 64)"},
        {"heads", "H", "query heads h (default 4)"},
        {"head-dim", "N",
         "head size h_d, even (default d / h; any other value makes Q h*h_d wide, not d, as in "
         "Gemma 3)"},
        {"kv-heads", "K", "key/value heads h_k, a divisor of h (default 2)"},
        {"ffn", "F", "FFN width d_ff (default 3.5 d rounded up to a multiple of 16)"},
        {"vocab", "V", "vocabulary size, at least 512 = 256 bytes + 256 specials (default 1024)"},
        {"context", "N",
         "max_position_embeddings (default 2048; with --preset the model's: 8192 for llama3-8b, "
         "131072 for the others)"},
        {"seed", "S", "seed of the random weights (default 1)"},
        {"shards", "N", "number of safetensors shards (default 1: a single model.safetensors)"},
        {"tie", "", "tie lm_head to the embedding table (tie_word_embeddings, as Llama 3.2)"},
        {"preset", "NAME",
         "a released model's exact sizes and configuration with --layers of its layers: "
         "llama3-8b (d=4096, h=32, h_k=8, d_ff=14336, 32 layers), llama3.1-8b (the same with "
         "llama3 rope scaling, factor 8), llama3.2-3b (d=3072, h=24, h_k=8, d_ff=8192, 28 "
         "layers, tied, factor 32), llama3.2-1b (d=2048, h=32, h_k=8, d_ff=8192, 16 layers, "
         "tied, factor 32); V=128256 for all"},
        {"force", "", "replace DIR if it already holds a model"},
    },
    "",
    "examples:\n"
    "  clockwork tiny-model --out tiny\n"
    "  clockwork tiny-model --out tiny-sharded --layers 4 --shards 3 --tie\n"
    "  clockwork tiny-model --out llama-1layer --preset llama3-8b --layers 1 --shards 2\n"
    "  clockwork tiny-model --out llama32-1b --preset llama3.2-1b --layers 16"};

// The released checkpoints' config.json values (HuggingFace meta-llama/*). All have V = 128256,
// rope_theta 500000 and rms_norm_eps 1e-5; 3.1 and 3.2 add llama3 rope scaling with
// low_freq_factor 1, high_freq_factor 4 and original_max_position_embeddings 8192.
struct Preset {
  const char* name;
  int64_t layers, hidden, heads, kv_heads, ffn, context;  // h_d = hidden / heads for all
  bool tied;
  double rope_factor;  // 0: no rope_scaling (Llama-3-8B)
};

constexpr Preset kPresets[] = {
    {"llama3-8b", 32, 4096, 32, 8, 14336, 8192, false, 0.0},
    {"llama3.1-8b", 32, 4096, 32, 8, 14336, 131072, false, 8.0},
    {"llama3.2-3b", 28, 3072, 24, 8, 8192, 131072, true, 32.0},
    {"llama3.2-1b", 16, 2048, 32, 8, 8192, 131072, true, 32.0},
};

const Preset& find_preset(const std::string& name) {
  std::string known;
  for (const Preset& p : kPresets) {
    if (name == p.name) return p;
    known += std::string(known.empty() ? "" : ", ") + p.name;
  }
  throw UsageError("--preset is '" + name + "'; the presets are " + known);
}

struct Plan {
  ModelConfig config;
  uint64_t seed = 1;
  int shards = 1;
  fs::path out;
  bool force = false;
};

Plan plan_from_args(const Args& args) {
  Plan p;
  ModelConfig& c = p.config;
  p.out = args.require("out");
  p.force = args.has("force");
  p.seed = static_cast<uint64_t>(args.get_int("seed", 1, 0, INT64_MAX));
  p.shards = static_cast<int>(args.get_int("shards", 1, 1, 99999));
  c.tie_word_embeddings = args.has("tie");
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.torch_dtype = "bfloat16";

  if (auto name = args.get("preset")) {
    const Preset& preset = find_preset(*name);
    for (const char* fixed : {"hidden", "heads", "head-dim", "kv-heads", "ffn", "vocab"}) {
      if (args.has(fixed)) {
        throw UsageError(std::string("--") + fixed + " cannot be combined with --preset " +
                         preset.name + ", which fixes it");
      }
    }
    if (preset.tied) c.tie_word_embeddings = true;
    c.num_layers = args.get_int("layers", 1, 1, preset.layers);
    c.hidden_size = preset.hidden;
    c.num_heads = preset.heads;
    c.num_kv_heads = preset.kv_heads;
    c.intermediate_size = preset.ffn;
    c.vocab_size = 128256;
    c.max_position_embeddings = args.get_int("context", preset.context, 2, 1 << 20);
    if (preset.rope_factor > 0) {
      c.rope_scaling = RopeScaling{"llama3", preset.rope_factor, 1.0, 4.0, 8192};
    }
  } else {
    c.num_layers = args.get_int("layers", 2, 1, 1024);
    c.hidden_size = args.get_int("hidden", 64, 2, 1 << 16);
    c.num_heads = args.get_int("heads", 4, 1, 1024);
    c.num_kv_heads = args.get_int("kv-heads", std::min<int64_t>(2, c.num_heads), 1, 1024);
    const int64_t default_ffn = (c.hidden_size * 7 / 2 + 15) / 16 * 16;
    c.intermediate_size = args.get_int("ffn", default_ffn, 1, 1 << 20);
    c.vocab_size = args.get_int("vocab", 1024, 0, 1 << 20);
    c.max_position_embeddings = args.get_int("context", 2048, 2, 1 << 20);
  }
  if (c.vocab_size < 512) {
    throw UsageError("--vocab " + std::to_string(c.vocab_size) +
                     " is too small: the vocabulary must hold the 256 byte tokens and Llama 3's "
                     "256 special tokens (at least 512)");
  }
  if (args.has("head-dim")) {
    c.head_dim = args.get_int("head-dim", 0, 2, 1 << 16);
    if (c.head_dim % 2 != 0) {
      throw UsageError("--head-dim " + std::to_string(c.head_dim) +
                       " is odd; RoPE rotates pairs of dimensions, so it must be even");
    }
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      throw UsageError("--hidden " + std::to_string(c.hidden_size) +
                       " is not a multiple of --heads " + std::to_string(c.num_heads) +
                       " (head_dim = d / h must be a whole number; or give --head-dim)");
    }
    c.head_dim = c.hidden_size / c.num_heads;
    if (c.head_dim % 2 != 0) {
      throw UsageError("head_dim = --hidden / --heads = " + std::to_string(c.head_dim) +
                       " is odd; RoPE rotates pairs of dimensions, so it must be even");
    }
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    throw UsageError("--heads " + std::to_string(c.num_heads) +
                     " is not a multiple of --kv-heads " + std::to_string(c.num_kv_heads) +
                     " (each KV head serves h / h_k query heads)");
  }
  const size_t num_tensors = expected_tensors(c).size();
  if (static_cast<size_t>(p.shards) > num_tensors) {
    throw UsageError("--shards " + std::to_string(p.shards) + " is more than the " +
                     std::to_string(num_tensors) + " tensors of this model");
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------------------------

std::string base64_encode(std::string_view bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) |
                       (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += table[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// Letters only, optionally after one space: " the", "ing", "k".
bool is_word_piece(std::string_view t, bool allow_space) {
  if (!t.empty() && t[0] == ' ' && allow_space) t.remove_prefix(1);
  if (t.empty()) return false;
  return std::all_of(t.begin(), t.end(),
                     [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); });
}

// A tokenizer of exactly `vocab` tokens: BPE merges learned from the corpus, and when the corpus
// runs out of pairs worth merging, made-up words (a learned word piece followed by a learned
// suffix, " the" + "ing") until the base vocabulary is vocab - 256. For --preset llama3-8b that
// puts the special tokens at 128000..128255, the ids of the released model.
Tokenizer build_tokenizer(int64_t vocab, int* learned_merges, int* made_up) {
  const int64_t base = vocab - kLlama3NumSpecialTokens;
  Tokenizer trained = train_small_bpe(training_corpus(), static_cast<int>(base - 256));
  *learned_merges = trained.special_base() - 256;
  *made_up = 0;
  if (trained.special_base() == base) return trained;

  std::vector<std::string> tokens;
  std::unordered_set<std::string> known;
  for (int32_t id = 0; id < trained.special_base(); ++id) {
    tokens.push_back(trained.token_bytes(id));
    known.insert(tokens.back());
  }
  std::vector<std::string> heads, tails;
  for (const std::string& t : tokens) {
    if (is_word_piece(t, true)) heads.push_back(t);
    if (is_word_piece(t, false) && t.size() > 1) tails.push_back(t);
  }
  // Walk the (head, tail) grid by anti-diagonals, so early (frequent) pieces pair first.
  const int64_t nh = static_cast<int64_t>(heads.size());
  const int64_t nt = static_cast<int64_t>(tails.size());
  for (int64_t sum = 0; sum <= nh + nt - 2 && static_cast<int64_t>(tokens.size()) < base; ++sum) {
    for (int64_t i = std::max<int64_t>(0, sum - nt + 1); i <= std::min(sum, nh - 1); ++i) {
      std::string word = heads[i] + tails[sum - i];
      if (!known.insert(word).second) continue;
      tokens.push_back(std::move(word));
      if (static_cast<int64_t>(tokens.size()) == base) break;
    }
  }
  if (static_cast<int64_t>(tokens.size()) < base) {
    throw UsageError("--vocab " + std::to_string(vocab) + " is larger than the built-in corpus " +
                     "can fill (at most " + std::to_string(tokens.size() + 256) + " tokens)");
  }
  *made_up = static_cast<int>(tokens.size()) - trained.special_base();

  // Rank file text: one `base64(bytes) rank` line per token, id = rank.
  std::string ranks;
  for (size_t id = 0; id < tokens.size(); ++id) {
    ranks += base64_encode(tokens[id]);
    ranks += ' ';
    ranks += std::to_string(id);
    ranks += '\n';
  }
  return Tokenizer::from_tokenizer_model_text(ranks, "tiny-model tokenizer");
}

// ---------------------------------------------------------------------------------------------
// Random weights
// ---------------------------------------------------------------------------------------------

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ULL);
  return splitmix64(s);
}

uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 0x100000001b3ULL;
  return h;
}

// N(mean, std²) by Box-Muller from a splitmix64 stream: the same numbers on every platform
// (the standard library's distributions are implementation-defined). `first` is the index of
// out[0] in its tensor; elements of rows marked in `quiet` (rows of `row_length`) are drawn 100
// times smaller.
void fill_normal(uint16_t* out, size_t n, uint64_t seed, float mean, float std, size_t first,
                 size_t row_length, const std::vector<uint8_t>* quiet) {
  uint64_t state = seed;
  auto value = [&](size_t i, double z) {
    const bool small = quiet && (*quiet)[(first + i) / row_length];
    return float_to_bf16(mean + std * static_cast<float>(small ? 0.01 * z : z));
  };
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = value(i, r * std::cos(2.0 * std::numbers::pi * u2));
    if (i + 1 < n) out[i + 1] = value(i + 1, r * std::sin(2.0 * std::numbers::pi * u2));
  }
}

// How each tensor is drawn. The real model's projections have std about 0.02 at d = 4096; a
// smaller model gets std 0.02·sqrt(4096 / in_features), so every projection's output has the
// same scale as in the real model whatever the width. Norm weights are near 1 but not 1, so a
// forgotten γ multiply changes the result.
struct Draw {
  float mean;
  float std;
};

Draw draw_for(const ExpectedTensor& t) {
  if (t.shape.size() == 1) return {1.0f, 0.1f};
  if (t.name == "model.embed_tokens.weight") return {0.0f, 0.02f};
  const double in_features = static_cast<double>(t.shape[1]);
  return {0.0f, static_cast<float>(0.02 * std::sqrt(4096.0 / in_features))};
}

struct PlannedTensor {
  ExpectedTensor spec;
  Draw draw;
  uint64_t seed;
  uint64_t nbytes;
  const std::vector<uint8_t>* quiet_rows = nullptr;  // see untrained_rows()
  int shard = 0;
  uint64_t offset = 0;  // in the shard's data area
};

// Rows of embed_tokens and lm_head that belong to the reserved special tokens. The released
// Llama 3 never trained them and their rows are close to zero; drawing them small here too
// keeps a random model from printing <|reserved_special_token_N|> every few tokens.
std::vector<uint8_t> untrained_rows(const Tokenizer& tokenizer) {
  std::vector<uint8_t> quiet(static_cast<size_t>(tokenizer.vocab_size()), 0);
  for (int32_t id = tokenizer.special_base(); id < tokenizer.vocab_size(); ++id) {
    quiet[id] = tokenizer.token_bytes(id).rfind("<|reserved_special_token_", 0) == 0;
  }
  return quiet;
}

// Splits tensors (kept in checkpoint order) into `shards` runs of roughly equal bytes, each
// holding at least one tensor.
void assign_shards(std::vector<PlannedTensor>& tensors, int shards) {
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.nbytes;
  int shard = 0;
  uint64_t cumulative = 0;  // bytes before the current tensor
  size_t in_shard = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t left = tensors.size() - i;
    const bool past_share = cumulative >= total / shards * (shard + 1);
    const bool must_move = left <= static_cast<size_t>(shards - 1 - shard);
    if (in_shard > 0 && shard < shards - 1 && (past_share || must_move)) {
      ++shard;
      in_shard = 0;
    }
    tensors[i].shard = shard;
    ++in_shard;
    cumulative += tensors[i].nbytes;
  }
}

std::string shard_file_name(int shard, int shards) {
  if (shards == 1) return std::string(kSingleFileName);
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, shards);
  return name;
}

// Writes one shard: the JSON header (padded with spaces to a multiple of 8 bytes) and then each
// tensor's bf16 values, generated in chunks on every core.
void write_shard(const fs::path& path, std::vector<PlannedTensor*> tensors, uint64_t& done,
                 uint64_t total, ProgressBar& bar) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (PlannedTensor* t : tensors) {
    t->offset = offset;
    header[t->spec.name] = {{"dtype", "BF16"},
                            {"shape", t->spec.shape},
                            {"data_offsets", {offset, offset + t->nbytes}}};
    offset += t->nbytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');

  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path.string() + ": cannot create");
  uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));  // little-endian
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));

  constexpr size_t kChunk = size_t{1} << 16;  // elements per seeded chunk
  constexpr size_t kChunksPerBlock = 256;     // 16M elements = 32 MB per write
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<uint16_t> block(kChunk * kChunksPerBlock);
  for (PlannedTensor* t : tensors) {
    const size_t numel = t->nbytes / 2;
    const size_t chunks = (numel + kChunk - 1) / kChunk;
    for (size_t first = 0; first < chunks; first += kChunksPerBlock) {
      const size_t count = std::min(kChunksPerBlock, chunks - first);
      auto work = [&](unsigned worker) {
        for (size_t c = worker; c < count; c += threads) {
          const size_t begin = (first + c) * kChunk;
          const size_t len = std::min(kChunk, numel - begin);
          fill_normal(block.data() + c * kChunk, len, mix(t->seed, first + c), t->draw.mean,
                      t->draw.std, begin, static_cast<size_t>(t->spec.shape.back()), t->quiet_rows);
        }
      };
      std::vector<std::thread> pool;
      for (unsigned w = 1; w < std::min<size_t>(threads, count); ++w) pool.emplace_back(work, w);
      work(0);
      for (auto& th : pool) th.join();
      const size_t elems = std::min(numel - first * kChunk, count * kChunk);
      out.write(reinterpret_cast<const char*>(block.data()),
                static_cast<std::streamsize>(elems * 2));  // bf16 is little-endian on disk
      done += elems * 2;
      bar.update(done, total, t->spec.name);
    }
  }
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": write failed (disk full?)");
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

// Llama 3 Instruct's chat template, as HuggingFace's tokenizer_config.json carries it.
constexpr const char* kChatTemplate =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
    "%}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

// Removes a temporary directory unless released.
struct TempDirGuard {
  fs::path path;
  ~TempDirGuard() {
    if (!path.empty()) remove_tree(path);
  }
};

fs::path make_temp_dir_next_to(const fs::path& target, const char* tag) {
  std::string pattern = target.string() + tag + "XXXXXX";
  if (!mkdtemp(pattern.data())) {
    throw std::runtime_error("cannot create a directory next to " + target.string() + ": " +
                             std::strerror(errno));
  }
  // mkdtemp makes it private (0700); the model directory gets the usual permissions.
  const mode_t mask = umask(0);
  umask(mask);
  chmod(pattern.c_str(), 0777 & ~mask);
  return pattern;
}

}  // namespace

int cmd_tiny_model(const std::vector<std::string>& argv) {
  const Args args = parse_args(kSpec, argv);
  if (args.help) {
    std::cout << help_text(kSpec);
    return 0;
  }
  Plan plan = plan_from_args(args);
  ModelConfig& config = plan.config;

  // The target: absent, an empty directory, or (with --force) a model directory.
  fs::path out = plan.out;
  while (!out.empty() && !out.has_filename()) out = out.parent_path();  // "dir/" -> "dir"
  std::error_code ec;
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) {
    throw std::runtime_error("cannot create " + out.string() + ": its parent directory " +
                             parent.string() + " does not exist");
  }
  const bool exists = fs::exists(fs::symlink_status(out, ec));
  if (exists) {
    if (!fs::is_directory(fs::symlink_status(out, ec))) {
      throw std::runtime_error(out.string() + " exists and is not a directory");
    }
    if (!fs::is_empty(out, ec)) {
      if (!plan.force) {
        throw std::runtime_error(out.string() +
                                 " is not empty (use --force to replace the model in it)");
      }
      if (!fs::exists(out / "config.json", ec)) {
        throw std::runtime_error("refusing to replace " + out.string() +
                                 ": it is not empty and holds no config.json, so it does not "
                                 "look like a model directory");
      }
    }
  }

  // Tokenizer first: it decides the special token ids written into the config.
  int learned = 0, made_up = 0;
  Tokenizer tokenizer = build_tokenizer(config.vocab_size, &learned, &made_up);
  config.bos_token_id = tokenizer.bos_id();
  config.eos_token_ids = {tokenizer.eos_id(), tokenizer.eot_id()};
  config.validate("tiny-model");

  TempDirGuard temp{make_temp_dir_next_to(out, ".tmp-")};
  const fs::path& dir = temp.path;

  write_text(dir / "config.json", config.to_json() + "\n");
  json generation = {{"bos_token_id", config.bos_token_id},
                     {"eos_token_id", config.eos_token_ids},
                     {"do_sample", true},
                     {"temperature", 0.6},
                     {"top_p", 0.9},
                     {"max_length", config.max_position_embeddings}};
  write_text(dir / "generation_config.json", generation.dump(2) + "\n");
  json tokenizer_config = {{"bos_token", "<|begin_of_text|>"},
                           {"eos_token", "<|eot_id|>"},
                           {"model_max_length", config.max_position_embeddings},
                           {"tokenizer_class", "PreTrainedTokenizerFast"},
                           {"clean_up_tokenization_spaces", true},
                           {"chat_template", kChatTemplate}};
  write_text(dir / "tokenizer_config.json", tokenizer_config.dump(2) + "\n");
  tokenizer.write_tokenizer_json(dir / "tokenizer.json");
  fs::create_directory(dir / "original");
  tokenizer.write_tokenizer_model(dir / "original" / "tokenizer.model");

  // Weights.
  std::vector<PlannedTensor> tensors;
  uint64_t total = 0;
  const std::vector<uint8_t> quiet = untrained_rows(tokenizer);
  for (ExpectedTensor& spec : expected_tensors(config)) {
    uint64_t numel = 1;
    for (int64_t d : spec.shape) numel *= static_cast<uint64_t>(d);
    PlannedTensor t{spec, draw_for(spec), mix(plan.seed, hash_name(spec.name)), numel * 2};
    if (spec.name == "model.embed_tokens.weight" || spec.name == "lm_head.weight") {
      t.quiet_rows = &quiet;
    }
    total += t.nbytes;
    tensors.push_back(std::move(t));
  }
  assign_shards(tensors, plan.shards);
  ProgressBar bar("writing");
  uint64_t done = 0;
  json weight_map = json::object();
  for (int s = 0; s < plan.shards; ++s) {
    std::vector<PlannedTensor*> in_shard;
    for (PlannedTensor& t : tensors) {
      if (t.shard == s) {
        in_shard.push_back(&t);
        weight_map[t.spec.name] = shard_file_name(s, plan.shards);
      }
    }
    write_shard(dir / shard_file_name(s, plan.shards), in_shard, done, total, bar);
  }
  bar.finish();
  if (plan.shards > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_text(dir / kIndexFileName, index.dump(2) + "\n");
  }

  // Read everything back the way the course's readers will before publishing the directory.
  {
    const ModelConfig reread = load_config(dir);
    const Checkpoint checkpoint = Checkpoint::open(dir);
    check_tensors(checkpoint, reread, /*any_float=*/false);
    const Tokenizer from_json = Tokenizer::from_file(dir / "tokenizer.json");
    const Tokenizer from_model = Tokenizer::from_file(dir / "original" / "tokenizer.model");
    if (from_json.vocab_size() != config.vocab_size ||
        from_model.vocab_size() != config.vocab_size) {
      throw std::runtime_error("internal error: the written tokenizer has " +
                               std::to_string(from_json.vocab_size()) + " tokens, expected " +
                               std::to_string(config.vocab_size));
    }
  }

  // Publish: rename into place; a replaced model is moved aside first and deleted afterwards.
  std::optional<TempDirGuard> old;
  if (exists && !fs::is_empty(out, ec)) {
    old.emplace();
    old->path = make_temp_dir_next_to(out, ".old-");
    fs::rename(out, old->path);  // replaces the empty placeholder directory
  }
  fs::rename(dir, out);
  temp.path.clear();

  std::cout << "wrote " << out.string() << ": " << config.num_layers
            << " layers, d=" << config.hidden_size << ", h=" << config.num_heads
            << ", h_k=" << config.num_kv_heads << ", h_d=" << config.head_dim
            << ", d_ff=" << config.intermediate_size << ", V=" << config.vocab_size << ", context "
            << config.max_position_embeddings
            << (config.tie_word_embeddings ? ", tied embeddings" : "")
            << (config.rope_scaling ? ", llama3 rope scaling" : "") << "\n"
            << "  weights: " << group_digits(total / 2) << " parameters, " << human_bytes(total)
            << " bf16 in " << plan.shards << (plan.shards == 1 ? " file" : " shards")
            << " (random, seed " << plan.seed << ")\n"
            << "  tokenizer: " << config.vocab_size << " tokens = 256 bytes + " << learned
            << " learned merges"
            << (made_up ? " + " + std::to_string(made_up) + " made-up words" : "")
            << " + 256 special (<|begin_of_text|> = " << config.bos_token_id
            << ", <|end_of_text|> = " << config.eos_token_ids[0]
            << ", <|eot_id|> = " << config.eos_token_ids[1] << ")\n";
  return 0;
}

}  // namespace clockwork::cli
