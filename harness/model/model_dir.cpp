// Opening a model directory's parts with errors that name the file (see model_dir.h).
#include "harness/model/model_dir.h"

#include <algorithm>
#include <stdexcept>

#include "harness/model/config_check.h"

namespace clockwork {

namespace fs = std::filesystem;

fs::path require_model_dir(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw std::runtime_error("model directory '" + path + "' does not exist");
  if (!fs::is_directory(st)) {
    throw std::runtime_error("'" + path +
                             "' is not a directory (--model expects a model "
                             "directory holding config.json and the safetensors files)");
  }
  return path;
}

ModelConfig load_config(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    throw ConfigError(file.string() + ": not found (a model directory needs config.json)");
  }
  return ModelConfig::from_file(file);
}

Tokenizer load_tokenizer(const fs::path& dir) {
  return Tokenizer::from_file(dir);
}

Tokenizer load_tokenizer(const fs::path& dir, ModelFamily family) {
  Tokenizer tokenizer = Tokenizer::from_file(dir);
  const Tokenizer::Style wanted =
      family == ModelFamily::gemma3 ? Tokenizer::Style::kSentencePiece : Tokenizer::Style::kByteLevel;
  if (tokenizer.style() != wanted) {
    auto describe = [](Tokenizer::Style s) {
      return s == Tokenizer::Style::kSentencePiece ? "a SentencePiece-style one (Gemma 3's)"
                                                   : "a byte-level one (Llama 3's)";
    };
    throw std::runtime_error(dir.string() + ": config.json describes a " +
                             std::string(family_name(family)) + " model, but the tokenizer is " +
                             describe(tokenizer.style()) + " where " + describe(wanted) +
                             " was expected; the tokenizer does not belong to this model");
  }
  return tokenizer;
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  const int64_t d = c.hidden_size;
  const int64_t q_width = c.num_heads * c.head_dim;
  const int64_t kv_width = c.num_kv_heads * c.head_dim;
  const int64_t ff = c.intermediate_size;
  std::vector<ExpectedTensor> out{{"model.embed_tokens.weight", {c.vocab_size, d}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {d}});
    out.push_back({p + "self_attn.q_proj.weight", {q_width, d}});
    out.push_back({p + "self_attn.k_proj.weight", {kv_width, d}});
    out.push_back({p + "self_attn.v_proj.weight", {kv_width, d}});
    out.push_back({p + "self_attn.o_proj.weight", {d, q_width}});
    if (c.is_gemma3()) {  // QK-norm: one weight of h_d shared by every head
      out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    out.push_back({p + "post_attention_layernorm.weight", {d}});
    if (c.is_gemma3()) {  // the norms around the FFN
      out.push_back({p + "pre_feedforward_layernorm.weight", {d}});
      out.push_back({p + "post_feedforward_layernorm.weight", {d}});
    }
    out.push_back({p + "mlp.gate_proj.weight", {ff, d}});
    out.push_back({p + "mlp.up_proj.weight", {ff, d}});
    out.push_back({p + "mlp.down_proj.weight", {d, ff}});
  }
  out.push_back({"model.norm.weight", {d}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, d}});
  return out;
}

void check_tensors(const Checkpoint& checkpoint, const ModelConfig& config, bool any_float) {
  check_config_fits_checkpoint(config, checkpoint);  // before 9 x L names are built
  for (const ExpectedTensor& e : expected_tensors(config)) {
    const TensorInfo& t = checkpoint.get(e.name);  // a missing name throws, with a suggestion
    if (t.shape != e.shape) {
      throw CheckpointError(t.file + ": tensor '" + e.name + "' has shape " +
                            shape_string(t.shape) + ", but config.json implies " +
                            shape_string(e.shape));
    }
    if (!any_float && t.dtype != DType::BF16) {
      throw CheckpointError(t.file + ": tensor '" + e.name + "' is " +
                            std::string(dtype_name(t.dtype)) +
                            ", expected BF16 (the model keeps its weights in bf16)");
    }
  }
}

void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelConfig& config) {
  if (tokenizer.vocab_size() > config.vocab_size) {
    throw std::runtime_error("the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                             " tokens but config.json's vocab_size is " +
                             std::to_string(config.vocab_size) +
                             "; the tokenizer does not belong to this model");
  }
}

std::vector<int32_t> stop_ids(const ModelConfig& config, const Tokenizer& tokenizer) {
  std::vector<int32_t> out;
  for (int64_t id : config.eos_token_ids) out.push_back(static_cast<int32_t>(id));
  for (const char* name : {"<|end_of_text|>", "<|eot_id|>", "<eos>", "<end_of_turn>"}) {
    if (auto id = tokenizer.find_special(name)) out.push_back(*id);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& prompt, bool chat,
                                   const std::string& system) {
  if (!chat) return tokenizer.encode(prompt, /*allow_special=*/false, /*bos=*/true);
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", prompt});
  return tokenizer.encode_chat(messages);
}

void check_prompt_fits(size_t prompt_tokens, const ModelConfig& config) {
  if (static_cast<int64_t>(prompt_tokens) >= config.max_position_embeddings) {
    throw std::runtime_error("the prompt is " + std::to_string(prompt_tokens) +
                             " tokens, but the model's context (max_position_embeddings in "
                             "config.json) is " +
                             std::to_string(config.max_position_embeddings) +
                             " tokens, leaving no room for a new token");
  }
}

}  // namespace clockwork
