/// @file symbols.h
/// Which names of the framework a submission's code may use. Student code runs in the same
/// process as the tests, the libtorch reference they compare with and the CPU backend's checker,
/// so a student file could declare their names itself: switch the checker off in a checked run,
/// or fill its outputs from the reference. Such a name can be hidden from a reader (a macro can
/// build it) but not from the linker, so the grader reads the symbol tables of the objects
/// compiled from student files (`nm`) and refuses a submission whose objects refer to or define
/// one.
#pragma once

#include <string>
#include <vector>

namespace clockwork::grading {

/// An object file the build compiled from a student file.
struct StudentObject {
  std::string object;    ///< its path, as given to nm
  std::string source;    ///< the student file, relative to the project root
  bool checked = false;  ///< built for the checked run: the checker's instrumentation is expected in it
};

/// A name a student object may not use.
struct ForbiddenSymbol {
  std::string source;    ///< the student file
  std::string symbol;    ///< the name, demangled
  bool defined = false;  ///< the object defines it (else it refers to it)
  std::string owner;     ///< what the name belongs to, for the message
};

/// The forbidden names in `nm_output`, the output of `nm -P -g -A` over the objects' paths, in the
/// order found, each (source, symbol) once. Throws std::runtime_error on a line it cannot read,
/// so that nothing goes unchecked.
std::vector<ForbiddenSymbol> forbidden_symbols(const std::string& nm_output, const std::vector<StudentObject>& objects);

/// What the student is told: each file and the names it may not use, and why.
std::string describe_forbidden(const std::vector<ForbiddenSymbol>& found);

/// The name a demangled symbol is about: without what the demangler puts around it ("guard
/// variable for ", "TLS wrapper function for ", a function's return type and parameters).
std::string symbol_entity(const std::string& demangled);

}  // namespace clockwork::grading
