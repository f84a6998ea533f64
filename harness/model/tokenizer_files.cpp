// Reading and writing the two tokenizer file formats:
//   tokenizer.json  — HuggingFace `tokenizers` (BPE model, byte-level alphabet, added_tokens)
//   tokenizer.model — Meta's tiktoken rank file (`base64(token bytes) rank` per line)
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "harness/model/json_reader.h"
#include "harness/model/tokenizer.h"
#include "harness/model/tokenizer_internal.h"
#include "harness/model/tokenizer_utf8.h"

namespace clockwork {
namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// GPT-2 byte-level alphabet and base64
// ---------------------------------------------------------------------------------------------
namespace {

// Bytes that are printable Latin-1 characters stand for themselves.
bool byte_is_printable(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteAlphabet {
  std::array<uint32_t, 256> to_unicode{};
  std::array<int, 256 + 68> from_unicode{};  // 68 = bytes that are not printable
  ByteAlphabet() {
    from_unicode.fill(-1);
    uint32_t next_stand_in = 256;  // the others take U+0100, U+0101, ... in byte order
    for (int b = 0; b < 256; ++b) {
      to_unicode[b] = byte_is_printable(b) ? static_cast<uint32_t>(b) : next_stand_in++;
      from_unicode[to_unicode[b]] = b;
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

constexpr std::string_view kBase64Chars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

uint32_t byte_to_unicode(unsigned char b) {
  return byte_alphabet().to_unicode[b];
}

int byte_from_unicode(uint32_t cp) {
  const auto& table = byte_alphabet().from_unicode;
  return cp < table.size() ? table[cp] : -1;
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<unsigned char>(bytes[i + 2]);
    out += kBase64Chars[(chunk >> 18) & 63];
    out += kBase64Chars[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64Chars[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64Chars[chunk & 63] : '=';
  }
  return out;
}

bool base64_decode(std::string_view text, std::string& out) {
  out.clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  const size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t chunk = 0;
    for (size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      const bool in_padding = i + 4 == text.size() && j >= 4 - padding;
      if (in_padding) {
        chunk <<= 6;
        continue;
      }
      const size_t value = kBase64Chars.find(c);
      if (value == std::string_view::npos) return false;  // includes a misplaced '='
      chunk = (chunk << 6) | static_cast<uint32_t>(value);
    }
    out += static_cast<char>(chunk >> 16);
    if (i + 4 < text.size() || padding < 2) out += static_cast<char>((chunk >> 8) & 0xFF);
    if (i + 4 < text.size() || padding < 1) out += static_cast<char>(chunk & 0xFF);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Reading and writing whole files
// ---------------------------------------------------------------------------------------------
namespace {

// Both formats: Llama 3's tokenizer.json is 9 MB and its tokenizer.model 2 MB.
constexpr size_t kMaxTokenizerFileBytes = kTokenizerJsonLimits.max_bytes;
// Lines of a tokenizer.model, checked before the tables are sized from their count.
constexpr size_t kMaxTokenizerModelTokens = size_t{1} << 22;

std::string read_file(const fs::path& path) {
  try {
    return read_limited_file(path, kMaxTokenizerFileBytes);
  } catch (const JsonError& e) {
    throw TokenizerError(e.what());
  }
}

// Writes to a temporary file in the same folder, then renames it over `path`, so a reader never
// sees a half-written tokenizer.
void write_file_atomically(const fs::path& path, std::string_view content) {
  static std::atomic<uint64_t> counter{0};
  fs::path temp = path;
  temp += ".tmp" + std::to_string(std::random_device{}()) + "-" + std::to_string(counter++);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw TokenizerError(temp.string() + ": cannot open for writing");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      throw TokenizerError(temp.string() + ": write failed");
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw TokenizerError(path.string() +
                         ": cannot rename the temporary file into place: " + ec.message());
  }
}

std::string json_quoted(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// tokenizer.json
// ---------------------------------------------------------------------------------------------
namespace {

class JsonReader {
 public:
  explicit JsonReader(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void fail(const std::string& json_path, const std::string& what) const {
    throw TokenizerError(origin_ + ": " + json_path + ": " + what);
  }

  const json& member(const json& object, const std::string& path, const char* key) const {
    auto it = object.find(key);
    if (it == object.end()) fail(path, std::string("missing \"") + key + "\"");
    return *it;
  }

  // A token id: a non-negative integer below `limit`.
  int32_t id(const json& value, const std::string& path, size_t limit) const {
    if (!value.is_number_integer()) {
      fail(path, "expected an integer id, found " + json_short_text(value));
    }
    if (!value.is_number_unsigned() || value.get<uint64_t>() >= limit) {
      fail(path, "id " + json_short_text(value) + " is out of range: with " + std::to_string(limit) +
                     " tokens in all, ids must be 0.." + std::to_string(limit - 1) +
                     " with no gaps");
    }
    return static_cast<int32_t>(value.get<uint64_t>());
  }

  // Byte-level string (as in model.vocab and model.merges) → raw bytes.
  std::string bytes_of(const std::string& key, const std::string& path) const {
    if (key.empty()) fail(path, "empty token");
    std::string bytes;
    size_t pos = 0;
    while (pos < key.size()) {
      utf8::Step step = utf8::next(key, pos);
      if (step.status != utf8::Status::kOk) fail(path, "not valid UTF-8: " + step.problem);
      const int b = byte_from_unicode(step.code_point);
      if (b < 0) {
        char cp[16];
        std::snprintf(cp, sizeof cp, "U+%04X", step.code_point);
        fail(path, std::string("character ") + cp + " is not in the byte-level alphabet");
      }
      bytes += static_cast<char>(b);
      pos += step.length;
    }
    return bytes;
  }

  // Llama 3 splits text with its own regex before BPE, and so does this tokenizer whatever the
  // file says; a file that splits differently would silently give other tokens, so it is
  // refused. A file without a pre-tokenizer (null or absent, as minimal hand-written files are)
  // is read as Llama 3's. Otherwise the steps (a Sequence nests others) must include a Split with
  // Llama 3's regex, and any ByteLevel step must not apply a regex of its own. Walked with a list
  // of pending steps rather than recursion, so nesting costs no stack.
  void check_pre_tokenizer(const json* root) const {
    if (root == nullptr || root->is_null()) return;
    std::vector<std::pair<const json*, std::string>> pending{{root, "pre_tokenizer"}};
    size_t splits = 0;
    while (!pending.empty()) {
      auto [node, path] = std::move(pending.back());
      pending.pop_back();
      if (!node->is_object()) fail(path, "expected an object");
      const json& type = member(*node, path, "type");
      if (type == "Sequence") {
        const json& list = member(*node, path, "pretokenizers");
        if (!list.is_array()) fail(path + ".pretokenizers", "expected an array");
        for (size_t i = list.size(); i-- > 0;) {  // reversed: the first step is checked first
          pending.emplace_back(&list[i], path + ".pretokenizers[" + std::to_string(i) + "]");
        }
      } else if (type == "Split") {
        const json& pattern = member(*node, path, "pattern");
        auto regex = pattern.is_object() ? pattern.find("Regex") : pattern.end();
        if (!pattern.is_object() || regex == pattern.end() || !regex->is_string()) {
          fail(path + ".pattern", "expected {\"Regex\": \"...\"}");
        }
        if (regex->get<std::string>() != kLlama3SplitPattern) {
          fail(path + ".pattern.Regex", "not Llama 3's pre-tokenizer regex");
        }
        ++splits;
      } else if (type == "ByteLevel") {
        auto use_regex = node->find("use_regex");
        if (use_regex == node->end() || *use_regex != false) {
          fail(path, "ByteLevel with use_regex applies GPT-2's regex, not Llama 3's");
        }
      } else {
        fail(path + ".type", "pre-tokenizer " + json_short_text(type) + " is not supported");
      }
    }
    if (splits == 0) {
      fail("pre_tokenizer",
           "has no \"Split\" step with Llama 3's regex; Llama 3 splits text with it before BPE");
    }
  }

 private:
  std::string origin_;
};

// model.merges in rank order as pairs of ids; `key_ids` maps model.vocab's keys to ids. Entries
// are "left right" or ["left", "right"]; both halves and their concatenation must be keys.
void read_merges(const JsonReader& reader, const json& model,
                 const std::unordered_map<std::string, int32_t>& key_ids,
                 std::vector<std::pair<int32_t, int32_t>>& merge_list) {
  auto merges_it = model.find("merges");
  if (merges_it != model.end() && !merges_it->is_null()) {
    const json& merges = *merges_it;
    if (!merges.is_array()) reader.fail("model.merges", "expected an array");
    merge_list.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string path = "model.merges[" + std::to_string(rank) + "]";
      const json& entry = merges[rank];
      std::string left, right;
      // "left right": neither the byte-level alphabet nor a '▁'-normalized piece has a space
      if (entry.is_string()) {
        const std::string s = entry.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
          reader.fail(path,
                      "expected \"left right\" with one space, found " + json_short_text(entry));
        }
        left = s.substr(0, space);
        right = s.substr(space + 1);
      } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
                 entry[1].is_string()) {  // ["left", "right"]
        left = entry[0].get<std::string>();
        right = entry[1].get<std::string>();
      } else {
        reader.fail(path,
                    "expected \"left right\" or [\"left\", \"right\"], found " +
                        json_short_text(entry));
      }
      auto l = key_ids.find(left);
      auto r = key_ids.find(right);
      if (l == key_ids.end()) reader.fail(path, json_quoted(left) + " is not in model.vocab");
      if (r == key_ids.end()) reader.fail(path, json_quoted(right) + " is not in model.vocab");
      if (!key_ids.contains(left + right)) {
        reader.fail(path,
                    "the merged token " + json_quoted(left + right) + " is not in model.vocab");
      }
      merge_list.emplace_back(l->second, r->second);
    }
  }

}


// ---------------------------------------------------------------------------------------------
// tokenizer.json of Gemma 3 (Style::kSentencePiece)
// ---------------------------------------------------------------------------------------------
constexpr std::string_view kMetaSpace = "\xE2\x96\x81";  // '▁'

bool is_string_pattern(const json& node, std::string_view key, std::string_view value) {
  auto it = node.find(key);
  if (it == node.end() || !it->is_object()) return false;
  auto s = it->find("String");
  return s != it->end() && s->is_string() && *s == value;
}

// {"type": "Replace", "pattern": {"String": from}, "content": to}
bool is_replace(const json& node, std::string_view from, std::string_view to) {
  if (!node.is_object()) return false;
  auto type = node.find("type");
  auto content = node.find("content");
  return type != node.end() && *type == "Replace" && is_string_pattern(node, "pattern", from) &&
         content != node.end() && content->is_string() && *content == to;
}

bool has_type(const json& node, std::string_view type) {
  if (!node.is_object()) return false;
  auto it = node.find("type");
  return it != node.end() && *it == type;
}

// The steps of Gemma 3's tokenizer.json other than the vocabulary: anything else would encode or
// decode differently, so it is refused, naming the key.
void check_sentencepiece_steps(const JsonReader& reader, const json& root, const json& model) {
  const std::string expected_normalizer =
      "; Gemma's tokenizer.json has {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
      "\"content\": \"\u2581\"}";
  const json& normalizer = reader.member(root, "(root)", "normalizer");
  if (has_type(normalizer, "Sequence")) {
    const json& steps = reader.member(normalizer, "normalizer", "normalizers");
    if (!steps.is_array() || steps.size() != 1 || !is_replace(steps[0], " ", kMetaSpace)) {
      reader.fail("normalizer.normalizers",
                  "a sequence other than the one Replace step is not supported" +
                      expected_normalizer);
    }
  } else if (!is_replace(normalizer, " ", kMetaSpace)) {
    reader.fail("normalizer", json_short_text(normalizer) + " is not supported" + expected_normalizer);
  }

  // Gemma splits on " " after the normalizer has replaced every space: no split at all.
  auto pre = root.find("pre_tokenizer");
  if (pre != root.end() && !pre->is_null()) {
    auto invert = pre->is_object() ? pre->find("invert") : pre->end();
    const bool inverted = pre->is_object() && invert != pre->end() && *invert != false;
    if (!has_type(*pre, "Split") || !is_string_pattern(*pre, "pattern", " ") || inverted) {
      reader.fail("pre_tokenizer",
                  json_short_text(*pre) +
                      " is not supported; a SentencePiece-style tokenizer.json has none, or "
                      "Gemma's Split on the string \" \" (which finds no space once they are '\u2581')");
    }
  }

  const json& decoder = reader.member(root, "(root)", "decoder");
  const json* steps = nullptr;
  if (has_type(decoder, "Sequence")) {
    auto it = decoder.find("decoders");
    if (it != decoder.end() && it->is_array()) steps = &*it;
  }
  if (steps == nullptr || steps->size() != 3 || !is_replace((*steps)[0], kMetaSpace, " ") ||
      !has_type((*steps)[1], "ByteFallback") || !has_type((*steps)[2], "Fuse")) {
    reader.fail("decoder", json_short_text(decoder) +
                               " is not supported; Gemma's tokenizer.json decodes with the "
                               "Sequence Replace('\u2581', ' '), ByteFallback, Fuse");
  }

  auto fallback = model.find("byte_fallback");
  if (fallback == model.end() || *fallback != true) {
    reader.fail("model.byte_fallback",
                "must be true: a SentencePiece-style vocabulary turns characters it lacks into "
                "<0xNN> byte tokens");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && !it->is_null() && *it != "") {
      reader.fail(std::string("model.") + key, json_short_text(*it) + " is not supported");
    }
  }
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    reader.fail("model.dropout", json_short_text(*dropout) + ": BPE dropout is for training only");
  }
  auto ignore = model.find("ignore_merges");
  if (ignore != model.end() && !ignore->is_boolean()) {
    reader.fail("model.ignore_merges", "expected true or false, found " + json_short_text(*ignore));
  }
}

// The decoded bytes of a model.vocab piece: "<0xNN>" is the byte NN, '▁' a space.
std::string piece_bytes(const std::string& piece) {
  if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>') {
    auto hex = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    };
    const int hi = hex(piece[3]), lo = hex(piece[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  std::string out;
  for (size_t pos = 0; pos < piece.size();) {
    if (std::string_view(piece).substr(pos).starts_with(kMetaSpace)) {
      out += ' ';
      pos += kMetaSpace.size();
    } else {
      out += piece[pos++];
    }
  }
  return out;
}

// One entry of added_tokens: its path for errors, its text, its id (checked < total) and its
// "special" flag (false when absent).
struct AddedToken {
  std::string path, text;
  int32_t id = 0;
  bool special = false;
};

AddedToken read_added_token(const JsonReader& reader, const json& entry, size_t index,
                            size_t total) {
  AddedToken token;
  token.path = "added_tokens[" + std::to_string(index) + "]";
  if (!entry.is_object()) reader.fail(token.path, "expected an object");
  const json& content = reader.member(entry, token.path, "content");
  if (!content.is_string() || content.get<std::string>().empty()) {
    reader.fail(token.path + ".content", "expected a non-empty string");
  }
  token.text = content.get<std::string>();
  token.id = reader.id(reader.member(entry, token.path, "id"), token.path + ".id", total);
  auto special = entry.find("special");
  if (special != entry.end() && !special->is_boolean()) {
    reader.fail(token.path + ".special",
                "expected true or false, found " + json_short_text(*special));
  }
  token.special = special != entry.end() && *special == true;
  return token;
}

Tokenizer read_sentencepiece_json(const JsonReader& reader, const json& root, const json& model,
                                  const json& vocab, const json& added, std::string_view origin) {
  check_sentencepiece_steps(reader, root, model);
  const size_t base = vocab.size();
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->style = Tokenizer::Style::kSentencePiece;
  impl->rule = Tokenizer::MergeRule::kMergeList;
  impl->special_base = static_cast<int32_t>(base);
  auto ignore = model.find("ignore_merges");
  impl->ignore_merges = ignore != model.end() && *ignore == true;

  // Added tokens may reuse ids of model.vocab (Gemma's <bos> is both) or follow it.
  size_t beyond = 0;
  for (size_t i = 0; i < added.size(); ++i) {
    const json& entry = added[i];
    if (entry.is_object()) {
      auto id = entry.find("id");
      if (id != entry.end() && id->is_number_unsigned() && id->get<uint64_t>() >= base) ++beyond;
    }
  }
  const size_t total = base + beyond;
  impl->tokens.resize(total);
  impl->pieces.resize(base);
  impl->special.assign(total, false);
  impl->piece_ids.reserve(base);
  std::vector<bool> seen(total, false);
  std::unordered_map<std::string, int32_t> key_ids;
  key_ids.reserve(base);
  for (const auto& [key, value] : vocab.items()) {
    const std::string path = "model.vocab[" + json_quoted(key) + "]";
    if (key.empty()) reader.fail(path, "empty token");
    const int32_t id = reader.id(value, path, base);
    if (seen[id]) reader.fail(path, "id " + std::to_string(id) + " is used twice");
    seen[id] = true;
    impl->pieces[id] = key;
    impl->tokens[id] = piece_bytes(key);
    impl->piece_ids.emplace(key, id);
    key_ids.emplace(key, id);
  }

  std::vector<bool> added_seen(total, false);
  for (size_t i = 0; i < added.size(); ++i) {
    const AddedToken token = read_added_token(reader, added[i], i, total);
    const int32_t id = token.id;
    if (added_seen[id]) {
      reader.fail(token.path + ".id", "id " + std::to_string(id) + " is used twice");
    }
    added_seen[id] = true;
    if (static_cast<size_t>(id) < base) {
      if (impl->pieces[id] != token.text) {
        reader.fail(token.path, "id " + std::to_string(id) + " is " +
                                    json_quoted(impl->pieces[id]) +
                                    " in model.vocab but the added token is " +
                                    json_quoted(token.text));
      }
    } else {
      seen[id] = true;
    }
    impl->special[id] = token.special;
    impl->tokens[id] = token.text;  // matched as written, and decoded as written
    impl->added.push_back(id);
  }
  if (auto gap = std::find(seen.begin(), seen.end(), false); gap != seen.end()) {
    reader.fail("added_tokens", "no token has id " + std::to_string(gap - seen.begin()) +
                                    ": the tokens after model.vocab must follow it with no gaps");
  }

  read_merges(reader, model, key_ids, impl->merge_list);
  return make_tokenizer(std::move(impl), origin);
}

}  // namespace

Tokenizer Tokenizer::from_tokenizer_json_text(std::string_view text, std::string_view origin) {
  JsonReader reader(origin);
  json root;
  try {
    root = parse_json(text, std::string(origin), kTokenizerJsonLimits);
  } catch (const JsonError& e) {
    throw TokenizerError(e.what());
  }
  if (!root.is_object()) reader.fail("(root)", "expected a JSON object");

  const json& model = reader.member(root, "(root)", "model");
  if (!model.is_object()) reader.fail("model", "expected an object");
  if (auto type = model.find("type"); type != model.end() && *type != "BPE") {
    reader.fail("model.type", "is " + json_short_text(*type) + "; only \"BPE\" is supported");
  }
  const json& vocab = reader.member(model, "model", "vocab");
  if (!vocab.is_object()) reader.fail("model.vocab", "expected an object of token → id");

  const json empty_array = json::array();
  auto added_it = root.find("added_tokens");
  const json& added = added_it == root.end() || added_it->is_null() ? empty_array : *added_it;
  if (!added.is_array()) reader.fail("added_tokens", "expected an array");

  // Gemma 3's layout: a normalizer that writes spaces as '▁', byte fallback.
  auto normalizer = root.find("normalizer");
  auto fallback = model.find("byte_fallback");
  if ((normalizer != root.end() && !normalizer->is_null()) ||
      (fallback != model.end() && *fallback == true)) {
    return read_sentencepiece_json(reader, root, model, vocab, added, origin);
  }

  // Ids must run 0..total-1 with the vocabulary first and the added tokens after it.
  const size_t base = vocab.size();
  const size_t total = base + added.size();
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->tokens.resize(total);
  impl->special_base = static_cast<int32_t>(base);
  impl->rule = MergeRule::kMergeList;
  std::vector<bool> seen(total, false);
  std::unordered_map<std::string, int32_t> key_ids;  // byte-level string → id, for merges
  key_ids.reserve(base);
  for (const auto& [key, value] : vocab.items()) {
    const std::string path = "model.vocab[" + json_quoted(key) + "]";
    const int32_t id = reader.id(value, path, base);
    if (seen[id]) reader.fail(path, "id " + std::to_string(id) + " is used twice");
    seen[id] = true;
    impl->tokens[id] = reader.bytes_of(key, path);
    key_ids.emplace(key, id);
  }

  for (size_t i = 0; i < added.size(); ++i) {
    const AddedToken token = read_added_token(reader, added[i], i, total);
    if (static_cast<size_t>(token.id) < base) {
      reader.fail(token.path + ".id", "id " + std::to_string(token.id) +
                                          " is inside model.vocab; added tokens must follow it");
    }
    if (seen[token.id]) {
      reader.fail(token.path + ".id", "id " + std::to_string(token.id) + " is used twice");
    }
    seen[token.id] = true;
    // Every added token is treated as a special token: matched literally when encode() allows
    // special tokens (Llama 3's are all marked "special": true).
    impl->tokens[token.id] = token.text;
  }
  // With `total` slots, unique in-range ids and `total` entries, every id is taken; kept as a
  // check in case that reasoning ever changes.
  if (auto gap = std::find(seen.begin(), seen.end(), false); gap != seen.end()) {
    reader.fail("model.vocab", "no token has id " + std::to_string(gap - seen.begin()));
  }

  read_merges(reader, model, key_ids, impl->merge_list);

  auto pre = root.find("pre_tokenizer");
  reader.check_pre_tokenizer(pre == root.end() ? nullptr : &*pre);
  return make_tokenizer(std::move(impl), origin);
}

Tokenizer Tokenizer::from_tokenizer_json(const fs::path& path) {
  return from_tokenizer_json_text(read_file(path), path.string());
}

void Tokenizer::write_tokenizer_json(const fs::path& path) const {
  if (style() == Style::kSentencePiece) {
    throw TokenizerError(path.string() +
                         ": writing a SentencePiece-style (Gemma) tokenizer.json is not supported");
  }
  using ojson = nlohmann::ordered_json;  // keeps the vocabulary in id order, as HF writes it
  const Impl& t = *impl_;
  auto key = [&](int32_t id) {
    std::string s;
    for (char c : t.tokens[id]) utf8::append(s, byte_to_unicode(static_cast<unsigned char>(c)));
    return s;
  };

  // Appended directly to the ordered map: its operator[] searches linearly for the key, which
  // made writing a 128k-token vocabulary quadratic. Token strings are unique, so no check is lost.
  ojson vocab = ojson::object();
  auto& entries = vocab.get_ref<ojson::object_t&>();
  entries.reserve(static_cast<size_t>(t.special_base));
  for (int32_t id = 0; id < t.special_base; ++id) entries.emplace_back(key(id), id);

  // A rank-based vocabulary gets the merges that reproduce it: every split of a token into two
  // tokens, ordered by the merged token's rank, then by the ranks of the two halves.
  std::vector<std::pair<int32_t, int32_t>> merge_list = t.merge_list;
  if (t.rule == MergeRule::kTokenRanks) {
    std::vector<std::tuple<int32_t, int32_t, int32_t>> derived;
    for (int32_t id = 0; id < t.special_base; ++id) {
      const std::string_view s = t.tokens[id];
      for (size_t k = 1; k < s.size(); ++k) {
        auto left = t.base_ids.find(s.substr(0, k));
        auto right = t.base_ids.find(s.substr(k));
        if (left != t.base_ids.end() && right != t.base_ids.end()) {
          derived.emplace_back(id, left->second, right->second);
        }
      }
    }
    std::sort(derived.begin(), derived.end());
    merge_list.clear();
    for (auto [merged, left, right] : derived) merge_list.emplace_back(left, right);
  }
  ojson merges = ojson::array();
  for (auto [left, right] : merge_list) merges.push_back(key(left) + " " + key(right));

  ojson added = ojson::array();
  for (int32_t id = t.special_base; id < vocab_size(); ++id) {
    added.push_back({{"id", id},
                     {"content", t.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }

  ojson root = ojson::object();
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"},
                              {"pattern", {{"Regex", std::string(kLlama3SplitPattern)}}},
                              {"behavior", "Isolated"},
                              {"invert", false}},
                             {{"type", "ByteLevel"},
                              {"add_prefix_space", false},
                              {"trim_offsets", true},
                              {"use_regex", false}}}}};
  // <|begin_of_text|> in front of every encoded text, as Llama 3's file does.
  if (auto bos = find_special("<|begin_of_text|>")) {
    const std::string name = "<|begin_of_text|>";
    ojson bos_piece = {{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
    root["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {bos_piece,
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", name}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{name, {{"id", name}, {"ids", {*bos}}, {"tokens", {name}}}}}}};
  } else {
    root["post_processor"] = nullptr;
  }
  root["decoder"] = {{"type", "ByteLevel"},
                     {"add_prefix_space", true},
                     {"trim_offsets", true},
                     {"use_regex", true}};
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", true},
                   {"vocab", std::move(vocab)},
                   {"merges", std::move(merges)}};
  write_file_atomically(path, root.dump(2) + "\n");
}

// ---------------------------------------------------------------------------------------------
// tokenizer.model
// ---------------------------------------------------------------------------------------------
Tokenizer Tokenizer::from_tokenizer_model_text(std::string_view text, std::string_view origin,
                                               const std::vector<std::string>& special_tokens) {
  auto fail = [&](size_t line, const std::string& what) {
    throw TokenizerError(std::string(origin) + ":" + std::to_string(line) + ": " + what);
  };
  if (text.find('\0') != std::string_view::npos) {
    throw TokenizerError(std::string(origin) +
                         ": binary data where `base64 rank` lines were expected (a SentencePiece "
                         "model, as used by Llama 2, is not supported)");
  }

  struct Entry {
    size_t line;
    std::string_view token_b64;
    std::string_view rank;
  };
  std::vector<Entry> entries;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty()) continue;  // e.g. the newline at the end of the file
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
      fail(line_no,
           "expected `<base64 token> <rank>`, found \"" + std::string(line.substr(0, 80)) + "\"");
    }
    if (entries.size() == kMaxTokenizerModelTokens) {
      fail(line_no, "more than " + std::to_string(kMaxTokenizerModelTokens) +
                        " tokens, far more than any vocabulary (Llama 3 has 128,000)");
    }
    entries.push_back({line_no, line.substr(0, space), line.substr(space + 1)});
  }
  if (entries.empty()) throw TokenizerError(std::string(origin) + ": no tokens in the file");

  const size_t count = entries.size();  // the vocabulary size is the number of lines
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->rule = MergeRule::kTokenRanks;
  impl->special_base = static_cast<int32_t>(count);
  impl->tokens.resize(count + special_tokens.size());
  std::vector<size_t> rank_line(count, 0);
  std::unordered_map<std::string, size_t> bytes_line;
  bytes_line.reserve(count);
  for (const Entry& e : entries) {
    std::string bytes;
    if (!base64_decode(e.token_b64, bytes)) {
      fail(e.line, "\"" + std::string(e.token_b64.substr(0, 80)) + "\" is not valid base64");
    }
    uint64_t rank = 0;
    auto [end, ec] = std::from_chars(e.rank.data(), e.rank.data() + e.rank.size(), rank);
    if (ec != std::errc() || end != e.rank.data() + e.rank.size()) {
      fail(e.line,
           "rank \"" + std::string(e.rank.substr(0, 40)) + "\" is not a non-negative integer");
    }
    if (rank >= count) {
      fail(e.line, "rank " + std::to_string(rank) + " is out of range: a file of " +
                       std::to_string(count) + " tokens must use ranks 0.." +
                       std::to_string(count - 1));
    }
    if (rank_line[rank] != 0) {
      fail(e.line, "rank " + std::to_string(rank) + " already appeared on line " +
                       std::to_string(rank_line[rank]));
    }
    rank_line[rank] = e.line;
    auto [it, inserted] = bytes_line.emplace(bytes, e.line);
    if (!inserted) {
      fail(e.line, "the same token bytes already appeared on line " + std::to_string(it->second));
    }
    impl->tokens[rank] = std::move(bytes);
  }
  for (size_t i = 0; i < special_tokens.size(); ++i) impl->tokens[count + i] = special_tokens[i];
  return make_tokenizer(std::move(impl), origin);
}

Tokenizer Tokenizer::from_tokenizer_model(const fs::path& path,
                                          const std::vector<std::string>& special_tokens) {
  return from_tokenizer_model_text(read_file(path), path.string(), special_tokens);
}

void Tokenizer::write_tokenizer_model(const fs::path& path) const {
  if (style() == Style::kSentencePiece) {
    throw TokenizerError(path.string() + ": tokenizer.model holds byte-level (Llama 3) "
                                         "vocabularies only, not a SentencePiece-style one");
  }
  const Impl& t = *impl_;
  // The rank file has no room for special tokens; loading it appends Llama 3's list.
  const std::vector<std::string> standard = llama3_special_tokens();
  if (!std::equal(t.tokens.begin() + t.special_base, t.tokens.end(), standard.begin(),
                  standard.end())) {
    throw TokenizerError(path.string() +
                         ": tokenizer.model cannot store these special tokens (only Llama 3's "
                         "standard 256 are implied by the format)");
  }
  std::string out;
  for (int32_t id = 0; id < t.special_base; ++id) {
    out += base64_encode(t.tokens[id]);
    out += ' ';
    out += std::to_string(id);
    out += '\n';
  }
  write_file_atomically(path, out);
}

// ---------------------------------------------------------------------------------------------
// Choosing the format
// ---------------------------------------------------------------------------------------------
Tokenizer Tokenizer::from_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const char* name : {"tokenizer.json", "original/tokenizer.model", "tokenizer.model"}) {
      if (fs::is_regular_file(path / name, ec)) return from_file(path / name);
    }
    throw TokenizerError(path.string() +
                         ": no tokenizer.json or original/tokenizer.model in this folder");
  }
  const std::string text = read_file(path);
  const std::string ext = path.extension().string();
  bool is_json = ext == ".json";
  if (ext != ".json" && ext != ".model") {
    const size_t first = text.find_first_not_of(" \t\r\n");
    is_json = first != std::string::npos && text[first] == '{';
  }
  return is_json ? from_tokenizer_json_text(text, path.string())
                 : from_tokenizer_model_text(text, path.string());
}

}  // namespace clockwork
