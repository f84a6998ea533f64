// Fuzz target: tokenizer.json, Llama 3's byte-level layout and Gemma 3's SentencePiece-style one
// (the seeds have both). An accepted tokenizer must encode a fixed text to valid ids that decode
// back to the text.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "harness/model/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clockwork;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<Tokenizer> tokenizer;
  if (!fuzz::loads("tokenizer.json: ", [&] {
        tokenizer.emplace(Tokenizer::from_tokenizer_json_text(text, "tokenizer.json"));
      })) {
    return 0;
  }
  fuzz::check_round_trip(*tokenizer);
  return 0;
}
