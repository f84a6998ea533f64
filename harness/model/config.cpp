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
  if (rs && !plain) {
    if (!rs->is_object()) {
      r.fail(rs_name, "is " + describe_value(*rs) + ", expected null or an object");
    }
    const FieldReader s(*rs, origin, rs_name + ".");
    // Newer configs say "rope_type", older ones "type".
    auto rope_type = s.optional_string("rope_type");
    auto legacy_type = s.optional_string("type");
    if (rope_type && legacy_type && *rope_type != *legacy_type) {
      s.fail("rope_type",
             "is '" + *rope_type + "' but 'type' is '" + *legacy_type + "'; they must agree");
    }
    if (!rope_type && !legacy_type) s.fail("rope_type", "is missing (expected \"llama3\")");
    RopeScaling scaling;
    scaling.type = rope_type ? *rope_type : *legacy_type;
    if (scaling.type != "llama3") {
      s.fail(rope_type ? "rope_type" : "type",
             "is '" + scaling.type + "'; only \"llama3\" rope scaling is supported");
    }
    scaling.factor = s.required_number("factor");
    scaling.low_freq_factor = s.required_number("low_freq_factor");
    scaling.high_freq_factor = s.required_number("high_freq_factor");
    scaling.original_max_position_embeddings = s.required_int("original_max_position_embeddings");
    c.rope_scaling = scaling;
  }

  c.bos_token_id = r.required_int("bos_token_id");
  const json& eos = r.require("eos_token_id", "an integer or a list of integers");
  c.eos_token_ids.clear();
  if (eos.is_array()) {
    if (eos.empty()) r.fail("eos_token_id", "is an empty list, expected at least one token id");
    for (const json& id : eos) c.eos_token_ids.push_back(r.to_int("eos_token_id", id));
  } else if (eos.is_number_integer()) {
    c.eos_token_ids.push_back(r.to_int("eos_token_id", eos));
  } else {
    r.fail("eos_token_id",
           "is " + describe_value(eos) + ", expected an integer or a list of integers");
  }

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
    if (s.type != "llama3") {
      config_fail(origin, "field 'rope_scaling.rope_type' is '" + s.type +
                              "'; only \"llama3\" rope scaling is supported");
    }
    require_positive(origin, "rope_scaling.factor", s.factor);
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

std::string ModelConfig::to_json() const {
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
