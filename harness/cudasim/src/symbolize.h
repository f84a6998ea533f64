// Code addresses to source lines, for diagnostics. Only ever used when something is reported, so
// it may be slow: it asks addr2line (binutils) about the program's own debug information, which
// follows the rewriter's #line directives and so names the original .cu file and line.
#pragma once

#include <string>
#include <vector>

namespace cudasim::detail {

struct SourceLine {
  std::string function;  // demangled, or "" when unknown
  std::string file;      // as the compiler saw it (absolute for the project's files), or ""
  unsigned line = 0;
};

/// The source lines of the instruction at `pc`, innermost inlined call first. `return_address`:
/// `pc` is where a call returns to (a callback's caller), so the call itself is one byte before.
std::vector<SourceLine> symbolize(const void* pc, bool return_address);

/// Whether `file` (a source file named by the debug information) is the C++ standard library's or
/// the system's headers: code a program calls, not code it wrote. False when unknown ("").
bool is_library_file(const std::string& file);

/// "kernels/softmax.cu:42 (in softmax_kernel)" for a return address into program code; the
/// innermost source line that is not in cudasim's or CUDA's headers.
std::string describe_code_address(const void* pc, bool return_address = true);

/// The innermost source line of the return address `pc` that is the program's own code (not
/// cudasim's or CUDA's headers); empty file when unknown.
SourceLine program_source_line(const void* pc);

/// "test.cu:12" for a call stack (return addresses, innermost first): the first frame that is the
/// program's own code rather than the runtime, CUDA's headers or the C++ library.
std::string describe_call_site(void* const* frames, int depth);

/// The function whose code starts at `fn`, from the program's symbol table (demangled), or "".
std::string function_symbol(const void* fn);

/// "softmax" for "void ns::softmax<float>(float const*, int)" or "ns::softmax<float>": the
/// unqualified name without template arguments or parameters.
std::string base_function_name(const std::string& name);

/// "softmax<float>" for the same: the unqualified name with its template arguments.
std::string instantiation_name(const std::string& name);

}  // namespace cudasim::detail
