#include "tools/handout/markers.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace clockwork::handout {

std::string MarkerError::str() const { return file + ":" + std::to_string(line) + ": error: " + message; }

bool StripResult::stubbed() const {
  return std::any_of(regions.begin(), regions.end(), [](const Region& r) { return r.stubbed; });
}

namespace {

constexpr std::string_view kBegin = "BEGIN SOLUTION";
constexpr std::string_view kEnd = "END SOLUTION";
constexpr std::string_view kStub = "STUB:";

// How many lines from the top may hold the INSTRUCTOR-ONLY line (after a licence or @file block).
constexpr int kInstructorOnlyWindow = 20;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string_view trim_left(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::string_view trim_right(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) --n;
  return s.substr(0, n);
}

// One physical line: its content without the end of line, and the end of line itself ("\n",
// "\r\n" or "" for a last line without one), so that files keep their line endings.
struct Line {
  std::string_view body;
  std::string_view eol;
};

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      lines.push_back({text.substr(pos), ""});
      break;
    }
    size_t body_end = nl;
    if (body_end > pos && text[body_end - 1] == '\r') --body_end;
    lines.push_back({text.substr(pos, body_end - pos), text.substr(body_end, nl + 1 - body_end)});
    pos = nl + 1;
  }
  return lines;
}

enum class Kind { Code, Comment, Begin, End, Stub };

// A line classified against the comment leader. For comments, `rest` is the text after the
// leader; for markers, what follows the keyword.
struct Parsed {
  Kind kind = Kind::Code;
  std::string_view indent;
  std::string_view rest;
};

Parsed classify(std::string_view body, std::string_view leader) {
  Parsed p;
  const std::string_view stripped = trim_left(body);
  p.indent = body.substr(0, body.size() - stripped.size());
  if (!starts_with(stripped, leader)) return p;
  const std::string_view after = stripped.substr(leader.size());
  const std::string_view word = trim_left(after);
  if (starts_with(word, kBegin)) {
    p.kind = Kind::Begin;
    p.rest = word.substr(kBegin.size());
  } else if (starts_with(word, kEnd)) {
    p.kind = Kind::End;
    p.rest = word.substr(kEnd.size());
  } else if (starts_with(word, kStub)) {
    p.kind = Kind::Stub;
    p.rest = word.substr(kStub.size());
    if (starts_with(p.rest, " ")) p.rest.remove_prefix(1);  // the one space of "STUB: "
  } else {
    p.kind = Kind::Comment;
    p.rest = after;
  }
  return p;
}

// Parses "(mK)" and an optional ": text" after BEGIN SOLUTION. Returns K, or nullopt with
// `why` set.
std::optional<int> parse_begin(std::string_view rest, std::string_view& text, std::string& why) {
  const std::string_view shown = trim_right(rest);
  auto unknown = [&] {
    why = "unknown marker 'BEGIN SOLUTION" + std::string(shown.substr(0, shown.find(':'))) +
          "': expected 'BEGIN SOLUTION(mN): task text' with N the milestone number";
    return std::nullopt;
  };
  if (!starts_with(rest, "(m")) return unknown();
  size_t i = 2;
  int milestone = 0;
  while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) {
    if (milestone > 1000) return unknown();
    milestone = milestone * 10 + (rest[i] - '0');
    ++i;
  }
  if (i == 2 || i >= rest.size() || rest[i] != ')') return unknown();
  if (milestone < 1) {
    why = "milestone numbers start at 1 (found 'SOLUTION(m0)')";
    return std::nullopt;
  }
  std::string_view after = rest.substr(i + 1);
  if (starts_with(after, ":")) {
    text = trim_right(trim_left(after.substr(1)));
  } else if (trim_left(after).empty()) {
    text = {};
  } else {
    why = "unexpected text after 'BEGIN SOLUTION(m" + std::to_string(milestone) +
          ")': write 'BEGIN SOLUTION(m" + std::to_string(milestone) + "): task text'";
    return std::nullopt;
  }
  return milestone;
}

// A region being read: where it starts, its task text and the lines of each part.
struct Open {
  int milestone = 0;
  int begin_line = 0;
  std::string_view indent;
  std::string_view eol;
  std::vector<std::string_view> text;  // first line, then continuation lines
  bool reading_text = true;            // still inside the task-text comment block
  std::vector<size_t> solution;        // indices of the solution's lines
  std::vector<std::string_view> stubs;
};

}  // namespace

std::string_view comment_leader_for(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  static constexpr std::string_view kSlashSlash[] = {".c",   ".cc",  ".cpp", ".cxx", ".h",   ".hh",
                                                     ".hpp", ".hxx", ".cu",  ".cuh", ".inl", ".ipp"};
  static constexpr std::string_view kHash[] = {".cmake", ".sh", ".py", ".bash"};
  for (std::string_view ext : kSlashSlash) {
    if (ends_with(name, ext)) return "//";
  }
  if (name == "CMakeLists.txt") return "#";
  for (std::string_view ext : kHash) {
    if (ends_with(name, ext)) return "#";
  }
  return "";
}

StripResult strip_solutions(std::string_view text, const std::string& file, int stub_from, std::string_view leader) {
  StripResult result;
  if (leader.empty()) {
    result.text = std::string(text);
    return result;
  }
  const std::vector<Line> lines = split_lines(text);
  std::string out;
  out.reserve(text.size());
  std::optional<Open> open;

  // The first malformed marker ends the scan of a file: later messages would mostly be echoes of
  // it (an unclosed region makes the next END look unmatched).
  auto error = [&](int line, std::string message) { result.errors.push_back({file, line, std::move(message)}); };

  auto emit_region = [&](const Open& r, const Line& end) {
    const bool stub = r.milestone >= stub_from;
    result.regions.push_back({r.milestone, r.begin_line, 0, stub});
    if (!stub) {
      for (size_t i : r.solution) {
        out += lines[i].body;
        out += lines[i].eol;
      }
      return;
    }
    // The TODO comment, then the stub code, each line indented like the opening marker. The
    // last generated line takes the closing marker's end of line (a file may end there).
    std::vector<std::string> gen;
    const std::string lead = std::string(r.indent) + std::string(leader);
    gen.push_back(lead + " TODO(m" + std::to_string(r.milestone) + ")" +
                  (r.text.empty() || r.text[0].empty() ? "" : ": " + std::string(r.text[0])));
    for (size_t i = 1; i < r.text.size(); ++i) {
      gen.push_back(r.text[i].empty() ? lead : lead + " " + std::string(r.text[i]));
    }
    for (std::string_view s : r.stubs) {
      gen.push_back(trim_right(s).empty() ? std::string() : std::string(r.indent) + std::string(trim_right(s)));
    }
    for (size_t i = 0; i < gen.size(); ++i) {
      out += gen[i];
      out += i + 1 == gen.size() ? end.eol : r.eol;
    }
  };

  for (size_t i = 0; i < lines.size() && result.errors.empty(); ++i) {
    const int lineno = static_cast<int>(i) + 1;
    const Parsed p = classify(lines[i].body, leader);
    switch (p.kind) {
      case Kind::Begin: {
        if (open) {
          error(lineno, "nested BEGIN SOLUTION: the region opened at line " + std::to_string(open->begin_line) +
                            " is not closed (regions do not nest; close it with END SOLUTION first)");
          break;
        }
        std::string why;
        std::string_view first;
        const std::optional<int> m = parse_begin(p.rest, first, why);
        if (!m) {
          error(lineno, why);
          break;
        }
        open = Open{};
        open->milestone = *m;
        open->begin_line = lineno;
        open->indent = p.indent;
        open->eol = lines[i].eol.empty() ? std::string_view("\n") : lines[i].eol;
        open->text.push_back(first);
        break;
      }
      case Kind::End:
        if (!open) {
          error(lineno, "END SOLUTION without a matching BEGIN SOLUTION");
          break;
        }
        if (!trim_left(p.rest).empty()) {
          error(lineno, "unexpected text after END SOLUTION: '" + std::string(trim_right(trim_left(p.rest))) + "'");
          break;
        }
        emit_region(*open, lines[i]);
        result.regions.back().end_line = lineno;
        open.reset();
        break;
      case Kind::Stub:
        if (!open) {
          error(lineno, "STUB line outside a solution region");
          break;
        }
        open->reading_text = false;
        open->stubs.push_back(p.rest);
        break;
      case Kind::Comment:
        if (open && open->reading_text) {
          // A continuation of the task text: drop exactly one space after the leader so that
          // deeper indentation inside the text (lists, code) survives.
          std::string_view t = p.rest;
          if (starts_with(t, " ")) t.remove_prefix(1);
          open->text.push_back(trim_right(t));
          break;
        }
        [[fallthrough]];
      case Kind::Code:
        if (!open) {
          out += lines[i].body;
          out += lines[i].eol;
          break;
        }
        open->reading_text = false;
        if (!open->stubs.empty() && trim_left(lines[i].body).empty()) break;  // blank lines before END
        if (!open->stubs.empty()) {
          error(lineno, "code after the STUB lines of the region opened at line " +
                            std::to_string(open->begin_line) + ": STUB lines must come just before END SOLUTION");
          break;
        }
        open->solution.push_back(i);
        break;
    }
  }
  if (open && result.errors.empty()) {
    error(open->begin_line, "BEGIN SOLUTION(m" + std::to_string(open->milestone) +
                                ") is never closed: add END SOLUTION after the solution and its STUB lines");
  }
  if (!result.errors.empty()) {
    result.regions.clear();
    return result;
  }
  result.text = std::move(out);
  return result;
}

bool has_instructor_only_line(std::string_view text) {
  const std::vector<Line> lines = split_lines(text.substr(0, 8192));
  const int n = std::min<int>(static_cast<int>(lines.size()), kInstructorOnlyWindow);
  for (int i = 0; i < n; ++i) {
    std::string_view s = trim_left(lines[i].body);
    if (starts_with(s, "//")) {
      s.remove_prefix(2);
    } else if (starts_with(s, "#")) {
      s.remove_prefix(1);
    } else {
      continue;
    }
    s = trim_left(s);
    constexpr std::string_view kTag = "INSTRUCTOR-ONLY";
    if (starts_with(s, kTag) && (s.size() == kTag.size() || s[kTag.size()] == ' ' || s[kTag.size()] == ':' ||
                                 s[kTag.size()] == '\t')) {
      return true;
    }
  }
  return false;
}

}  // namespace clockwork::handout
