// The one way the framework reads a JSON document from a model directory (config.json,
// model.safetensors.index.json, a safetensors header, tokenizer.json).
//
// These files come from outside the program: a download, a student's folder, a fuzzer. The reader
// refuses, with a message naming the file and the key, anything that could exhaust the stack or
// the memory or that a plain parser accepts silently:
//   - a document larger than its limit, checked before a byte of it is read;
//   - nesting deeper than its limit, checked while parsing: nlohmann's SAX parser keeps its own
//     stack, and the value is built here without recursion, so a 100,000-deep input fails at
//     depth limit + 1 instead of overflowing the stack;
//   - an object or array with more entries than its limit (e.g. tensors in one header);
//   - a NUL byte anywhere (nlohmann's lexer takes one for the end of the input, so
//     `{...}\0garbage` would load);
//   - anything but whitespace after the value (only spaces after a safetensors header, which its
//     format pads with spaces);
//   - a key that appears twice in one object (a plain parser keeps the last one without a word);
//   - a number too large for a double (1e999).
// Values that pass are small enough that the code reading them may recurse over them, but error
// messages should still show values with json_preview(), which never recurses.
#pragma once

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace clockwork {

/// A JSON document the reader refuses. what() is `ORIGIN: key 'PATH': PROBLEM` (without the key
/// part when the problem is not inside a value), where PATH is written like
/// `model.vocab["a b"][3]`.
class JsonError : public std::runtime_error {
 public:
  JsonError(std::string origin, std::string key_path, std::string problem);
  const std::string& origin() const { return origin_; }
  const std::string& key_path() const { return key_path_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string origin_, key_path_, problem_;
};

struct JsonLimits {
  size_t max_bytes = 0;    ///< the whole text
  size_t max_depth = 0;    ///< nested objects and arrays; the top-level value is depth 1
  size_t max_members = 0;  ///< entries of any one object or array
  /// After the value only spaces (0x20) may follow, not tabs or newlines: a safetensors header.
  bool only_spaces_after = false;
  /// Names the document in the "not valid JSON" message: "header" gives "header is not valid
  /// JSON"; empty gives "not valid JSON".
  std::string_view noun;
};

/// config.json: a dozen settings, a few kilobytes at most.
inline constexpr JsonLimits kConfigJsonLimits{.max_bytes = 1 << 20,
                                              .max_depth = 16,
                                              .max_members = 4096,
                                              .only_spaces_after = false,
                                              .noun = ""};
/// model.safetensors.index.json: one entry per tensor (291 for Llama-3-8B, about 1,100 for
/// Llama 3.1 405B).
inline constexpr JsonLimits kIndexJsonLimits{.max_bytes = 64 << 20,
                                             .max_depth = 16,
                                             .max_members = 1 << 20,
                                             .only_spaces_after = false,
                                             .noun = ""};
/// A safetensors header: the format's own reader caps it at 100,000,000 bytes; one file of a
/// sharded checkpoint holds hundreds of tensors, never 65,536.
inline constexpr JsonLimits kSafetensorsHeaderLimits{.max_bytes = 100'000'000,
                                                     .max_depth = 16,
                                                     .max_members = 1 << 16,
                                                     .only_spaces_after = true,
                                                     .noun = "header"};
/// tokenizer.json: Llama 3's is 9 MB with 128,000 vocabulary entries and 280,000 merges; nested
/// pre-tokenizer and post-processor settings stay well under 32 levels.
inline constexpr JsonLimits kTokenizerJsonLimits{.max_bytes = 256 << 20,
                                                 .max_depth = 32,
                                                 .max_members = 1 << 22,
                                                 .only_spaces_after = false,
                                                 .noun = ""};

/// Parses `text` within `limits`; `origin` names the document in errors. Throws JsonError.
nlohmann::json parse_json(std::string_view text, const std::string& origin,
                          const JsonLimits& limits);

/// Reads a whole file of at most `max_bytes` bytes, refusing a larger one before reading it.
/// Errors (missing, a directory, too large, unreadable) are thrown as JsonError naming the path.
std::string read_limited_file(const std::filesystem::path& path, size_t max_bytes);

/// read_limited_file() then parse_json(), with the path as origin.
nlohmann::json read_json_file(const std::filesystem::path& path, const JsonLimits& limits);

/// A value for an error message, without recursion and at most about `max_chars` long:
/// "the number 1.5", "the string \"abc\"", "a list [1,2,[3,...", "an object {\"a\":...".
std::string json_preview(const nlohmann::json& value, size_t max_chars = 60);

/// The value alone, without the leading "the number", compact as nlohmann's dump(): `[1,2,...`.
std::string json_short_text(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace clockwork
