/// @file markers.h
/// The solution-marker engine: turns a file of the solution tree into the same file of a
/// milestone's handout (the convention is described in handouts/solution-markers.md).
///
/// A region of milestone K is either kept (its solution stays, the marker lines go) or replaced:
/// its task text becomes a `TODO(mK)` comment and its `STUB:` lines become code, all indented
/// like the line that opens the region. Malformed markers are reported with file and line and
/// nothing is produced for that file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace clockwork::handout {

/// A malformed marker, reported as `file:line: error: message`.
struct MarkerError {
  std::string file;
  int line = 0;  ///< 1-based
  std::string message;

  /// The compiler-style line: `file:line: error: message`.
  std::string str() const;
};

/// One solution region as found in the source.
struct Region {
  int milestone = 0;   ///< K of `SOLUTION(mK)`
  int begin_line = 0;  ///< 1-based line of the opening marker
  int end_line = 0;    ///< 1-based line of the closing marker
  bool stubbed = false;  ///< replaced by its TODO and stub (false: the solution was kept)
};

/// The result of processing one file.
struct StripResult {
  std::string text;                  ///< the handout's version (empty when there are errors)
  std::vector<Region> regions;       ///< every region, in order
  std::vector<MarkerError> errors;   ///< malformed markers; the file must not be written

  bool ok() const { return errors.empty(); }
  /// True when at least one region was replaced by its stub.
  bool stubbed() const;
};

/// The comment leader the markers of a file use, chosen by its name: "//" for C, C++ and CUDA
/// sources and headers, "#" for CMake, shell and Python files, and "" for every other file
/// (documentation, data), which is copied as it is: the marker convention's own handout shows
/// markers in a code block that must stay intact.
std::string_view comment_leader_for(std::string_view path);

/// Processes `text` (the content of `file`, used in messages) with comment leader `leader`:
/// regions of milestone >= `stub_from` are replaced by their TODO and stub, earlier ones keep
/// their solution without the marker lines.
StripResult strip_solutions(std::string_view text, const std::string& file, int stub_from,
                            std::string_view leader = "//");

/// True when one of the first lines of `text` is an `INSTRUCTOR-ONLY` line (after `//` or `#`):
/// such files never go into a handout.
bool has_instructor_only_line(std::string_view text);

}  // namespace clockwork::handout
