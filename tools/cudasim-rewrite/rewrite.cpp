// cudasim-rewrite: turns a CUDA C++ source into host C++ for the CPU backend.
//
//   cudasim-rewrite input.cu output.cpp
//
// Only the constructs a host compiler cannot parse, or that need per-block storage, change:
//
//   K<<<grid, block[, smem[, stream]]>>>(args)
//     -> ::cudasim::launcher(::cudasim::config(grid, block, ...), "K",
//                            [=](auto... a) { K(a...); },
//                            [=]<class... T>() -> const void* { the function K names for T...
//                            })(args)
//        (the kernel is called inside a generic lambda, so template arguments are still deduced
//        from the call arguments, exactly as nvcc does; it takes them by value, as a kernel does,
//        so that every simulated thread works on copies on its own stack. The lambda copies what
//        it names, a kernel launched through a local function pointer included: a launch recorded
//        by stream capture outlives the function that made it)
//   extern __shared__ __align__(16) T name[];   (function scope)
//     -> T* const name = ::cudasim::dynamic_shared<T>("name");
//   __shared__ T name[N][M];                     (function scope)
//     -> T (&name)[N][M] = ::cudasim::shared_var<T [N][M], ID, ALIGN>("name");
//   (the name is for the checker's messages: "element 17 of __shared__ array 'name'")
//   the same two at namespace scope become object-like macros, since a namespace-scope variable
//   cannot refer to the memory of whichever block is running.
//   __global__ void __launch_bounds__(256, 2) k(...) { body }
//     -> __global__ void k(...) { ::cudasim::detail::launch_bounds(256, 2); body }
//        (a GPU refuses a launch of more threads per block than the bound; the CPU backend learns
//        the bound only when a thread starts the kernel, and stops there)
//
// The output keeps every line of the input at the same line number (a `#line 1 "input.cu"`
// header plus the same newlines; where a macro has to be emitted, a `#line` restores the count),
// so compiler errors, warnings and __FILE__/__LINE__ point into the original .cu file.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

enum class Kind { Ident, Number, Literal, Punct, LaunchOpen, LaunchClose };

struct Token {
  Kind kind;
  size_t begin, end;  // byte range in the source
  int line;           // 1-based line of `begin`
  bool in_directive;  // inside a preprocessor directive (e.g. a #define body)
};

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    bool line_start = true;  // only whitespace seen since the last newline
    bool directive = false;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\n') {
        ++line_;
        ++i_;
        line_start = true;
        directive = false;
        continue;
      }
      if (c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {  // line continuation
        ++line_;
        i_ += 2;
        continue;
      }
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i_;
        continue;
      }
      if (c == '/' && peek(1) == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') {
          if (s_[i_] == '\\' && peek(1) == '\n') { ++line_; ++i_; }
          ++i_;
        }
        continue;
      }
      if (c == '/' && peek(1) == '*') {
        size_t e = s_.find("*/", i_ + 2);
        e = e == std::string::npos ? s_.size() : e + 2;
        line_ += static_cast<int>(std::count(s_.begin() + i_, s_.begin() + e, '\n'));
        i_ = e;
        continue;
      }
      if (c == '#' && line_start) directive = true;
      line_start = false;
      size_t b = i_;
      int l = line_;
      Kind k = lex_one();
      out.push_back({k, b, i_, l, directive});
    }
    return out;
  }

 private:
  char peek(size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  Kind lex_one() {
    char c = s_[i_];
    if (ident_start(c)) {
      size_t b = i_;
      while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
      std::string word = s_.substr(b, i_ - b);
      // Raw string literal with an optional encoding prefix: R"d( ... )d".
      if (i_ < s_.size() && s_[i_] == '"' && !word.empty() && word.back() == 'R' &&
          (word == "R" || word == "u8R" || word == "uR" || word == "UR" || word == "LR")) {
        size_t open = s_.find('(', i_);
        std::string delim = s_.substr(i_ + 1, open == std::string::npos ? 0 : open - i_ - 1);
        size_t close = open == std::string::npos ? std::string::npos : s_.find(")" + delim + "\"", open);
        size_t e = close == std::string::npos ? s_.size() : close + delim.size() + 2;
        line_ += static_cast<int>(std::count(s_.begin() + i_, s_.begin() + e, '\n'));
        i_ = e;
        return Kind::Literal;
      }
      if (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'') &&
          (word == "u8" || word == "u" || word == "U" || word == "L")) {
        quoted(s_[i_]);
        return Kind::Literal;
      }
      return Kind::Ident;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && std::isdigit(static_cast<unsigned char>(peek(1))))) {
      // pp-number: digits, letters, '.', digit separators and exponent signs.
      ++i_;
      while (i_ < s_.size()) {
        char d = s_[i_];
        if ((d == '+' || d == '-') && std::strchr("eEpP", s_[i_ - 1])) { ++i_; continue; }
        if (ident_char(d) || d == '.' ||
            (d == '\'' && i_ + 1 < s_.size() && ident_char(s_[i_ + 1]))) { ++i_; continue; }
        break;
      }
      return Kind::Number;
    }
    if (c == '"' || c == '\'') {
      quoted(c);
      return Kind::Literal;
    }
    if (c == '<' && peek(1) == '<' && peek(2) == '<') { i_ += 3; return Kind::LaunchOpen; }
    if (c == '>' && peek(1) == '>' && peek(2) == '>') { i_ += 3; return Kind::LaunchClose; }
    static const char* const multi[] = {"<<=", ">>=", "->*", "...", "::", "->", "++", "--", "<<",
                                        ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=",
                                        "*=", "/=", "%=", "&=", "|=", "^=", ".*", "##"};
    for (const char* m : multi) {
      size_t n = std::strlen(m);
      if (s_.compare(i_, n, m) == 0) { i_ += n; return Kind::Punct; }
    }
    ++i_;
    return Kind::Punct;
  }

  void quoted(char q) {
    ++i_;
    while (i_ < s_.size() && s_[i_] != q && s_[i_] != '\n') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ < s_.size() && s_[i_] == q) ++i_;
  }

  const std::string& s_;
  size_t i_ = 0;
  int line_ = 1;
};

struct Edit {
  size_t begin, end;  // replaced byte range
  std::string text;
};

class Rewriter {
 public:
  Rewriter(const std::string& src, std::string path)
      : s_(src), path_(std::move(path)), toks_(Lexer(src).run()) {}

  bool run(std::string& out, std::string& err) {
    std::vector<bool> ns_scope = scope_map();
    for (size_t t = 0; t < toks_.size(); ++t) {
      const Token& tok = toks_[t];
      if (tok.kind == Kind::LaunchOpen) {
        if (!launch(t, ns_scope[t], err)) return false;
      } else if (tok.kind == Kind::Ident && text(t) == "__shared__") {
        shared_decl(t, ns_scope[t]);
      } else if (tok.kind == Kind::Ident && text(t) == "__launch_bounds__" && !tok.in_directive &&
                 is(t + 1, "(")) {
        launch_bounds(t);
      }
    }
    std::sort(edits_.begin(), edits_.end(), [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
    out = "#line 1 \"" + escaped(path_) + "\"\n";
    size_t pos = 0;
    for (const Edit& e : edits_) {
      if (e.begin < pos) continue;  // overlapping edit (cannot happen for valid input)
      out.append(s_, pos, e.begin - pos);
      out += e.text;
      pos = e.end;
    }
    out.append(s_, pos, std::string::npos);
    return true;
  }

 private:
  std::string text(size_t t) const { return s_.substr(toks_[t].begin, toks_[t].end - toks_[t].begin); }
  bool is(size_t t, const char* p) const { return t < toks_.size() && text(t) == p; }

  static std::string escaped(const std::string& p) {
    std::string r;
    for (char c : p) {
      if (c == '\\' || c == '"') r += '\\';
      r += c;
    }
    return r;
  }

  // Newlines inside [b, e): kept in place of removed text so line numbers do not move.
  std::string newlines(size_t b, size_t e) const {
    return std::string(static_cast<size_t>(std::count(s_.begin() + b, s_.begin() + e, '\n')), '\n');
  }

  // Source text of tokens [a, b] on one line, single spaces between tokens that had space.
  std::string joined(size_t a, size_t b) const {
    std::string r;
    for (size_t t = a; t <= b; ++t) {
      if (t > a && toks_[t].begin > toks_[t - 1].end) r += ' ';
      r += text(t);
    }
    return r;
  }

  // For each token: is it at namespace scope (outside every function body and class)?
  std::vector<bool> scope_map() const {
    std::vector<bool> ns(toks_.size());
    std::vector<bool> stack;  // true = namespace / extern "C" brace
    for (size_t t = 0; t < toks_.size(); ++t) {
      ns[t] = std::all_of(stack.begin(), stack.end(), [](bool b) { return b; });
      if (toks_[t].in_directive) continue;
      std::string x = text(t);
      if (x == "{") {
        bool is_ns = false;
        // namespace a::b {   namespace {   extern "C" {   (skip back over the name)
        size_t k = t;
        while (k > 0 && (toks_[k - 1].kind == Kind::Ident || is(k - 1, "::")) && !is(k - 1, "namespace")) --k;
        if (k > 0 && is(k - 1, "namespace")) is_ns = true;
        if (t >= 2 && toks_[t - 1].kind == Kind::Literal && is(t - 2, "extern")) is_ns = true;
        stack.push_back(is_ns);
      } else if (x == "}") {
        if (!stack.empty()) stack.pop_back();
      }
    }
    return ns;
  }

  // Index of the first token of the kernel expression that ends just before token `t`.
  size_t kernel_begin(size_t t) const {
    size_t b = t;
    for (;;) {
      if (b == 0) return b;
      std::string x = text(b - 1);
      if (x == ">" || x == ">>") {  // template argument list
        int depth = 0;
        size_t k = b;
        while (k > 0) {
          --k;
          std::string y = text(k);
          if (y == ">") ++depth;
          else if (y == ">>") depth += 2;
          else if (y == "<") --depth;
          else if (y == ")" || y == "]") k = matching_open(k);
          if (depth <= 0) break;
        }
        b = k;
        continue;
      }
      if (x == ")" || x == "]") {
        b = matching_open(b - 1);
        if (x == "]") continue;  // subscript: keep scanning the operand
        return b;                // parenthesised kernel expression
      }
      if (toks_[b - 1].kind == Kind::Ident) {
        --b;
        if (b > 0 && is(b - 1, "template")) --b;
        if (b > 0 && (is(b - 1, "::") || is(b - 1, ".") || is(b - 1, "->"))) {
          --b;
          continue;
        }
        return b;
      }
      if (x == "::") return b - 1;  // leading global scope
      return b;
    }
  }

  size_t matching_open(size_t close) const {
    const std::string c = text(close);
    const std::string o = c == ")" ? "(" : c == "]" ? "[" : "{";
    int depth = 0;
    for (size_t k = close + 1; k-- > 0;) {
      if (text(k) == c) ++depth;
      else if (text(k) == o && --depth == 0) return k;
    }
    return close;
  }

  bool launch(size_t open, bool at_ns_scope, std::string& err) {
    size_t kb = kernel_begin(open);
    if (kb == open) {
      err = path_ + ":" + std::to_string(toks_[open].line) + ": error: '<<<' without a kernel name before it";
      return false;
    }
    int depth = 0;
    size_t close = open + 1;
    for (; close < toks_.size(); ++close) {
      std::string x = text(close);
      if (x == "(" || x == "[" || x == "{") ++depth;
      else if (x == ")" || x == "]" || x == "}") --depth;
      else if (toks_[close].kind == Kind::LaunchClose && depth == 0) break;
    }
    if (close == toks_.size()) {
      err = path_ + ":" + std::to_string(toks_[open].line) + ": error: '<<<' is never closed by '>>>'";
      return false;
    }
    std::string kernel = joined(kb, open - 1);
    edits_.push_back({toks_[kb].begin, toks_[open].end,
                      "::cudasim::launcher(::cudasim::config(" + newlines(toks_[kb].begin, toks_[open].end)});
    std::string name;
    for (char c : kernel) name += (c == '"' || c == '\\') ? '_' : c;
    // The second lambda tells which function the expression names for the arguments' types
    // (cudasim::detail::function_of). The test makes an overload set, a template whose arguments
    // a call deduces, or a pointer variable no compile error: it names nothing here.
    const std::string capture = at_ns_scope ? "[]" : "[=]";
    const std::string of = "::cudasim::detail::function_of<cudasim_types_...>(&" + kernel +
                           ", ::cudasim::detail::ExactParameters{})";
    edits_.push_back({toks_[close].begin, toks_[close].end,
                      "), \"" + name + "\", " + capture + "(auto... cudasim_args_) { " + kernel +
                          "(cudasim_args_...); }, " + capture +
                          "<class... cudasim_types_>() -> const void* { if constexpr (requires { " +
                          of + "; }) return " + of + "; else return nullptr; })"});
    return true;
  }

  // `__launch_bounds__(args)` on a kernel's definition -> a check of the block's size as the body's
  // first statement (see file comment). A declaration without a body keeps nothing.
  void launch_bounds(size_t t) {
    size_t close = t + 1;
    for (int depth = 0; close < toks_.size(); ++close) {
      if (is(close, "(")) ++depth;
      if (is(close, ")") && --depth == 0) break;
    }
    if (close >= toks_.size()) return;
    edits_.push_back(
        {toks_[t].begin, toks_[close].end, newlines(toks_[t].begin, toks_[close].end)});
    if (close == t + 2) return;  // no arguments
    int depth = 0;
    for (size_t k = close + 1; k < toks_.size() && !toks_[k].in_directive; ++k) {
      const std::string x = text(k);
      if (x == "(" || x == "[") ++depth;
      if (x == ")" || x == "]") --depth;
      if (depth == 0 && x == ";") return;
      if (depth == 0 && x == "{") {
        edits_.push_back({toks_[k].end, toks_[k].end,
                          " ::cudasim::detail::launch_bounds(" + joined(t + 2, close - 1) + ");"});
        return;
      }
    }
  }

  // `[static] [extern] __shared__ ... ;` -> storage of the running block (see file comment).
  void shared_decl(size_t t, bool at_ns_scope) {
    bool is_extern = t > 0 && is(t - 1, "extern");
    size_t first = is_extern ? t - 1 : t;
    if (first > 0 && is(first - 1, "static")) --first;  // `static` adds nothing to __shared__
    // The declaration ends at the first `;` at bracket depth 0, inside the same directive.
    size_t semi = t + 1;
    int depth = 0;
    for (; semi < toks_.size(); ++semi) {
      if (toks_[semi].in_directive != toks_[t].in_directive) return;  // e.g. #define S __shared__
      std::string x = text(semi);
      if (x == "(" || x == "[" || x == "<") ++depth;
      else if (x == ")" || x == "]" || x == ">") --depth;
      else if (x == ">>") depth -= 2;
      else if (x == "{" || x == "}") return;
      else if (x == ";" && depth <= 0) break;
    }
    if (semi == toks_.size()) return;

    // Split into type tokens and declarators (name + array bounds), dropping __align__(n).
    std::vector<size_t> type;
    std::vector<std::vector<size_t>> decls(1);
    std::string align = "0";
    bool in_decls = false;
    depth = 0;
    for (size_t k = t + 1; k < semi; ++k) {
      if (is(k, "__align__") && is(k + 1, "(")) {
        size_t e = k + 1;
        while (e < semi && !is(e, ")")) ++e;
        align = joined(k + 2, e - 1);
        k = e;
        continue;
      }
      std::string x = text(k);
      if (x == "(" || x == "[" || x == "<") ++depth;
      if (x == ")" || x == "]" || x == ">") --depth;
      if (x == ">>") depth -= 2;
      if (in_decls && x == "," && depth == 0) { decls.emplace_back(); continue; }
      if (!in_decls) {
        // The declarator starts at the identifier that is followed by `[`, `,` or the end.
        bool name = toks_[k].kind == Kind::Ident && depth == 0 &&
                    (k + 1 == semi || is(k + 1, "[") || is(k + 1, ","));
        if (name) in_decls = true;
      }
      (in_decls ? decls.back() : type).push_back(k);
    }
    if (type.empty() || decls.front().empty()) return;  // not a declaration we understand
    std::string ty = joined(type.front(), type.back());

    std::string repl;
    if (is_extern) {
      const std::string& nm = text(decls.front().front());
      std::string ptr = "::cudasim::dynamic_shared<" + ty + ">(\"" + nm + "\")";
      if (at_ns_scope) {
        repl = "\n#define " + nm + " (" + ptr + ")\n#line " + std::to_string(toks_[semi].line) +
               " \"" + escaped(path_) + "\"\n";
      } else {
        repl = ty + "* const " + nm + " = " + ptr + ";" + newlines(toks_[first].begin, toks_[semi].end);
      }
    } else if (at_ns_scope) {
      for (const auto& d : decls) {
        std::string bounds = d.size() > 1 ? joined(d[1], d.back()) : "";
        repl += "\n#define " + text(d.front()) + " (::cudasim::shared_var<" + ty + " " + bounds + ", " +
                std::to_string(next_id_++) + ", " + align + ">(\"" + text(d.front()) + "\"))";
      }
      repl += "\n#line " + std::to_string(toks_[semi].line) + " \"" + escaped(path_) + "\"\n";
    } else {
      repl = ty + " ";
      for (size_t i = 0; i < decls.size(); ++i) {
        const auto& d = decls[i];
        std::string bounds = d.size() > 1 ? joined(d[1], d.back()) : "";
        repl += (i ? ", " : "") + std::string("(&") + text(d.front()) + ")" + bounds +
                " = ::cudasim::shared_var<" + ty + " " + bounds + ", " + std::to_string(next_id_++) +
                ", " + align + ">(\"" + text(d.front()) + "\")";
      }
      repl += ";" + newlines(toks_[first].begin, toks_[semi].end);
    }
    edits_.push_back({toks_[first].begin, toks_[semi].end, repl});
  }

  const std::string& s_;
  std::string path_;
  std::vector<Token> toks_;
  std::vector<Edit> edits_;
  unsigned next_id_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cudasim-rewrite input.cu output.cpp\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "cudasim-rewrite: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string out, err;
  if (!Rewriter(ss.str(), argv[1]).run(out, err)) {
    std::cerr << err << "\n";
    return 1;
  }
  // Write to a temporary name and rename, so an interrupted build never leaves half a file.
  std::string tmp = std::string(argv[2]) + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary);
    o << out;
    if (!o) {
      std::cerr << "cudasim-rewrite: cannot write " << tmp << "\n";
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), argv[2]) != 0) {
    std::cerr << "cudasim-rewrite: cannot rename " << tmp << " to " << argv[2] << "\n";
    return 1;
  }
  return 0;
}
