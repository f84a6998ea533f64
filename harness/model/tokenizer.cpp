// Tokenizer core: the pre-tokenizer regex, byte-level BPE, decoding and the chat template.
// File formats are in tokenizer_files.cpp, vocabulary training in tokenizer_train.cpp.
#include "harness/model/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <climits>
#include <queue>
#include <cstdio>
#include <utility>

#include "harness/model/tokenizer_internal.h"
#include "harness/model/tokenizer_utf8.h"

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

// kLlama3SplitPattern with \s and \S replaced by kWhiteSpace, inside and outside [...] classes.
std::string pcre2_split_pattern() {
  const std::string_view p = kLlama3SplitPattern;
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S') {
        throw TokenizerError("pre-tokenizer regex: \\S inside a character class is not supported");
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

class SplitRegex {
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

  // Calls on_piece for each consecutive piece of `text`, which must be valid UTF-8.
  template <typename F>
  void split(std::string_view text, F&& on_piece) const {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
    if (!match) throw TokenizerError("out of memory for PCRE2 match data");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    uint32_t options = PCRE2_NO_UTF_CHECK;  // the caller validated the text
    size_t pos = 0;
    while (pos < text.size()) {
      int rc = pcre2_match(code_, subject, text.size(), pos, options, match.get(), nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !(options & PCRE2_NO_JIT)) {
        options |= PCRE2_NO_JIT;  // very long runs can exhaust the JIT stack; the interpreter copes
        continue;
      }
      if (rc == PCRE2_ERROR_NOMATCH) {
        on_piece(text.substr(pos));
        return;
      }
      if (rc < 0) throw TokenizerError("pre-tokenizer regex failed: " + pcre2_message(rc));
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
      size_t start = ovector[0], end = ovector[1];
      // Every character matches some alternative, so gaps should not occur; if one did, it is
      // kept as its own piece so that no byte of the text is lost.
      if (start > pos) on_piece(text.substr(pos, start - pos));
      if (end == start) {  // an empty match; the pattern has none, but never loop forever
        if (start == text.size()) return;
        end = start + utf8::next(text, start).length;
      }
      on_piece(text.substr(start, end - start));
      pos = end;
    }
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
  std::vector<std::string> pieces;
  split_regex().split(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

// ---------------------------------------------------------------------------------------------
// Building the lookup tables
// ---------------------------------------------------------------------------------------------
Tokenizer make_tokenizer(std::unique_ptr<Tokenizer::Impl> impl, std::string_view origin) {
  auto fail = [&](const std::string& what) {
    throw TokenizerError(std::string(origin) + ": " + what);
  };
  Tokenizer::Impl& t = *impl;
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

// Byte-level BPE of one piece: start from single bytes and repeatedly merge the adjacent pair of
// lowest rank (the leftmost one on ties) until no pair can merge.
//
// The parts live in a linked list and the candidate pairs in a min-heap keyed by (rank, position),
// so a long piece costs O(n log n) rather than O(n^2). A heap entry is stale once either of its
// parts has changed; stale entries are skipped when popped.
void bpe(const Tokenizer::Impl& t, std::string_view piece, std::vector<int32_t>& out) {
  if (piece.empty()) return;
  // A piece that is already a token is taken whole (tiktoken does this; Llama 3's
  // tokenizer.json says so with "ignore_merges": true).
  if (auto it = t.base_ids.find(piece); it != t.base_ids.end()) {
    out.push_back(it->second);
    return;
  }
  // Part i starts at byte i of the piece; a merge keeps the left part and removes the right.
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<int32_t> ids(n), next(n), prev(n);
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = t.byte_ids[static_cast<unsigned char>(piece[i])];
    next[i] = i + 1;  // n marks the end
    prev[i] = i - 1;  // -1 marks the start
  }
  struct Candidate {
    int32_t rank, left, right, left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  std::string scratch;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right >= n) return;
    auto merge = find_merge(t, ids[left], ids[right], scratch);
    if (merge.id >= 0) heap.push({merge.rank, left, right, ids[left], ids[right], merge.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const bool still_adjacent =
        next[c.left] == c.right && ids[c.left] == c.left_id && ids[c.right] == c.right_id;
    if (!still_adjacent) continue;
    ids[c.left] = c.merged_id;
    next[c.left] = next[c.right];
    if (next[c.right] < n) prev[next[c.right]] = c.left;
    ids[c.right] = -1;  // removed: any heap entry naming it is now stale
    next[c.right] = -1;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  for (int32_t i = 0; i < n; i = next[i]) out.push_back(ids[i]);
}

constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 64;

// Pre-tokenizes and BPE-encodes text that holds no special tokens.
void encode_ordinary(const Tokenizer::Impl& t, std::string_view text, std::vector<int32_t>& out) {
  split_regex().split(text, [&](std::string_view piece) {
    const bool cacheable = piece.size() <= kCacheMaxPieceBytes;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(t.cache->mutex);
      auto it = t.cache->map.find(piece);
      if (it != t.cache->map.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
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
  });
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special, bool bos) const {
  check_utf8(text);
  const Impl& t = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (bos) ids.push_back(bos_id());
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
  return id >= impl_->special_base && id < vocab_size();
}
Tokenizer::MergeRule Tokenizer::merge_rule() const {
  return impl_->rule;
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

std::vector<int32_t> Tokenizer::encode_chat(const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt) const {
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
