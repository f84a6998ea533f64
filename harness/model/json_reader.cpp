// The bounded JSON reader (see json_reader.h).
#include "harness/model/json_reader.h"

#include <cstring>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

namespace clockwork {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string with_key(const std::string& origin, const std::string& key_path,
                     const std::string& problem) {
  std::string s = origin + ": ";
  if (!key_path.empty()) s += "key '" + key_path + "': ";
  return s + problem;
}

// Cuts `s` to at most `max` bytes without splitting a UTF-8 character.
std::string_view utf8_prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

// A string as a JSON literal, shortened to about `max` bytes.
std::string quoted(std::string_view s, size_t max) {
  const std::string_view head = utf8_prefix(s, max);
  std::string out = json(std::string(head)).dump(-1, ' ', false, json::error_handler_t::replace);
  if (head.size() < s.size()) out.insert(out.size() - 1, "...");
  return out;
}

std::string line_and_column(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// nlohmann's error text without its "[json.exception.parse_error.101] " prefix.
std::string without_prefix(const std::string& what) {
  const size_t close = what.find("] ");
  if (!what.empty() && what.front() == '[' && close != std::string::npos) {
    return what.substr(close + 2);
  }
  return what;
}

bool is_identifier(std::string_view key) {
  if (key.empty() || key.size() > 64) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Builds the parsed value with an explicit stack (no recursion), enforcing the limits; errors are
// thrown as JsonError with the path of the value being read.
class BoundedBuilder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  BoundedBuilder(std::string_view text, const std::string& origin, const JsonLimits& limits)
      : text_(text), origin_(origin), limits_(limits) {}

  json take() { return std::move(root_); }

  bool null() {
    add(nullptr);
    return true;
  }
  bool boolean(bool v) {
    add(v);
    return true;
  }
  bool number_integer(number_integer_t v) {
    add(v);
    return true;
  }
  bool number_unsigned(number_unsigned_t v) {
    add(v);
    return true;
  }
  bool number_float(number_float_t v, const string_t& /*text*/) {
    add(v);
    return true;
  }
  bool string(string_t& v) {
    add(std::move(v));
    return true;
  }
  bool binary(binary_t& /*v*/) {
    fail(path(), "binary values are not JSON");  // only the binary formats produce them
  }
  bool start_object(std::size_t /*elements*/) {
    open(json::value_t::object);
    return true;
  }
  bool key(string_t& k) {
    Frame& f = frames_.back();
    auto& members = f.value->get_ref<json::object_t&>();
    f.key = k;
    ++f.count;
    if (members.find(k) != members.end()) {
      fail(path(), "appears twice in the same object; keys must be unique");
    }
    check_count(f);
    pending_ = &members[std::move(k)];
    return true;
  }
  bool end_object() {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {
    open(json::value_t::array);
    return true;
  }
  bool end_array() {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const json::exception& ex) {
    if (done_ && frames_.empty()) {
      fail("", "unexpected text after the JSON value (" + without_prefix(ex.what()) +
                   "); a JSON document holds exactly one value");
    }
    if (ex.id == 406) {  // a number beyond the range of a double
      fail(path(/*next=*/true), without_prefix(ex.what()) + " at " +
                                    line_and_column(text_, position) +
                                    ": the number is too large for a double");
    }
    const std::string noun = limits_.noun.empty() ? "" : std::string(limits_.noun) + " is ";
    std::string where = path(/*next=*/true);
    fail("", (noun.empty() ? "not valid JSON: " : noun + "not valid JSON: ") +
                 without_prefix(ex.what()) +
                 (where.empty() ? std::string() : " (inside '" + where + "')"));
  }

 private:
  struct Frame {
    json* value;
    size_t count = 0;  // entries so far
    std::string key;   // the latest key (objects)
  };

  [[noreturn]] void fail(const std::string& key_path, const std::string& problem) const {
    throw JsonError(origin_, key_path, problem);
  }

  // The key path of the value being read: `model.vocab["a b"][3]`; for very deep nesting the
  // middle is elided. `next` names the list entry about to be stored (a value that failed to
  // parse, a list or object too deep to open) rather than the last one stored.
  std::string path(bool next = false) const {
    auto component = [&](const Frame& f, bool first) {
      if (f.value->is_array()) {
        const bool innermost = &f == &frames_.back();
        const size_t index = next && innermost ? f.count : (f.count == 0 ? 0 : f.count - 1);
        return "[" + std::to_string(index) + "]";
      }
      if (is_identifier(f.key)) return (first ? "" : ".") + f.key;
      return "[" + quoted(f.key, 40) + "]";
    };
    std::string out;
    const size_t n = frames_.size();
    constexpr size_t kShown = 6;  // components at each end when the path is elided
    for (size_t i = 0; i < n; ++i) {
      if (n > 2 * kShown && i == kShown) {
        out += "...(" + std::to_string(n - 2 * kShown) + " levels)...";
        i = n - kShown - 1;
        continue;
      }
      const Frame& f = frames_[i];
      if (!f.value->is_array() && f.count == 0) break;  // an object before its first key
      out += component(f, i == 0);
    }
    return out;
  }

  void check_count(const Frame& f) const {
    if (f.count > limits_.max_members) {
      fail(path(), "more than " + std::to_string(limits_.max_members) + " entries in one " +
                       (f.value->is_array() ? "list" : "object") + ", the limit for this file");
    }
  }

  // Stores `v` where the next value goes and returns it.
  template <typename V>
  json* add(V&& v) {
    if (frames_.empty()) {
      root_ = json(std::forward<V>(v));
      done_ = true;
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      ++f.count;
      check_count(f);
      auto& items = f.value->get_ref<json::array_t&>();
      items.emplace_back(std::forward<V>(v));
      return &items.back();
    }
    *pending_ = json(std::forward<V>(v));
    return pending_;
  }

  void open(json::value_t type) {
    if (frames_.size() + 1 > limits_.max_depth) {
      fail(path(/*next=*/true), "nested deeper than " + std::to_string(limits_.max_depth) +
                                    " levels of objects and lists, the limit for this file");
    }
    json* v = add(type);
    frames_.push_back(Frame{v, 0, {}});
  }

  std::string_view text_;
  const std::string& origin_;
  const JsonLimits& limits_;
  json root_;
  bool done_ = false;
  std::vector<Frame> frames_;
  json* pending_ = nullptr;  // the object member whose value comes next
};

}  // namespace

JsonError::JsonError(std::string origin, std::string key_path, std::string problem)
    : std::runtime_error(with_key(origin, key_path, problem)),
      origin_(std::move(origin)),
      key_path_(std::move(key_path)),
      problem_(std::move(problem)) {}

json parse_json(std::string_view text, const std::string& origin, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw JsonError(origin, "",
                    std::to_string(text.size()) + " bytes, more than the " +
                        std::to_string(limits.max_bytes) + "-byte limit for this file");
  }
  if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
    const size_t at = static_cast<size_t>(static_cast<const char*>(nul) - text.data());
    throw JsonError(origin, "",
                    "NUL byte at offset " + std::to_string(at) + " (" + line_and_column(text, at) +
                        "); JSON text cannot contain one");
  }
  std::string_view body = text;
  if (limits.only_spaces_after) {
    // The value ends with a character that is not whitespace, so once the padding spaces are
    // cut, any whitespace left at the end is a tab or newline that is not padding.
    while (!body.empty() && body.back() == ' ') body.remove_suffix(1);
    if (!body.empty() && (body.back() == '\t' || body.back() == '\n' || body.back() == '\r')) {
      throw JsonError(origin, "",
                      "a tab or line break after the JSON value; only spaces may pad a "
                      "safetensors header");
    }
  }
  BoundedBuilder builder(text, origin, limits);
  json::sax_parse(body.begin(), body.end(), &builder, nlohmann::json::input_format_t::json,
                  /*strict=*/true, /*ignore_comments=*/false);
  return builder.take();
}

std::string read_limited_file(const fs::path& path, size_t max_bytes) {
  const std::string origin = path.string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw JsonError(origin, "", "file not found");
  if (fs::is_directory(st)) throw JsonError(origin, "", "is a directory, expected a file");
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > max_bytes) {
    throw JsonError(origin, "",
                    std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                        "-byte limit for this file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JsonError(origin, "", "cannot open for reading");
  // Read at most one byte past the limit, so a file that grows (or a pipe) cannot exceed it.
  std::string text;
  char buffer[1 << 16];
  while (in && text.size() <= max_bytes) {
    in.read(buffer, sizeof buffer);
    text.append(buffer, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw JsonError(origin, "", "read error");
  if (text.size() > max_bytes) {
    throw JsonError(origin, "",
                    "more than the " + std::to_string(max_bytes) + "-byte limit for this file");
  }
  return text;
}

json read_json_file(const fs::path& path, const JsonLimits& limits) {
  return parse_json(read_limited_file(path, limits.max_bytes), path.string(), limits);
}

std::string json_short_text(const json& value, size_t max_chars) {
  std::string out;
  struct Frame {
    const json* v;
    json::const_iterator it;
    bool first = true;
  };
  std::vector<Frame> stack;
  auto emit = [&](const json& v) {
    if (v.is_object() || v.is_array()) {
      out += v.is_object() ? '{' : '[';
      stack.push_back(Frame{&v, v.cbegin()});
    } else if (v.is_string()) {
      out += quoted(v.get_ref<const std::string&>(), max_chars);
    } else {
      out += v.dump(-1, ' ', false, json::error_handler_t::replace);  // a scalar: no recursion
    }
  };
  emit(value);
  while (!stack.empty() && out.size() <= max_chars) {
    Frame& f = stack.back();
    if (f.it == f.v->cend()) {
      out += f.v->is_object() ? '}' : ']';
      stack.pop_back();
      continue;
    }
    if (!f.first) out += ',';
    f.first = false;
    if (f.v->is_object()) out += quoted(f.it.key(), max_chars) + ':';
    const json& child = *f.it;
    ++f.it;  // before emit(), which may grow the stack and move `f`
    emit(child);
  }
  if (out.size() > max_chars) out = std::string(utf8_prefix(out, max_chars)) + "...";
  return out;
}

std::string json_preview(const json& v, size_t max_chars) {
  const std::string text = json_short_text(v, max_chars);
  if (v.is_number()) return "the number " + text;
  if (v.is_string()) return "the string " + text;
  if (v.is_boolean()) return "the boolean " + text;
  if (v.is_array()) return "a list " + text;
  if (v.is_object()) return "an object " + text;
  return text;  // null
}

}  // namespace clockwork
