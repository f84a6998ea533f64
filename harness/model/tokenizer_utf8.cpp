#include "harness/model/tokenizer_utf8.h"

#include <cstdio>

namespace clockwork::utf8 {
namespace {

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

}  // namespace

Step next(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {Status::kOk, b0, 1, {}};
  if (is_continuation(b0)) {
    return {Status::kInvalid, 0, 1, "unexpected continuation byte " + hex_byte(b0)};
  }
  if (b0 == 0xC0 || b0 == 0xC1) {
    return {Status::kInvalid, 0, 1, "overlong encoding (lead byte " + hex_byte(b0) + ")"};
  }
  if (b0 >= 0xF5) {
    const char* why = b0 <= 0xF7 ? " starts a code point above U+10FFFF" : " never occurs in UTF-8";
    return {Status::kInvalid, 0, 1, "byte " + hex_byte(b0) + why};
  }

  const size_t need = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  // The second byte's range is narrower after some lead bytes: that is what rules out overlong
  // forms (E0, F0), surrogates (ED) and values above U+10FFFF (F4).
  unsigned char lo = 0x80, hi = 0xBF;
  const char* narrow_problem = nullptr;
  if (b0 == 0xE0) lo = 0xA0, narrow_problem = "overlong 3-byte encoding";
  if (b0 == 0xED) hi = 0x9F, narrow_problem = "UTF-16 surrogate (U+D800..U+DFFF) encoded in UTF-8";
  if (b0 == 0xF0) lo = 0x90, narrow_problem = "overlong 4-byte encoding";
  if (b0 == 0xF4) hi = 0x8F, narrow_problem = "code point above U+10FFFF";

  uint32_t cp = b0 & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= s.size()) {
      return {
          Status::kIncomplete, 0, i,
          "truncated sequence: the text ends inside a " + std::to_string(need) + "-byte character"};
    }
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const bool in_range = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    if (!in_range) {
      if (i == 1 && narrow_problem != nullptr && is_continuation(b)) {
        return {Status::kInvalid, 0, 1, narrow_problem};
      }
      return {Status::kInvalid, 0, i,
              "truncated sequence: a " + std::to_string(need) + "-byte character is cut off by " +
                  hex_byte(b) + " at offset " + std::to_string(pos + i)};
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Status::kOk, cp, need, {}};
}

std::optional<Problem> find_problem(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    // Fast path for ASCII, which is most of any prompt.
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    Step step = next(s, pos);
    if (step.status != Status::kOk) return Problem{pos, std::move(step.problem)};
    pos += step.length;
  }
  return std::nullopt;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t append_lossy(std::string& out, std::string_view bytes, bool keep_incomplete_tail) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  size_t pos = 0;
  while (pos < bytes.size()) {
    Step step = next(bytes, pos);
    switch (step.status) {
      case Status::kOk:
        out.append(bytes.substr(pos, step.length));
        break;
      case Status::kIncomplete:
        if (keep_incomplete_tail) return pos;
        out.append(kReplacement);
        break;
      case Status::kInvalid:
        out.append(kReplacement);
        break;
    }
    pos += step.length;
  }
  return pos;
}

namespace {

// Python's str.isspace(): Unicode categories Zs, Zl, Zp plus the bidi classes B, S, WS.
bool is_python_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace

std::string_view trim_whitespace(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    Step step = next(s, begin);
    if (step.status != Status::kOk || !is_python_space(step.code_point)) break;
    begin += step.length;
  }
  size_t end = s.size();
  while (end > begin) {
    // Step back to the first byte of the last character.
    size_t start = end - 1;
    while (start > begin && is_continuation(static_cast<unsigned char>(s[start]))) --start;
    Step step = next(s, start);
    if (step.status != Status::kOk || start + step.length != end ||
        !is_python_space(step.code_point)) {
      break;
    }
    end = start;
  }
  return s.substr(begin, end - begin);
}

}  // namespace clockwork::utf8
