// Gemma 3's SentencePiece-style BPE (Tokenizer::Style::kSentencePiece), encoding side.
//
// The merge loop is the student's merge_piece (kernels/tokenizer_steps.h), the same one Llama 3
// uses: HuggingFace's BPE merges the adjacent pair of lowest rank, leftmost on a tie, in both
// families. What differs is where BPE starts. Llama 3 starts from one token per byte; Gemma starts
// from one token per character, and a character the vocabulary lacks becomes the <0xNN> tokens of
// its bytes. merge_piece starts from bytes, so the table below lets it build the characters first:
//
//   * an ASCII byte is the token of that character (or its <0xNN> token if there is none);
//   * any other byte, and every incomplete start of a multi-byte character, is a stand-in id
//     above the vocabulary (kStandIn) that encodes its bytes;
//   * a stand-in merges with the next continuation byte at rank 0, below every real merge (whose
//     ranks are shifted up by one), into the next stand-in or, once the character is complete,
//     into the character's token when the vocabulary has one;
//   * stand-ins never merge with real tokens.
//
// So merge_piece first assembles every character the vocabulary knows, then runs BPE over them
// exactly as from a list of characters. Stand-ins left at the end are characters without a token:
// each becomes the <0xNN> tokens of its bytes (byte fallback). Byte fallback tokens cannot take
// part in later merges this way; the loader refuses a file whose merges use the <0xNN> token of a
// non-ASCII byte (none is known to: SentencePiece never merges byte pieces).
#include <algorithm>
#include <climits>
#include <cstdio>

#include "harness/model/tokenizer_internal.h"
#include "harness/model/tokenizer_utf8.h"
#include "kernels/tokenizer_steps.h"

namespace clockwork {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, '▁'

// Stand-in ids: first + (length << 24 | bytes), for 1 to 3 bytes packed big-endian.
struct StandIn {
  int32_t first;  // the vocabulary size: no real token has an id this high
  bool is(int32_t id) const { return id >= first; }
  int32_t make(uint32_t length, uint32_t bytes) const {
    return first + static_cast<int32_t>((length << 24) | bytes);
  }
  uint32_t length(int32_t id) const { return static_cast<uint32_t>(id - first) >> 24; }
  uint32_t bytes(int32_t id) const { return static_cast<uint32_t>(id - first) & 0xFFFFFFu; }
};

// The UTF-8 length a lead byte announces (the text is valid, so only real leads reach here).
uint32_t utf8_length(uint32_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The vocabulary as the student's merge_piece sees it for a kSentencePiece tokenizer.
class SentencePieceMergeTable final : public tokenizer_steps::MergeTable {
 public:
  explicit SentencePieceMergeTable(const Tokenizer::Impl& t)
      : t_(t), stand_in_{static_cast<int32_t>(t.tokens.size())} {
    for (int b = 0; b < 0x80; ++b) {
      const char c = static_cast<char>(b);
      auto it = t.piece_ids.find(std::string_view(&c, 1));
      ascii_[b] = it != t.piece_ids.end() ? it->second : t.fallback_ids[b];
    }
  }

  int32_t byte_token(unsigned char b) const override {
    return b < 0x80 ? ascii_[b] : stand_in_.make(1, b);
  }

  std::optional<Merge> merge(int32_t left, int32_t right) const override {
    const bool l = stand_in_.is(left), r = stand_in_.is(right);
    if (!l && !r) {
      if (left < 0 || right < 0) return std::nullopt;
      auto it = t_.merges.find(Tokenizer::Impl::pair_key(left, right));
      if (it == t_.merges.end()) return std::nullopt;
      return Merge{it->second.rank + 1, it->second.id};
    }
    if (!l || !r || stand_in_.length(right) != 1) return std::nullopt;
    const uint32_t cont = stand_in_.bytes(right);
    const uint32_t have = stand_in_.length(left), bytes = stand_in_.bytes(left);
    const uint32_t lead = bytes >> (8 * (have - 1));
    if ((lead & 0xC0) != 0xC0 || (cont & 0xC0) != 0x80 || have >= utf8_length(lead)) {
      return std::nullopt;  // a continuation byte left over from a character without a token
    }
    const uint32_t grown = (bytes << 8) | cont;
    if (have + 1 < utf8_length(lead)) return Merge{0, stand_in_.make(have + 1, grown)};
    char character[4];
    for (uint32_t i = 0; i <= have; ++i) {
      character[i] = static_cast<char>(grown >> (8 * (have - i)));
    }
    auto it = t_.piece_ids.find(std::string_view(character, have + 1));
    if (it == t_.piece_ids.end()) return std::nullopt;  // left as bytes: byte fallback
    return Merge{0, it->second};
  }

  // Appends `id`, or the <0xNN> tokens of a stand-in's bytes.
  void emit(int32_t id, std::vector<int32_t>& out) const {
    if (!stand_in_.is(id)) {
      out.push_back(id);
      return;
    }
    const uint32_t n = stand_in_.length(id), bytes = stand_in_.bytes(id);
    for (uint32_t i = 0; i < n; ++i) {
      out.push_back(t_.fallback_ids[(bytes >> (8 * (n - 1 - i))) & 0xFF]);
    }
  }

 private:
  const Tokenizer::Impl& t_;
  StandIn stand_in_;
  std::array<int32_t, 0x80> ascii_{};
};

// One stretch of text between added tokens: normalized, then BPE.
void encode_segment(const Tokenizer::Impl& t, std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::string piece;
  piece.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      piece += kSpace;
    } else {
      piece += c;
    }
  }
  if (t.ignore_merges) {
    if (auto it = t.piece_ids.find(piece); it != t.piece_ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const SentencePieceMergeTable table(t);
  std::vector<int32_t> ids;
  tokenizer_steps::merge_piece(table, piece, ids);
  for (int32_t id : ids) table.emit(id, out);
}

}  // namespace

void build_sentencepiece_tables(Tokenizer::Impl& t, std::string_view origin) {
  auto fail = [&](const std::string& what) {
    throw TokenizerError(std::string(origin) + ": " + what);
  };
  const auto total = static_cast<int64_t>(t.tokens.size());
  // Stand-in ids go up to total + (4 << 24); they must stay below INT32_MAX.
  if (total > (int64_t{1} << 30)) fail("more than 2^30 tokens; no vocabulary is that large");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = t.piece_ids.find(std::string_view(name));
    if (it == t.piece_ids.end()) {
      fail(std::string("model.vocab: no byte fallback token \"") + name +
           "\"; byte_fallback needs all 256 (<0x00> to <0xFF>)");
    }
    t.fallback_ids[b] = it->second;
  }
  std::vector<bool> non_ascii_fallback(t.tokens.size(), false);
  for (int b = 0x80; b < 256; ++b) non_ascii_fallback[t.fallback_ids[b]] = true;

  t.merges.clear();
  t.merges.reserve(t.merge_list.size());
  for (size_t rank = 0; rank < t.merge_list.size(); ++rank) {
    auto [left, right] = t.merge_list[rank];
    if (non_ascii_fallback[left] || non_ascii_fallback[right]) {
      fail("model.merges[" + std::to_string(rank) + "]: merges the byte fallback token \"" +
           t.pieces[non_ascii_fallback[left] ? left : right] +
           "\"; merges of non-ASCII byte tokens are not supported");
    }
    auto merged = t.piece_ids.find(t.pieces[left] + t.pieces[right]);
    if (merged == t.piece_ids.end()) {
      fail("model.merges[" + std::to_string(rank) + "] produces a piece that is not a token");
    }
    // A repeated pair keeps its first (lowest) rank.
    t.merges.emplace(Tokenizer::Impl::pair_key(left, right),
                     Tokenizer::Impl::Merge{static_cast<int32_t>(rank), merged->second});
  }

  t.special_ids.clear();
  for (auto& group : t.specials_by_first_byte) group.clear();
  for (int32_t id : t.added) {
    const std::string& text = t.tokens[id];
    auto [it, inserted] = t.special_ids.emplace(text, id);
    if (!inserted) {
      fail("added tokens " + std::to_string(it->second) + " and " + std::to_string(id) +
           " are both \"" + text + "\"");
    }
    t.specials_by_first_byte[static_cast<unsigned char>(text[0])].push_back(id);
  }
  for (auto& group : t.specials_by_first_byte) {
    std::stable_sort(group.begin(), group.end(),
                     [&](int32_t a, int32_t b) { return t.tokens[a].size() > t.tokens[b].size(); });
  }
}

void encode_sentencepiece(const Tokenizer::Impl& t, std::string_view text, bool allow_special,
                          std::vector<int32_t>& out) {
  size_t start = 0;  // start of the text not yet encoded
  size_t i = 0;
  while (i < text.size()) {
    int32_t hit = -1;
    for (int32_t id : t.specials_by_first_byte[static_cast<unsigned char>(text[i])]) {
      if ((allow_special || !t.special[id]) && text.substr(i).starts_with(t.tokens[id])) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    encode_segment(t, text.substr(start, i - start), out);
    out.push_back(hit);
    i += t.tokens[hit].size();
    start = i;
  }
  encode_segment(t, text.substr(start), out);
}

}  // namespace clockwork
