// Model configuration: the fields of a HuggingFace Llama `config.json` that the course uses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace clockwork {

/// A missing, wrongly typed or inconsistent field in `config.json`. The message names the file
/// and the field and says what was expected.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `rope_scaling` of Llama 3.1/3.2 checkpoints (`rope_type: "llama3"`); absent for Llama-3-8B.
/// It rescales the RoPE inverse frequencies: wavelengths longer than
/// original_max_position_embeddings / low_freq_factor are divided by `factor`, those shorter
/// than original_max_position_embeddings / high_freq_factor are kept, and the band between is
/// blended smoothly.
struct RopeScaling {
  std::string type;  ///< "llama3" is the only type the course supports
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 1.0;
  int64_t original_max_position_embeddings = 0;

  bool operator==(const RopeScaling&) const = default;
};

/// Shapes and constants of a Llama model, validated on load.
struct ModelConfig {
  int64_t hidden_size = 0;                  ///< d
  int64_t num_layers = 0;                   ///< L (`num_hidden_layers`)
  int64_t num_heads = 0;                    ///< h (`num_attention_heads`)
  int64_t num_kv_heads = 0;                 ///< h_k (`num_key_value_heads`; defaults to h)
  /// h_d (`head_dim`; d / h when absent). Need not equal d / h: Q is [s, h·h_d] and K, V are
  /// [s, h_k·h_d] whatever d is, and the O projection maps h·h_d back to d.
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;            ///< d_ff
  int64_t vocab_size = 0;                   ///< V
  int64_t max_position_embeddings = 0;      ///< context length
  double rms_norm_eps = 1e-5;               ///< epsilon inside the RMSNorm square root
  double rope_theta = 500000.0;             ///< RoPE base
  bool tie_word_embeddings = false;         ///< lm_head shares embed_tokens (Llama 3.2 1B/3B)
  std::optional<RopeScaling> rope_scaling;  ///< null/absent for Llama-3-8B
  int64_t bos_token_id = 128000;            ///< <|begin_of_text|>
  /// `eos_token_id`, an integer or a list in config.json: 128001 (<|end_of_text|>) for the base
  /// model, [128001, 128009] (adding <|eot_id|>) for Instruct. Generation stops on any of them.
  std::vector<int64_t> eos_token_ids{128001, 128009};
  std::string torch_dtype = "bfloat16";  ///< `torch_dtype` (or the newer `dtype`); informational

  /// Reads and validates `config.json`; throws clockwork::ConfigError naming the file and field.
  static ModelConfig from_file(const std::filesystem::path& config_json);
  /// Same, from the JSON text (`origin` names the source in error messages).
  static ModelConfig from_json_text(const std::string& text, const std::string& origin);

  /// Checks the values: positive sizes, h divisible by h_k, even h_d (RoPE rotates pairs),
  /// eps > 0, theta > 0, a supported rope_scaling, token ids inside the vocabulary.
  /// Throws ConfigError whose message starts with `origin`. from_json_text() calls it.
  void validate(const std::string& origin) const;

  /// The config as HuggingFace-style `config.json` text (LlamaForCausalLM), for writing synthetic
  /// checkpoints; from_json_text(c.to_json(), ...) == c.
  std::string to_json() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace clockwork
