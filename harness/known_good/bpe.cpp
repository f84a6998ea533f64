// Known-good tokenizer steps (milestones/milestone1/bpe.cpp's functions), for the framework's
// own programs and tests, which must tokenize whatever state the student's file is in.
#include <cstddef>
#include <set>
#include <utility>

#include "kernels/tokenizer_steps.h"

namespace clockwork::tokenizer_steps {

void split_pieces(const PieceRegex& regex, std::string_view text, std::vector<std::string_view>& pieces) {
  size_t at = 0;
  while (at < text.size()) {
    const std::optional<PieceRegex::Match> m = regex.find(text, at);
    const size_t begin = m ? m->begin : text.size();
    if (begin > at) pieces.push_back(text.substr(at, begin - at));  // text no match covers
    if (!m) break;
    pieces.push_back(text.substr(m->begin, m->end - m->begin));
    at = m->end;
  }
}

void merge_piece(const MergeTable& table, std::string_view piece, std::vector<int32_t>& out) {
  // Tokens in a doubly linked list over the byte positions (a token keeps the position of its
  // first byte), and every adjacent pair that can merge in an ordered set keyed by (rank, position):
  // its first element is the lowest rank, leftmost on a tie. Each merge changes two pairs, so a
  // piece of n bytes takes O(n log n), however long.
  const int n = static_cast<int>(piece.size());
  std::vector<int32_t> token(static_cast<size_t>(n));
  std::vector<int> left(static_cast<size_t>(n)), right(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    token[i] = table.byte_token(static_cast<unsigned char>(piece[i]));
    left[i] = i - 1;
    right[i] = i + 1;
  }
  std::set<std::pair<int32_t, int>> pairs;  // (rank, position of the pair's left token)
  std::vector<int32_t> rank_at(static_cast<size_t>(n), -1), merged_at(static_cast<size_t>(n), -1);
  const auto enter = [&](int i) {  // the pair starting at token i, if it merges
    if (i < 0 || right[i] >= n) return;
    if (const std::optional<MergeTable::Merge> m = table.merge(token[i], token[right[i]])) {
      rank_at[i] = m->rank;
      merged_at[i] = m->id;
      pairs.emplace(m->rank, i);
    }
  };
  const auto leave = [&](int i) {
    if (i >= 0 && rank_at[i] >= 0) pairs.erase({rank_at[i], i});
    if (i >= 0) rank_at[i] = -1;
  };
  for (int i = 0; i + 1 < n; ++i) enter(i);
  while (!pairs.empty()) {
    const int i = pairs.begin()->second;
    const int gone = right[i];
    leave(left[i]);
    leave(i);
    leave(gone);
    token[i] = merged_at[i];
    right[i] = right[gone];
    if (right[i] < n) left[right[i]] = i;
    enter(left[i]);
    enter(i);
  }
  for (int i = 0; i < n; i = right[i]) out.push_back(token[i]);
}

}  // namespace clockwork::tokenizer_steps
