// Shared by the parser fuzz targets: a loader may refuse an input only with one of the project's
// error types and a message that starts with the file's name (or, for a folder, a path inside it);
// anything else (another exception, a message that names nothing) ends the run as a crash, so
// libFuzzer keeps the input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "harness/model/safetensors.h"
#include "harness/model/tokenizer.h"
#include "kernels/model_config.h"

namespace clockwork::fuzz {

[[noreturn]] inline void crash(const std::string& what) {
  std::fprintf(stderr, "fuzz target: %s\n", what.c_str());
  std::abort();
}

// Runs `load`; returns true when it succeeded, false when it refused the input with an error
// whose message starts with `prefix` ("config.json: ", or "<folder>/" for a checkpoint folder).
template <typename F>
bool loads(std::string_view prefix, F&& load) {
  auto check = [&](const char* type, const std::exception& e) {
    const std::string_view message = e.what();
    if (!message.starts_with(prefix)) {
      crash(std::string(type) + " does not start with \"" + std::string(prefix) +
            "\": " + std::string(message.substr(0, 500)));
    }
  };
  try {
    load();
    return true;
  } catch (const CheckpointError& e) {
    check("CheckpointError", e);
  } catch (const ConfigError& e) {
    check("ConfigError", e);
  } catch (const TokenizerError& e) {
    check("TokenizerError", e);
  } catch (const std::exception& e) {
    crash(std::string("an exception that is not one of the loaders' errors escaped: ") + e.what());
  }
  return false;
}

// An accepted tokenizer must encode a fixed text to ids inside its vocabulary that decode back to
// the text (a byte-level BPE loses nothing, and neither does a SentencePiece-style one with byte
// fallback: the text holds no "<0xNN>" that merges could turn into a byte token).
inline void check_round_trip(const Tokenizer& tokenizer) {
  const std::string sample = "Hello, world! It's 2024:  \xce\xb3 = 0.5\n\tabcabc <|eot_id|>";
  const std::vector<int32_t> ids = tokenizer.encode(sample);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) crash("encode() gave id " + std::to_string(id));
  }
  if (tokenizer.decode(ids) != sample) crash("decode(encode(text)) != text");
}

}  // namespace clockwork::fuzz
