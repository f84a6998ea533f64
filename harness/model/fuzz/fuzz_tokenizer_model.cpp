// Fuzz target: tokenizer.model (Meta's `base64 rank` lines), with Llama 3's special tokens
// appended. An accepted tokenizer must encode a fixed text to valid ids that decode back to it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "harness/model/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clockwork;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<Tokenizer> tokenizer;
  if (!fuzz::loads("tokenizer.model:", [&] {
        tokenizer.emplace(Tokenizer::from_tokenizer_model_text(text, "tokenizer.model"));
      })) {
    return 0;
  }
  fuzz::check_round_trip(*tokenizer);
  return 0;
}
