// Tokenizer core: the pre-tokenizer regex, byte-level BPE, decoding and the chat template.
// File formats are in tokenizer_files.cpp, vocabulary training in tokenizer_train.cpp.
#include "harness/model/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <utility>

#include "harness/model/tokenizer_internal.h"
#include "harness/model/tokenizer_utf8.h"
#include "kernels/tokenizer_steps.h"

namespace clockwork {

InvalidUtf8Error::InvalidUtf8Error(size_t byte_offset, const std::string& problem)
    : TokenizerError("invalid UTF-8 at byte offset " + std::to_string(byte_offset) + ": " +
                     problem),
      byte_offset_(byte_offset) {}

std::vector<std::string> llama3_special_tokens() {
  // The order of Meta's llama3 tokenizer.py: ten named slots (some of them reserved), then
  // reserved tokens numbered on from 5 until there are 256 in all.
  std::vector<std::string> names = {
      "<|begin_of_text|>",
      "<|end_of_text|>",
      "<|reserved_special_token_0|>",
      "<|reserved_special_token_1|>",
      "<|reserved_special_token_2|>",
      "<|reserved_special_token_3|>",
      "<|start_header_id|>",
      "<|end_header_id|>",
      "<|reserved_special_token_4|>",
      "<|eot_id|>",
  };
  for (int i = 5; names.size() < static_cast<size_t>(kLlama3NumSpecialTokens); ++i) {
    names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  }
  return names;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer: the Llama 3 regex compiled once with PCRE2 (Unicode classes need UTF + UCP).
// ---------------------------------------------------------------------------------------------
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  int n = pcre2_get_error_message(code, buf, sizeof buf);
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buf));
}

// Unicode's White_Space property as character-class contents. PCRE2's \s under UCP also
// matches U+180E MONGOLIAN VOWEL SEPARATOR, which stopped being whitespace in Unicode 6.3; the
// regex engines behind tiktoken and HuggingFace follow White_Space, so \s and \S are spelled out.
constexpr std::string_view kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Letters (\p{L}) and numbers (\p{N}) added to Unicode after version 14, as character-class
// contents. PCRE2 10.42 (Debian 12) carries Unicode 14 tables, where these code points are
// unassigned, while tiktoken and HuggingFace split with newer tables: without them a space before
// a Kirat Rai digit would stick to it, and Nag Mundari letters would break a word in two. Adding
// them to \p{L} and \p{N} makes the split the same whatever Unicode version PCRE2 knows (a
// newer PCRE2 already has them; the union changes nothing). The ranges are those of general
// category L* and N* in UnicodeData.txt 16.0 that are not L* and N* in 14.0 (none went the other
// way): Unicode 15.0 (Kawi, Nag Mundari, CJK Extension H, Kaktovik numerals, ...), 15.1 (CJK
// Extension I) and 16.0 (Garay, Gurung Khema, Kirat Rai, Ol Onal, Sunuwar, Todhri,
// Tulu-Tigalari, Egyptian hieroglyphs extended-A, ...).
constexpr std::string_view kLettersAfterUnicode14 =
    R"(\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D65})"
    R"(\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240}\x{11380}-\x{11389}\x{1138B})"
    R"(\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{11F02})"
    R"(\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F}\x{13441}-\x{13446}\x{13460}-\x{143FA})"
    R"(\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A})"
    R"(\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739})"
    R"(\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
constexpr std::string_view kNumbersAfterUnicode14 =
    R"(\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";

// `p` for PCRE2: \s and \S spelled out as kWhiteSpace, \p{L} and \p{N} extended by the ranges
// above, inside and outside [...] classes.
std::string pcre2_split_pattern(std::string_view p = kLlama3SplitPattern) {
  std::string out;
  bool in_class = false;
  // Appends class contents: as they are inside [...], wrapped in [...] outside.
  auto add_class = [&](std::string_view contents) {
    if (in_class) {
      out += contents;
    } else {
      out += '[';
      out += contents;
      out += ']';
    }
  };
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      if (e == 's') {
        add_class(kWhiteSpace);
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S') {
        throw TokenizerError("pre-tokenizer regex: \\S inside a character class is not supported");
      } else if (e == 'p' && (p.substr(i + 1, 3) == "{L}" || p.substr(i + 1, 3) == "{N}")) {
        const bool letter = p[i + 2] == 'L';
        add_class("\\p{" + std::string(1, p[i + 2]) + "}" +
                  std::string(letter ? kLettersAfterUnicode14 : kNumbersAfterUnicode14));
        i += 3;
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (p[i] == '[') in_class = true;
    if (p[i] == ']') in_class = false;
    out += p[i];
  }
  return out;
}

// The compiled regex, handed to the student's split_pieces (kernels/tokenizer_steps.h).
class SplitRegex final : public tokenizer_steps::PieceRegex {
 public:
  SplitRegex() {
    const std::string pattern = pcre2_split_pattern();
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (code_ == nullptr) {
      throw TokenizerError("cannot compile the pre-tokenizer regex at offset " +
                           std::to_string(error_offset) + ": " + pcre2_message(error));
    }
    // JIT is several times faster; when this PCRE2 build has none, pcre2_match interprets.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~SplitRegex() { pcre2_code_free(code_); }
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // `text` must be valid UTF-8 (the callers check it once, not at every match).
  std::optional<Match> find(std::string_view text, size_t from) const override {
    if (from >= text.size()) return std::nullopt;
    // One match block per thread, reused: a piece is often a few bytes, and allocating per
    // match would cost more than matching.
    thread_local std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
    if (!match) throw TokenizerError("out of memory for PCRE2 match data");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    uint32_t options = PCRE2_NO_UTF_CHECK;
    int rc = pcre2_match(code_, subject, text.size(), from, options, match.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Very long runs can exhaust the JIT stack; the interpreter copes.
      options |= PCRE2_NO_JIT;
      rc = pcre2_match(code_, subject, text.size(), from, options, match.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
    if (rc < 0) throw TokenizerError("pre-tokenizer regex failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    Match m{ovector[0], ovector[1]};
    // The pattern matches no empty text, but the contract promises progress: never return one.
    if (m.end == m.begin) {
      if (m.begin >= text.size()) return std::nullopt;
      m.end = m.begin + utf8::next(text, m.begin).length;
    }
    return m;
  }

 private:
  pcre2_code* code_ = nullptr;
};

const SplitRegex& split_regex() {
  static const SplitRegex regex;  // thread-safe one-time compile
  return regex;
}

void check_utf8(std::string_view text) {
  if (auto problem = utf8::find_problem(text)) {
    throw InvalidUtf8Error(problem->offset, problem->what);
  }
}

}  // namespace

std::vector<std::string> pre_tokenize(std::string_view text) {
  check_utf8(text);
  std::vector<std::string_view> views;
  tokenizer_steps::split_pieces(split_regex(), text, views);
  return std::vector<std::string>(views.begin(), views.end());
}

// ---------------------------------------------------------------------------------------------
// Building the lookup tables
// ---------------------------------------------------------------------------------------------
Tokenizer make_tokenizer(std::unique_ptr<Tokenizer::Impl> impl, std::string_view origin) {
  auto fail = [&](const std::string& what) {
    throw TokenizerError(std::string(origin) + ": " + what);
  };
  Tokenizer::Impl& t = *impl;
  if (t.style == Tokenizer::Style::kSentencePiece) {
    build_sentencepiece_tables(t, origin);
    return Tokenizer(std::move(impl));
  }
  const auto total = static_cast<int32_t>(t.tokens.size());
  if (t.special_base < 256 || t.special_base > total) {
    fail("the base vocabulary has " + std::to_string(t.special_base) +
         " tokens; byte-level BPE needs at least the 256 single bytes");
  }

  t.base_ids.clear();
  t.base_ids.reserve(static_cast<size_t>(t.special_base));
  for (int32_t id = 0; id < t.special_base; ++id) {
    const std::string& bytes = t.tokens[id];
    if (bytes.empty()) fail("token " + std::to_string(id) + " is empty");
    auto [it, inserted] = t.base_ids.emplace(bytes, id);
    if (!inserted) {
      fail("tokens " + std::to_string(it->second) + " and " + std::to_string(id) +
           " have the same bytes");
    }
  }
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    auto it = t.base_ids.find(std::string_view(&byte, 1));
    if (it == t.base_ids.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      fail(std::string("no token for the single byte ") + hex +
           "; byte-level BPE needs all 256 bytes");
    }
    t.byte_ids[b] = it->second;
  }

  t.special_ids.clear();
  for (auto& group : t.specials_by_first_byte) group.clear();
  for (int32_t id = t.special_base; id < total; ++id) {
    const std::string& text = t.tokens[id];
    if (text.empty()) fail("special token " + std::to_string(id) + " is empty");
    if (auto problem = utf8::find_problem(text)) {
      fail("special token " + std::to_string(id) + " is not valid UTF-8: " + problem->what);
    }
    auto [it, inserted] = t.special_ids.emplace(text, id);
    if (!inserted) {
      fail("special tokens " + std::to_string(it->second) + " and " + std::to_string(id) +
           " are both \"" + text + "\"");
    }
    t.specials_by_first_byte[static_cast<unsigned char>(text[0])].push_back(id);
  }
  // Longest first, so that of two specials where one is a prefix of the other the longer wins.
  for (auto& group : t.specials_by_first_byte) {
    std::stable_sort(group.begin(), group.end(),
                     [&](int32_t a, int32_t b) { return t.tokens[a].size() > t.tokens[b].size(); });
  }

  t.merges.clear();
  if (t.rule == Tokenizer::MergeRule::kMergeList) {
    t.merges.reserve(t.merge_list.size());
    for (size_t rank = 0; rank < t.merge_list.size(); ++rank) {
      auto [left, right] = t.merge_list[rank];
      if (left < 0 || left >= t.special_base || right < 0 || right >= t.special_base) {
        fail("merge " + std::to_string(rank) + " names a token outside the base vocabulary");
      }
      auto merged = t.base_ids.find(t.tokens[left] + t.tokens[right]);
      if (merged == t.base_ids.end()) {
        fail("merge " + std::to_string(rank) + " produces bytes that are not a token");
      }
      // A repeated pair keeps its first (lowest) rank.
      t.merges.emplace(Tokenizer::Impl::pair_key(left, right),
                       Tokenizer::Impl::Merge{static_cast<int32_t>(rank), merged->second});
    }
  } else {
    t.merge_list.clear();
  }
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------
namespace {

constexpr Tokenizer::Impl::Merge kNoMerge{INT32_MAX, -1};

// May `left` and `right` merge, and with which rank into which token?
Tokenizer::Impl::Merge find_merge(const Tokenizer::Impl& t, int32_t left, int32_t right,
                                  std::string& scratch) {
  if (t.rule == Tokenizer::MergeRule::kMergeList) {
    auto it = t.merges.find(Tokenizer::Impl::pair_key(left, right));
    return it == t.merges.end() ? kNoMerge : it->second;
  }
  scratch.assign(t.tokens[left]).append(t.tokens[right]);
  auto it = t.base_ids.find(std::string_view(scratch));
  return it == t.base_ids.end() ? kNoMerge : Tokenizer::Impl::Merge{it->second, it->second};
}

// The vocabulary as the student's merge_piece sees it (kernels/tokenizer_steps.h).
class ImplMergeTable final : public tokenizer_steps::MergeTable {
 public:
  explicit ImplMergeTable(const Tokenizer::Impl& t) : t_(t) {}
  int32_t byte_token(unsigned char b) const override { return t_.byte_ids[b]; }
  std::optional<Merge> merge(int32_t left, int32_t right) const override {
    if (left < 0 || left >= t_.special_base || right < 0 || right >= t_.special_base) {
      return std::nullopt;  // not base-vocabulary tokens: nothing merges with them
    }
    const Tokenizer::Impl::Merge m = find_merge(t_, left, right, scratch_);
    if (m.id < 0) return std::nullopt;
    return Merge{m.rank, m.id};
  }

 private:
  const Tokenizer::Impl& t_;
  mutable std::string scratch_;  // one table per encode call, so never shared between threads
};

// Byte-level BPE of one piece.
void bpe(const Tokenizer::Impl& t, std::string_view piece, std::vector<int32_t>& out) {
  if (piece.empty()) return;
  // A piece that is already a token is taken whole (tiktoken does this; Llama 3's
  // tokenizer.json says so with "ignore_merges": true).
  if (auto it = t.base_ids.find(piece); it != t.base_ids.end()) {
    out.push_back(it->second);
    return;
  }
  const ImplMergeTable table(t);
  tokenizer_steps::merge_piece(table, piece, out);
}

constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 64;

// Pre-tokenizes and BPE-encodes text that holds no special tokens.
void encode_ordinary(const Tokenizer::Impl& t, std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::vector<std::string_view> pieces;
  tokenizer_steps::split_pieces(split_regex(), text, pieces);
  for (std::string_view piece : pieces) {
    const bool cacheable = piece.size() <= kCacheMaxPieceBytes;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(t.cache->mutex);
      auto it = t.cache->map.find(piece);
      if (it != t.cache->map.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    const size_t first = out.size();
    bpe(t, piece, out);
    if (cacheable) {
      std::lock_guard<std::mutex> lock(t.cache->mutex);
      if (t.cache->map.size() >= kCacheMaxEntries) t.cache->map.clear();
      t.cache->map.emplace(std::string(piece),
                           std::vector<int32_t>(out.begin() + first, out.end()));
    }
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special, bool bos) const {
  check_utf8(text);
  const Impl& t = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (bos) ids.push_back(bos_id());
  if (t.style == Style::kSentencePiece) {
    encode_sentencepiece(t, text, allow_special, ids);
    return ids;
  }
  size_t start = 0;  // start of the text not yet encoded
  if (allow_special) {
    size_t i = 0;
    while (i < text.size()) {
      int32_t hit = -1;
      for (int32_t id : t.specials_by_first_byte[static_cast<unsigned char>(text[i])]) {
        if (text.substr(i).starts_with(t.tokens[id])) {
          hit = id;
          break;
        }
      }
      if (hit < 0) {
        ++i;
        continue;
      }
      encode_ordinary(t, text.substr(start, i - start), ids);
      ids.push_back(hit);
      i += t.tokens[hit].size();
      start = i;
    }
  }
  encode_ordinary(t, text.substr(start), ids);
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Decoding and lookups
// ---------------------------------------------------------------------------------------------
const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw TokenizerError("token id " + std::to_string(id) +
                         " is out of range: the vocabulary has ids 0.." +
                         std::to_string(vocab_size() - 1));
  }
  return impl_->tokens[id];
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      throw TokenizerError("token id " + std::to_string(ids[i]) + " at position " +
                           std::to_string(i) + " is out of range: the vocabulary has ids 0.." +
                           std::to_string(vocab_size() - 1));
    }
    bytes += impl_->tokens[ids[i]];
  }
  return bytes;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  if (skip_special) {
    std::vector<int32_t> kept;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!is_special(ids[i])) kept.push_back(ids[i]);
    }
    bytes = decode_bytes(kept);
  } else {
    bytes = decode_bytes(ids);
  }
  std::string text;
  text.reserve(bytes.size());
  utf8::append_lossy(text, bytes, /*keep_incomplete_tail=*/false);
  return text;
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->tokens.size());
}
int32_t Tokenizer::special_base() const {
  return impl_->special_base;
}
int32_t Tokenizer::num_special_tokens() const {
  return vocab_size() - impl_->special_base;
}
bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  if (impl_->style == Style::kSentencePiece) return impl_->special[id];
  return id >= impl_->special_base;
}
Tokenizer::MergeRule Tokenizer::merge_rule() const {
  return impl_->rule;
}
Tokenizer::Style Tokenizer::style() const {
  return impl_->style;
}

int32_t Tokenizer::bos_id() const {
  return special_id(impl_->style == Style::kSentencePiece ? "<bos>" : "<|begin_of_text|>");
}
int32_t Tokenizer::eos_id() const {
  return special_id(impl_->style == Style::kSentencePiece ? "<eos>" : "<|end_of_text|>");
}
int32_t Tokenizer::eot_id() const {
  return special_id(impl_->style == Style::kSentencePiece ? "<end_of_turn>" : "<|eot_id|>");
}

std::optional<int32_t> Tokenizer::find_special(std::string_view text) const {
  auto it = impl_->special_ids.find(text);
  if (it == impl_->special_ids.end()) return std::nullopt;
  return it->second;
}

int32_t Tokenizer::special_id(std::string_view text) const {
  if (auto id = find_special(text)) return *id;
  throw TokenizerError("this tokenizer has no special token \"" + std::string(text) + "\"");
}

std::optional<int32_t> Tokenizer::find_token(std::string_view bytes) const {
  if (impl_->style == Style::kSentencePiece) {
    std::string piece;
    for (char c : bytes) {
      if (c == ' ') {
        piece += "\xE2\x96\x81";  // '▁'
      } else {
        piece += c;
      }
    }
    auto it = impl_->piece_ids.find(piece);
    if (it == impl_->piece_ids.end()) return std::nullopt;
    return it->second;
  }
  auto it = impl_->base_ids.find(bytes);
  if (it == impl_->base_ids.end()) return std::nullopt;
  return it->second;
}

// ---------------------------------------------------------------------------------------------
// Chat template
// ---------------------------------------------------------------------------------------------
namespace {
constexpr std::string_view kBos = "<|begin_of_text|>";
constexpr std::string_view kStartHeader = "<|start_header_id|>";
constexpr std::string_view kEndHeader = "<|end_header_id|>";
constexpr std::string_view kEot = "<|eot_id|>";

std::string_view trimmed_content(const ChatMessage& m) {
  check_utf8(m.content);
  return utf8::trim_whitespace(m.content);
}
}  // namespace

std::string format_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string text;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) text += kBos;
    text += kStartHeader;
    text += messages[i].role;
    text += kEndHeader;
    text += "\n\n";
    text += trimmed_content(messages[i]);
    text += kEot;
  }
  if (add_generation_prompt) {
    text += kStartHeader;
    text += "assistant";
    text += kEndHeader;
    text += "\n\n";
  }
  return text;
}

namespace {

constexpr std::string_view kGemmaBos = "<bos>";
constexpr std::string_view kStartOfTurn = "<start_of_turn>";
constexpr std::string_view kEndOfTurn = "<end_of_turn>";

// One turn of Gemma 3's template: the role as written, and the text of the turn (the folded
// system prompt, then the trimmed content).
struct GemmaTurn {
  std::string_view role;
  std::string text;
};

// Gemma 3's template logic: the system prompt folded into the first user turn, roles checked.
std::vector<GemmaTurn> gemma_turns(const std::vector<ChatMessage>& messages) {
  std::string first_user_prefix;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    check_utf8(messages[0].content);
    first_user_prefix = messages[0].content + "\n\n";  // not trimmed, as the template does
    first = 1;
  }
  std::vector<GemmaTurn> turns;
  for (size_t i = first; i < messages.size(); ++i) {
    const bool user_turn = (i - first) % 2 == 0;
    if ((messages[i].role == "user") != user_turn) {
      throw TokenizerError(
          "chat message " + std::to_string(i) + " has role \"" + messages[i].role +
          "\" where Gemma's template expects " + (user_turn ? "\"user\"" : "a reply (\"assistant\")") +
          ": after an optional first system message, roles must alternate user, assistant, user, "
          "...");
    }
    GemmaTurn turn;
    turn.role = messages[i].role == "assistant" ? std::string_view("model")
                                                : std::string_view(messages[i].role);
    if (i == first) turn.text = first_user_prefix;
    turn.text += trimmed_content(messages[i]);
    turns.push_back(std::move(turn));
  }
  return turns;
}

}  // namespace

std::string format_gemma_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string text(kGemmaBos);
  for (const GemmaTurn& turn : gemma_turns(messages)) {
    text += kStartOfTurn;
    text += turn.role;
    text += '\n';
    text += turn.text;
    text += kEndOfTurn;
    text += '\n';
  }
  if (add_generation_prompt) {
    text += kStartOfTurn;
    text += "model\n";
  }
  return text;
}

std::vector<int32_t> Tokenizer::encode_chat(const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt) const {
  if (style() == Style::kSentencePiece) {
    const int32_t start = special_id(kStartOfTurn);
    const int32_t end = special_id(kEndOfTurn);
    // As in the Llama branch below, each stretch between control tokens is encoded as one text,
    // just as the formatted string would be with special tokens allowed.
    std::vector<int32_t> ids{bos_id()};
    auto append_text = [&](std::string_view text) {
      std::vector<int32_t> part = encode(text);
      ids.insert(ids.end(), part.begin(), part.end());
    };
    const std::vector<GemmaTurn> turns = gemma_turns(messages);
    for (size_t i = 0; i < turns.size(); ++i) {
      if (i > 0) append_text("\n");  // after the previous <end_of_turn>
      ids.push_back(start);
      append_text(std::string(turns[i].role) + "\n" + turns[i].text);
      ids.push_back(end);
    }
    if (!turns.empty()) append_text("\n");
    if (add_generation_prompt) {
      ids.push_back(start);
      append_text("model\n");
    }
    return ids;
  }
  const int32_t start_header = special_id(kStartHeader);
  const int32_t end_header = special_id(kEndHeader);
  const int32_t eot = special_id(kEot);
  // The text between two special tokens is one segment, exactly as when the formatted string
  // is encoded with special tokens allowed: "\n\n" and the content are encoded together.
  std::vector<int32_t> ids;
  auto append_text = [&](std::string_view text) {
    std::vector<int32_t> part = encode(text);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) ids.push_back(bos_id());
    ids.push_back(start_header);
    append_text(messages[i].role);
    ids.push_back(end_header);
    append_text("\n\n" + std::string(trimmed_content(messages[i])));
    ids.push_back(eot);
  }
  if (add_generation_prompt) {
    ids.push_back(start_header);
    append_text("assistant");
    ids.push_back(end_header);
    append_text("\n\n");
  }
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Streaming decode
// ---------------------------------------------------------------------------------------------
std::string StreamDecoder::push(int32_t id) {
  return push_bytes(tokenizer_->token_bytes(id));
}

std::string StreamDecoder::push_bytes(std::string_view bytes) {
  pending_.append(bytes);
  std::string text;
  const size_t used = utf8::append_lossy(text, pending_, /*keep_incomplete_tail=*/true);
  pending_.erase(0, used);
  return text;
}

std::string StreamDecoder::flush() {
  std::string text;
  utf8::append_lossy(text, pending_, /*keep_incomplete_tail=*/false);
  pending_.clear();
  return text;
}

}  // namespace clockwork
