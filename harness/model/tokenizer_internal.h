// Internals shared by the tokenizer's source files; not part of the public interface.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "harness/model/tokenizer.h"

namespace clockwork {

// Hashing that lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using BytesToId = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Tokenizer::Impl {
  // Every token's bytes, indexed by id: the base vocabulary, then the special tokens' text.
  // kSentencePiece: what each token decodes to ('▁' read as a space, <0xNN> as the byte NN).
  std::vector<std::string> tokens;
  int32_t special_base = 0;
  MergeRule rule = MergeRule::kTokenRanks;
  Style style = Style::kByteLevel;

  BytesToId base_ids;                   // base-vocabulary bytes → id
  BytesToId special_ids;                // special token text → id
  std::array<int32_t, 256> byte_ids{};  // id of each single-byte token

  // kMergeList only: (left id, right id) → (rank, merged id), and the list in rank order.
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  std::unordered_map<uint64_t, Merge> merges;
  std::vector<std::pair<int32_t, int32_t>> merge_list;

  // Special tokens grouped by first byte, longest first, for the literal scan in encode().
  std::array<std::vector<int32_t>, 256> specials_by_first_byte;

  // kSentencePiece only (see tokenizer_sentencepiece.cpp). `pieces` holds each base-vocabulary
  // token as model.vocab spells it and `piece_ids` the reverse; `added` lists the added tokens
  // cut out of the text before BPE, and `special` marks those with "special": true.
  std::vector<std::string> pieces;
  BytesToId piece_ids;
  std::vector<int32_t> added;
  std::vector<bool> special;
  std::array<int32_t, 256> fallback_ids{};  // id of <0xNN> for each byte NN
  bool ignore_merges = false;               // a piece that is a token is taken whole

  // Piece → ids. Bounded: cleared when full, which keeps memory flat on adversarial input.
  struct Cache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  std::unique_ptr<Cache> cache = std::make_unique<Cache>();

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
};

/// Builds the lookup tables from `impl.tokens`, `special_base`, `rule` and (for kMergeList)
/// `merge_list`, checking that the vocabulary is usable: unique non-empty tokens, all 256 single
/// bytes present, merges that produce tokens. `origin` prefixes error messages.
Tokenizer make_tokenizer(std::unique_ptr<Tokenizer::Impl> impl, std::string_view origin);

/// GPT-2's byte-level alphabet: each byte is shown as a printable code point (bytes that are
/// already printable map to themselves, the others to U+0100 and up).
uint32_t byte_to_unicode(unsigned char b);

/// kSentencePiece: fills `fallback_ids`, `merges`, `special_ids`, `specials_by_first_byte` from
/// `pieces`, `piece_ids`, `merge_list` and `added`, checking that every byte has its <0xNN>
/// token. make_tokenizer() calls it for that style.
void build_sentencepiece_tables(Tokenizer::Impl& impl, std::string_view origin);

/// kSentencePiece encoding of valid UTF-8 `text` (see tokenizer.h), appended to `out`.
void encode_sentencepiece(const Tokenizer::Impl& impl, std::string_view text, bool allow_special,
                          std::vector<int32_t>& out);
/// Inverse of byte_to_unicode; -1 if the code point is not in the alphabet.
int byte_from_unicode(uint32_t cp);

std::string base64_encode(std::string_view bytes);
/// Strict base64 (standard alphabet, '=' padding); false if `text` is not valid base64.
bool base64_decode(std::string_view text, std::string& out);

}  // namespace clockwork
