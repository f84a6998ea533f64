// UTF-8 decoding helpers shared by the tokenizer: validation with a precise reason, lossy
// decoding (invalid bytes → U+FFFD) and whitespace trimming for the chat template.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace clockwork::utf8 {

enum class Status {
  kOk,          ///< a whole character of `length` bytes
  kIncomplete,  ///< the text ends inside a character whose `length` bytes so far are valid
  kInvalid,     ///< `length` bytes (>= 1) can never start a valid character
};

struct Step {
  Status status;
  uint32_t code_point;  ///< valid only for kOk
  size_t length;        ///< bytes consumed; for kInvalid the maximal invalid subpart
  std::string problem;  ///< why the bytes are invalid or incomplete (empty for kOk)
};

/// Decodes the character starting at s[pos] (pos < s.size()). Follows the Unicode table of
/// well-formed byte sequences: overlong forms, surrogates and values above U+10FFFF are invalid.
Step next(std::string_view s, size_t pos);

/// Offset and reason of the first invalid or truncated sequence, if any.
struct Problem {
  size_t offset;
  std::string what;
};
std::optional<Problem> find_problem(std::string_view s);

/// Appends the UTF-8 encoding of a scalar value (cp must not be a surrogate or > U+10FFFF).
void append(std::string& out, uint32_t cp);

/// Appends `bytes` to `out` with each maximal invalid subpart replaced by U+FFFD. If
/// keep_incomplete_tail, a valid but unfinished character at the end is not consumed; returns the
/// number of bytes consumed.
size_t append_lossy(std::string& out, std::string_view bytes, bool keep_incomplete_tail);

/// `s` without leading and trailing whitespace, with Python's str.isspace() meaning (which is
/// what Jinja's `trim` filter uses). `s` must be valid UTF-8.
std::string_view trim_whitespace(std::string_view s);

}  // namespace clockwork::utf8
