/// @file checked_run.h
/// Whether this test program runs under the CPU backend's checker (the `.check` ctest entries set
/// CUDASIM_CHECK). The checker records every memory access, at several times the plain cost, so a
/// test may check fewer cases there; the plain runs (.sim, .cuda) still check them all.
#pragma once

#include <cstdlib>
#include <string_view>

namespace clockwork {

/// True when CUDASIM_CHECK asks for any check ("0" and "none" ask for none).
inline bool checked_run() {
  const char* check = std::getenv("CUDASIM_CHECK");
  return check != nullptr && *check != '\0' && std::string_view(check) != "0" &&
         std::string_view(check) != "none";
}

}  // namespace clockwork
