// Fuzz target: tokenizer.json. An accepted tokenizer must encode a fixed text to valid ids that
// decode back to the text (a byte-level BPE loses nothing).
#include <cstddef>
#include <cstdint>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

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
  const std::string sample = "Hello, world! It's 2024:  \xce\xb3 = 0.5\n\tabcabc <|eot_id|>";
  const std::vector<int32_t> ids = tokenizer->encode(sample);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer->vocab_size())
      fuzz::crash("encode() gave id " + std::to_string(id));
  }
  if (tokenizer->decode(ids) != sample) fuzz::crash("decode(encode(text)) != text");
  return 0;
}
