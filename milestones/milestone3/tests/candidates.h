// Choosing which known mistakes may explain an output, before matches_reference() compares them.
//
// matches_reference() calls a candidate "close" when it agrees with the output on the elements
// where both are finite. Two kinds of output make that test meaningless, and these helpers leave
// such candidates out: an output with elements nobody wrote (NaN by poison: no mistake of the
// table leaves elements unwritten, and the report already names them), and a candidate that is
// NaN where the output is a number (inside a whole model one NaN row spreads to every later
// layer, and such a candidate, compared on its few finite elements, looks close to anything).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"

namespace clockwork {

/// The candidates that could explain `got` (see above).
inline std::vector<PitfallCandidate> explaining(std::vector<PitfallCandidate> candidates,
                                                const std::vector<float>& got) {
  for (float g : got) {
    uint32_t bits;
    std::memcpy(&bits, &g, sizeof bits);
    if (bits == 0xFFFFFFFFu) return {};  // DeviceBuffer's poison: never written
  }
  std::vector<PitfallCandidate> kept;
  for (PitfallCandidate& c : candidates) {
    bool possible = true;
    for (size_t i = 0; i < c.output.size() && i < got.size() && possible; ++i) {
      possible = std::isfinite(c.output[i]) || !std::isfinite(got[i]);
    }
    if (possible) kept.push_back(std::move(c));
  }
  return kept;
}

/// Same, for an output still on the device.
inline std::vector<PitfallCandidate> explaining(std::vector<PitfallCandidate> candidates,
                                                const DeviceBuffer<float>& got) {
  return explaining(std::move(candidates), got.download());
}

/// For every candidate of size k·n (k > 1), adds one holding only its first n values: what an
/// [n] output buffer shows when a kernel wrote a whole [k, n] result into it (lm_head over every
/// row leaves row 0's logits in a [V] buffer).
inline void add_first_row_views(std::vector<PitfallCandidate>& candidates, size_t n) {
  for (size_t i = 0, count = candidates.size(); i < count; ++i) {
    if (candidates[i].output.size() <= n || candidates[i].output.size() % n != 0) continue;
    PitfallCandidate first = candidates[i];
    first.output.resize(n);
    candidates.push_back(std::move(first));
  }
}

}  // namespace clockwork
