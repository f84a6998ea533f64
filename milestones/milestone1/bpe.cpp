/// @file bpe.cpp
/// Milestone 1: the heart of Llama 3's tokenizer, text → pieces → token ids.
///
/// The framework (harness/model/tokenizer.h) reads the tokenizer files, cuts special tokens such
/// as <|begin_of_text|> out of the text when they are allowed, and then calls split_pieces on
/// each stretch of ordinary text and merge_piece on each piece. The contract is in
/// kernels/tokenizer_steps.h; the tests are in tests/test_bpe.cpp.
#include "kernels/tokenizer_steps.h"

#include <functional>
#include <queue>

namespace clockwork::tokenizer_steps {

void split_pieces(const PieceRegex& regex, std::string_view text, std::vector<std::string_view>& pieces) {
  // BEGIN SOLUTION(m1): Walk through `text` with regex.find(text, pos), starting at pos = 0:
  // each match is one piece; text the regex skipped before a match, or left after the last
  // match, is a piece too, so that no byte is lost. Do not split by hand (on spaces, say): the
  // regex is what keeps " world" together, cuts "2024" into "202" and "4", and keeps "'s" apart.
  size_t pos = 0;
  while (pos < text.size()) {
    const std::optional<PieceRegex::Match> m = regex.find(text, pos);
    if (!m) {
      pieces.push_back(text.substr(pos));
      return;
    }
    if (m->begin > pos) pieces.push_back(text.substr(pos, m->begin - pos));
    pieces.push_back(text.substr(m->begin, m->end - m->begin));
    pos = m->end;
  }
  // STUB: (void)regex; (void)text; (void)pieces;
  // END SOLUTION
}

void merge_piece(const MergeTable& table, std::string_view piece, std::vector<int32_t>& out) {
  // BEGIN SOLUTION(m1): Byte-level BPE. Start with one token per byte, table.byte_token(b)
  // (not the byte value: the vocabulary numbers bytes in its own order). Then, while some
  // adjacent pair (a, b) has a merge, replace the pair whose table.merge(a, b)->rank is lowest
  // (the leftmost one if several pairs share it) by its merged id, and look again. Merging the
  // first mergeable pair from the left instead gives other tokens. Append the final ids to
  // `out`. A loop over all pairs per merge is fine for words; a piece can be thousands of bytes
  // (a long run of letters), where keeping candidate pairs in a priority queue pays off.
  //
  // Part i starts at byte i of the piece; a merge keeps the left part and unlinks the right
  // one. Candidates are kept in a min-heap ordered by (rank, position); one whose parts have
  // changed since it was pushed is stale and skipped when popped.
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<int32_t> ids(n), next(n), prev(n);
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = table.byte_token(static_cast<unsigned char>(piece[i]));
    next[i] = i + 1;  // n marks the end
    prev[i] = i - 1;  // -1 marks the start
  }
  struct Candidate {
    int32_t rank, left, right, left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right >= n) return;
    if (auto m = table.merge(ids[left], ids[right])) {
      heap.push({m->rank, left, right, ids[left], ids[right], m->id});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const bool current = next[c.left] == c.right && ids[c.left] == c.left_id && ids[c.right] == c.right_id;
    if (!current) continue;
    ids[c.left] = c.merged_id;
    next[c.left] = next[c.right];
    if (next[c.right] < n) prev[next[c.right]] = c.left;
    ids[c.right] = -1;  // unlinked: every heap entry naming it is now stale
    next[c.right] = -1;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  for (int32_t i = 0; i < n; i = next[i]) out.push_back(ids[i]);
  // STUB: (void)table; (void)piece; (void)out;
  // END SOLUTION
}

}  // namespace clockwork::tokenizer_steps
