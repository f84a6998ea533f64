// Known-good tokenizer steps (milestones/milestone1/bpe.cpp's functions), for the framework's
// own programs and tests, which must tokenize whatever state the student's file is in.
#include <cstddef>
#include <limits>

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
  std::vector<int32_t> ids;
  for (const char c : piece) ids.push_back(table.byte_token(static_cast<unsigned char>(c)));
  for (;;) {
    // The leftmost adjacent pair of lowest rank; none left: done.
    size_t best = ids.size();
    MergeTable::Merge merge{std::numeric_limits<int32_t>::max(), 0};
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const std::optional<MergeTable::Merge> m = table.merge(ids[i], ids[i + 1]);
      if (m && m->rank < merge.rank) {
        merge = *m;
        best = i;
      }
    }
    if (best == ids.size()) break;
    ids[best] = merge.id;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace clockwork::tokenizer_steps
