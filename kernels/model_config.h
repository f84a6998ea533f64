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
/// Gemma 3 4B and larger use `rope_type: "linear"` on their global layers: every inverse
/// frequency divided by `factor` (the other fields unused). The llama3 type rescales the RoPE inverse frequencies: wavelengths longer than
/// original_max_position_embeddings / low_freq_factor are divided by `factor`, those shorter
/// than original_max_position_embeddings / high_freq_factor are kept, and the band between is
/// blended smoothly.
struct RopeScaling {
  std::string type;  ///< "llama3" (Llama family) or "linear" (Gemma 3)
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 1.0;
  int64_t original_max_position_embeddings = 0;

  bool operator==(const RopeScaling&) const = default;
};

/// The architecture a config.json describes (`model_type`).
enum class ModelFamily {
  llama,   ///< "llama" (or no model_type): Llama 3, 3.1, 3.2
  gemma3,  ///< "gemma3_text", or "gemma3" with the text model under `text_config`
};

/// The attention of one Gemma 3 layer (`layer_types`). Llama layers are all global.
enum class LayerType {
  full_attention,     ///< global: every earlier position, RoPE base rope_theta (+ rope_scaling)
  sliding_attention,  ///< local: the last `sliding_window` positions, RoPE base rope_local_theta
};

/// "llama" / "gemma3", for messages.
const char* family_name(ModelFamily family);

/// Shapes and constants of a Llama or Gemma 3 model, validated on load.
struct ModelConfig {
  ModelFamily family = ModelFamily::llama;  ///< from `model_type`
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

  // Gemma 3 only (left at these values for Llama, where they mean "not used").
  /// Attention scores are multiplied by query_pre_attn_scalar^(-1/2) (Gemma 3: 256, so 1/16),
  /// not by head_dim^(-1/2). 0 for Llama: the scale is head_dim^(-1/2).
  double query_pre_attn_scalar = 0.0;
  /// How many positions a local layer sees, its own included: position p attends to
  /// max(0, p - sliding_window + 1) .. p. 0 for Llama (no local layers).
  int64_t sliding_window = 0;
  /// One entry per layer (Gemma 3: from `layer_types`, or from the older
  /// `sliding_window_pattern` N, where layer i is global when (i + 1) % N == 0). Empty for
  /// Llama: every layer is global.
  std::vector<LayerType> layer_types;
  /// RoPE base of the local layers (`rope_local_base_freq`, or rope_parameters.sliding_attention).
  /// 0 for Llama.
  double rope_local_theta = 0.0;

  bool is_gemma3() const { return family == ModelFamily::gemma3; }
  /// Whether `layer` is a local (sliding-window) layer; always false for Llama.
  bool is_sliding(int64_t layer) const;
  /// RoPE base of `layer`: rope_local_theta for a local layer, rope_theta otherwise.
  double layer_rope_theta(int64_t layer) const;
  /// rope_scaling applies to global layers only (Gemma 3 scales the long-range layers).
  const std::optional<RopeScaling>& layer_rope_scaling(int64_t layer) const;
  /// The factor the attention scores Q·Kᵀ are multiplied by: query_pre_attn_scalar^(-1/2) for
  /// Gemma 3, head_dim^(-1/2) for Llama.
  double attention_scale() const;

  /// Reads and validates `config.json`; throws clockwork::ConfigError naming the file and field.
  static ModelConfig from_file(const std::filesystem::path& config_json);
  /// Same, from the JSON text (`origin` names the source in error messages).
  static ModelConfig from_json_text(const std::string& text, const std::string& origin);

  /// Checks the values: positive sizes, h divisible by h_k, even h_d (RoPE rotates pairs),
  /// eps > 0, theta > 0, a supported rope_scaling, token ids inside the vocabulary.
  /// Throws ConfigError whose message starts with `origin`. from_json_text() calls it.
  void validate(const std::string& origin) const;

  /// The config as HuggingFace-style `config.json` text (LlamaForCausalLM, or Gemma3ForCausalLM
  /// with model_type gemma3_text), for writing synthetic checkpoints;
  /// from_json_text(c.to_json(), ...) == c.
  std::string to_json() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace clockwork
