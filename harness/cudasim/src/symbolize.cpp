// Code addresses to source lines (addr2line) and function names (the ELF symbol table).
#include "symbolize.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "runtime_internal.h"

extern char** environ;

namespace cudasim::detail {
namespace {

struct Module {
  std::string path;
  uintptr_t bias = 0;  // load address minus link-time address
};

// The loaded module whose segments hold `pc`.
bool find_module(const void* pc, Module& out) {
  struct Search {
    uintptr_t pc;
    Module* out;
    bool found;
  } s{reinterpret_cast<uintptr_t>(pc), &out, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
          if (s->pc >= lo && s->pc < lo + ph.p_memsz) {
            s->out->bias = info->dlpi_addr;
            s->out->path = info->dlpi_name ? info->dlpi_name : "";
            s->found = true;
            return 1;
          }
        }
        return 0;
      },
      &s);
  if (s.found && out.path.empty()) {  // the program itself
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) out.path.assign(buf, static_cast<size_t>(n));
  }
  return s.found && !out.path.empty();
}

// Runs `argv` and returns what it printed on stdout.
std::string run_and_read(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string out;
  if (rc == 0) {
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    int status = 0;
    waitpid(pid, &status, 0);
  }
  close(fds[0]);
  return out;
}

std::mutex& cache_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<const void*, std::vector<SourceLine>>& line_cache() {
  static auto* c = new std::map<const void*, std::vector<SourceLine>>;
  return *c;
}

// The runtime, CUDA's and the C++ library's headers, and the test harness's buffers (an allocation
// made by DeviceBuffer is named after the test line that made the buffer).
// A CUDA header folder is known by what it holds, not by its name: the toolkit may sit in
// /usr/local/cuda-13.0/include, /usr/local/cuda/targets/..., or a folder of NVIDIA's header wheels,
// and the inline wrappers there (the templated cudaMalloc) are never the user's call site.
bool in_cuda_header_folder(const std::string& f) {
  static auto* known = new std::map<std::string, bool>;
  const size_t slash = f.rfind('/');
  if (slash == std::string::npos) return false;
  const std::string dir = f.substr(0, slash);
  std::lock_guard lk(cache_mutex());
  if (auto it = known->find(dir); it != known->end()) return it->second;
  struct stat st{};
  bool cuda = stat((dir + "/cuda_runtime_api.h").c_str(), &st) == 0;
  if (!cuda) {  // crt/host_defines.h and friends sit one folder down
    const size_t up = dir.rfind('/');
    cuda = up != std::string::npos && stat((dir.substr(0, up) + "/cuda_runtime_api.h").c_str(), &st) == 0;
  }
  return (*known)[dir] = cuda;
}

bool is_runtime_file(const std::string& f) {
  return f.empty() || f.find("/harness/cudasim/include/") != std::string::npos ||
         f.find("/harness/check/") != std::string::npos ||
         f.find("/harness/cudasim/src/") != std::string::npos || is_library_file(f) ||
         f.find("/cuda/include/") != std::string::npos || f.find("/cuda/targets/") != std::string::npos ||
         in_cuda_header_folder(f);
}

}  // namespace

bool is_library_file(const std::string& f) {
  return f.find("/include/c++/") != std::string::npos || f.rfind("/usr/include/", 0) == 0;
}

namespace {

std::string format(const SourceLine& s) {
  std::string r = s.file + ":" + std::to_string(s.line);
  const std::string fn = base_function_name(s.function);
  if (!fn.empty()) r += " (in " + fn + ")";
  return r;
}

// ---- the ELF symbol table ----------------------------------------------------------------------

struct Symbols {
  std::vector<std::pair<uintptr_t, std::string>> functions;  // sorted by address
};

Symbols read_symbols(const std::string& path) {
  Symbols out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  struct stat st{};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(ElfW(Ehdr)))) {
    close(fd);
    return out;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return out;
  const auto* base = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_shoff + eh->e_shnum * sizeof(ElfW(Shdr)) > size) {
    munmap(map, size);
    return out;
  }
  const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
  for (int pass = 0; pass < 2 && out.functions.empty(); ++pass) {
    const unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
      const ElfW(Shdr)& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
      const auto* syms = reinterpret_cast<const ElfW(Sym)*>(base + sh[i].sh_offset);
      const size_t n = sh[i].sh_size / sizeof(ElfW(Sym));
      for (size_t k = 0; k < n; ++k) {
        if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_value == 0 || syms[k].st_name >= strs.sh_size) continue;
        out.functions.emplace_back(syms[k].st_value,
                                   reinterpret_cast<const char*>(base + strs.sh_offset + syms[k].st_name));
      }
    }
  }
  munmap(map, size);
  std::sort(out.functions.begin(), out.functions.end());
  return out;
}

}  // namespace

std::vector<SourceLine> symbolize(const void* pc, bool return_address) {
  const void* at = static_cast<const char*>(pc) - (return_address ? 1 : 0);
  {
    std::lock_guard lk(cache_mutex());
    if (auto it = line_cache().find(at); it != line_cache().end()) return it->second;
  }
  std::vector<SourceLine> lines;
  Module m;
  if (find_module(at, m)) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "0x%zx", static_cast<size_t>(reinterpret_cast<uintptr_t>(at) - m.bias));
    std::istringstream in(run_and_read({"addr2line", "-f", "-C", "-i", "-e", m.path, addr}));
    for (std::string fn, loc; std::getline(in, fn) && std::getline(in, loc);) {
      SourceLine s;
      s.function = fn == "??" ? "" : fn;
      const size_t disc = loc.find(" (discriminator");
      if (disc != std::string::npos) loc.resize(disc);
      const size_t colon = loc.rfind(':');
      if (colon != std::string::npos && loc.compare(0, 2, "??") != 0) {
        s.file = loc.substr(0, colon);
        s.line = static_cast<unsigned>(std::strtoul(loc.c_str() + colon + 1, nullptr, 10));
      }
      lines.push_back(s);
    }
  }
  std::lock_guard lk(cache_mutex());
  line_cache()[at] = lines;
  return lines;
}

std::string describe_code_address(const void* pc, bool return_address) {
  const std::vector<SourceLine> lines = symbolize(pc, return_address);
  for (const SourceLine& s : lines) {
    if (!is_runtime_file(s.file) && s.line) return format(s);
  }
  for (const SourceLine& s : lines) {
    if (s.line) return format(s);
  }
  Module m;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%p", pc);
  const std::string fn = function_symbol(pc);
  return std::string(buf) + (fn.empty() ? "" : " (in " + base_function_name(fn) + ")") +
         " (no line information: compile with -g)";
}

SourceLine program_source_line(const void* pc) {
  const std::vector<SourceLine> lines = symbolize(pc, true);
  for (const SourceLine& s : lines) {
    if (!is_runtime_file(s.file) && s.line) return s;
  }
  for (const SourceLine& s : lines) {
    if (s.line) return s;
  }
  return {};
}

std::string describe_call_site(void* const* frames, int depth) {
  for (int i = 0; i < depth; ++i) {
    for (const SourceLine& s : symbolize(frames[i], true)) {
      if (!is_runtime_file(s.file) && s.line) return s.file + ":" + std::to_string(s.line);
    }
  }
  return depth > 0 ? describe_code_address(frames[0]) : std::string("an unknown place");
}

std::string function_symbol(const void* fn) {
  Module m;
  if (!find_module(fn, m)) return "";
  static auto* tables = new std::map<std::string, Symbols>;
  std::lock_guard lk(cache_mutex());
  auto it = tables->find(m.path);
  if (it == tables->end()) it = tables->emplace(m.path, read_symbols(m.path)).first;
  const auto& f = it->second.functions;
  const uintptr_t a = reinterpret_cast<uintptr_t>(fn) - m.bias;
  auto hit = std::upper_bound(f.begin(), f.end(), std::make_pair(a, std::string("\xff")));
  if (hit == f.begin()) return "";
  --hit;
  if (hit->first != a) return "";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(hit->second.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : hit->second;
}

namespace {
// The unqualified name in a demangled symbol ("void ns::softmax<float>(float const*, int)"), with
// or without its template arguments.
std::string unqualified_name(const std::string& name, bool template_arguments) {
  std::string s = name;
  // The only parentheses a qualifier holds; as written they would end the name early.
  for (size_t at; (at = s.find("(anonymous namespace)")) != std::string::npos;)
    s.replace(at, 21, "anonymous");
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  size_t args = s.size();  // where the template arguments begin
  if (!s.empty() && s.back() == '>') {
    int d = 0;
    size_t i = s.size();
    while (i-- > 0) {
      if (s[i] == '>') ++d;
      if (s[i] == '<' && --d == 0) break;
    }
    if (i != std::string::npos && i > 0) args = i;
  }
  const size_t cut = s.find_last_of(": ", args == 0 ? 0 : args - 1);
  const size_t begin = cut == std::string::npos ? 0 : cut + 1;
  return s.substr(begin, (template_arguments ? s.size() : args) - begin);
}
}  // namespace

std::string base_function_name(const std::string& name) {
  return unqualified_name(name, false);
}

std::string instantiation_name(const std::string& name) {
  return unqualified_name(name, true);
}

const char* function_name(const void* fn, const char* fallback) {
  static auto* names = new std::map<const void*, std::string>;
  static std::mutex m;
  std::lock_guard lk(m);
  auto it = names->find(fn);
  if (it == names->end()) it = names->emplace(fn, instantiation_name(function_symbol(fn))).first;
  return it->second.empty() ? fallback : it->second.c_str();
}

}  // namespace cudasim::detail
