// Counting mode: Nsight-Compute-like memory counts from the CPU backend (CUDASIM_PROFILE=1).
//
// A program built for checking (`cudasim-cc --check` or `--profile`, the `_check` binaries) calls
// the checker before every memory access (check.cpp); in counting mode the checker hands each
// access of global or shared memory to this file as well. Accesses to a thread's own stack, the
// kernel's parameters and __constant__/__device__ variables are not counted.
//
// A GPU issues a memory instruction once per warp, for all its active lanes together; the CPU
// backend runs the threads of a warp one after the other. The accesses of one warp-level
// instruction are brought back together by their identity: the n-th time lane L executes the
// access at code address P since the block's last __syncthreads() is occurrence n of P, and
// occurrence n of P in the 32 lanes of one warp is one instruction (one "request"). A lane that
// skips the access (a branch, a shorter loop) simply does not contribute to it, as an inactive
// lane on a GPU. An instruction is complete when every lane of the warp contributed, or when the
// block reaches a barrier or ends; then it is counted:
//   - global memory: the distinct 32-byte sectors its lanes touch (ncu's
//     l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum over ...requests.sum); bytes requested is
//     the sum of the lanes' access sizes, bytes moved is 32 per sector;
//   - shared memory: 32 banks of 4 bytes; lanes that read the same 4-byte word are served at
//     once (broadcast), distinct words in one bank take one wavefront each, so a request takes
//     as many wavefronts as the busiest bank has distinct words. Accesses wider than 4 bytes are
//     served 128 bytes of lanes at a time (half warps for 8 bytes, quarter warps for 16), each
//     such phase needing at least one wavefront; bank conflicts are the wavefronts beyond one per
//     phase (ncu's l1tex__data_bank_conflicts_pipe_lsu_mem_shared);
//   - atomics are counted as requests and lane operations (and sectors, for global ones).
// The compiler's view of an access is what is counted: loads it merged or vectorised on the CPU
// (one 16-byte access instead of four 4-byte ones) count as it emitted them, and a value it kept
// in a register is not loaded again. Bytes moved count traffic between the SM and the L2 cache;
// with perfect reuse in L2 DRAM sees less, with no reuse the same.
//
// FLOPs: code compiled with cudasim's GCC plugin (harness/cudasim/plugins, loaded with the checking
// instrumentation when GCC's plugin headers are installed) adds each basic block's floating-point
// operations to a per-OS-thread counter, __cudasim_flops; a block's FLOPs are the counter's growth
// between its start and its end, when only its threads ran on that OS thread. A program (or a
// bench tool that knows the operation) may also declare them with cudasim::profile_flops() after a
// launch; the report shows both when both are known.
//
// How it is done cheaply: the hook called for every access (access(), inline in profile.h) only
// appends the address, size, code address and kind to the thread's log of kLogDepth entries. A
// warp's logs are counted when one fills or at a barrier (drain()). Usually every lane of the warp
// made the same accesses in the same order, so the lanes' p-th entries are one instruction,
// complete, counted at once from the log; from the first position where the lanes differ, the
// warp's accesses up to the barrier are matched by occurrence among open instructions
// (general_access()). Both give the same groups, so the counts do not depend on which path ran.
//
// A thread whose log is full lets the other threads of its block take a turn (a yield, as in a
// spin-wait), so that a thread looping far ahead of its warp neither overruns its log nor leaves
// thousands of instructions open; a correct kernel's results do not depend on that order.
//
// A block runs on one OS thread, so the logs and the warps' open instructions live in thread_local
// tables; per-site totals are added to the launch's under a mutex when the block ends.
#include "profile.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "symbolize.h"

// The FLOP counter of the plugin's code: one per OS thread (the plugin adds to it with one
// instruction, addressing it as a thread-local variable of the program).
extern "C" {
__thread unsigned long long __cudasim_flops = 0;
}

namespace cudasim::detail::profile {

bool g_launch_profiled = false;
std::atomic<bool> g_flops_counted{false};
constinit thread_local LaneLogs tl_logs;

namespace {

constexpr uint64_t kLowBits = (uint64_t{1} << kTopShift) - 1;

struct Stats {
  uint64_t requests = 0, lanes = 0, bytes = 0, transactions = 0, ideal = 0;
  void add(const Stats& o) {
    requests += o.requests;
    lanes += o.lanes;
    bytes += o.bytes;
    transactions += o.transactions;
    ideal += o.ideal;
  }
};

// One warp-level instruction being gathered: the address and size of each contributing lane.
// Kept small, since a warp has one open per site and lane 0 may run far ahead of lane 31: the low
// 32 bits of each address, with the high bits and the size shared by the lanes; a lane that differs
// in either moves the group to a full copy (`wide`, rare: an instruction reads one size, and the
// buffers of one instruction rarely straddle a 4 GiB boundary).
struct Group {
  uint32_t lo[32];
  uint32_t lanes;
  uint32_t hi;
  uint8_t size;
  int32_t wide;  // index into ThreadProfile::wide, or -1
};
struct WideGroup {
  uintptr_t addr[32];
  uint8_t size[32];
};
// A group as count_group() reads it.
struct Lanes {
  uintptr_t addr[32];
  uint8_t size[32];
  uint32_t lanes;
};

// One access site (code address and kind) as seen by one warp.
struct Site {
  const void* pc;
  Kind kind;
  uint32_t count[32];         // per lane: its occurrences of this site in the barrier interval
  uint32_t base = 0;          // occurrence number of open[head]
  std::vector<Group> open;    // groups by occurrence, from `head` on (lanes 0: already counted)
  size_t head = 0;
  Stats stats;
};

struct Warp {
  std::vector<Site> sites;
  uint32_t full = 0;  // the lanes this warp has
  // Whether the lanes' accesses since the last barrier go through the open groups of `sites`
  // (their logs differed) rather than being counted straight from the logs, and the last site
  // the logs' counting used.
  bool general = false;
  size_t hint = 0;
  // 1 + the index in `sites` of a site whose code address hashes to the slot (0: none), so that
  // finding a site is not a walk through all of them when a loop jumps back.
  uint16_t slot[64] = {};
};
inline unsigned slot_of(const void* pc, Kind kind) {
  const auto v = reinterpret_cast<uintptr_t>(pc);
  return static_cast<unsigned>((v ^ (v >> 6) ^ (uintptr_t{kind} << 3)) & 63);
}

struct ThreadProfile {
  std::vector<Warp> warps;
  std::vector<WideGroup> wide;
  std::vector<int32_t> free_wide;
  std::vector<uint16_t> hint = std::vector<uint16_t>(kMaxThreadsPerBlock);  // per lane: its last site
  std::vector<LogSlot> log;      // the warps' logs (LaneLogs::slots)
  std::vector<uint32_t> depth;   // LaneLogs::depth
  unsigned nwarps = 0;
  unsigned long long flops_at_start = 0;  // __cudasim_flops when the block began
};
thread_local ThreadProfile* tl_profile = nullptr;

bool is_global(Kind k) { return k <= kGlobalAtomic; }

// A set of at most 160 values, for counting distinct sectors and words without sorting: open
// addressing in 256 slots.
class SmallSet {
 public:
  SmallSet() { std::memset(used_, 0, sizeof used_); }
  bool insert(uintptr_t v) {  // true when v is new
    unsigned h = static_cast<unsigned>((v * 0x9e3779b97f4a7c15ull) >> 56);
    while (used_[h]) {
      if (slot_[h] == v) return false;
      h = (h + 1) & 255;
    }
    used_[h] = 1;
    slot_[h] = v;
    return true;
  }

 private:
  uintptr_t slot_[256];
  uint8_t used_[256];
};

// The fewest sectors that could carry what the lanes asked for: their distinct bytes, packed.
uint64_t ideal_sectors(const Lanes& g) {
  uintptr_t lo = ~uintptr_t{0}, hi = 0;
  for (uint32_t m = g.lanes; m; m &= m - 1) {
    const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
    lo = std::min(lo, g.addr[l]);
    hi = std::max(hi, g.addr[l] + g.size[l]);
  }
  uint64_t distinct = 0;
  if (hi - lo <= 512) {  // a byte map of the span
    uint64_t bits[8] = {};
    for (uint32_t m = g.lanes; m; m &= m - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
      for (uintptr_t b = g.addr[l] - lo; b < g.addr[l] - lo + g.size[l]; ++b) bits[b >> 6] |= uint64_t{1} << (b & 63);
    }
    for (uint64_t b : bits) distinct += static_cast<uint64_t>(__builtin_popcountll(b));
  } else {  // lanes far apart: distinct (address, size) pairs, overlaps aside
    SmallSet seen;
    for (uint32_t m = g.lanes; m; m &= m - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
      if (seen.insert(g.addr[l] * 32 + g.size[l])) distinct += g.size[l];
    }
  }
  return (distinct + 31) / 32;
}

// Calls f(l) for every lane l in `lanes`, in lane order.
template <class F>
void for_each_lane(uint32_t lanes, F f) {
  if (lanes == ~0u) {  // a full warp: a loop the compiler vectorises
    for (unsigned l = 0; l < 32; ++l) f(l);
    return;
  }
  for (uint32_t m = lanes; m; m &= m - 1) f(static_cast<unsigned>(__builtin_ctz(m)));
}

// An instruction whose lanes (`lanes`; lane l's address addr(l)) all access `size` bytes (a power
// of two up to 16) aligned to it, between addresses lo and hi: counted as count_group() would,
// returning true, or false when its lanes are too far apart for the bitmaps below. Aligned
// accesses of one size either coincide or do not overlap and never straddle a sector. In shared
// memory, words less than 32 apart lie in distinct banks. In global memory, lanes in address
// order (a broadcast, a row, a column read down a matrix) show each new sector or element as a
// change from the previous lane, however far apart; otherwise the distinct sectors and the
// distinct bytes come from bitmaps of sectors and of elements.
template <class Addr>
bool count_uniform(Stats& st, bool global, uint32_t lanes, unsigned size, uintptr_t lo, uintptr_t hi, Addr addr) {
  uint64_t transactions = 1, ideal = 1;
  if (!global) {
    if (size > 4 || (hi >> 2) - (lo >> 2) >= 32) return false;
  } else {
    uintptr_t prev = lo;
    bool ordered = true, first = true;
    uint64_t nsec = 1, nel = 1;
    for_each_lane(lanes, [&](unsigned l) {
      const uintptr_t a = addr(l);
      ordered &= a >= prev;
      if (!first) {
        nsec += (a >> 5) != (prev >> 5);
        nel += a != prev;
      }
      first = false;
      prev = a;
    });
    if (!ordered) {
      if ((hi >> 5) - (lo >> 5) >= 512 || (hi - lo) / size >= 512) return false;
      uint64_t sectors[8] = {}, elements[8] = {};
      const unsigned shift = static_cast<unsigned>(__builtin_ctz(size));
      for_each_lane(lanes, [&](unsigned l) {
        const uintptr_t sec = (addr(l) >> 5) - (lo >> 5), el = (addr(l) - lo) >> shift;
        sectors[sec >> 6] |= uint64_t{1} << (sec & 63);
        elements[el >> 6] |= uint64_t{1} << (el & 63);
      });
      nsec = nel = 0;  // only the words the span reaches (popcount may be a call)
      for (unsigned i = 0; i <= ((hi >> 5) - (lo >> 5)) >> 6; ++i) nsec += static_cast<uint64_t>(__builtin_popcountll(sectors[i]));
      for (unsigned i = 0; i <= ((hi - lo) >> shift) >> 6; ++i) nel += static_cast<uint64_t>(__builtin_popcountll(elements[i]));
    }
    transactions = nsec;
    ideal = (nel * size + 31) / 32;
  }
  const auto n = static_cast<unsigned>(__builtin_popcount(lanes));
  ++st.requests;
  st.lanes += n;
  st.bytes += uint64_t{n} * size;
  st.transactions += transactions;
  st.ideal += ideal;
  return true;
}

// The usual instruction: every lane one size (a power of two up to 16), aligned to it, the lanes
// close together (count_uniform). Returns false for anything else.
bool count_simple(Stats& st, bool global, const Lanes& g) {
  uint8_t smin = 255, smax = 0;
  uintptr_t lo = ~uintptr_t{0}, hi = 0, low_bits = 0;
  for_each_lane(g.lanes, [&](unsigned l) {
    smin = std::min(smin, g.size[l]);
    smax = std::max(smax, g.size[l]);
    lo = std::min(lo, g.addr[l]);
    hi = std::max(hi, g.addr[l]);
    low_bits |= g.addr[l];
  });
  const unsigned size = smin;
  if (smin != smax || size == 0 || size > 16 || (size & (size - 1)) || (low_bits & (size - 1))) return false;
  return count_uniform(st, global, g.lanes, size, lo, hi, [&](unsigned l) { return g.addr[l]; });
}

// count_simple() for a full warp's entry of a log (one site, every lane), read in place: the
// usual instruction of a loop, so the lanes are scanned with four independent minima, maxima and
// masks. The top byte of each entry is the lane's size: the entries' AND and OR agree on it when
// every lane has the same size.
bool count_full_slot(Stats& st, bool global, const LogSlot& slot) {
  uint64_t mn0 = slot.addr[0], mn1 = slot.addr[1], mn2 = slot.addr[2], mn3 = slot.addr[3];
  uint64_t mx0 = mn0, mx1 = mn1, mx2 = mn2, mx3 = mn3, and0 = mn0, and1 = mn1, and2 = mn2, and3 = mn3;
  uint64_t or0 = mn0, or1 = mn1, or2 = mn2, or3 = mn3;
  for (unsigned l = 4; l < 32; l += 4) {
    const uint64_t v0 = slot.addr[l], v1 = slot.addr[l + 1], v2 = slot.addr[l + 2], v3 = slot.addr[l + 3];
    mn0 = std::min(mn0, v0), mn1 = std::min(mn1, v1), mn2 = std::min(mn2, v2), mn3 = std::min(mn3, v3);
    mx0 = std::max(mx0, v0), mx1 = std::max(mx1, v1), mx2 = std::max(mx2, v2), mx3 = std::max(mx3, v3);
    and0 &= v0, and1 &= v1, and2 &= v2, and3 &= v3;
    or0 |= v0, or1 |= v1, or2 |= v2, or3 |= v3;
  }
  const uint64_t lo_v = std::min(std::min(mn0, mn1), std::min(mn2, mn3));
  const uint64_t hi_v = std::max(std::max(mx0, mx1), std::max(mx2, mx3));
  const uint64_t and_v = and0 & and1 & and2 & and3, or_v = or0 | or1 | or2 | or3;
  const auto size = static_cast<unsigned>(or_v >> kTopShift);
  if ((and_v >> kTopShift) != size || size > 16 || size == 0 || (size & (size - 1)) || (or_v & (size - 1))) return false;
  return count_uniform(st, global, ~0u, size, lo_v & kLowBits, hi_v & kLowBits,
                       [&](unsigned l) { return static_cast<uintptr_t>(slot.addr[l] & kLowBits); });
}

void count_group(Site& s, const Lanes& g) {
  Stats& st = s.stats;
  if (count_simple(st, is_global(s.kind), g)) return;
  ++st.requests;
  st.lanes += static_cast<unsigned>(__builtin_popcount(g.lanes));
  for (uint32_t m = g.lanes; m; m &= m - 1) st.bytes += g.size[__builtin_ctz(m)];
  if (is_global(s.kind)) {
    // Usually the sectors lie within 512 of each other: a bitmap counts them without sorting.
    uintptr_t lo = ~uintptr_t{0}, hi = 0;
    for (uint32_t m = g.lanes; m; m &= m - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
      lo = std::min(lo, g.addr[l] >> 5);
      hi = std::max(hi, (g.addr[l] + g.size[l] - 1) >> 5);
    }
    st.ideal += ideal_sectors(g);
    if (hi - lo < 512) {
      uint64_t bits[8] = {};
      for (uint32_t m = g.lanes; m; m &= m - 1) {
        const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
        for (uintptr_t sec = g.addr[l] >> 5; sec <= (g.addr[l] + g.size[l] - 1) >> 5; ++sec) {
          bits[(sec - lo) >> 6] |= uint64_t{1} << ((sec - lo) & 63);
        }
      }
      for (uint64_t b : bits) st.transactions += static_cast<uint64_t>(__builtin_popcountll(b));
      return;
    }
    SmallSet seen;
    unsigned n = 0;
    for (uint32_t m = g.lanes; m; m &= m - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
      for (uintptr_t sec = g.addr[l] >> 5; sec <= (g.addr[l] + g.size[l] - 1) >> 5 && n < 160; ++sec, ++n) {
        st.transactions += seen.insert(sec);
      }
    }
    return;
  }
  // Shared memory: lanes are served in phases of 128 bytes' worth of lanes, in lane order.
  unsigned widest = 0;
  for (uint32_t m = g.lanes; m; m &= m - 1) widest = std::max<unsigned>(widest, g.size[__builtin_ctz(m)]);
  if (widest <= 4) {
    // The common case: one word per lane. Each bank remembers its first word; a second, different
    // word in a bank is a conflict, counted exactly below.
    uintptr_t first[32];
    uint32_t used = 0;
    bool conflict = false;
    for (uint32_t m = g.lanes; m && !conflict; m &= m - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
      if ((g.addr[l] & 3) + g.size[l] > 4) {
        conflict = true;  // straddles two words: the general count
        break;
      }
      const uintptr_t w = g.addr[l] >> 2;
      const unsigned b = static_cast<unsigned>(w & 31);
      if (!(used >> b & 1u)) {
        used |= 1u << b;
        first[b] = w;
      } else if (first[b] != w) {
        conflict = true;
      }
    }
    if (!conflict) {
      ++st.transactions;
      ++st.ideal;
      return;
    }
  }
  widest = std::max(widest, 4u);
  const unsigned per_phase = std::max(1u, 128u / std::min(widest, 128u));
  for (unsigned first = 0; first < 32; first += per_phase) {
    const uint32_t in_phase = g.lanes & (per_phase >= 32 ? ~0u : ((1u << per_phase) - 1u) << first);
    if (!in_phase) continue;
    SmallSet seen;
    unsigned n = 0, per_bank[32] = {}, busiest = 0;
    for (uint32_t m = in_phase; m; m &= m - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
      for (uintptr_t w = g.addr[l] >> 2; w <= (g.addr[l] + g.size[l] - 1) >> 2 && n < 160; ++w, ++n) {
        if (seen.insert(w)) busiest = std::max(busiest, ++per_bank[w & 31]);
      }
    }
    st.transactions += busiest;
    ++st.ideal;
  }
}

void release_group(ThreadProfile& t, Site& s, size_t index) {
  Group& g = s.open[index];
  if (!g.lanes) return;
  if (g.wide < 0 && !is_global(s.kind) && g.size <= 4) {
    // What count_group() finds for a shared access of one word per lane and no two words in one
    // bank, decided here on the packed addresses (the lanes share the high bits), without copying.
    uint32_t first[32];
    uint32_t used = 0;
    bool simple = true;
    for (uint32_t m = g.lanes; m; m &= m - 1) {
      const uint32_t lo = g.lo[__builtin_ctz(m)];
      const uint32_t w = lo >> 2, b = w & 31;
      if ((lo & 3) + g.size > 4 || ((used >> b & 1u) && first[b] != w)) {
        simple = false;
        break;
      }
      used |= 1u << b;
      first[b] = w;
    }
    if (simple) {
      const auto n = static_cast<unsigned>(__builtin_popcount(g.lanes));
      ++s.stats.requests;
      s.stats.lanes += n;
      s.stats.bytes += uint64_t{n} * g.size;
      ++s.stats.transactions;
      ++s.stats.ideal;
      g.lanes = 0;
      return;
    }
  }
  Lanes l;
  l.lanes = g.lanes;
  if (g.wide >= 0) {
    const WideGroup& w = t.wide[static_cast<size_t>(g.wide)];
    for (uint32_t m = g.lanes; m; m &= m - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctz(m));
      l.addr[i] = w.addr[i];
      l.size[i] = w.size[i];
    }
    t.free_wide.push_back(g.wide);
  } else {
    for (uint32_t m = g.lanes; m; m &= m - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctz(m));
      l.addr[i] = (uintptr_t{g.hi} << 32) | g.lo[i];
      l.size[i] = g.size;
    }
  }
  count_group(s, l);
  g.lanes = 0;
}

// Finds the warp's site for (pc, kind), adding it when new; `hint` is the last one used: code runs
// in the order its sites were first met, so after site i usually comes i + 1.
size_t find_site(Warp& warp, const void* pc, Kind kind, size_t hint) {
  std::vector<Site>& sites = warp.sites;
  if (hint + 1 < sites.size() && sites[hint + 1].pc == pc && sites[hint + 1].kind == kind) return hint + 1;
  if (hint < sites.size() && sites[hint].pc == pc && sites[hint].kind == kind) return hint;
  const unsigned h = slot_of(pc, kind);
  size_t si = sites.size();
  if (const size_t c = warp.slot[h]; c && sites[c - 1].pc == pc && sites[c - 1].kind == kind) return c - 1;
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i].pc == pc && sites[i].kind == kind) {
      si = i;
      break;
    }
  }
  if (si < 0xffff) warp.slot[h] = static_cast<uint16_t>(si + 1);  // a new site gets index si too
  if (si == sites.size()) {
    sites.emplace_back();
    sites.back().pc = pc;
    sites.back().kind = kind;
    std::memset(sites.back().count, 0, sizeof sites.back().count);
  }
  return si;
}

// One access of a lane whose warp's logs differed: it joins occurrence n of its site among the
// warp's open instructions, which is counted when complete or at the barrier.
const void* pc_of(uint64_t key) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(key & kLowBits)); }

// Lane `bit`'s entry at one position.
uint64_t key_of(const LogSlot& s, unsigned bit) { return s.differ >> bit & 1u ? s.other[bit] : s.key; }

void general_access(ThreadProfile& t, Warp& warp, unsigned lane, const LogSlot& slot) {
  const unsigned bit = lane & 31;
  const uint64_t key = key_of(slot, bit), addr = slot.addr[bit];
  const auto kind = static_cast<Kind>(key >> kTopShift);
  const uintptr_t a = addr & kLowBits;
  const void* pc = pc_of(key);
  const auto size = static_cast<uint8_t>(addr >> kTopShift);
  const size_t si = find_site(warp, pc, kind, t.hint[lane]);
  t.hint[lane] = static_cast<uint16_t>(std::min<size_t>(si, 0xffff));
  Site& s = warp.sites[si];
  const size_t index = s.head + (s.count[bit]++ - s.base);
  if (index == s.open.size()) {
    Group& g = s.open.emplace_back();
    g.lanes = 0;
    g.hi = static_cast<uint32_t>(a >> 32);
    g.size = size;
    g.wide = -1;
  }
  Group& g = s.open[index];
  const auto sz = size;
  if (__builtin_expect(g.wide < 0 && (g.hi == static_cast<uint32_t>(a >> 32) && g.size == sz), 1)) {
    g.lo[bit] = static_cast<uint32_t>(a);
  } else {
    if (g.wide < 0) {  // the first lane that differs: copy the others to a full group
      int32_t wi;
      if (!t.free_wide.empty()) {
        wi = t.free_wide.back();
        t.free_wide.pop_back();
      } else {
        wi = static_cast<int32_t>(t.wide.size());
        t.wide.emplace_back();
      }
      WideGroup& w = t.wide[static_cast<size_t>(wi)];
      for (uint32_t m = g.lanes; m; m &= m - 1) {
        const unsigned i = static_cast<unsigned>(__builtin_ctz(m));
        w.addr[i] = (uintptr_t{g.hi} << 32) | g.lo[i];
        w.size[i] = g.size;
      }
      g.wide = wi;
    }
    WideGroup& w = t.wide[static_cast<size_t>(g.wide)];
    w.addr[bit] = a;
    w.size[bit] = sz;
  }
  g.lanes |= 1u << bit;
  if (g.lanes == warp.full) {
    release_group(t, s, index);
    while (s.head < s.open.size() && !s.open[s.head].lanes) {
      ++s.head;
      ++s.base;
    }
    if (s.head == s.open.size()) {
      s.open.clear();
      s.head = 0;
    } else if (s.head > 4096 && s.head * 2 > s.open.size()) {  // drop what has been counted
      s.open.erase(s.open.begin(), s.open.begin() + static_cast<std::ptrdiff_t>(s.head));
      s.head = 0;
    }
  }
}

// Hands one lane's log to the open instructions and empties it.
void drain_lane(ThreadProfile& t, Warp& warp, unsigned lane) {
  LogSlot* slots = &t.log[size_t{lane >> 5} * kLogDepth];
  for (uint32_t p = 0; p < t.depth[lane]; ++p) {
    general_access(t, warp, lane, slots[p]);
    slots[p].differ &= ~(1u << (lane & 31));  // its next entry here is compared afresh
  }
  t.depth[lane] = 0;
}

// Counts the logs of warp `w` and empties them. While every lane of the warp has made the same
// accesses (the same sites in the same order) since the barrier, access p of each lane is
// occurrence n of one site in all of them, so the lanes' p-th accesses are one complete
// instruction, counted here at once. From the first position where the lanes differ, or when a
// lane has made fewer accesses, the rest goes through the open instructions (general_access), for
// the warp's remaining accesses up to the barrier: the occurrences counted here are the same in
// every lane, so the numbering there still matches the lanes' occurrences.
void drain(ThreadProfile& t, unsigned w) {
  Warp& warp = t.warps[w];
  const unsigned base = w * 32;
  LogSlot* slots = &t.log[size_t{w} * kLogDepth];
  uint32_t same = 0, deepest = 0;
  for (uint32_t m = warp.full; m; m &= m - 1) deepest = std::max(deepest, t.depth[base + static_cast<unsigned>(__builtin_ctz(m))]);
  if (!warp.general) {
    same = kLogDepth;
    for (uint32_t m = warp.full; m; m &= m - 1) same = std::min(same, t.depth[base + static_cast<unsigned>(__builtin_ctz(m))]);
    Lanes g;
    g.lanes = warp.full;
    for (uint32_t p = 0; p < same; ++p) {
      const LogSlot& slot = slots[p];
      const uint64_t key = slot.key;
      if (slot.differ & warp.full) {
        same = p;
        break;
      }
      if (warp.full == ~0u) {  // a full warp: a loop the compiler vectorises
        warp.hint = find_site(warp, pc_of(key), static_cast<Kind>(key >> kTopShift), warp.hint);
        Site& site = warp.sites[warp.hint];
        if (count_full_slot(site.stats, is_global(site.kind), slot)) continue;
        for (unsigned l = 0; l < 32; ++l) {
          g.addr[l] = slot.addr[l] & kLowBits;
          g.size[l] = static_cast<uint8_t>(slot.addr[l] >> kTopShift);
        }
      } else {
        for (uint32_t m = warp.full; m; m &= m - 1) {
          const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
          g.addr[l] = slot.addr[l] & kLowBits;
          g.size[l] = static_cast<uint8_t>(slot.addr[l] >> kTopShift);
        }
      }
      warp.hint = find_site(warp, pc_of(key), static_cast<Kind>(key >> kTopShift), warp.hint);
      count_group(warp.sites[warp.hint], g);
    }
  }
  for (uint32_t m = warp.full; m; m &= m - 1) {
    const unsigned bit = static_cast<unsigned>(__builtin_ctz(m)), lane = base + bit;
    if (t.depth[lane] > same) {
      warp.general = true;
      for (uint32_t p = same; p < t.depth[lane]; ++p) general_access(t, warp, lane, slots[p]);
    }
    t.depth[lane] = 0;
  }
  for (uint32_t p = 0; p < deepest; ++p) {
    slots[p].key = 0;
    slots[p].differ = 0;
  }
}

// Counts every open instruction of every warp (a barrier or the block's end: nothing can join them).
void flush(ThreadProfile& t) {
  for (unsigned w = 0; w < t.nwarps; ++w) {
    drain(t, w);
    t.warps[w].general = false;
    for (Site& s : t.warps[w].sites) {
      for (size_t i = s.head; i < s.open.size(); ++i) release_group(t, s, i);
      s.open.clear();
      s.head = 0;
      s.base = 0;
      std::memset(s.count, 0, sizeof s.count);
    }
  }
}

// ---- what has been counted ------------------------------------------------------------------------

struct KernelTotals {
  std::string name;
  uint64_t launches = 0;
  double flops = 0;                 // declared (profile_flops)
  unsigned long long counted = 0;   // executed, from the plugin's counter
  dim3 grid, block;
  std::map<std::pair<const void*, int>, Stats> sites;
};

std::mutex g_mutex;
std::vector<KernelTotals> g_kernels;  // in the order of their first launch
size_t g_current = 0;                 // the running (or last) launch's kernel
bool g_any_launch = false;

KernelTotals& kernel_named(const std::string& name) {
  for (KernelTotals& k : g_kernels) {
    if (k.name == name) return k;
  }
  g_kernels.push_back({});
  g_kernels.back().name = name;
  return g_kernels.back();
}

void at_exit() {
  if (!g_kernels.empty()) print_report();
}

}  // namespace

void launch_begin(const char* kernel, dim3 grid, dim3 block) {
  std::lock_guard lk(g_mutex);
  if (!g_any_launch) {
    g_any_launch = true;
    std::atexit(at_exit);
  }
  KernelTotals& k = kernel_named(kernel);
  ++k.launches;
  k.grid = grid;
  k.block = block;
  g_current = static_cast<size_t>(&k - g_kernels.data());
  g_launch_profiled = true;
}

void launch_end() { g_launch_profiled = false; }

void block_begin(unsigned nthreads) {
  if (!tl_profile) tl_profile = new ThreadProfile;
  ThreadProfile& t = *tl_profile;
  t.nwarps = (nthreads + 31) / 32;
  if (t.warps.size() < t.nwarps) t.warps.resize(t.nwarps);
  for (unsigned w = 0; w < t.nwarps; ++w) {
    const unsigned width = std::min(32u, nthreads - w * 32);
    t.warps[w].full = width == 32 ? ~0u : (1u << width) - 1u;
    t.warps[w].sites.clear();
    t.warps[w].general = false;
    t.warps[w].hint = 0;
    std::memset(t.warps[w].slot, 0, sizeof t.warps[w].slot);
  }
  std::fill(t.hint.begin(), t.hint.begin() + nthreads, uint16_t{0});
  if (t.log.size() < size_t{t.nwarps} * kLogDepth) t.log.resize(size_t{t.nwarps} * kLogDepth);
  if (t.depth.size() < nthreads) t.depth.resize(nthreads);
  std::fill(t.depth.begin(), t.depth.begin() + nthreads, uint32_t{0});
  tl_logs = {t.log.data(), t.depth.data()};
  t.flops_at_start = __cudasim_flops;
}

void barrier_released() {
  if (tl_profile) flush(*tl_profile);
}

void block_end() {
  if (!tl_profile) return;
  ThreadProfile& t = *tl_profile;
  flush(t);
  std::lock_guard lk(g_mutex);
  if (g_current >= g_kernels.size()) return;  // reset while the launch ran
  KernelTotals& k = g_kernels[g_current];
  k.counted += __cudasim_flops - t.flops_at_start;
  for (unsigned w = 0; w < t.nwarps; ++w) {
    for (const Site& s : t.warps[w].sites) k.sites[{s.pc, s.kind}].add(s.stats);
  }
}

void log_full(unsigned lane) {
  ThreadProfile& t = *tl_profile;
  const unsigned w = lane >> 5;
  Warp& warp = t.warps[w];
  if (warp.general) {
    drain_lane(t, warp, lane);
  } else {
    bool all = true;
    for (uint32_t m = warp.full; m && all; m &= m - 1) all = t.depth[w * 32 + static_cast<unsigned>(__builtin_ctz(m))] == kLogDepth;
    if (all) {  // the usual case in a loop: the last lane of the warp to fill counts them all
      drain(t, w);
      return;
    }
  }
  // A lane that runs far ahead of its warp (a long loop without barriers) would leave one open
  // instruction per iteration; letting the others catch up keeps the logs and open ones few.
  profile_yield();
  if (t.depth[lane] == kLogDepth) drain(t, w);  // the others did not catch up
}

// ---- the results and the report ---------------------------------------------------------------------

namespace {

// Peak DRAM bandwidth and FP32 (non-tensor) throughput, from NVIDIA's published specifications:
//   h100:    H100 SXM5 80 GB: 3.35 TB/s HBM3, 67 TFLOP/s FP32 (NVIDIA H100 Tensor Core GPU datasheet)
//   a100:    A100 SXM4 80 GB: 2.039 TB/s HBM2e, 19.5 TFLOP/s FP32 (NVIDIA A100 Tensor Core GPU datasheet)
//   rtx4090: GeForce RTX 4090: 1008 GB/s GDDR6X, 82.6 TFLOP/s FP32 (NVIDIA Ada Lovelace architecture whitepaper)
//   t4:      Tesla T4: 320 GB/s GDDR6, 8.1 TFLOP/s FP32 (NVIDIA T4 datasheet)
struct GpuTable {
  const char* name;
  double bytes_per_s, flops_per_s;
};
constexpr GpuTable kGpus[] = {
    {"h100", 3.35e12, 67e12}, {"a100", 2.039e12, 19.5e12}, {"rtx4090", 1.008e12, 82.6e12}, {"t4", 320e9, 8.1e12}};

const char* kind_name(int k) {
  static const char* const names[] = {"global load", "global store", "global atomic",
                                      "shared load", "shared store", "shared atomic"};
  return names[k];
}

struct Where {
  std::string file;
  unsigned line = 0;
};

Where where_of(const void* pc) {
  static std::map<const void*, Where>* cache = new std::map<const void*, Where>;
  if (auto it = cache->find(pc); it != cache->end()) return it->second;
  const SourceLine s = program_source_line(pc);
  Where w{s.file.empty() ? "?" : s.file, s.line};
  return (*cache)[pc] = w;
}

std::string short_file(const std::string& f) {
  const size_t slash = f.rfind('/');
  return slash == std::string::npos ? f : f.substr(slash + 1);
}

std::string human(double v) {
  char buf[32];
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

std::string seconds(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  }
  return buf;
}

std::vector<KernelProfile> results_locked() {
  std::vector<KernelProfile> out;
  for (const KernelTotals& k : g_kernels) {
    KernelProfile p;
    p.kernel = k.name;
    p.launches = k.launches;
    p.flops = k.flops;
    p.flops_counted = g_flops_counted.load(std::memory_order_relaxed);
    p.counted_flops = static_cast<double>(k.counted);
    // Sites of one source line and kind are one row, as in ncu's source view.
    std::map<std::tuple<std::string, unsigned, int>, Stats> rows;
    for (const auto& [key, st] : k.sites) {
      const Where w = where_of(key.first);
      rows[{w.file, w.line, key.second}].add(st);
    }
    for (const auto& [key, st] : rows) {
      ProfileLine l;
      l.file = std::get<0>(key);
      l.line = std::get<1>(key);
      l.kind = static_cast<AccessKind>(std::get<2>(key));
      l.requests = st.requests;
      l.lane_accesses = st.lanes;
      l.bytes_requested = st.bytes;
      if (is_global(static_cast<Kind>(std::get<2>(key)))) {
        l.sectors = st.transactions;
        l.ideal_sectors = st.ideal;
      } else {
        l.wavefronts = st.transactions;
        l.ideal_wavefronts = st.ideal;
      }
      p.lines.push_back(l);
    }
    out.push_back(std::move(p));
  }
  return out;
}

// What a line wastes: sectors beyond the bytes it asked for, or wavefronts beyond one per phase.
double waste(const ProfileLine& l) {
  if (static_cast<int>(l.kind) <= kGlobalAtomic) {
    return static_cast<double>(l.sectors) - static_cast<double>(l.ideal_sectors);
  }
  return static_cast<double>(l.wavefronts - l.ideal_wavefronts) * 4.0;  // a wavefront moves up to 4 sectors' worth
}

}  // namespace

void print_report() {
  const std::string text = cudasim::profile_report(std::getenv("CUDASIM_GPU"));
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

void add_flops(double flops) {
  std::lock_guard lk(g_mutex);
  if (g_current < g_kernels.size()) g_kernels[g_current].flops += flops;
}

}  // namespace cudasim::detail::profile

namespace cudasim {


std::vector<KernelProfile> profile_results() {
  std::lock_guard lk(detail::profile::g_mutex);
  return detail::profile::results_locked();
}

void profile_reset() {
  std::lock_guard lk(detail::profile::g_mutex);
  detail::profile::g_kernels.clear();
  detail::profile::g_current = ~size_t{0};
}

void profile_flops(double flops) { detail::profile::add_flops(flops); }

std::vector<GpuPeaks> profile_gpus() {
  std::vector<GpuPeaks> out;
  for (const auto& g : detail::profile::kGpus) out.push_back({g.name, g.bytes_per_s, g.flops_per_s});
  return out;
}

KernelProfile::Totals KernelProfile::totals() const {
  Totals t;
  for (const ProfileLine& l : lines) {
    const int k = static_cast<int>(l.kind);
    t.requests[k] += l.requests;
    t.bytes_requested[k] += l.bytes_requested;
    t.sectors[k] += l.sectors;
    t.ideal_sectors[k] += l.ideal_sectors;
    t.wavefronts[k] += l.wavefronts;
    t.ideal_wavefronts[k] += l.ideal_wavefronts;
    t.lane_accesses[k] += l.lane_accesses;
  }
  return t;
}

double KernelProfile::roofline_flops() const { return flops_counted ? counted_flops : flops; }

uint64_t KernelProfile::global_bytes_moved() const {
  uint64_t b = 0;
  for (const ProfileLine& l : lines) b += l.sectors * 32;
  return b;
}

std::string profile_report(const char* gpu) {
  using namespace detail::profile;
  std::vector<const GpuTable*> gpus;
  for (const GpuTable& g : kGpus) {
    if (!gpu || !*gpu || std::strcmp(gpu, g.name) == 0) gpus.push_back(&g);
  }
  std::ostringstream o;
  if (gpus.empty()) {
    o << "cudasim profile: unknown GPU '" << gpu << "' (CUDASIM_GPU / --gpu): expected h100, a100, rtx4090 or t4\n";
    for (const GpuTable& g : kGpus) gpus.push_back(&g);
  }
  const std::vector<KernelProfile> kernels = profile_results();
  char buf[256];
  o << "\n==== cudasim profile: memory traffic counted on the CPU backend ====\n"
    << "Counts are exact for the accesses the program made; GPU times below are predictions from these counts "
       "and peak figures, not measurements.\n";
  for (const KernelProfile& k : kernels) {
    const KernelProfile::Totals t = k.totals();
    o << "\nkernel '" << k.kernel << "' (" << k.launches << (k.launches == 1 ? " launch" : " launches") << ")\n";
    o << "                   requests  sectors/req  ideal/req  bytes requested  bytes moved\n";
    for (int kind = kGlobalLoad; kind <= kGlobalAtomic; ++kind) {
      if (!t.requests[kind]) continue;
      const double req = static_cast<double>(t.requests[kind]), moved = 32.0 * static_cast<double>(t.sectors[kind]);
      std::snprintf(buf, sizeof buf, "  %-14s %10s  %11.2f  %9.2f  %15s  %11s\n", kind_name(kind), human(req).c_str(),
                    static_cast<double>(t.sectors[kind]) / req, static_cast<double>(t.ideal_sectors[kind]) / req,
                    human(static_cast<double>(t.bytes_requested[kind])).c_str(), human(moved).c_str());
      o << buf;
    }
    bool shared_header = false;
    for (int kind = kSharedLoad; kind <= kSharedAtomic; ++kind) {
      if (!t.requests[kind]) continue;
      if (!shared_header) {
        o << "                   requests  wavefronts/req  bank conflicts  conflicts/req\n";
        shared_header = true;
      }
      const double req = static_cast<double>(t.requests[kind]);
      const double conflicts = static_cast<double>(t.wavefronts[kind] - t.ideal_wavefronts[kind]);
      std::snprintf(buf, sizeof buf, "  %-14s %10s  %14.2f  %14s  %13.2f\n", kind_name(kind), human(req).c_str(),
                    static_cast<double>(t.wavefronts[kind]) / req, human(conflicts).c_str(), conflicts / req);
      o << buf;
    }
    const double bytes = static_cast<double>(k.global_bytes_moved());
    const double flops = k.roofline_flops();
    o << "  global bytes moved: " << human(bytes) << "B";
    if (k.flops_counted) {
      o << "; FLOPs (counted): " << human(k.counted_flops);
      if (k.flops > 0) o << " (declared: " << human(k.flops) << ")";
    } else if (k.flops > 0) {
      o << "; FLOPs (declared): " << human(k.flops);
    } else {
      o << "; FLOPs: not counted (this build has no FLOP counter: GCC's plugin headers were missing; declare "
           "them with cudasim::profile_flops)";
    }
    if (flops > 0) {
      std::snprintf(buf, sizeof buf, "; arithmetic intensity: %.3f FLOP/byte", bytes ? flops / bytes : 0.0);
      o << buf;
    }
    o << "\n";
    // The three lines that waste the most.
    std::vector<const ProfileLine*> lines;
    for (const ProfileLine& l : k.lines) lines.push_back(&l);
    std::stable_sort(lines.begin(), lines.end(), [](const ProfileLine* a, const ProfileLine* b) { return waste(*a) > waste(*b); });
    o << "  worst lines:\n";
    for (size_t i = 0; i < lines.size() && i < 3; ++i) {
      const ProfileLine& l = *lines[i];
      const double req = static_cast<double>(l.requests);
      if (static_cast<int>(l.kind) <= kGlobalAtomic) {
        const double ideal = static_cast<double>(l.ideal_sectors);
        std::snprintf(buf, sizeof buf, "    %s:%u  %s: %.2f sectors/request, %s sectors where %s would do\n",
                      short_file(l.file).c_str(), l.line, kind_name(static_cast<int>(l.kind)),
                      static_cast<double>(l.sectors) / req, human(static_cast<double>(l.sectors)).c_str(),
                      human(ideal).c_str());
      } else {
        std::snprintf(buf, sizeof buf, "    %s:%u  %s: %.2f wavefronts/request, %s bank conflicts\n",
                      short_file(l.file).c_str(), l.line, kind_name(static_cast<int>(l.kind)),
                      static_cast<double>(l.wavefronts) / req,
                      human(static_cast<double>(l.wavefronts - l.ideal_wavefronts)).c_str());
      }
      o << buf;
    }
    // The roofline, per launch.
    const double launches = static_cast<double>(std::max<uint64_t>(k.launches, 1));
    o << "  predicted roofline position per launch (a prediction from counts, not a measurement):\n";
    for (const GpuTable* g : gpus) {
      const double t_mem = bytes / launches / g->bytes_per_s;
      if (flops > 0) {
        const double t_fp = flops / launches / g->flops_per_s, ai = bytes ? flops / bytes : 0;
        const double attainable = std::min(g->flops_per_s, ai * g->bytes_per_s);
        std::snprintf(buf, sizeof buf,
                      "    %-8s ridge %6.1f FLOP/B  %-14s  at least %s  (%s FLOP/s of %s attainable)\n", g->name,
                      g->flops_per_s / g->bytes_per_s, t_mem >= t_fp ? "memory-bound" : "compute-bound",
                      seconds(std::max(t_mem, t_fp)).c_str(), human(attainable).c_str(),
                      human(g->flops_per_s).c_str());
      } else {
        std::snprintf(buf, sizeof buf, "    %-8s memory time at least %s (%s B/s peak)\n", g->name, seconds(t_mem).c_str(),
                      human(g->bytes_per_s).c_str());
      }
      o << buf;
    }
  }
  o << "\nBytes moved are 32-byte sectors between the SMs and L2; DRAM sees this much when nothing is reused "
       "in L2, less otherwise.\n";
  return o.str();
}

bool profiling() { return detail::profiling_requested() && detail::program_is_instrumented(); }

void detail::note_flop_counting() { detail::profile::g_flops_counted.store(true, std::memory_order_relaxed); }

}  // namespace cudasim
