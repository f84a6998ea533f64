// Reading, validating and writing a Llama `config.json`.
#include "kernels/model_config.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/model/json_reader.h"

namespace clockwork {

using json = nlohmann::json;

namespace {

// "the string \"4096\"", "the number -1", "a list [1, 2]": the JSON type and the value, shortened
// without recursion.
std::string describe_value(const json& v) {
  return json_preview(v);
}

// Typed access to one JSON object, with errors naming the origin and the field.
class FieldReader {
 public:
  FieldReader(const json& object, std::string origin, std::string prefix)
      : object_(object), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw ConfigError(origin_ + ": field '" + prefix_ + field + "' " + problem);
  }

  // nullptr when the field is absent or null (HuggingFace treats null as "use the default").
  const json* find(const std::string& field) const {
    auto it = object_.find(field);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  const json& require(const std::string& field, const char* expected) const {
    auto it = object_.find(field);
    if (it == object_.end()) fail(field, std::string("is missing (expected ") + expected + ")");
    if (it->is_null()) fail(field, std::string("is null, expected ") + expected);
    return *it;
  }

  int64_t to_int(const std::string& field, const json& v) const {
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(field, "is " + json_short_text(v) + ", too large for a 64-bit integer");
    }
    if (!v.is_number_integer()) fail(field, "is " + describe_value(v) + ", expected an integer");
    return v.get<int64_t>();
  }

  double to_number(const std::string& field, const json& v) const {
    if (!v.is_number()) fail(field, "is " + describe_value(v) + ", expected a number");
    return v.get<double>();
  }

  int64_t required_int(const std::string& field) const {
    return to_int(field, require(field, "an integer"));
  }
  double required_number(const std::string& field) const {
    return to_number(field, require(field, "a number"));
  }
  std::optional<double> optional_number(const std::string& field) const {
    const json* v = find(field);
    if (v == nullptr) return std::nullopt;
    return to_number(field, *v);
  }
  std::optional<int64_t> optional_int(const std::string& field) const {
    const json* v = find(field);
    if (v == nullptr) return std::nullopt;
    return to_int(field, *v);
  }
  bool optional_bool(const std::string& field, bool fallback) const {
    const json* v = find(field);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(field, "is " + describe_value(*v) + ", expected true or false");
    return v->get<bool>();
  }
  std::optional<std::string> optional_string(const std::string& field) const {
    const json* v = find(field);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) fail(field, "is " + describe_value(*v) + ", expected a string");
    return v->get<std::string>();
  }

 private:
  const json& object_;
  std::string origin_;
  std::string prefix_;  // "rope_scaling." for nested fields
};

[[noreturn]] void config_fail(const std::string& origin, const std::string& message) {
  throw ConfigError(origin + ": " + message);
}

void require_positive(const std::string& origin, const char* field, int64_t value) {
  if (value <= 0) {
    config_fail(origin, std::string("field '") + field + "' is " + std::to_string(value) +
                            ", expected a positive integer");
  }
}

void require_positive(const std::string& origin, const char* field, double value) {
  if (!(value > 0.0) || !std::isfinite(value)) {
    std::ostringstream ss;
    ss << "field '" << field << "' is " << value << ", expected a finite number > 0";
    config_fail(origin, ss.str());
  }
}

// Upper bounds far above any Llama (Llama 3.1 405B: d = 16384, L = 126, h = 128, d_ff = 53248,
// V = 128256) that keep every size computed from them, and every list built from them, small
// enough to check before it is allocated. Token ids and positions are 32-bit in the kernels.
constexpr int64_t kMaxHiddenSize = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = int64_t{1} << 14;
constexpr int64_t kMaxHeadDim = int64_t{1} << 14;
constexpr int64_t kMaxIntermediateSize = int64_t{1} << 22;
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;
constexpr int64_t kMaxPositions = std::numeric_limits<int32_t>::max();

void require_at_most(const std::string& origin, const char* field, int64_t value, int64_t limit,
                     const char* why) {
  if (value > limit) {
    config_fail(origin, std::string("field '") + field + "' is " + std::to_string(value) +
                            ", more than " + std::to_string(limit) + " (" + why + ")");
  }
}


// A rope_scaling object (or a rope_parameters entry that declares a scaling type); `supported` is
// the one type the family uses ("llama3" for Llama, "linear" for Gemma 3).
RopeScaling read_rope_scaling(const json& rs, const FieldReader& parent, const std::string& origin,
                              const std::string& rs_name, const std::string& supported) {
  if (!rs.is_object()) {
    parent.fail(rs_name, "is " + describe_value(rs) + ", expected null or an object");
  }
  const FieldReader s(rs, origin, rs_name + ".");
  // Newer configs say "rope_type", older ones "type".
  auto rope_type = s.optional_string("rope_type");
  auto legacy_type = s.optional_string("type");
  if (rope_type && legacy_type && *rope_type != *legacy_type) {
    s.fail("rope_type",
           "is '" + *rope_type + "' but 'type' is '" + *legacy_type + "'; they must agree");
  }
  if (!rope_type && !legacy_type) s.fail("rope_type", "is missing (expected \"" + supported + "\")");
  RopeScaling scaling;
  scaling.type = rope_type ? *rope_type : *legacy_type;
  if (scaling.type != supported) {
    s.fail(rope_type ? "rope_type" : "type", "is '" + scaling.type + "'; only \"" + supported +
                                                 "\" rope scaling is supported for this model");
  }
  scaling.factor = s.required_number("factor");
  if (supported == "llama3") {
    scaling.low_freq_factor = s.required_number("low_freq_factor");
    scaling.high_freq_factor = s.required_number("high_freq_factor");
    scaling.original_max_position_embeddings = s.required_int("original_max_position_embeddings");
  }
  return scaling;
}


// `eos_token_id`: an integer or a non-empty list of integers.
std::vector<int64_t> read_token_ids(const FieldReader& r, const std::string& field, const json& v) {
  std::vector<int64_t> ids;
  if (v.is_array()) {
    if (v.empty()) r.fail(field, "is an empty list, expected at least one token id");
    for (const json& id : v) ids.push_back(r.to_int(field, id));
  } else if (v.is_number_integer()) {
    ids.push_back(r.to_int(field, v));
  } else {
    r.fail(field, "is " + describe_value(v) + ", expected an integer or a list of integers");
  }
  return ids;
}

// Gemma 3's config.json. The text model's settings are at the top level (model_type
// "gemma3_text", Gemma3ForCausalLM: the 1B) or under "text_config" (model_type "gemma3", the
// multimodal 4B/12B/27B). Absent fields take transformers' Gemma3TextConfig defaults, as
// transformers itself does: the multimodal checkpoints leave most of them out (the 4B's text_config
// names only hidden_size, intermediate_size, num_hidden_layers, rope_scaling and sliding_window).
ModelConfig read_gemma3(const json& top, const std::string& origin) {
  const FieldReader outer(top, origin, "");
  const json* text = &top;
  std::string prefix;
  if (outer.optional_string("model_type") == "gemma3") {
    const json& tc = outer.require("text_config", "an object with the text model's settings");
    if (!tc.is_object()) outer.fail("text_config", "is " + describe_value(tc) + ", expected an object");
    text = &tc;
    prefix = "text_config.";
  }
  const FieldReader r(*text, origin, prefix);
  auto int_or = [&](const char* field, int64_t fallback) {
    return r.optional_int(field).value_or(fallback);
  };
  auto number_or = [&](const FieldReader& reader, const char* field, double fallback) {
    return reader.optional_number(field).value_or(fallback);
  };

  ModelConfig c;
  c.family = ModelFamily::gemma3;
  c.hidden_size = int_or("hidden_size", 2304);
  c.num_layers = int_or("num_hidden_layers", 26);
  c.num_heads = int_or("num_attention_heads", 8);
  c.num_kv_heads = int_or("num_key_value_heads", 4);
  c.head_dim = int_or("head_dim", 256);
  c.intermediate_size = int_or("intermediate_size", 9216);
  c.vocab_size = int_or("vocab_size", 262208);
  c.max_position_embeddings = int_or("max_position_embeddings", 131072);
  c.rms_norm_eps = number_or(r, "rms_norm_eps", 1e-6);
  c.query_pre_attn_scalar = number_or(r, "query_pre_attn_scalar", 256.0);
  c.sliding_window = int_or("sliding_window", 4096);
  c.tie_word_embeddings = r.optional_bool("tie_word_embeddings", true);

  // What the course's Gemma computes and nothing else: say so rather than compute something else.
  const char* activation_key = r.find("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string activation = r.optional_string(activation_key).value_or("gelu_pytorch_tanh");
  if (activation != "gelu_pytorch_tanh") {
    r.fail(activation_key, "is '" + activation +
                               "'; Gemma 3 uses GELU with the tanh approximation, "
                               "\"gelu_pytorch_tanh\", the only activation supported here");
  }
  for (const char* softcap : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    if (const json* v = r.find(softcap)) {
      r.fail(softcap, "is " + describe_value(*v) +
                          "; logit soft-capping (a Gemma 2 feature, null in Gemma 3) is not "
                          "supported");
    }
  }
  if (r.optional_bool("use_bidirectional_attention", false)) {
    r.fail("use_bidirectional_attention", "is true; only causal attention is supported");
  }
  if (r.optional_bool("attention_bias", false)) {
    r.fail("attention_bias", "is true; the projections here have no bias terms");
  }

  require_positive(origin, "num_hidden_layers", c.num_layers);
  require_at_most(origin, "num_hidden_layers", c.num_layers, kMaxLayers,
                  "far larger than any Gemma model; the file is corrupt");
  if (const json* types = r.find("layer_types")) {
    if (!types->is_array()) r.fail("layer_types", "is " + describe_value(*types) + ", expected a list");
    if (static_cast<int64_t>(types->size()) != c.num_layers) {
      r.fail("layer_types", "has " + std::to_string(types->size()) +
                                " entries but num_hidden_layers is " + std::to_string(c.num_layers));
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      const std::string name = t.is_string() ? t.get<std::string>() : "";
      if (name == "sliding_attention") {
        c.layer_types.push_back(LayerType::sliding_attention);
      } else if (name == "full_attention") {
        c.layer_types.push_back(LayerType::full_attention);
      } else {
        r.fail("layer_types[" + std::to_string(i) + "]",
               "is " + describe_value(t) +
                   ", expected \"sliding_attention\" or \"full_attention\"");
      }
    }
  } else {
    // The older form: every pattern-th layer is global, counting from 1 (layers 5, 11, ... of 6).
    const int64_t pattern = int_or("sliding_window_pattern", 6);
    if (pattern <= 0) {
      r.fail("sliding_window_pattern", "is " + std::to_string(pattern) + ", expected a positive integer");
    }
    for (int64_t i = 0; i < c.num_layers; ++i) {
      c.layer_types.push_back((i + 1) % pattern == 0 ? LayerType::full_attention
                                                     : LayerType::sliding_attention);
    }
  }

  // RoPE: transformers 5 writes one entry per layer type under "rope_parameters"; older configs
  // write rope_theta (global), rope_local_base_freq (local) and rope_scaling (global only).
  const json* rope_parameters = r.find("rope_theta") ? nullptr : r.find("rope_parameters");
  if (rope_parameters) {
    if (!rope_parameters->is_object()) {
      r.fail("rope_parameters", "is " + describe_value(*rope_parameters) + ", expected an object");
    }
    const FieldReader rp(*rope_parameters, origin, prefix + "rope_parameters.");
    auto entry = [&](const char* layer_type, double default_theta, double& theta,
                     std::optional<RopeScaling>* scaling) {
      const json* e = rp.find(layer_type);
      if (e == nullptr) {
        theta = default_theta;
        return;
      }
      if (!e->is_object()) rp.fail(layer_type, "is " + describe_value(*e) + ", expected an object");
      const std::string name = prefix + "rope_parameters." + layer_type;
      const FieldReader er(*e, origin, name + ".");
      theta = number_or(er, "rope_theta", default_theta);
      const std::string type = er.optional_string("rope_type").value_or("default");
      if (type == "default") return;
      if (scaling == nullptr) {
        er.fail("rope_type", "is '" + type + "'; only the global (full_attention) layers may scale RoPE");
      }
      *scaling = read_rope_scaling(*e, rp, origin, name, "linear");
    };
    entry("full_attention", 1e6, c.rope_theta, &c.rope_scaling);
    entry("sliding_attention", 1e4, c.rope_local_theta, nullptr);
  } else {
    c.rope_theta = number_or(r, "rope_theta", 1e6);
    c.rope_local_theta = number_or(r, "rope_local_base_freq", 1e4);
    if (const json* rs = r.find("rope_scaling")) {
      c.rope_scaling = read_rope_scaling(*rs, r, origin, prefix + "rope_scaling", "linear");
    }
  }

  // Token ids and the dtype sit in text_config or, in the multimodal configs, at the top level.
  auto either = [&](const char* field) -> std::pair<const FieldReader*, const json*> {
    if (const json* v = r.find(field)) return {&r, v};
    if (text != &top) {
      if (const json* v = outer.find(field)) return {&outer, v};
    }
    return {nullptr, nullptr};
  };
  if (auto [reader, v] = either("bos_token_id"); v) {
    c.bos_token_id = reader->to_int("bos_token_id", *v);
  } else {
    c.bos_token_id = 2;
  }
  if (auto [reader, v] = either("eos_token_id"); v) {
    c.eos_token_ids = read_token_ids(*reader, "eos_token_id", *v);
  } else {
    c.eos_token_ids = {1};
  }
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (auto [reader, v] = either(key); v) {
      if (!v->is_string()) reader->fail(key, "is " + describe_value(*v) + ", expected a string");
      c.torch_dtype = v->get<std::string>();
      break;
    }
  }
  return c;
}

}  // namespace

ModelConfig ModelConfig::from_file(const std::filesystem::path& config_json) {
  std::string text;
  try {
    text = read_limited_file(config_json, kConfigJsonLimits.max_bytes);
  } catch (const JsonError& e) {
    throw ConfigError(e.what());
  }
  return from_json_text(text, config_json.string());
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = parse_json(text, origin, kConfigJsonLimits);
  } catch (const JsonError& e) {
    throw ConfigError(e.what());
  }
  if (!j.is_object()) {
    config_fail(origin, std::string("is a JSON ") + j.type_name() +
                            ", expected an object of model settings");
  }
  const FieldReader r(j, origin, "");

  const std::string model_type = r.optional_string("model_type").value_or("llama");
  if (model_type == "gemma3" || model_type == "gemma3_text") {
    ModelConfig c = read_gemma3(j, origin);
    c.validate(origin);
    return c;
  }
  if (model_type.rfind("gemma", 0) == 0) {
    r.fail("model_type", "is '" + model_type +
                             "'; of the Gemma models only Gemma 3 (\"gemma3_text\", or \"gemma3\" "
                             "with a text_config) is supported");
  }

  ModelConfig c;
  c.hidden_size = r.required_int("hidden_size");
  c.num_layers = r.required_int("num_hidden_layers");
  c.num_heads = r.required_int("num_attention_heads");
  c.num_kv_heads = r.optional_int("num_key_value_heads").value_or(c.num_heads);
  c.intermediate_size = r.required_int("intermediate_size");
  c.vocab_size = r.required_int("vocab_size");
  c.max_position_embeddings = r.required_int("max_position_embeddings");
  // Both are required rather than defaulted: HuggingFace's defaults (1e-6, 10000) are not
  // Llama 3's values, and a silent wrong default is exactly the bug the course warns about.
  c.rms_norm_eps = r.required_number("rms_norm_eps");
  // transformers 5 writes the RoPE settings as one object, "rope_parameters" (rope_theta, and
  // the scaling fields next to rope_type); earlier versions and Meta's releases write
  // "rope_theta" and "rope_scaling" at the top level.
  const json* rope_parameters = r.find("rope_theta") ? nullptr : r.find("rope_parameters");
  if (rope_parameters && !rope_parameters->is_object()) {
    r.fail("rope_parameters", "is " + describe_value(*rope_parameters) + ", expected an object");
  }
  if (rope_parameters) {
    c.rope_theta = FieldReader(*rope_parameters, origin, "rope_parameters.").required_number("rope_theta");
  } else {
    c.rope_theta = r.required_number("rope_theta");
  }
  c.tie_word_embeddings = r.optional_bool("tie_word_embeddings", false);

  require_positive(origin, "hidden_size", c.hidden_size);
  require_positive(origin, "num_attention_heads", c.num_heads);
  // Llama has d == h * h_d, but the key is free: Gemma 3 1B has d = 1152 and 4 heads of 256,
  // so Q is wider than the residual stream and the O projection maps h * h_d back to d.
  if (auto hd = r.optional_int("head_dim")) {
    c.head_dim = *hd;
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      config_fail(origin, "field 'hidden_size' (" + std::to_string(c.hidden_size) +
                              ") is not divisible by 'num_attention_heads' (" +
                              std::to_string(c.num_heads) + "), so head_dim = d / h is undefined");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }

  const json* rs = rope_parameters ? rope_parameters : r.find("rope_scaling");
  const std::string rs_name = rope_parameters ? "rope_parameters" : "rope_scaling";
  // In "rope_parameters", rope_type "default" (or none) means plain RoPE without scaling.
  const json* declared = rope_parameters ? FieldReader(*rs, origin, "").find("rope_type") : nullptr;
  const bool plain = rope_parameters && (!declared || (declared->is_string() && declared->get<std::string>() == "default"));
  if (rs && !plain) c.rope_scaling = read_rope_scaling(*rs, r, origin, rs_name, "llama3");

  c.bos_token_id = r.required_int("bos_token_id");
  c.eos_token_ids = read_token_ids(r, "eos_token_id", r.require("eos_token_id", "an integer or a list of integers"));

  if (auto dtype = r.optional_string("torch_dtype")) {
    c.torch_dtype = *dtype;
  } else if (auto new_dtype = r.optional_string("dtype")) {
    c.torch_dtype = *new_dtype;
  }

  c.validate(origin);
  return c;
}

void ModelConfig::validate(const std::string& origin) const {
  require_positive(origin, "hidden_size", hidden_size);
  require_positive(origin, "num_hidden_layers", num_layers);
  require_positive(origin, "num_attention_heads", num_heads);
  require_positive(origin, "num_key_value_heads", num_kv_heads);
  require_positive(origin, "head_dim", head_dim);
  require_positive(origin, "intermediate_size", intermediate_size);
  require_positive(origin, "vocab_size", vocab_size);
  require_positive(origin, "max_position_embeddings", max_position_embeddings);
  require_positive(origin, "rms_norm_eps", rms_norm_eps);
  require_positive(origin, "rope_theta", rope_theta);

  const char* too_large = "far larger than any Llama model; the file is corrupt";
  require_at_most(origin, "hidden_size", hidden_size, kMaxHiddenSize, too_large);
  require_at_most(origin, "num_hidden_layers", num_layers, kMaxLayers, too_large);
  require_at_most(origin, "num_attention_heads", num_heads, kMaxHeads, too_large);
  require_at_most(origin, "num_key_value_heads", num_kv_heads, kMaxHeads, too_large);
  require_at_most(origin, "head_dim", head_dim, kMaxHeadDim, too_large);
  require_at_most(origin, "intermediate_size", intermediate_size, kMaxIntermediateSize, too_large);
  require_at_most(origin, "vocab_size", vocab_size, kMaxVocabSize, too_large);
  require_at_most(origin, "max_position_embeddings", max_position_embeddings, kMaxPositions,
                  "positions are 32-bit integers");

  if (head_dim % 2 != 0) {
    config_fail(origin, "head_dim " + std::to_string(head_dim) +
                            " is odd; RoPE rotates pairs (x_i, x_{i + h_d/2}), so it must be even");
  }
  if (num_heads % num_kv_heads != 0) {
    config_fail(origin, "num_attention_heads " + std::to_string(num_heads) +
                            " is not divisible by num_key_value_heads " +
                            std::to_string(num_kv_heads) +
                            " (grouped-query attention shares each KV head among h / h_k "
                            "query heads)");
  }

  if (rope_scaling) {
    const RopeScaling& s = *rope_scaling;
    const char* supported = is_gemma3() ? "linear" : "llama3";
    if (s.type != supported) {
      config_fail(origin, "field 'rope_scaling.rope_type' is '" + s.type + "'; only \"" +
                              supported + "\" rope scaling is supported for " +
                              family_name(family));
    }
    require_positive(origin, "rope_scaling.factor", s.factor);
  }
  if (rope_scaling && !is_gemma3()) {
    const RopeScaling& s = *rope_scaling;
    require_positive(origin, "rope_scaling.low_freq_factor", s.low_freq_factor);
    require_positive(origin, "rope_scaling.high_freq_factor", s.high_freq_factor);
    require_positive(origin, "rope_scaling.original_max_position_embeddings",
                     s.original_max_position_embeddings);
    require_at_most(origin, "rope_scaling.original_max_position_embeddings",
                    s.original_max_position_embeddings, kMaxPositions,
                    "positions are 32-bit integers");
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      std::ostringstream ss;
      ss << "field 'rope_scaling.high_freq_factor' (" << s.high_freq_factor
         << ") must be greater than 'rope_scaling.low_freq_factor' (" << s.low_freq_factor
         << "); the llama3 formula blends between them";
      config_fail(origin, ss.str());
    }
  }

  if (is_gemma3()) {
    require_positive(origin, "query_pre_attn_scalar", query_pre_attn_scalar);
    require_positive(origin, "sliding_window", sliding_window);
    require_at_most(origin, "sliding_window", sliding_window, kMaxPositions,
                    "positions are 32-bit integers");
    require_positive(origin, "rope_local_base_freq", rope_local_theta);
    if (static_cast<int64_t>(layer_types.size()) != num_layers) {
      config_fail(origin, "field 'layer_types' has " + std::to_string(layer_types.size()) +
                              " entries but num_hidden_layers is " + std::to_string(num_layers));
    }
  } else if (!layer_types.empty() || sliding_window != 0 || query_pre_attn_scalar != 0.0 ||
             rope_local_theta != 0.0) {
    config_fail(origin, "layer_types, sliding_window, query_pre_attn_scalar and "
                        "rope_local_base_freq are Gemma 3 settings; a Llama config leaves them "
                        "unset");
  }

  auto check_token = [&](const char* field, int64_t id) {
    if (id < 0 || id >= vocab_size) {
      config_fail(origin, std::string("field '") + field + "' has token id " + std::to_string(id) +
                              ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  };
  check_token("bos_token_id", bos_token_id);
  if (eos_token_ids.empty()) config_fail(origin, "field 'eos_token_id' has no token ids");
  for (int64_t id : eos_token_ids) check_token("eos_token_id", id);
}

const char* family_name(ModelFamily family) {
  return family == ModelFamily::gemma3 ? "gemma3" : "llama";
}

bool ModelConfig::is_sliding(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(layer_types.size()) &&
         layer_types[static_cast<size_t>(layer)] == LayerType::sliding_attention;
}

double ModelConfig::layer_rope_theta(int64_t layer) const {
  return is_sliding(layer) ? rope_local_theta : rope_theta;
}

const std::optional<RopeScaling>& ModelConfig::layer_rope_scaling(int64_t layer) const {
  static const std::optional<RopeScaling> none;
  return is_sliding(layer) ? none : rope_scaling;
}

double ModelConfig::attention_scale() const {
  const double scalar = query_pre_attn_scalar > 0 ? query_pre_attn_scalar
                                                  : static_cast<double>(head_dim);
  return 1.0 / std::sqrt(scalar);
}

namespace {

// Gemma3ForCausalLM's config.json, in the transformers 4 layout that Google's checkpoints use.
std::string gemma3_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"Gemma3ForCausalLM"};
  j["model_type"] = "gemma3_text";
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
  j["sliding_window"] = c.sliding_window;
  std::vector<std::string> types;
  for (LayerType t : c.layer_types) {
    types.push_back(t == LayerType::sliding_attention ? "sliding_attention" : "full_attention");
  }
  j["layer_types"] = types;
  j["rope_theta"] = c.rope_theta;
  j["rope_local_base_freq"] = c.rope_local_theta;
  if (c.rope_scaling) {
    j["rope_scaling"] = {{"rope_type", c.rope_scaling->type}, {"factor", c.rope_scaling->factor}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["final_logit_softcapping"] = nullptr;
  j["attn_logit_softcapping"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["vocab_size"] = c.vocab_size;
  j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) {
    j["eos_token_id"] = c.eos_token_ids.front();
  } else {
    j["eos_token_id"] = c.eos_token_ids;
  }
  j["torch_dtype"] = c.torch_dtype;
  return j.dump(2) + "\n";
}

}  // namespace

std::string ModelConfig::to_json() const {
  if (is_gemma3()) return gemma3_json(*this);
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_act"] = "silu";
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_layers;
  j["num_attention_heads"] = num_heads;
  j["num_key_value_heads"] = num_kv_heads;
  j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  if (rope_scaling) {
    j["rope_scaling"] = {
        {"rope_type", rope_scaling->type},
        {"factor", rope_scaling->factor},
        {"low_freq_factor", rope_scaling->low_freq_factor},
        {"high_freq_factor", rope_scaling->high_freq_factor},
        {"original_max_position_embeddings", rope_scaling->original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["vocab_size"] = vocab_size;
  j["bos_token_id"] = bos_token_id;
  if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids.front();
  } else {
    j["eos_token_id"] = eos_token_ids;
  }
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

}  // namespace clockwork
