/// @file nvtx_recorder.h
/// For tests: records the NVTX ranges a program opens, without a profiler.
///
/// NVTX looks for a tool when the first range opens. Linking this recorder into a test binary
/// installs it as that tool (NVTX's static injection: the library defines the symbol
/// `InitializeInjectionNvtx2_fnptr`), so a test can check which ranges the code under test
/// opened, their names, domain and nesting. A profiler started from outside (nsys sets
/// NVTX_INJECTION64_PATH) takes precedence; the recorder then sees nothing and says so through
/// recorder_installed().
///
///     nvtx_recorder::clear();
///     model.forward(ids);
///     for (const RecordedRange& r : nvtx_recorder::ranges()) ...  // "forward s=9 > embedding"
#pragma once

#include <string>
#include <vector>

namespace clockwork::nvtx_recorder {

/// One range, as it was opened.
struct RecordedRange {
  std::string domain;  ///< the NVTX domain's name ("" for NVTX's global domain)
  std::string name;    ///< the range's message
  std::string path;    ///< the names of the enclosing ranges and this one, joined by " > "
  int depth = 0;       ///< 0 for a range opened when no other was open on its thread
};

/// True when NVTX handed its calls to the recorder (false when a profiler's tool took over, or
/// before the first NVTX call of the process).
bool recorder_installed();

/// Forgets the recorded ranges (ranges open right now stay open and are still closed properly).
void clear();

/// The ranges opened since the last clear(), in the order they opened.
std::vector<RecordedRange> ranges();

/// Ranges opened and not yet closed on the calling thread (0 when every range was closed).
int open_ranges();

}  // namespace clockwork::nvtx_recorder
