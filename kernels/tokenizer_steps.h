/// @file tokenizer_steps.h
/// The two steps of Llama 3's tokenizer that students write in milestones/milestone1/bpe.cpp:
/// cutting text into pieces with the pre-tokenizer regex, and byte-level BPE on one piece.
/// The framework's tokenizer (harness/model/tokenizer.h) reads the files, keeps the byte
/// alphabet and the merge ranks, cuts out special tokens, and calls these two functions. Like
/// steps.h, this header is a contract: the framework implements the two interfaces below and
/// links the student's definitions of the functions; it never includes a milestone file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace clockwork::tokenizer_steps {

/// The pre-tokenizer regex (kLlama3SplitPattern of harness/model/tokenizer.h), compiled by the
/// framework.
class PieceRegex {
 public:
  struct Match {
    size_t begin;  ///< byte offset of the first byte of the match in `text`
    size_t end;    ///< byte offset one past its last byte (end > begin: the pattern matches no empty text)
  };
  /// The leftmost match that starts at or after byte `from` of `text` (from < text.size(),
  /// on a character boundary), or std::nullopt if there is none.
  virtual std::optional<Match> find(std::string_view text, size_t from) const = 0;

 protected:
  ~PieceRegex() = default;
};

/// What BPE needs from the vocabulary.
class MergeTable {
 public:
  /// A merge of two adjacent tokens: `rank` orders merges (lower merges first), `id` is the
  /// token they become.
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  /// The id of the token holding the single byte `b`. Not `b` itself: Llama 3's vocabulary lists
  /// the 256 bytes in the order of GPT-2's byte alphabet ('!' is token 0, 'A' token 32). Treat ids
  /// as opaque: for Gemma 3's tokenizer, which merges characters rather than bytes, the table
  /// answers with working ids above the vocabulary that its first merges turn into characters.
  virtual int32_t byte_token(unsigned char b) const = 0;
  /// The merge of token `left` followed by token `right`, or std::nullopt if they never merge.
  virtual std::optional<Merge> merge(int32_t left, int32_t right) const = 0;

 protected:
  ~MergeTable() = default;
};

/// Milestone 1. Appends to `pieces` the pieces of `text` in order: every match of `regex`, and
/// any text between two matches (or after the last one) as a piece of its own, so that the
/// pieces concatenated give back `text`. `text` is valid UTF-8 without special tokens.
void split_pieces(const PieceRegex& regex, std::string_view text, std::vector<std::string_view>& pieces);

/// Milestone 1. Appends to `out` the token ids of one piece (non-empty) by byte-level BPE: start
/// from the token of each byte, then repeatedly merge the adjacent pair of lowest rank (the
/// leftmost such pair on a tie) until no adjacent pair can merge.
void merge_piece(const MergeTable& table, std::string_view piece, std::vector<int32_t>& out);

}  // namespace clockwork::tokenizer_steps
