// `clockwork inspect`: what a model directory holds. The configuration, every tensor with its
// dtype, shape and file, the parameter count, and whether lm_head is tied to the embeddings.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"
#include "harness/model/model_dir.h"

namespace clockwork::cli {

namespace fs = std::filesystem;

namespace {

const CommandSpec kSpec{
    "inspect",
    "--model DIR [--no-check]",
    "Prints a model directory's configuration, its tensors (name, dtype, shape, file), the\n"
    "parameter count and size, and its tokenizer. Every tensor the configuration implies is\n"
    "checked first (present, right shape, bf16); a problem is reported as an error.",
    {
        {"model", "DIR", "model directory"},
        {"no-check", "", "print the table even when tensors are missing or misshapen"},
    },
    "",
    ""};

std::string format_double(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

}  // namespace

int cmd_inspect(const std::vector<std::string>& argv) {
  const Args args = parse_args(kSpec, argv);
  if (args.help) {
    std::cout << help_text(kSpec);
    return 0;
  }
  const fs::path dir = require_model_dir(args.require("model"));
  const ModelConfig c = load_config(dir);
  const Checkpoint checkpoint = Checkpoint::open(dir);
  if (!args.has("no-check")) check_tensors(checkpoint, c, /*any_float=*/false);

  std::optional<Tokenizer> tokenizer;
  std::string tokenizer_file;
  for (const char* name : {"tokenizer.json", "original/tokenizer.model"}) {
    std::error_code ec;
    if (fs::is_regular_file(dir / name, ec)) {
      tokenizer.emplace(Tokenizer::from_file(dir / name));
      tokenizer_file = name;
      break;
    }
  }
  if (tokenizer && !args.has("no-check")) check_tokenizer_fits(*tokenizer, c);

  auto& out = std::cout;
  out << "model: " << dir.string() << "\n\n"
      << "config.json\n"
      << "  family             " << family_name(c.family)
      << (c.is_gemma3() ? " (Gemma 3)" : " (Llama 3)") << "\n"
      << "  layers L           " << c.num_layers << "\n"
      << "  hidden size d      " << c.hidden_size << "\n"
      << "  heads h / h_k      " << c.num_heads << " / " << c.num_kv_heads << " (groups of "
      << c.num_heads / c.num_kv_heads << " query heads per KV head)\n"
      << "  head dim h_d       " << c.head_dim << "\n"
      << "  FFN width d_ff     " << c.intermediate_size << "\n"
      << "  vocabulary V       " << c.vocab_size << "\n"
      << "  context            " << c.max_position_embeddings << " positions\n"
      << "  rms_norm_eps       " << format_double(c.rms_norm_eps) << "\n"
      << "  rope_theta         " << format_double(c.rope_theta) << "\n"
      << "  rope_scaling       "
      << (c.rope_scaling ? c.rope_scaling->type + " (factor " +
                               format_double(c.rope_scaling->factor) + ")" +
                               (c.is_gemma3() ? ", global layers only" : "")
                         : std::string("none"))
      << "\n";
  if (c.is_gemma3()) {
    // One letter per layer (L local, G global), the pattern a Gemma port must follow.
    std::string pattern;
    for (int64_t i = 0; i < c.num_layers; ++i) pattern += c.is_sliding(i) ? 'L' : 'G';
    out << "  rope_local_theta   " << format_double(c.rope_local_theta) << " (local layers)\n"
        << "  sliding_window     " << c.sliding_window << " positions (local layers)\n"
        << "  layer types        " << pattern << " (L local, G global)\n"
        << "  attention scale    query_pre_attn_scalar " << format_double(c.query_pre_attn_scalar)
        << "^-1/2 = " << format_double(c.attention_scale()) << "\n"
        << "  activation         gelu_pytorch_tanh (GeGLU)\n";
  }
  out
      << "  tied embeddings    "
      << (c.tie_word_embeddings ? "yes (lm_head uses model.embed_tokens.weight)"
                                : "no (lm_head.weight is its own tensor)")
      << "\n"
      << "  bos / eos ids      " << c.bos_token_id << " /";
  for (int64_t id : c.eos_token_ids) out << " " << id;
  out << "\n  dtype              " << c.torch_dtype << "\n\n";

  // Tensors in checkpoint order (the configuration's), then anything else the files hold.
  std::map<std::string, std::string> file_of;
  const bool sharded = checkpoint.files().size() > 1 || fs::exists(dir / kIndexFileName);
  for (const std::string& name : checkpoint.names()) {
    file_of[name] = fs::path(checkpoint.get(name).file).filename().string();
  }
  std::vector<std::string> order;
  std::set<std::string> listed;
  for (const ExpectedTensor& e : expected_tensors(c)) {
    if (checkpoint.contains(e.name)) {
      order.push_back(e.name);
      listed.insert(e.name);
    }
  }
  std::vector<std::string> extra;
  for (const std::string& name : checkpoint.names()) {
    if (!listed.count(name)) extra.push_back(name);
  }

  size_t name_w = 6, shape_w = 5;
  for (const std::string& name : checkpoint.names()) {
    name_w = std::max(name_w, name.size());
    shape_w = std::max(shape_w, shape_string(checkpoint.get(name).shape).size());
  }
  out << "tensors (" << checkpoint.size() << ")\n  " << std::left << std::setw(int(name_w))
      << "name"
      << "  dtype  " << std::setw(int(shape_w)) << "shape"
      << "  file\n";
  auto row = [&](const std::string& name, const char* note) {
    const TensorInfo& t = checkpoint.get(name);
    out << "  " << std::setw(int(name_w)) << name << "  " << std::setw(5) << dtype_name(t.dtype)
        << "  " << std::setw(int(shape_w)) << shape_string(t.shape) << "  " << file_of[name] << note
        << "\n";
  };
  for (const std::string& name : order) row(name, "");
  for (const std::string& name : extra) {
    const bool unused_lm_head = name == "lm_head.weight" && c.tie_word_embeddings;
    row(name, unused_lm_head ? "  (unused: embeddings are tied)" : "  (not used by the model)");
  }
  out << std::right;
  if (!checkpoint.set_aside().empty()) {
    // A multimodal checkpoint: its text model is listed above under the text-only names.
    const size_t n = checkpoint.set_aside().size();
    out << "  (" << n << (n == 1 ? " more tensor" : " more tensors")
        << " beside the text model, not read: the vision tower and projector, e.g. "
        << checkpoint.set_aside().front() << ")\n";
  }

  out << "\ncheckpoint\n"
      << "  files              " << checkpoint.files().size()
      << (sharded ? " (sharded, " + std::string(kIndexFileName) + ")" : std::string()) << "\n"
      << "  parameters         " << group_digits(checkpoint.num_parameters()) << "\n"
      << "  bytes              " << group_digits(checkpoint.total_bytes()) << " ("
      << human_bytes(checkpoint.total_bytes()) << ")\n"
      << "  lm_head            "
      << (c.tie_word_embeddings ? "tied to model.embed_tokens.weight" : "lm_head.weight") << "\n";

  out << "\ntokenizer\n";
  if (!tokenizer) {
    out << "  none (no tokenizer.json or original/tokenizer.model)\n";
  } else {
    out << "  file               " << tokenizer_file << "\n"
        << "  tokens             " << tokenizer->vocab_size() << " (" << tokenizer->special_base();
    if (tokenizer->style() == Tokenizer::Style::kSentencePiece) {
      // Gemma's special tokens sit inside model.vocab; count them instead.
      int32_t special = 0;
      for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) special += tokenizer->is_special(id);
      out << " in model.vocab + " << tokenizer->num_special_tokens() << " after it; " << special
          << " special)\n";
    } else {
      out << " base + " << tokenizer->num_special_tokens() << " special)\n";
    }
    out << "  kind               "
        << (tokenizer->style() == Tokenizer::Style::kSentencePiece
                ? "SentencePiece-style BPE (Gemma 3)"
                : "byte-level BPE (Llama 3)")
        << "\n";
    for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<bos>",
                                "<eos>", "<start_of_turn>", "<end_of_turn>"}) {
      if (auto id = tokenizer->find_special(special)) {
        out << "  " << std::left << std::setw(19) << special << std::right << *id << "\n";
      }
    }
  }
  return 0;
}

}  // namespace clockwork::cli
