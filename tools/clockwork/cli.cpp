// Option parsing and output helpers for the `clockwork` subcommands (see cli.h).
#include "tools/clockwork/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>

namespace clockwork::cli {

namespace {

const Option* find_option(const CommandSpec& spec, std::string_view name) {
  for (const Option& o : spec.options) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::string option_usage(const Option& o) {
  return "--" + o.name + (o.value_name.empty() ? "" : " " + o.value_name);
}

}  // namespace

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::require(const std::string& name) const {
  if (auto v = get(name)) return *v;
  const Option* o = spec_ ? find_option(*spec_, name) : nullptr;
  throw UsageError("missing " + (o ? option_usage(*o) : "--" + name));
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  const auto text = get(name);
  if (!text) return fallback;
  const auto value = parse_int(*text);
  if (!value) throw UsageError("--" + name + " expects an integer, got '" + *text + "'");
  if (*value < lo || *value > hi) {
    throw UsageError("--" + name + " is " + *text + ", expected a value from " +
                     std::to_string(lo) + " to " + std::to_string(hi));
  }
  return *value;
}

double Args::get_double(const std::string& name, double fallback, double lo, double hi) const {
  const auto text = get(name);
  if (!text) return fallback;
  double value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (text->empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    throw UsageError("--" + name + " expects a number, got '" + *text + "'");
  }
  if (value < lo || value > hi) {
    std::ostringstream range;
    range << "--" << name << " is " << *text << ", expected a value from " << lo << " to " << hi;
    throw UsageError(range.str());
  }
  return value;
}

Args parse_args(const CommandSpec& spec, const std::vector<std::string>& argv) {
  Args args;
  args.spec_ = &spec;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      args.help = true;
      continue;
    }
    // A lone "-" or a negative number is a value, not an option (ids and seeds can be given so).
    const bool looks_like_option = arg.size() > 1 && arg[0] == '-' && !parse_int(arg);
    if (!looks_like_option) {
      if (spec.positional_name.empty()) {
        throw UsageError("unexpected argument '" + arg + "'");
      }
      args.positional_.push_back(arg);
      continue;
    }
    if (arg.rfind("--", 0) != 0) throw UsageError("unknown option '" + arg + "'");
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const Option* o = find_option(spec, name);
    if (!o) throw UsageError("unknown option '--" + name + "'");
    if (args.values_.count(name)) throw UsageError("--" + name + " given twice");
    if (o->value_name.empty()) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      args.values_[name] = "";
      continue;
    }
    if (inline_value) {
      args.values_[name] = *inline_value;
      continue;
    }
    // The next word is the value unless it is another option ("--name=--x" passes such a value).
    const bool next_is_value = i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0;
    if (!next_is_value) throw UsageError("--" + name + " needs a value (" + option_usage(*o) + ")");
    args.values_[name] = argv[++i];
  }
  return args;
}

int run_command(const std::string& name, int (*command)(const std::vector<std::string>&),
                const std::vector<std::string>& args) {
  const std::string prefix = "clockwork " + name + ": error: ";
  try {
    return command(args);
  } catch (const UsageError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s (see clockwork %s --help)\n", prefix.c_str(),
                 one_line(e.what()).c_str(), name.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), one_line(e.what()).c_str());
    return 1;
  } catch (...) {
    std::fflush(stdout);
    std::fprintf(stderr, "%san unexpected error of unknown type\n", prefix.c_str());
    return 1;
  }
}

std::string help_text(const CommandSpec& spec) {
  std::ostringstream out;
  out << "usage: clockwork " << spec.name << " " << spec.synopsis << "\n\n"
      << spec.description << "\n\noptions:\n";
  std::vector<Option> all = spec.options;
  all.push_back({"help", "", "show this help"});
  size_t width = 0;
  for (const Option& o : all) width = std::max(width, option_usage(o).size());
  // Help texts wrap at 100 columns, continuing under the first line's text.
  const size_t indent = width + 4;
  for (const Option& o : all) {
    const std::string u = option_usage(o);
    out << "  " << u << std::string(width - u.size() + 2, ' ');
    std::istringstream words(o.help);
    std::string word;
    size_t column = indent;
    bool first = true;
    while (words >> word) {
      if (!first && column + 1 + word.size() > 100) {
        out << "\n" << std::string(indent, ' ');
        column = indent;
        first = true;
      }
      out << (first ? "" : " ") << word;
      column += word.size() + (first ? 0 : 1);
      first = false;
    }
    out << "\n";
  }
  if (!spec.epilogue.empty()) out << "\n" << spec.epilogue << "\n";
  return out.str();
}

std::string one_line(std::string_view message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    if (message[i] == '\n' || message[i] == '\r') {
      while (i < message.size() && std::isspace(static_cast<unsigned char>(message[i]))) ++i;
      if (!out.empty() && i < message.size()) out += "; ";
      continue;
    }
    out += message[i++];
  }
  return out;
}

std::string quote_bytes(std::string_view bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\n') {
      out += "\\n";
      ++i;
      continue;
    }
    if (c == '\t') {
      out += "\\t";
      ++i;
      continue;
    }
    if (c == '\r') {
      out += "\\r";
      ++i;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    if (c == '"') {
      out += "\\\"";
      ++i;
      continue;
    }
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A complete UTF-8 character is shown as itself; a stray byte in hex.
    size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (c >= 0xf5) len = 0;
    bool complete = len > 0 && i + len <= bytes.size();
    for (size_t k = 1; complete && k < len; ++k) {
      complete = (static_cast<unsigned char>(bytes[i + k]) & 0xc0) == 0x80;
    }
    if (complete) {
      out.append(bytes.substr(i, len));
      i += len;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    }
  }
  return out + "\"";
}

std::string group_digits(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)), enabled_(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::update(uint64_t done, uint64_t total, const std::string& detail) {
  if (!enabled_ || total == 0) return;
  const int permille = static_cast<int>(std::min<uint64_t>(1000, done * 1000 / total));
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::string shown = detail.size() > 40 ? "..." + detail.substr(detail.size() - 37) : detail;
  std::fprintf(stderr, "\r\033[K%s [%s] %3d%%  %s / %s  %s", label_.c_str(), bar.c_str(),
               permille / 10, human_bytes(done).c_str(), human_bytes(total).c_str(), shown.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

std::vector<int32_t> parse_id_list(const std::string& text, int64_t vocab, const std::string& option) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 0 || value >= vocab) {
      throw UsageError(option + ": '" + item + "' (element " + std::to_string(ids.size() + 1) +
                       ") is not a token id in [0, " + std::to_string(vocab) + ")");
    }
    ids.push_back(static_cast<int32_t>(value));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

}  // namespace clockwork::cli
