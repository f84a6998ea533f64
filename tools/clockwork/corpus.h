// The built-in English text that tiny-model trains its byte-level BPE tokenizer on.
#pragma once

#include <string_view>

namespace clockwork::cli {

/// About 10 KB of plain English prose (ASCII).
std::string_view training_corpus();

}  // namespace clockwork::cli
