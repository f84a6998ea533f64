/// @file nvtx.h
/// Named ranges for profiler timelines (NVTX), so that `nsys` shows "layer 7 > rope" instead of
/// an anonymous run of kernels.
///
///     {
///       const nvtx::Range range("rope");        // "rope"
///       kernels::rope_apply(...);
///     }                                         // the range ends here
///     const nvtx::Range layer("layer ", 7);     // "layer 7"
///
/// The ranges belong to the NVTX domain "clockwork". To see them, record a timeline with NVTX
/// tracing on and open it in Nsight Systems, e.g.
///
///     nsys profile --trace=cuda,nvtx -o forward build/bin/clockwork-cuda generate --model DIR ...
///     nsys stats --report nvtx_sum forward.nsys-rep
///
/// (the ranges are in the timeline's NVTX row, and nsys also projects them onto the GPU row over
/// the kernels launched inside them). `--trace=nvtx` works with the CPU build, `clockwork`, too:
/// its kernels run inside the calls that launch them, so there the ranges time the kernels
/// themselves.
///
/// Without a profiler attached every call returns after checking one function pointer, so the
/// ranges stay in release code. Defining NVTX_DISABLE before this header removes them entirely.
///
/// Built on the CUDA toolkit's header-only NVTX3 C++ wrapper; this header is plain host C++ (no
/// libtorch, no device code) and compiles with g++ for the CPU backend and with nvcc.
#pragma once

#include <cstdio>

// NVTX's advice for headers: use the explicitly versioned names (nvtx3::v1), so that a file that
// also includes another version of nvtx3.hpp still compiles.
#ifndef NVTX3_CPP_REQUIRE_EXPLICIT_VERSION
#define NVTX3_CPP_REQUIRE_EXPLICIT_VERSION
#include <nvtx3/nvtx3.hpp>
#undef NVTX3_CPP_REQUIRE_EXPLICIT_VERSION
#else
#include <nvtx3/nvtx3.hpp>
#endif

namespace clockwork::nvtx {

/// The NVTX domain of every Clockwork range ("clockwork"): nsys groups and filters by it.
struct Domain {
  /// The domain's name as the profiler shows it.
  static constexpr const char* name{"clockwork"};
};

/// One named range, open from construction to destruction (scope-bound; not copyable or
/// movable). Ranges nest: a range opened inside another one is drawn below it.
class Range {
 public:
  /// A range called `name` (copied by NVTX when the range opens).
  explicit Range(const char* name) noexcept : range_{nvtx3::v1::message{name}} {}

  /// A range called `name` followed by `number`: Range("layer ", 7) is "layer 7", and
  /// Range("forward s=", 12) is "forward s=12".
  Range(const char* name, long long number) noexcept
      : range_{nvtx3::v1::message{Label(name, number).text}} {}

  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  // The text in a fixed buffer (no allocation); the temporary lives until the range has opened,
  // and NVTX copies the text then.
  struct Label {
    char text[96];
    Label(const char* name, long long number) noexcept {
      std::snprintf(text, sizeof text, "%s%lld", name, number);
    }
  };

  nvtx3::v1::scoped_range_in<Domain> range_;
};

}  // namespace clockwork::nvtx
