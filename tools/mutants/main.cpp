// clockwork-mutants: applies each mistake of a list to a scratch copy of the source tree, builds
// the one test program that should catch it, runs it, and checks that it fails with the message
// that names the mistake. A mutant that passes (survives), or fails without its message, fails
// the run. See mutants.list for the format and the mistakes.
//
//   clockwork-mutants --source <tree> --work <dir> --list <file> [--only <name>]...
//                     [--cmake <cmake>] [-- <extra configure arguments>...]
//
// <dir>/src is the scratch copy (synchronised by content, so an unchanged file keeps its time
// stamp and its objects), <dir>/src/build its build folder, configured once and reused by every
// mutant and every later run.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Mutant {
  std::string name, file, target, filter, find, replace, expect;
  int line = 0;  // where its block starts in the list
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  if (!out || !(out << text)) throw std::runtime_error("cannot write " + p.string());
}

// "\n" in a value of the list stands for a line break, "\\" for a backslash.
std::string unescape(const std::string& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size() && (v[i + 1] == 'n' || v[i + 1] == '\\')) {
      out += v[i + 1] == 'n' ? '\n' : '\\';
      ++i;
    } else {
      out += v[i];
    }
  }
  return out;
}

std::vector<Mutant> parse_list(const fs::path& list) {
  std::ifstream in(list);
  if (!in) throw std::runtime_error("cannot read the mutant list " + list.string());
  std::vector<Mutant> out;
  Mutant cur;
  bool open = false;
  int n = 0;
  auto finish = [&]() {
    if (!open) return;
    const std::string where = list.string() + ":" + std::to_string(cur.line);
    if (cur.name.empty() || cur.file.empty() || cur.target.empty() || cur.find.empty() ||
        cur.expect.empty()) {
      throw std::runtime_error(where +
                               ": a mutant needs name, file, target, find, replace and expect");
    }
    out.push_back(cur);
    cur = Mutant{};
    open = false;
  };
  std::string line;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) {
      finish();
      continue;
    }
    if (line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos)
      throw std::runtime_error(list.string() + ":" + std::to_string(n) + ": expected 'key: value'");
    const std::string key = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    value = unescape(value);
    if (!open) {
      open = true;
      cur.line = n;
    }
    std::map<std::string, std::string*> fields{
        {"name", &cur.name},     {"file", &cur.file},     {"target", &cur.target},
        {"filter", &cur.filter}, {"find", &cur.find},     {"replace", &cur.replace},
        {"expect", &cur.expect}};
    const auto f = fields.find(key);
    if (f == fields.end())
      throw std::runtime_error(list.string() + ":" + std::to_string(n) + ": unknown key '" + key +
                               "'");
    *f->second = value;
  }
  finish();
  return out;
}

// Copies `from` into `to` file by file, writing only files whose content differs, and removes
// files of `to` that `from` no longer has. Build folders, hidden entries and `skip` stay out.
void sync_tree(const fs::path& from, const fs::path& to, const fs::path& skip) {
  auto excluded = [&](const fs::path& rel) {
    const std::string top = rel.begin()->string();
    return top.empty() || top[0] == '.' || top.rfind("build", 0) == 0;
  };
  const fs::path skip_abs = fs::weakly_canonical(skip);
  for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path rel = fs::relative(it->path(), from);
    if (excluded(rel) || fs::weakly_canonical(it->path()) == skip_abs) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    const fs::path dst = to / rel;
    if (it->is_directory()) {
      fs::create_directories(dst);
    } else if (it->is_regular_file()) {
      const std::string text = read_file(it->path());
      if (!fs::exists(dst) || read_file(dst) != text) {
        write_file(dst, text);
        fs::permissions(dst, fs::status(it->path()).permissions());
      }
    }
  }
  for (auto it = fs::recursive_directory_iterator(to); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path rel = fs::relative(it->path(), to);
    if (excluded(rel)) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!fs::exists(from / rel)) {
      fs::remove_all(it->path());
      it.disable_recursion_pending();
    }
  }
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command; returns its exit status and its output (stdout and stderr together).
int run(const std::string& command, std::string& output) {
  output.clear();
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run: " + command);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  fs::path source, work, list;
  std::string cmake = "cmake";
  std::vector<std::string> only, configure_args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "clockwork-mutants: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--source") {
      source = value();
    } else if (a == "--work") {
      work = value();
    } else if (a == "--list") {
      list = value();
    } else if (a == "--cmake") {
      cmake = value();
    } else if (a == "--only") {
      only.push_back(value());
    } else if (a == "--") {
      configure_args.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::cerr << "clockwork-mutants: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  if (source.empty() || work.empty() || list.empty()) {
    std::cerr << "usage: clockwork-mutants --source <tree> --work <dir> --list <file> "
                 "[--only <name>]... [--cmake <cmake>] [-- <configure arguments>...]\n";
    return 2;
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    std::vector<Mutant> mutants = parse_list(list);
    if (!only.empty()) {
      std::vector<Mutant> kept;
      for (const Mutant& m : mutants) {
        for (const std::string& o : only) {
          if (m.name == o) kept.push_back(m);
        }
      }
      if (kept.size() != only.size()) throw std::runtime_error("--only names a mutant not listed");
      mutants = kept;
    }
    // The build folder sits inside the copy as build/ does in a checkout, so that compiler
    // caches configured with a base directory see the same relative paths as in a normal build.
    const fs::path src = work / "src", build = src / "build";
    fs::create_directories(src);
    sync_tree(source, src, work);
    if (!fs::exists(build / "build.ninja") && !fs::exists(build / "Makefile")) {
      std::string cmd = quote(cmake) + " -S " + quote(src.string()) + " -B " + quote(build.string());
      for (const std::string& a : configure_args) cmd += " " + quote(a);
      std::string out;
      std::cout << "configuring " << build.string() << std::endl;
      if (run(cmd, out) != 0) throw std::runtime_error("configuring failed:\n" + tail(out, 4000));
    }
    std::cout << mutants.size() << " mutants, tree synchronised in " << seconds_since(start)
              << " s" << std::endl;

    int failures = 0;
    for (const Mutant& m : mutants) {
      const auto t0 = std::chrono::steady_clock::now();
      const fs::path file = src / m.file;
      const std::string original = read_file(file);
      const size_t at = original.find(m.find);
      if (at == std::string::npos || original.find(m.find, at + 1) != std::string::npos) {
        std::cout << "[ LIST ERROR ] " << m.name << ": the snippet to replace occurs "
                  << (at == std::string::npos ? "nowhere" : "more than once") << " in " << m.file
                  << " (" << list.string() << ":" << m.line << ")" << std::endl;
        ++failures;
        continue;
      }
      std::string mutated = original;
      mutated.replace(at, m.find.size(), m.replace);
      write_file(file, mutated);
      std::string out, verdict;
      bool ok = false;
      const int built =
          run(quote(cmake) + " --build " + quote(build.string()) + " --target " + m.target, out);
      if (built != 0) {
        verdict = "the mutant does not build:\n" + tail(out, 3000);
      } else {
        const bool checked = m.target.size() > 6 && m.target.substr(m.target.size() - 6) == "_check";
        std::string cmd = checked ? "CUDASIM_CHECK=all CUDASIM_ORDER=warps-reverse " : "";
        cmd += quote((build / "bin" / m.target).string()) + " --gtest_color=no";
        if (!m.filter.empty()) cmd += " --gtest_filter=" + quote(m.filter);
        const int rc = run(cmd, out);
        if (rc == 0) {
          verdict = "SURVIVED: the tests pass with this mistake";
        } else if (out.find(m.expect) == std::string::npos) {
          verdict = "caught, but the output does not name it (expected \"" + m.expect + "\"):\n" +
                    tail(out, 3000);
        } else {
          ok = true;
          // The line that names it, as the student reads it.
          const size_t at_msg = out.find(m.expect);
          const size_t from = out.rfind('\n', at_msg) + 1;  // npos + 1 == 0
          const size_t to = out.find('\n', at_msg);
          std::string named = out.substr(from, to == std::string::npos ? to : to - from);
          named.erase(0, named.find_first_not_of(' '));
          if (named.size() > 240) named = named.substr(0, 240) + "...";
          verdict = "caught and named: " + named;
        }
      }
      // Restored with a new time stamp, so that the next build recompiles the original.
      write_file(file, original);
      if (!ok) ++failures;
      std::cout << (ok ? "[ OK ] " : "[ FAILED ] ") << m.name << " (" << m.file << ", "
                << m.target << ", " << static_cast<int>(seconds_since(t0) + 0.5) << " s): "
                << verdict << std::endl;
    }
    std::cout << mutants.size() - failures << " of " << mutants.size()
              << " mutants caught and named, in " << static_cast<int>(seconds_since(start) + 0.5)
              << " s" << std::endl;
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "clockwork-mutants: " << e.what() << "\n";
    return 2;
  }
}
