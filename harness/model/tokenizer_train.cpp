// A small byte-level BPE trainer, used to make tiny tokenizers (and checkpoints) for tests.
// Plain counting over the distinct pieces of the corpus: slow for big corpora, clear to read.
#include <map>
#include <unordered_map>

#include "harness/model/tokenizer.h"
#include "harness/model/tokenizer_internal.h"

namespace clockwork {

Tokenizer train_small_bpe(std::string_view corpus, int num_merges) {
  if (num_merges < 0) throw TokenizerError("train_small_bpe: num_merges must be >= 0");

  // Each distinct piece once, with how often it occurs; BPE never merges across pieces.
  std::map<std::string, int64_t> piece_counts;  // ordered, so training is deterministic
  for (std::string& piece : pre_tokenize(corpus)) ++piece_counts[std::move(piece)];
  struct Word {
    std::vector<int32_t> symbols;
    int64_t count;
  };
  std::vector<Word> words;
  words.reserve(piece_counts.size());
  for (const auto& [piece, count] : piece_counts) {
    Word w{{}, count};
    for (char c : piece) w.symbols.push_back(static_cast<unsigned char>(c));
    words.push_back(std::move(w));
  }

  auto impl = std::make_unique<Tokenizer::Impl>();
  for (int b = 0; b < 256; ++b) impl->tokens.emplace_back(1, static_cast<char>(b));
  std::unordered_map<std::string, int32_t> ids;
  for (int32_t b = 0; b < 256; ++b) ids.emplace(impl->tokens[b], b);

  int learned = 0;
  while (learned < num_merges) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pair_counts;
    for (const Word& w : words) {
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
        pair_counts[{w.symbols[i], w.symbols[i + 1]}] += w.count;
      }
    }
    // Most frequent pair; the map's order makes the smallest (left, right) win ties.
    auto best = pair_counts.end();
    for (auto it = pair_counts.begin(); it != pair_counts.end(); ++it) {
      if (best == pair_counts.end() || it->second > best->second) best = it;
    }
    if (best == pair_counts.end() || best->second < 2) break;  // nothing worth merging

    const auto [left, right] = best->first;
    const std::string merged = impl->tokens[left] + impl->tokens[right];
    // Two different pairs can spell the same bytes ("a"+"bc" and "ab"+"c"); the token exists
    // already then, and only the corpus is updated.
    auto [it, is_new] = ids.emplace(merged, static_cast<int32_t>(impl->tokens.size()));
    if (is_new) {
      impl->tokens.push_back(merged);
      ++learned;
    }
    const int32_t merged_id = it->second;
    for (Word& w : words) {
      std::vector<int32_t> out;
      out.reserve(w.symbols.size());
      for (size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == left && w.symbols[i + 1] == right) {
          out.push_back(merged_id);
          ++i;
        } else {
          out.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(out);
    }
  }

  impl->special_base = static_cast<int32_t>(impl->tokens.size());
  for (std::string& name : llama3_special_tokens()) impl->tokens.push_back(std::move(name));
  impl->rule = Tokenizer::MergeRule::kTokenRanks;
  return make_tokenizer(std::move(impl), "train_small_bpe");
}

}  // namespace clockwork
