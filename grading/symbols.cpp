#include "grading/symbols.h"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

namespace clockwork::grading {
namespace {

// Namespaces whose names no student file refers to or defines: what judges the submission.
struct Owner {
  const char* prefix;
  const char* what;
};
constexpr Owner kForbiddenNamespaces[] = {
    {"cudasim::detail::check::",
     "the CPU backend's checker, which finds races, out-of-bounds accesses and reads of unwritten memory in the "
     "checked run"},
    {"clockwork::ref::", "the libtorch reference the tests compare your results with"},
    {"clockwork::known_good::", "the framework's known-good steps, which only the isolated tests use"},
    {"clockwork::grading::", "the autograder"},
    {"at::", "libtorch, which only the reference uses"},
    {"c10::", "libtorch, which only the reference uses"},
    {"torch::", "libtorch, which only the reference uses"},
    {"caffe2::", "libtorch, which only the reference uses"},
};

// C names of the checker's instrumentation: the compiler puts references to them in the objects
// built for the checked run, and nothing else may name them.
constexpr const char* kInstrumentation[] = {"__tsan_", "__cudasim_"};
constexpr const char* kInstrumentationWhat = "the checker's instrumentation, which only the compiler may use";

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string demangle(const std::string& name) {
  // Only C++ names, and not absurdly long ones (the demangler recurses over them).
  if (!name.starts_with("_Z") || name.size() > 64 * 1024) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

// nm's types of defined symbols that another definition cannot override: everything but undefined
// (U), weak (w, W, v, V) and unique (u, the one copy of an inline variable or template static).
bool strong_definition(char type) { return std::string("UwWvVu").find(type) == std::string::npos; }

// A demangled symbol without what the demangler says around the name it is about.
std::string without_around(std::string s) {
  static const char* const kAround[] = {"TLS wrapper function for ", "TLS init function for ", "guard variable for ",
                                        "typeinfo name for ",        "typeinfo for ",          "vtable for ",
                                        "VTT for ",                  "construction vtable for ",
                                        "non-virtual thunk to ",     "virtual thunk to ",
                                        "covariant return thunk to ", "hidden alias for ",
                                        "transaction clone for ",    "non-transaction clone for "};
  for (bool again = true; again;) {
    again = false;
    for (const char* a : kAround) {
      if (s.starts_with(a)) {
        s.erase(0, std::string(a).size());
        again = true;
      }
    }
    if (s.starts_with("reference temporary #")) {
      const size_t f = s.find(" for ");
      if (f != std::string::npos) {
        s.erase(0, f + 5);
        again = true;
      }
    }
  }
  return s;
}

}  // namespace

std::string symbol_entity(const std::string& demangled) {
  const std::string s = without_around(demangled);
  // A function's parameters start at its first '(' outside template arguments; what comes before
  // its name, after the last space outside template arguments, is a template's return type.
  int depth = 0;
  size_t name_start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    // An operator's own '<', '>' or "()" opens nothing.
    if (s.compare(i, 8, "operator") == 0 && (i == 0 || !identifier_char(s[i - 1])) &&
        (i + 8 == s.size() || !identifier_char(s[i + 8]))) {
      size_t j = i + 8;
      if (s.compare(j, 2, "()") == 0) {
        j += 2;
      } else {
        while (j < s.size() && (s[j] == '<' || s[j] == '>' || s[j] == '=' || s[j] == '-')) ++j;
        if (j + 1 < s.size() && s[j] == ' ' && s[j + 1] == '<') ++j;  // "operator<< <T>": its template arguments
      }
      i = j - 1;
      continue;
    }
    const char c = s[i];
    if (c == '<') ++depth;
    if (c == '>' && depth > 0) --depth;
    if (depth == 0 && c == '(') return s.substr(name_start, i - name_start);
    if (depth == 0 && c == ' ') name_start = i + 1;
  }
  return s.substr(name_start);
}

std::vector<ForbiddenSymbol> forbidden_symbols(const std::string& nm_output, const std::vector<StudentObject>& objects) {
  std::map<std::string, const StudentObject*> by_path;
  for (const StudentObject& o : objects) by_path[o.object] = &o;
  std::vector<ForbiddenSymbol> found;
  std::set<std::pair<std::string, std::string>> seen;  // (file, entity): a variable's TLS wrapper is the variable
  std::string entity;
  auto add = [&](const StudentObject& o, const std::string& symbol, bool defined, const std::string& owner) {
    if (seen.insert({o.source, entity}).second) found.push_back({o.source, symbol, defined, owner});
  };
  std::istringstream in(nm_output);
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    // nm says so of an object without symbols (an empty file compiles to one).
    if (line.starts_with("nm: ") && line.ends_with(": no symbols")) continue;
    // "<object>: <name> <type> [<value> [<size>]]"
    const size_t colon = line.find(": ");
    auto it = colon == std::string::npos ? by_path.end() : by_path.find(line.substr(0, colon));
    if (it == by_path.end()) {
      throw std::runtime_error("line " + std::to_string(number) + " of nm's output names no object the grader asked "
                               "about: " + line.substr(0, 200));
    }
    std::istringstream fields(line.substr(colon + 2));
    std::string name, type;
    if (!(fields >> name >> type) || type.size() != 1) {
      throw std::runtime_error("line " + std::to_string(number) + " of nm's output is not 'name type value size': " +
                               line.substr(0, 200));
    }
    const StudentObject& o = *it->second;
    const bool defined = type[0] != 'U';
    const std::string shown = without_around(demangle(name));
    entity = symbol_entity(shown);
    for (const Owner& ns : kForbiddenNamespaces) {
      if (entity.starts_with(ns.prefix)) add(o, shown, defined, ns.what);
    }
    for (const char* prefix : kInstrumentation) {
      if (name.starts_with(prefix) && (defined || !o.checked)) add(o, shown, defined, kInstrumentationWhat);
    }
    // The loader calls an indirect function's resolver before any of the program's own start-up
    // code, the hidden tests' included (grading/hidden/seed_channel.cpp).
    if (type == "i") add(o, shown, true, "an indirect function (ifunc), whose resolver runs before the program starts");
    // A strong definition takes the place of a library's function of the same name (the shared
    // libraries': libtorch, the C and C++ libraries), for the tests' code as well as the student's.
    if (defined && strong_definition(type[0])) {
      if (entity.starts_with("cudasim::")) add(o, shown, true, "the CPU backend (cudasim), which your code may not replace");
      for (const char* ns : {"std::", "__gnu_cxx::", "__cxxabiv1::", "testing::"}) {
        if (entity.starts_with(ns)) add(o, shown, true, "a library the tests use, which your code may not replace");
      }
    }
    // A function with a C name (extern "C": memcmp, expf, cudaMemcpy...) takes a library's place
    // even when weak: the program's own definition comes first. The C names a student object
    // defines as code are nvcc's launch stubs of its kernels and the NVTX header's functions
    // (weak, in every file that includes it); a global variable's name is unmangled too, and
    // allowed.
    const bool code = type == "T" || type == "W";
    if (code && !name.starts_with("_Z") && !name.starts_with("__device_stub_") && !name.starts_with("nvtx")) {
      add(o, shown, true,
          "a C function (extern \"C\"), which could take the place of the C library's, the CUDA runtime's or "
          "another library's");
    }
  }
  return found;
}

std::string describe_forbidden(const std::vector<ForbiddenSymbol>& found) {
  std::ostringstream o;
  o << "Your code names parts of the framework that a submission may not use, so it was not graded:\n";
  size_t shown = 0;
  for (const ForbiddenSymbol& f : found) {
    if (++shown > 12) {
      o << "  and " << found.size() - 12 << " more\n";
      break;
    }
    o << "  " << f.source << (f.defined ? " defines " : " refers to ") << f.symbol << ": " << f.owner << "\n";
  }
  o << "Your files may use the CUDA runtime, the C++ standard library and what the handout's headers declare. "
       "They may not reach into the checker, the reference, libtorch or the grader, even through names they "
       "declare themselves: the tests must see what your own kernels compute. If you copied such a declaration "
       "from the framework's sources, remove it.\n";
  return o.str();
}

}  // namespace clockwork::grading
