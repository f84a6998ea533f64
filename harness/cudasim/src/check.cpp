// The checker: what a checked program (its .cu files compiled with -fsanitize=thread, see
// cudasim.h) reports about its kernels' memory accesses.
//
// GCC's thread-sanitizer instrumentation calls __tsan_read4(addr), __tsan_write8(addr),
// __tsan_atomic32_fetch_add(addr, v, order), ... before every access to memory that is not a
// private local; this file defines those functions (libtsan is never linked). Each access is
// classified by address:
//   - the running simulated thread's own stack: private, nothing to check;
//   - the block's shared memory: bounds against the `__shared__` variable it falls in (the
//     scheduler leaves red zones between variables) or the dynamic size given at the launch, and
//     hazards against the previous accesses to the same word;
//   - device memory: bounds against the live allocation (or the part a test harness gave the
//     kernel), use after free, initialisation, and races between threads and blocks;
//   - the launch's own arguments, static data (__device__/__constant__ variables, string
//     literals) and thread-local storage: fine;
//   - anything else is host memory a kernel cannot reach on a GPU: reported.
//
// Shared memory hazards. Every 4-byte word of a block's shared memory has a shadow cell holding
// the last write and up to two reads of it: the thread, its barrier interval (a __syncthreads()
// starts a new one), its warp clock and the bytes it touched. Two accesses to the same bytes by
// different threads in one barrier interval are a hazard when at least one is a plain write
// (atomics never conflict with each other, and a plain read of a word others update atomically is
// the first guess of a compare-and-swap loop), unless both threads are in one warp and a
// __syncwarp/shuffle/vote both took part in came between them, or the earlier thread executed
// __threadfence() since (it published its writes). Warp ordering uses vector clocks: each lane
// counts the warp-synchronous calls it has left (its clock), and knows, for every lane of its
// warp, the latest clock of that lane it has synchronised with; a release joins the participants'
// knowledge. A block runs on one OS thread, so these cells need no atomics.
//
// Device memory. Each 4-byte word of device memory gets a shadow cell once a kernel writes its
// 64 KiB chunk (memory only the host wrote, such as a model's weights, never needs one): the last
// write and one read that a later write could race with, each with its block (a number unique
// across launches), thread, barrier interval, warp clock and source line. Blocks of one launch are
// not ordered unless the earlier one executed __threadfence() after its access (the "last block"
// reduction pattern). Blocks run concurrently on several OS threads: a record is read and written
// with single 16-byte loads and stores (atomic on x86-64 processors with AVX), so concurrent
// updates may lose a record (and a report) but never invent one. Initialisation is a bit per byte
// of device memory, set by copies, memsets and kernel writes.
//
// The first problem found is reported with both source lines and the process ends with the
// diagnostic status, like the other diagnostics of cudasim.
#include <emmintrin.h>
#include <link.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "profile.h"
#include "memory.h"
#include "runtime_internal.h"
#include "symbolize.h"

extern "C" {
__thread cudasim::detail::check::ReadFilter __cudasim_read_filter = {};
}
// The plugin's instructions use these offsets (harness/cudasim/plugins/inline_reads.cpp).
static_assert(offsetof(cudasim::detail::check::ReadFilter, words) == 8);
static_assert(offsetof(cudasim::detail::check::ReadFilter, tokens) == 16);
static_assert(offsetof(cudasim::detail::check::ReadFilter, token) == 24);
static_assert(offsetof(cudasim::detail::check::ReadFilter, any) == 28);

namespace cudasim::detail {

namespace {
std::atomic<bool> g_instrumented{false};
}  // namespace

bool program_is_instrumented() { return g_instrumented.load(std::memory_order_relaxed); }

namespace check {

bool g_launch_checked = false;
std::atomic<unsigned long long> g_read_calls{0};  // ThreadState::read_calls of the blocks that ended

namespace {

// ---- the launch ---------------------------------------------------------------------------------

struct LaunchState {
  dim3 grid, block;
  unsigned checks = 0;
  LaunchRange ranges[4] = {};
  size_t n_ranges = 0;
  uint64_t uid_base = 1;  // block uid = uid_base + linear block index
  uint64_t nblocks = 0;
  std::atomic<uint32_t>* fences = nullptr;  // per block: 1 + the barrier interval of its last fence
  std::atomic<bool> any_fence{false};       // grids too large for the table
};
LaunchState g_launch;
uint64_t g_next_uid = 1;
constexpr uint64_t kFenceTableBlocks = uint64_t{1} << 24;

// Device memory as the checker sees it (copied at launch start: DeviceMemory's accessors are not
// free in the hot path).
uintptr_t g_dev_lo = 0, g_alias_lo = 0, g_region = 0;

// Shadow of device memory: two 16-byte records per 4-byte word, a "has shadow" byte per 64 KiB,
// and the initialisation bitmap (a bit per byte). Address space reserved on first use.
constexpr unsigned kChunkShift = 16;
struct alignas(16) Record {
  uint64_t a, b;
};
struct GlobalCell {
  Record write, read;
};
GlobalCell* g_cells = nullptr;
std::atomic<uint8_t>* g_chunk_has_shadow = nullptr;
std::atomic<uint64_t>* g_init_bits = nullptr;
std::mutex g_shadow_mutex;

void* reserve(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "cudasim: cannot reserve %zu MiB of address space for the checker's shadow memory\n",
                 bytes >> 20);
    std::abort();
  }
  return p;
}

void ensure_global_shadow() {
  std::lock_guard lk(g_shadow_mutex);
  if (g_init_bits || !g_region) return;
  const size_t words = g_region / 4;
  g_cells = static_cast<GlobalCell*>(reserve(words * sizeof(GlobalCell)));
  g_chunk_has_shadow = static_cast<std::atomic<uint8_t>*>(reserve(g_region >> kChunkShift));
  g_init_bits = static_cast<std::atomic<uint64_t>*>(reserve(g_region / 8));
}

// Record packing. a: uid (40 bits) | lane (10) | atomic (1) | byte mask (4) | valid (1)
//                 b: barrier interval (20) | warp clock (12) | code offset (32)
constexpr uint64_t kValid = uint64_t{1} << 55;
inline Record pack(uint64_t uid, unsigned lane, bool atomic, unsigned mask, uint32_t epoch, uint32_t clock, uint32_t pc) {
  return {(uid & 0xffffffffffull) | (uint64_t{lane} << 40) | (uint64_t{atomic} << 50) | (uint64_t{mask} << 51) | kValid,
          (uint64_t{epoch} & 0xfffff) | ((uint64_t{clock} & 0xfff) << 20) | (uint64_t{pc} << 32)};
}
inline uint64_t rec_uid(const Record& r) { return r.a & 0xffffffffffull; }
inline unsigned rec_lane(const Record& r) { return static_cast<unsigned>(r.a >> 40) & 0x3ff; }
inline bool rec_atomic(const Record& r) { return (r.a >> 50) & 1; }
inline unsigned rec_mask(const Record& r) { return static_cast<unsigned>(r.a >> 51) & 0xf; }
inline uint32_t rec_epoch(const Record& r) { return static_cast<uint32_t>(r.b & 0xfffff); }
inline uint32_t rec_clock(const Record& r) { return static_cast<uint32_t>(r.b >> 20) & 0xfff; }
inline uint32_t rec_pc(const Record& r) { return static_cast<uint32_t>(r.b >> 32); }

inline Record load_record(const Record* p) {
  const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
  return {static_cast<uint64_t>(_mm_cvtsi128_si64(v)), static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v)))};
}
inline void store_record(Record* p, const Record& r) {
  _mm_store_si128(reinterpret_cast<__m128i*>(p), _mm_set_epi64x(static_cast<long long>(r.b), static_cast<long long>(r.a)));
}

// Code addresses are kept as 32-bit offsets from the program's load address.
uintptr_t g_pc_base = 0;
inline uint32_t pc_offset(const void* pc) {
  const uintptr_t d = reinterpret_cast<uintptr_t>(pc) - g_pc_base;
  return d < 0xffffffffu ? static_cast<uint32_t>(d) : 0xffffffffu;
}
inline const void* pc_from(uint32_t off) {
  return off == 0xffffffffu ? nullptr : reinterpret_cast<const void*>(g_pc_base + off);
}

// Static data of every loaded module (where __device__ and __constant__ variables live), and the
// size of the initial thread-local storage.
struct Range {
  uintptr_t lo, hi;
};
std::vector<Range> g_static;
Range g_program{0, 0};  // the program's own segments: most static data a kernel reads is here
size_t g_tls_bytes = 0;

void find_static_data() {
  static std::once_flag once;
  std::call_once(once, [] {
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void*) -> int {
          const bool program = g_static.empty();
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            const uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
            if (ph.p_type == PT_LOAD) g_static.push_back({lo, hi});
            if (ph.p_type == PT_LOAD && program) {
              g_program.lo = g_program.lo ? std::min(g_program.lo, lo) : lo;
              g_program.hi = std::max(g_program.hi, hi);
            }
            if (ph.p_type == PT_TLS) g_tls_bytes += (ph.p_memsz + ph.p_align + 63) / 64 * 64;
          }
          if (!g_pc_base) g_pc_base = info->dlpi_addr;  // the program comes first
          return 0;
        },
        nullptr);
    std::sort(g_static.begin(), g_static.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  });
}

bool in_static_data(uintptr_t a) {
  auto it = std::upper_bound(g_static.begin(), g_static.end(), a, [](uintptr_t v, const Range& r) { return v < r.lo; });
  return it != g_static.begin() && a < std::prev(it)->hi;
}

// ---- the OS thread's block -------------------------------------------------------------------------

// The accesses to one 4-byte word of shared memory that the hazard check compares with: the last
// write and two reads, each with its barrier interval (the low 16 bits; 0: none), thread and the
// bytes of the word it touched. The cell also says which `__shared__` variable the word belongs
// to (1 + its index, 0: none, as in the red zones between variables), so that the bounds check
// reads the same cache line. 16 bytes, so that a tile's cells stay in the L1 cache; the warp
// clocks and code addresses of the three accesses, needed to compare and to report, are kept
// apart (SharedLines).
struct SharedCell {
  uint16_t w_epoch, r1_epoch, r2_epoch;
  uint16_t w_lane, r1_lane, r2_lane;
  uint8_t masks;   // bits 0-3: the write's bytes, 4-7: read 1's
  uint8_t masks2;  // bits 0-3: read 2's bytes; bit 4: the write is atomic, 5: read 1 is, 6: read 2 is
  uint8_t owner;
  uint8_t unused;
};
static_assert(sizeof(SharedCell) == 16);
struct SharedLines {
  uint16_t w_clock, r1_clock, r2_clock, unused;
  uint32_t w_pc, r1_pc, r2_pc;
};
// One of the three, unpacked for the comparisons and the report.
struct SharedAccess {
  uint32_t epoch;
  uint16_t lane, clock;
  uint8_t mask;
  bool atomic;
  uint32_t pc;
};

struct SharedVar {
  uintptr_t lo, hi;
  size_t elem;
  const char* name;
  const char* file;
  unsigned line;
};

constexpr size_t kPageBytes = 4096;

}  // namespace

struct ThreadState {
  bool active = false;
  bool profile = false;  // counting mode: accesses go to profile.cpp too
  bool fast4 = false;       // races and bounds checked, no counting: shared_fast4() applies
  bool fast4_race = false;  // races checked, bounds not, no counting: so does it, without bounds
  bool count_fast = false;  // counting with bounds checked or nothing: see shared_fast4()
  unsigned checks = 0;
  const Lane* lanes = nullptr;
  unsigned nthreads = 0;
  uint64_t block_linear = 0, uid = 0;
  const StackRange* stacks = nullptr;
  // Shared memory: [arena, arena + capacity) static, then a page, then the dynamic region, which
  // ends at `window_end`; the dynamic data is [dyn_lo, dyn_lo + dyn_bytes).
  uintptr_t arena = 0, window_end = 0, dyn_lo = 0;
  size_t window_words = 0;  // (window_end - arena) / 4
  size_t capacity = 0, dyn_bytes = 0, arena_marked = 0;
  const char* dyn_name = nullptr;
  size_t dyn_elem = 0;
  std::vector<SharedVar> vars;
  SharedCell* cells = nullptr;     // per word of the whole window
  uint32_t* tokens = nullptr;      // per word: its read grant (ReadFilter)
  unsigned long long read_calls = 0;  // __tsan_read4 calls of the running block (fast4)
  SharedLines* lines = nullptr;
  uint16_t epoch = 0;              // shared-memory barrier intervals on this thread (low 16 bits; never 0)
  uint32_t block_epoch = 0;        // barrier intervals of the running block (device memory records)
  uint32_t (*vc)[32] = nullptr;    // per lane: the clocks of its warp's lanes it has synchronised with
  uint32_t* published = nullptr;   // per lane: its own clock at its last __threadfence()
  const void** spin_addr = nullptr;  // per lane: spin-wait detection in atomics and volatile reads
  unsigned* spin_count = nullptr;
  uintptr_t tls_lo = 0, tls_hi = 0;
  // The last two device buffers (the part a kernel was given) whose bounds an access passed in
  // this block; when checking (fast4), only buffers every byte of which was written before.
  // A block's buffers cannot be freed while it runs; the cache is emptied when a block begins.
  uintptr_t seen_lo[2] = {}, seen_hi[2] = {};
  unsigned seen_next = 0;
};
namespace {

thread_local ThreadState* tl_state = nullptr;

ThreadState& state() {
  if (!tl_state) {
    auto* s = new ThreadState;
    s->vc = static_cast<uint32_t(*)[32]>(std::calloc(kMaxThreadsPerBlock, sizeof(uint32_t[32])));
    s->published = static_cast<uint32_t*>(std::calloc(kMaxThreadsPerBlock, sizeof(uint32_t)));
    s->spin_addr = static_cast<const void**>(std::calloc(kMaxThreadsPerBlock, sizeof(void*)));
    s->spin_count = static_cast<unsigned*>(std::calloc(kMaxThreadsPerBlock, sizeof(unsigned)));
    const auto tp = reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
    s->tls_lo = tp - g_tls_bytes - 4096;
    s->tls_hi = tp + 4096;
    tl_state = s;
  }
  return *tl_state;
}

// ---- reports ------------------------------------------------------------------------------------

std::string dim_str(uint3 v) { return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")"; }
uint3 thread_of(unsigned linear) {
  const dim3 b = g_launch.block;
  return make_uint3(linear % b.x, linear / b.x % b.y, linear / (b.x * b.y));
}
uint3 block_of(uint64_t linear) {
  const dim3 g = g_launch.grid;
  return make_uint3(static_cast<unsigned>(linear % g.x), static_cast<unsigned>(linear / g.x % g.y),
                    static_cast<unsigned>(linear / (static_cast<uint64_t>(g.x) * g.y)));
}
std::string where(const void* pc) { return pc ? describe_code_address(pc) : std::string("an unknown line"); }
std::string access_word(bool write, bool atomic) { return atomic ? (write ? "atomically updates" : "atomically reads") : write ? "writes" : "reads"; }
std::string past_word(bool write, bool atomic) { return atomic ? (write ? "atomically updated" : "atomically read") : write ? "wrote" : "read"; }

[[noreturn]] void report(const std::string& what) {
  tl_checked = nullptr;
  fatal(running_kernel_description(true) + ": " + what);
}

const SharedVar* shared_var_near(const ThreadState& s, uintptr_t a) {
  const SharedVar* best = nullptr;
  for (const SharedVar& v : s.vars) {
    if (a >= v.lo && a < v.hi) return &v;
    const uintptr_t d = a < v.lo ? v.lo - a : a - v.hi;
    if (!best || d < (a < best->lo ? best->lo - a : a - best->hi)) best = &v;
  }
  return best;
}

// "element 5 of __shared__ array 'tile' (declared at f.cu:9)" for an address in shared memory.
std::string shared_element(const ThreadState& s, uintptr_t a, size_t access_bytes) {
  std::ostringstream o;
  if (a >= s.arena && a < s.arena + s.capacity) {
    const SharedVar* v = shared_var_near(s, a);
    if (!v) return "an address in shared memory where no __shared__ variable is";
    const long long rel = static_cast<long long>(a) - static_cast<long long>(v->lo);
    const long long e = static_cast<long long>(v->elem ? v->elem : 1);
    const long long idx = rel >= 0 ? rel / e : -((-rel + e - 1) / e);
    const long long count = static_cast<long long>((v->hi - v->lo) / (v->elem ? v->elem : 1));
    if (count == 1 && idx == 0) {
      o << "__shared__ variable '" << v->name << "' (declared at " << v->file << ":" << v->line << ")";
      return o.str();
    }
    o << "element " << idx << " of __shared__ " << (count > 1 ? "array" : "variable") << " '" << v->name
      << "' (declared at " << v->file << ":" << v->line;
    if (idx >= count || idx < 0) o << "; it has " << count << (count == 1 ? " element" : " elements");
    o << ")";
    return o.str();
  }
  const size_t e = s.dyn_elem ? s.dyn_elem : std::max<size_t>(access_bytes, 1);
  const long long rel = static_cast<long long>(a) - static_cast<long long>(s.dyn_lo);
  const long long idx = rel >= 0 ? rel / static_cast<long long>(e) : -((-rel + static_cast<long long>(e) - 1) / static_cast<long long>(e));
  o << "element " << idx << " of the dynamic shared memory" << (s.dyn_name ? std::string(" (extern __shared__ '") + s.dyn_name + "')" : std::string());
  return o.str();
}

std::string hint_for(bool earlier_write, bool now_write, bool same_line, bool same_block, bool same_warp, bool shared) {
  if (same_line && (earlier_write || now_write)) {
    return "  A read-modify-write such as `x += v` by several threads loses updates: use atomicAdd (or reduce "
           "first and let one thread write).";
  }
  if (!same_block) {
    return "  Blocks of one launch run in no particular order, possibly at the same time: give each block its "
           "own output, combine with atomics, or finish in a second kernel.";
  }
  const std::string sync = same_warp ? "__syncwarp() (both threads are in one warp) or __syncthreads()" : "__syncthreads()";
  if (earlier_write && now_write) {
    return "  Two threads write it between the same two barriers, so what remains depends on timing. Let one "
           "thread write it, or separate the writes with " + sync + ".";
  }
  return "  Nothing orders the two accesses, so the read gets the old or the new value depending on which thread "
         "runs first. Separate them with " + sync +
         (shared ? ": typically after one thread stores a result the others read, or between reading a shared "
                   "array and reusing it (a second reduction into the same scratch array)."
                 : ".");
}

// ---- shared memory --------------------------------------------------------------------------------

// Ordered: a barrier since, the same thread, a warp-synchronous call both took part in since, or
// a __threadfence() by the earlier thread since (a thread that publishes data with a fence and a
// flag: the reader is assumed to wait for the flag). Clocks are compared modulo 2^16.
inline bool shared_ordered(const ThreadState& s, unsigned prev_lane, uint16_t prev_clock, unsigned me) {
  if (prev_lane == me) return true;
  if (static_cast<uint16_t>(s.published[prev_lane] - prev_clock) < 0x8000 && s.published[prev_lane]) return true;
  if ((prev_lane >> 5) != (me >> 5)) return false;
  return static_cast<uint16_t>(s.vc[me][prev_lane & 31] - prev_clock) < 0x8000;
}

[[noreturn]] void report_shared_race(ThreadState& s, uintptr_t a, const SharedAccess& prev, bool prev_write, bool write,
                                     bool atomic, const void* pc) {
  tl_checked = nullptr;  // building the message runs library code: not the kernel's
  const unsigned me = tl_lane->linear;
  const std::string now_line = where(pc), then_line = where(pc_from(prev.pc));
  const char* kind = prev_write ? (write ? "write after write" : "read after write") : "write after read";
  std::ostringstream o;
  o << "shared-memory race (" << kind << ") on " << shared_element(s, a, 4) << ":\n"
    << "  thread " << dim_str(thread_of(me)) << " " << access_word(write, atomic) << " it at " << now_line << "\n"
    << "  thread " << dim_str(thread_of(prev.lane)) << " " << past_word(prev_write, prev.atomic) << " it at " << then_line
    << ", with no barrier between the two that both threads passed\n"
    << hint_for(prev_write, write, now_line == then_line, true, (prev.lane >> 5) == (me >> 5), true);
  report(o.str());
}

[[noreturn]] void report_shared_bounds(ThreadState& s, uintptr_t a, size_t size, bool write, const void* pc) {
  tl_checked = nullptr;  // building the message runs library code: not the kernel's
  std::ostringstream o;
  o << "out-of-bounds " << (write ? "write" : "read") << " of " << size << " bytes in shared memory at " << where(pc)
    << ": " << shared_element(s, a, size);
  if (a >= s.window_end - s.capacity - kPageBytes || a >= s.arena + s.capacity) {
    if (s.dyn_bytes == 0) {
      o << ".\n  The launch gave no dynamic shared memory: an `extern __shared__` array needs its size as the third "
           "<<<grid, block, bytes>>> argument.";
    } else {
      o << ".\n  The launch gave " << s.dyn_bytes << " bytes of dynamic shared memory (the third <<<>>> argument): "
        << "is that size computed for this block size?";
    }
  } else {
    o << ".\n  Check the index against the array's size.";
  }
  report(o.str());
}

[[noreturn, gnu::noinline, gnu::cold]] void shared_hazard(ThreadState& s, uintptr_t w, int which, bool write, bool atomic, const void* pc) {
  tl_checked = nullptr;  // building the message runs library code: not the kernel's
  const size_t i = (w - s.arena) >> 2;
  const SharedCell& c = s.cells[i];
  const SharedLines& l = s.lines[i];
  SharedAccess prev;
  if (which == 0) prev = {c.w_epoch, c.w_lane, l.w_clock, static_cast<uint8_t>(c.masks & 0xf), (c.masks2 & 0x10) != 0, l.w_pc};
  if (which == 1) prev = {c.r1_epoch, c.r1_lane, l.r1_clock, static_cast<uint8_t>(c.masks >> 4), (c.masks2 & 0x20) != 0, l.r1_pc};
  if (which == 2) prev = {c.r2_epoch, c.r2_lane, l.r2_clock, static_cast<uint8_t>(c.masks2 & 0xf), (c.masks2 & 0x40) != 0, l.r2_pc};
  report_shared_race(s, w, prev, which == 0, write, atomic, pc);
}

[[noreturn, gnu::noinline, gnu::cold]] void report_shared_bounds(ThreadState& s, uintptr_t a, size_t size, bool write,
                                                                const void* pc);

inline uint16_t own_clock(const ThreadState& s, unsigned me) { return static_cast<uint16_t>(s.vc[me][me & 31]); }

inline void record_write(ThreadState& s, SharedCell& c, size_t i, unsigned me, unsigned mask, bool atomic, const void* pc) {
  const bool mine = c.w_epoch == s.epoch && c.w_lane == me;
  c.w_epoch = s.epoch;
  c.w_lane = static_cast<uint16_t>(me);
  c.masks = static_cast<uint8_t>((c.masks & 0xf0) | (mine ? (c.masks & 0xf) | mask : mask));
  c.masks2 = static_cast<uint8_t>((c.masks2 & ~0x10u) | (atomic ? 0x10u : 0u));
  s.lines[i].w_clock = own_clock(s, me);
  s.lines[i].w_pc = pc_offset(pc);
}
inline void record_read1(ThreadState& s, SharedCell& c, size_t i, unsigned me, unsigned mask, bool atomic, const void* pc) {
  c.r1_epoch = s.epoch;
  c.r1_lane = static_cast<uint16_t>(me);
  c.r2_epoch = 0;
  c.masks = static_cast<uint8_t>((c.masks & 0x0f) | (mask << 4));
  c.masks2 = static_cast<uint8_t>((c.masks2 & ~0x20u) | (atomic ? 0x20u : 0u));
  s.lines[i].r1_clock = own_clock(s, me);
  s.lines[i].r1_pc = pc_offset(pc);
}
inline void record_read2(ThreadState& s, SharedCell& c, size_t i, unsigned me, unsigned mask, bool atomic, const void* pc) {
  c.r2_epoch = s.epoch;
  c.r2_lane = static_cast<uint16_t>(me);
  c.masks2 = static_cast<uint8_t>((c.masks2 & ~0x4fu) | mask | (atomic ? 0x40u : 0u));
  s.lines[i].r2_clock = own_clock(s, me);
  s.lines[i].r2_pc = pc_offset(pc);
}
// Two readers are kept: a later writer differs from at least one. The second is replaced only to
// cover another warp than the first (a writer may have synchronised with one warp).
inline bool keep_read2(const SharedCell& c, uint16_t ep, unsigned me) {
  return c.r2_epoch == ep && c.r2_lane != me && ((c.r2_lane >> 5) != (c.r1_lane >> 5) || (me >> 5) == (c.r1_lane >> 5));
}

// The read grant of word `i` as an access has just left it (see ReadFilter): the grant
// for every warp when a read by any thread would find no write of this barrier interval and be
// one record_shared() keeps as it is; for one warp when that holds for its threads only; else 0.
// Such a read is one the kept readers cover: both are of this interval and of the whole word,
// and a repeat by either of them comes at the clock it already has. (Skipped, such a repeat leaves
// the earlier read's line on record: in one generation both are ordered alike with any write.)
[[gnu::always_inline]] inline uint32_t read_grant(const ThreadState& s, const SharedCell& c, size_t i) {
  const uint16_t ep = s.epoch;
  if (c.w_epoch == ep || c.r1_epoch != ep || c.r2_epoch != ep) return 0;
  if ((c.masks >> 4) != 0xf || (c.masks2 & 0x4f) != 0xf) return 0;
  const uintptr_t w = s.arena + 4 * i;
  if (4 * i < s.capacity ? c.owner == 0 : (w < s.dyn_lo || w + 4 > s.dyn_lo + s.dyn_bytes)) return 0;
  const SharedLines& l = s.lines[i];
  if (l.r1_clock != own_clock(s, c.r1_lane) || l.r2_clock != own_clock(s, c.r2_lane)) return 0;
  // keep_read2(): readers of two warps cover any third thread; readers of one warp, its own.
  const unsigned w1 = c.r1_lane >> 5u;
  return w1 != (c.r2_lane >> 5u) ? __cudasim_read_filter.any : __cudasim_read_filter.generation | w1;
}

// Records an access to the word of cell `c` (index `i`) once it has been compared with the
// previous ones: a write replaces the last write, a read becomes read 1 (the first of this
// interval, or this thread's again) or read 2. Then sets the word's read grant (checking races
// and bounds, fast4: the only mode whose reads may skip the call).
[[gnu::always_inline]] inline void record_shared(ThreadState& s, SharedCell& c, size_t i, unsigned me, unsigned mask,
                                                 bool write, bool atomic, const void* pc) {
  if (write) {
    record_write(s, c, i, me, mask, atomic, pc);
  } else if (c.r1_epoch != s.epoch) {
    record_read1(s, c, i, me, mask, atomic, pc);
  } else if (c.r1_lane == me) {  // the same thread again: its latest read is the one a writer may race with
    c.masks = static_cast<uint8_t>(c.masks | (mask << 4));
    s.lines[i].r1_clock = own_clock(s, me);
    s.lines[i].r1_pc = pc_offset(pc);
  } else if (!keep_read2(c, s.epoch, me)) {
    record_read2(s, c, i, me, mask, atomic, pc);
  }
  if (s.fast4) s.tokens[i] = write ? 0 : read_grant(s, c, i);
}

// One access of `size` bytes at `a`, within one 4-byte word of the block's shared memory.
[[gnu::always_inline]] inline void shared_word(ThreadState& s, uintptr_t a, unsigned size, bool write, bool atomic, const void* pc) {
  const uintptr_t w = a & ~uintptr_t{3};
  const unsigned mask = ((1u << size) - 1) << (a & 3);
  const size_t i = (w - s.arena) >> 2;
  SharedCell& c = s.cells[i];
  const SharedLines& l = s.lines[i];
  const uint16_t ep = s.epoch;
  const unsigned me = tl_lane->linear;
  // A hazard needs a plain write on one side: atomics never conflict with each other, and a plain
  // read of a word others update atomically is the first guess of a compare-and-swap loop.
  const bool plain_write = write && !atomic;
  if (c.w_epoch == ep && (c.masks & mask) && (plain_write || !(c.masks2 & 0x10)) && !shared_ordered(s, c.w_lane, l.w_clock, me)) {
    shared_hazard(s, w, 0, write, atomic, pc);
  }
  if (plain_write) {
    if (c.r1_epoch == ep && ((c.masks >> 4) & mask) && !shared_ordered(s, c.r1_lane, l.r1_clock, me)) {
      shared_hazard(s, w, 1, write, atomic, pc);
    }
    if (c.r2_epoch == ep && ((c.masks2 & 0xf) & mask) && !shared_ordered(s, c.r2_lane, l.r2_clock, me)) {
      shared_hazard(s, w, 2, write, atomic, pc);
    }
  }
  record_shared(s, c, i, me, mask, write, atomic, pc);
}

[[gnu::always_inline]] inline void shared_access(ThreadState& s, uintptr_t a, size_t size, bool write, bool atomic,
                                                 const void* pc) {
  if (s.checks & kCheckBounds) {
    const uintptr_t end = a + size;
    bool ok;
    if (a < s.arena + s.capacity) {
      const uint8_t first = s.cells[(a - s.arena) >> 2].owner;
      ok = end <= s.arena + s.capacity && first != 0 && first == s.cells[(end - 1 - s.arena) >> 2].owner;
    } else {
      ok = a >= s.dyn_lo && end <= s.dyn_lo + s.dyn_bytes;
    }
    if (__builtin_expect(!ok, 0)) report_shared_bounds(s, a, size, write, pc);
  }
  if (!(s.checks & kCheckRace)) return;
  if (__builtin_expect((a & 3) + size <= 4, 1)) return shared_word(s, a, static_cast<unsigned>(size), write, atomic, pc);
  for (uintptr_t w = a & ~uintptr_t{3}; w < a + size; w += 4) {
    const uintptr_t lo = std::max(w, a), hi = std::min(w + 4, a + size);
    shared_word(s, lo, static_cast<unsigned>(hi - lo), write, atomic, pc);
  }
}

// ---- device memory ---------------------------------------------------------------------------------

inline uintptr_t region_offset(uintptr_t a) {
  if (a - g_dev_lo < g_region) return a - g_dev_lo;
  if (g_alias_lo && a - g_alias_lo < g_region) return a - g_alias_lo;
  return ~uintptr_t{0};
}

inline bool bits_set(uintptr_t off, size_t n) {
  for (uintptr_t b = off; b < off + n;) {
    const uint64_t word = g_init_bits[b >> 6].load(std::memory_order_relaxed);
    const unsigned first = static_cast<unsigned>(b & 63), count = static_cast<unsigned>(std::min<uintptr_t>(64 - first, off + n - b));
    const uint64_t want = (count == 64 ? ~0ull : ((1ull << count) - 1)) << first;
    if ((word & want) != want) return false;
    b += count;
  }
  return true;
}

void set_bits(uintptr_t off, size_t n) {
  uintptr_t b = off;
  const uintptr_t end = off + n;
  while (b < end && (b & 63)) {  // leading partial word
    const unsigned first = static_cast<unsigned>(b & 63), count = static_cast<unsigned>(std::min<uintptr_t>(64 - first, end - b));
    g_init_bits[b >> 6].fetch_or((count == 64 ? ~0ull : ((1ull << count) - 1)) << first, std::memory_order_relaxed);
    b += count;
  }
  if (end - b >= 64) {  // whole words
    std::memset(static_cast<void*>(g_init_bits + (b >> 6)), 0xff, ((end - b) >> 6) * 8);
    b += (end - b) & ~uintptr_t{63};
  }
  if (b < end) g_init_bits[b >> 6].fetch_or((1ull << (end - b)) - 1, std::memory_order_relaxed);
}

// The texts are plain C strings: a std::string argument would be built by the caller while the
// kernel's accesses are still checked, and the library code that builds it may be an instrumented
// copy (C++20 instantiates std::string's members in every translation unit, kernel ones included).
[[noreturn, gnu::noinline, gnu::cold]] void report_device_problem(const char* what, uintptr_t a, size_t size, bool write,
                                                                 const void* pc, const char* hint) {
  tl_checked = nullptr;  // building the message runs library code: not the kernel's
  std::ostringstream o;
  o << what << " " << (write ? "write" : "read") << " of " << size << " bytes at " << where(pc) << ": "
    << describe_device_address(a, size) << ".\n" << hint;
  report(o.str());
}

[[noreturn]] void report_global_race(ThreadState& s, uintptr_t a, size_t size, const Record& prev, bool prev_write,
                                     bool write, bool atomic, const void* pc) {
  tl_checked = nullptr;  // building the message runs library code: not the kernel's
  const unsigned me = tl_lane->linear;
  const uint64_t other_block = rec_uid(prev) - g_launch.uid_base;
  const bool same_block = rec_uid(prev) == s.uid;
  const std::string now_line = where(pc), then_line = where(pc_from(rec_pc(prev)));
  const char* kind = prev_write ? (write ? "write after write" : "read after write") : "write after read";
  std::ostringstream o;
  o << "global-memory race (" << kind << (same_block ? "" : " between blocks") << ") on "
    << describe_device_address(a, size) << ":\n"
    << "  thread " << dim_str(thread_of(me)) << " of block " << dim_str(block_of(s.block_linear)) << " "
    << access_word(write, atomic) << " it at " << now_line << "\n"
    << "  thread " << dim_str(thread_of(rec_lane(prev))) << " of block " << dim_str(block_of(other_block)) << " "
    << past_word(prev_write, rec_atomic(prev)) << " it at " << then_line
    << (same_block ? ", with no barrier between the two that both threads passed\n" : ", in the same launch\n")
    << hint_for(prev_write, write, now_line == then_line, same_block, same_block && (rec_lane(prev) >> 5) == (me >> 5), false);
  report(o.str());
}

inline bool global_ordered(const ThreadState& s, const Record& r, unsigned me) {
  const uint64_t uid = rec_uid(r);
  if (uid < (g_launch.uid_base & 0xffffffffffull)) return true;  // an earlier launch
  if (uid == (s.uid & 0xffffffffffull)) {
    if (rec_lane(r) == me || rec_epoch(r) != (s.block_epoch & 0xfffff)) return true;
    if (((s.published[rec_lane(r)] - rec_clock(r)) & 0xfff) < 0x800 && s.published[rec_lane(r)]) return true;
    if ((rec_lane(r) >> 5) != (me >> 5)) return false;
    return ((s.vc[me][rec_lane(r) & 31] - rec_clock(r)) & 0xfff) < 0x800;
  }
  // Another block of this launch: ordered only by a __threadfence() it executed after the access.
  const uint64_t other = uid - (g_launch.uid_base & 0xffffffffffull);
  if (g_launch.fences && other < g_launch.nblocks) {
    return g_launch.fences[other].load(std::memory_order_acquire) > rec_epoch(r);
  }
  return g_launch.any_fence.load(std::memory_order_relaxed);
}

void global_race(ThreadState& s, uintptr_t off, uintptr_t a, size_t size, bool write, bool atomic, const void* pc) {
  // Memory no kernel has ever written (weights, inputs the host uploaded) gets no shadow: a race
  // needs a write in the launch, and the first kernel write there creates the shadow. (A read in
  // such a chunk before that first write is not seen, so a write-after-read there is missed.)
  const size_t chunk = off >> kChunkShift;
  if (!g_chunk_has_shadow[chunk].load(std::memory_order_relaxed)) {
    if (!write) return;
    g_chunk_has_shadow[chunk].store(1, std::memory_order_relaxed);
  }
  const unsigned me = tl_lane->linear;
  const uint32_t clock = s.vc[me][me & 31];
  const uint32_t pco = pc_offset(pc);
  for (uintptr_t w = off & ~uintptr_t{3}; w < off + size; w += 4) {
    const unsigned lo = w < off ? static_cast<unsigned>(off - w) : 0, hi = static_cast<unsigned>(std::min<uintptr_t>(4, off + size - w));
    const unsigned mask = ((1u << hi) - 1) & ~((1u << lo) - 1);
    GlobalCell& c = g_cells[w >> 2];
    const bool plain_write = write && !atomic;  // see shared_access() for why one side must be one
    const auto conflicts = [&](const Record& r, bool r_write) {
      return (r.a & kValid) && (rec_mask(r) & mask) && (plain_write || (r_write && !rec_atomic(r))) &&
             !global_ordered(s, r, me);
    };
    const Record wr = load_record(&c.write);
    if (conflicts(wr, true)) report_global_race(s, a + (w - off), 4, wr, true, write, atomic, pc);
    if (write) {
      const Record rd = load_record(&c.read);
      if (plain_write && conflicts(rd, false)) report_global_race(s, a + (w - off), 4, rd, false, write, atomic, pc);
      store_record(&c.write, pack(s.uid, me, atomic, mask, s.block_epoch, clock, pco));
    } else {
      // One read is kept per word: a read by another thread of this launch that a later write
      // could race with stays; one that cannot matter any more (an earlier launch, an earlier
      // barrier interval of this block, this same thread) is replaced. Keeping it also keeps
      // the line clean for data many threads read.
      const Record rd = load_record(&c.read);
      const uint64_t uid = rec_uid(rd), base = g_launch.uid_base & 0xffffffffffull, mine_uid = s.uid & 0xffffffffffull;
      const bool useless = !(rd.a & kValid) || uid < base ||
                           (uid == mine_uid && (rec_lane(rd) == me || rec_epoch(rd) != (s.block_epoch & 0xfffff)));
      if (useless) store_record(&c.read, pack(s.uid, me, atomic, mask, s.block_epoch, clock, pco));
    }
  }
}

void global_access(ThreadState& s, uintptr_t off, uintptr_t a, size_t size, bool write, bool atomic, const void* pc) {
  const Allocation* al = device_memory().lookup(a);
  if (s.checks & kCheckBounds) {
    if (!al || al->is_freed.load(std::memory_order_relaxed)) {
      report_device_problem(al ? "use-after-free" : "out-of-bounds", a, size, write, pc,
                            al ? "  The buffer was freed before this kernel ran: free it after its last use."
                               : "  Check the index against the buffer's size (and the bounds test of the thread).");
    }
    if (a < al->view_lo || a + size > al->view_hi) {
      report_device_problem("out-of-bounds", a, size, write, pc,
                            "  Check the index against the buffer's size (and the bounds test of the thread).");
    }
  }
  if (!al) return;
  // Bounds passed: later accesses to this buffer are counted at once (counting mode), and reads of
  // it, once it is fully written, are checked at once (global_read_fast).
  if ((s.count_fast || (s.fast4 && al->fully_written.load(std::memory_order_relaxed))) &&
      !(al->view_lo == s.seen_lo[s.seen_next ^ 1] && al->view_hi == s.seen_hi[s.seen_next ^ 1])) {
    s.seen_lo[s.seen_next] = al->view_lo;
    s.seen_hi[s.seen_next] = al->view_hi;
    s.seen_next ^= 1;
  }
  if (s.checks & kCheckInit) {
    if (!write || atomic) {
      if (!al->fully_written.load(std::memory_order_relaxed) && !bits_set(off, size)) {
        report_device_problem("uninitialised", a, size, false, pc,
                              "  No cudaMemcpy, cudaMemset or kernel has written these bytes: the value is garbage "
                              "(NaN or -1 with cudasim's poison). Copy or compute the data before this kernel reads it.");
      }
    }
    if (write && !al->fully_written.load(std::memory_order_relaxed)) set_bits(off, size);
  }
  if (s.checks & kCheckRace) global_race(s, off, a, size, write, atomic, pc);
}

// ---- everything else ------------------------------------------------------------------------------

[[noreturn]] void report_host_pointer(uintptr_t a, size_t size, bool write, const void* pc) {
  tl_checked = nullptr;  // building the message runs library code: not the kernel's
  std::ostringstream o;
  o << (write ? "write" : "read") << " of " << size << " bytes at " << where(pc) << " to address 0x" << std::hex << a
    << std::dec;
  if (a < 65536) {
    o << ": a null pointer (plus " << a << ").\n  A pointer argument was not set: was the cudaMalloc missed, or "
      << "nullptr passed?";
  } else {
    o << ", which is not device memory: a host pointer (host stack or heap, e.g. a std::vector's data()) passed "
         "to the kernel?\n  A kernel can only use memory from cudaMalloc (or cudaMallocManaged / cudaMallocHost): "
         "copy the data to the device first.";
  }
  report("invalid memory access: " + o.str());
}

[[noreturn]] void report_misaligned(uintptr_t a, size_t size, bool write, const void* pc) {
  tl_checked = nullptr;  // building the message runs library code: not the kernel's
  std::ostringstream o;
  o << "misaligned " << size << "-byte " << (write ? "write" : "read") << " at " << where(pc) << ": address 0x"
    << std::hex << a << std::dec << " is not a multiple of " << size;
  const std::string what = device_memory().region_offset(a) != ~uintptr_t{0} ? describe_device_address(a, 1) : "";
  if (!what.empty()) o << " (" << what << ")";
  o << ".\n  On a GPU this stops the kernel (misaligned address). A vector access (float4, int2, double) needs an "
       "address that is a multiple of its size: check the offset added to the pointer before the cast.";
  report(o.str());
}

// Whether the access at `pc` is the C++ library's own code (std::string building an error message,
// say, called or inlined by a kernel running on the CPU): its innermost source line is in the
// library's or the system's headers. Such code works on its own heap memory, which is not a host
// pointer the kernel was given. Only asked about accesses outside device memory that are about to
// be reported; the answer is kept per code address.
bool library_code(const void* pc) {
  static std::mutex m;
  static auto* known = new std::map<const void*, bool>;
  {
    std::lock_guard lk(m);
    if (auto it = known->find(pc); it != known->end()) return it->second;
  }
  const std::vector<SourceLine> lines = symbolize(pc, true);
  const bool lib = !lines.empty() && is_library_file(lines.front().file);
  std::lock_guard lk(m);
  (*known)[pc] = lib;
  return lib;
}

void other_access(ThreadState& s, uintptr_t a, size_t size, bool write, const void* pc) {
  RuntimeCode runtime;  // what this calls is not the kernel's code
  for (size_t i = 0; i < g_launch.n_ranges; ++i) {
    const auto lo = reinterpret_cast<uintptr_t>(g_launch.ranges[i].p);
    if (a - lo < g_launch.ranges[i].bytes) return;
  }
  if (a - s.tls_lo < s.tls_hi - s.tls_lo) return;
  for (unsigned i = 0; i < s.nthreads; ++i) {  // another simulated thread's stack (a pointer to a local shared around)
    if (a - s.stacks[i].lo < s.stacks[i].hi - s.stacks[i].lo) return;
  }
  if (in_static_data(a)) return;
  if (host_registered(reinterpret_cast<const void*>(a), size)) return;
  if (!(s.checks & kCheckBounds)) return;
  if (a >= 65536 && library_code(pc)) return;
  report_host_pointer(a, size, write, pc);
}

// Everything access() does not finish itself.
[[gnu::noinline]] void access_slow(ThreadState* s, uintptr_t a, size_t size, bool write, bool atomic, bool aligned,
                                   const void* pc) {
  if (aligned && __builtin_expect((a & (size - 1)) != 0, 0) && (s->checks & kCheckBounds)) {
    report_misaligned(a, size, write, pc);
  }
  if (a - s->arena < s->window_end - s->arena) return shared_access(*s, a, size, write, atomic, pc);
  if (const uintptr_t off = region_offset(a); off != ~uintptr_t{0}) return global_access(*s, off, a, size, write, atomic, pc);
  const StackRange& st = s->stacks[tl_lane->linear];
  if (a - st.lo < st.hi - st.lo) return;  // the thread's own stack: private
  if (a - g_program.lo < g_program.hi - g_program.lo) return;  // __device__/__constant__ variables, literals
  other_access(*s, a, size, write, pc);
}

// The most frequent accesses of all: plain aligned 4-byte reads and writes of shared memory. This
// does what shared_access() does for them when there is nothing to compare (no other thread's
// write, and for a write no other thread's read, in this barrier interval), and says "not done"
// (false) otherwise, leaving the comparison to the full path. `bounds` and `race` are the checks
// asked for; both entry points below pass what they know, constants where they can.
[[gnu::always_inline]] inline bool shared_fast_word(ThreadState& s, uintptr_t a, bool write, bool bounds, bool race,
                                                    const void* pc) {
  const uintptr_t off = a - s.arena;
  // The word's index, with a misalignment rotated into the top bits: one comparison rejects both.
  const size_t i = (off >> 2) | (off << 62);
  if (i >= s.window_words) return false;
  SharedCell& c = s.cells[i];
  if (bounds && (off < s.capacity ? c.owner == 0 : (a < s.dyn_lo || a + 4 > s.dyn_lo + s.dyn_bytes))) return false;
  if (!race) return true;
  const uint16_t ep = s.epoch;
  const unsigned me = tl_lane->linear;
  if (c.w_epoch == ep && c.w_lane != me) return false;
  if (write && ((c.r1_epoch == ep && c.r1_lane != me) || (c.r2_epoch == ep && c.r2_lane != me))) return false;
  record_shared(s, c, i, me, 0xf, write, false, pc);
  return true;
}

// Counting mode: global and shared accesses go to the profiler; the rest is not memory traffic
// (the thread's stack, the parameters, __constant__ and __device__ variables).
[[gnu::always_inline]] inline void profile_access_inline(ThreadState& s, uintptr_t a, size_t size, bool write, bool atomic,
                                                         const void* pc) {
  const Lane* l = tl_lane;
  if (!l) return;
  profile::Kind kind;
  if (a - s.arena < s.window_end - s.arena) {
    kind = atomic ? profile::kSharedAtomic : write ? profile::kSharedStore : profile::kSharedLoad;
  } else if (region_offset(a) != ~uintptr_t{0}) {
    kind = atomic ? profile::kGlobalAtomic : write ? profile::kGlobalStore : profile::kGlobalLoad;
  } else {
    return;
  }
  profile::access(kind, l->linear, a, size, pc);
}
[[gnu::noinline]] void profile_access(ThreadState& s, uintptr_t a, size_t size, bool write, bool atomic, const void* pc) {
  profile_access_inline(s, a, size, write, atomic, pc);
}

[[gnu::always_inline]] inline void access_checked(ThreadState* s, const void* p, size_t size, bool write, bool atomic,
                                                  bool aligned, const void* pc) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (__builtin_expect(s->profile, 0)) {
    profile_access(*s, a, size, write, atomic, pc);
    if (!s->checks) return;
  }
  if (size == 4 && !atomic &&
      shared_fast_word(*s, a, write, (s->checks & kCheckBounds) != 0, (s->checks & kCheckRace) != 0, pc)) {
    return;
  }
  access_slow(s, a, size, write, atomic, aligned, pc);
}

// Whether [a, a + size) lies in one of the buffers whose bounds passed in this block.
[[gnu::always_inline]] inline bool in_seen_buffer(const ThreadState& s, uintptr_t a, size_t size) {
  return (a >= s.seen_lo[0] && a + size <= s.seen_hi[0]) || (a >= s.seen_lo[1] && a + size <= s.seen_hi[1]);
}

// Counting mode, plain aligned accesses of any size to device memory: counted at once when
// nothing is checked, or when the access lies in a buffer whose bounds an earlier access of this
// block passed (ThreadState::seen_lo); false leaves the access to the general path.
[[gnu::always_inline]] inline bool count_global_fast(ThreadState& s, uintptr_t a, size_t size, bool write, const void* pc) {
  const Lane* l = tl_lane;
  if ((a & (size - 1)) || !l) return false;
  if (!in_seen_buffer(s, a, size) && (s.checks || region_offset(a) == ~uintptr_t{0})) return false;
  profile::access(write ? profile::kGlobalStore : profile::kGlobalLoad, l->linear, a, size, pc);
  return true;
}

// Checking (races, bounds and initialisation), a plain aligned read of device memory: nothing to
// check or record when it lies in a fully written buffer whose bounds passed in this block
// (ThreadState::seen_lo) and in a 64 KiB chunk no kernel has written (no write to race with, as
// in global_race()). Model weights and inputs the host uploaded are read this way.
[[gnu::always_inline]] inline bool global_read_fast(ThreadState& s, uintptr_t a, size_t size) {
  if ((a & (size - 1)) || !in_seen_buffer(s, a, size)) return false;
  if (!(s.checks & kCheckRace)) return true;
  const uintptr_t off = region_offset(a);
  return off != ~uintptr_t{0} && !g_chunk_has_shadow[off >> kChunkShift].load(std::memory_order_relaxed);
}

[[gnu::always_inline]] inline void access(const void* p, size_t size, bool write, bool atomic, bool aligned,
                                          const void* pc) {
  ThreadState* s = tl_checked;
  if (!s) return;
  if (s->count_fast && !atomic && count_global_fast(*s, reinterpret_cast<uintptr_t>(p), size, write, pc)) return;
  if (s->fast4 && !write && !atomic && global_read_fast(*s, reinterpret_cast<uintptr_t>(p), size)) return;
  access_checked(s, p, size, write, atomic, aligned, pc);
}

// access() for an entry point that has tried shared_fast4() first: out of line, so that the
// entry point needs no stack frame of its own and reaches this by a jump.
[[gnu::noinline]] void access_rest(const void* p, size_t size, bool write, bool atomic, bool aligned, const void* pc) {
  ThreadState* s = tl_checked;
  if (!s) return;
  access_checked(s, p, size, write, atomic, aligned, pc);
}

// Plain aligned 4-byte accesses of shared memory with races and bounds checked, and no counting:
// most of a tiled kernel's accesses. The conditions that do not depend on the address are folded
// into one flag (ThreadState::fast4); true as well when no checked kernel code runs, false for
// anything else, leaving it to access_rest(). Counting mode (with bounds checked, its default, or no
// checks) counts them here too, without the calls of the general path: shared memory once its
// bounds are checked, and global memory when nothing is checked.
[[gnu::always_inline]] inline bool shared_fast4(const void* p, bool write, const void* pc) {
  ThreadState* s = tl_checked;
  if (!s) return true;  // no checked kernel code running: nothing to do
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (__builtin_expect(s->fast4, 1)) {
    if (!write) ++s->read_calls;
    return shared_fast_word(*s, a, write, true, true, pc) || (!write && global_read_fast(*s, a, 4));
  }
  if (s->count_fast) {
    if (a - s->arena < s->window_end - s->arena) {
      if (s->checks && !shared_fast_word(*s, a, write, true, false, pc)) return false;
      profile::access(write ? profile::kSharedStore : profile::kSharedLoad, tl_lane->linear, a, 4, pc);
      return true;
    }
    if (s->checks) {  // bounds: a buffer whose bounds were checked in this block, or the general path
      return count_global_fast(*s, a, 4, write, pc);
    }
    profile_access_inline(*s, a, 4, write, false, pc);
    return true;
  }
  if (s->fast4_race) return shared_fast_word(*s, a, write, false, true, pc);
  return false;
}

// A lane that keeps polling one address is waiting for another thread: let the others run.
inline void note_poll(const void* p, unsigned threshold, const char* why, const void* pc) {
  ThreadState* s = tl_checked;
  const Lane* l = tl_lane;
  if (!s || !l) return;
  const unsigned me = l->linear;
  if (s->spin_addr[me] != p) {
    s->spin_addr[me] = p;
    s->spin_count[me] = 0;
  } else if (++s->spin_count[me] >= threshold) {
    spin_yield_at(why, pc);
  }
}

}  // namespace

// ---- hooks called by the scheduler -----------------------------------------------------------------

ThreadState* this_thread_state() { return tl_state; }

// Voids every read grant given so far (ReadFilter). A generation is a multiple of 64 in 32 bits:
// when the count wraps (once per 2^26), the grants are cleared, so that none can look current.
void next_grant_generation(ThreadState& s) {
  ReadFilter& f = __cudasim_read_filter;
  f.generation += 64;
  if (f.generation == 0) {
    if (s.tokens) std::memset(s.tokens, 0, s.window_words * sizeof(uint32_t));
    f.generation = 64;
  }
  f.any = f.generation | 32;
  if (tl_lane) lane_running(tl_lane->linear);
}

// Barrier intervals are counted in 16 bits: when the count wraps, every recorded access is
// forgotten (once per 65535 intervals), so that an old one can never look current.
void next_shared_epoch(ThreadState& s) {
  next_grant_generation(s);
  if (++s.epoch != 0) return;
  for (size_t w = 0; w < (s.window_end - s.arena) / 4; ++w) s.cells[w].w_epoch = s.cells[w].r1_epoch = s.cells[w].r2_epoch = 0;
  s.epoch = 1;
}

void launch_begin(dim3 grid, dim3 block, const LaunchRange* ranges, size_t n_ranges) {
  find_static_data();
  DeviceMemory& m = device_memory();
  m.open_for_kernels();
  g_dev_lo = m.device_base();
  g_alias_lo = m.alias_base();
  g_region = m.region_size();
  g_launch.grid = grid;
  g_launch.block = block;
  g_launch.checks = requested_checks();
  g_launch.n_ranges = std::min<size_t>(n_ranges, 4);
  for (size_t i = 0; i < g_launch.n_ranges; ++i) g_launch.ranges[i] = ranges[i];
  g_launch.nblocks = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  g_launch.uid_base = g_next_uid;
  g_next_uid += g_launch.nblocks;
  g_launch.fences = nullptr;
  g_launch.any_fence.store(false);
  g_launch_checked = true;
}

void launch_end() {
  g_launch_checked = false;
  delete[] g_launch.fences;
  g_launch.fences = nullptr;
  device_memory().close_for_host((requested_checks() & kCheckBounds) != 0);
}

void block_begin(const BlockInfo& b) {
  ThreadState& s = state();
  s.checks = g_launch.checks;
  s.profile = profile::g_launch_profiled;
  s.fast4 = !s.profile && (s.checks & (kCheckRace | kCheckBounds)) == (kCheckRace | kCheckBounds);
  s.fast4_race = !s.profile && (s.checks & (kCheckRace | kCheckBounds)) == kCheckRace;
  s.count_fast = s.profile && (s.checks & ~kCheckBounds) == 0;
  s.seen_lo[0] = s.seen_lo[1] = s.seen_hi[0] = s.seen_hi[1] = 0;
  if (s.profile) profile::block_begin(b.nthreads);
  s.lanes = b.lanes;
  s.nthreads = b.nthreads;
  s.block_linear = b.linear_index;
  s.uid = g_launch.uid_base + b.linear_index;
  s.stacks = b.stacks;
  s.arena = reinterpret_cast<uintptr_t>(b.static_shared);
  s.capacity = b.static_capacity;
  // The window ends with the guard page after the dynamic region: an access there is out of the
  // dynamic region's bounds (the scheduler puts the region's end at that page).
  s.window_end = s.arena + 2 * s.capacity + 2 * kPageBytes;
  s.window_words = (s.window_end - s.arena) / 4;
  s.dyn_lo = reinterpret_cast<uintptr_t>(b.dynamic_shared);
  s.dyn_bytes = b.dynamic_bytes;
  s.dyn_name = nullptr;
  s.dyn_elem = 0;
  s.vars.clear();
  if (!s.cells) {
    s.cells = static_cast<SharedCell*>(reserve((s.window_end - s.arena) / 4 * sizeof(SharedCell)));
    s.lines = static_cast<SharedLines*>(reserve((s.window_end - s.arena) / 4 * sizeof(SharedLines)));
    s.tokens = static_cast<uint32_t*>(reserve((s.window_end - s.arena) / 4 * sizeof(uint32_t)));
  }
  for (size_t w = 0; w < s.arena_marked / 4; ++w) s.cells[w].owner = 0;
  s.arena_marked = 0;
  next_shared_epoch(s);
  s.block_epoch = 0;
  for (unsigned i = 0; i < b.nthreads; ++i) {
    std::memset(s.vc[i], 0, sizeof s.vc[i]);
    s.vc[i][i & 31] = 1;
    s.published[i] = 0;
    s.spin_addr[i] = nullptr;
    s.spin_count[i] = 0;
  }
  if ((s.checks & (kCheckRace | kCheckInit)) && !g_init_bits) ensure_global_shadow();
  ReadFilter& f = __cudasim_read_filter;
  f.base = s.arena;
  f.tokens = s.tokens;
  f.words = s.fast4 && inline_reads_enabled() ? s.window_words : 0;  // grants are given in this mode only
  s.active = true;
}

void block_end() {
  __cudasim_read_filter.words = 0;
  if (ThreadState* s = tl_state) {
    g_read_calls.fetch_add(s->read_calls, std::memory_order_relaxed);
    s->read_calls = 0;
    s->active = false;
    if (s->profile) profile::block_end();
  }
}

void barrier_released() {
  ThreadState& s = *tl_state;
  if (s.profile) profile::barrier_released();
  next_shared_epoch(s);
  ++s.block_epoch;
}

void warp_released(const Lane* lanes, unsigned base, unsigned width, unsigned released) {
  ThreadState* s = tl_state;
  if (!s || !(s->checks & kCheckRace)) return;
  const unsigned exist = width == 32 ? ~0u : (1u << width) - 1u;
  unsigned todo = released;
  while (todo) {
    const unsigned first = static_cast<unsigned>(__builtin_ctz(todo));
    const unsigned group = lanes[base + first].mask & exist & released;
    uint32_t joined[32] = {};
    for (unsigned m = group; m; m &= m - 1) {
      const uint32_t* v = s->vc[base + static_cast<unsigned>(__builtin_ctz(m))];
      for (unsigned k = 0; k < 32; ++k) joined[k] = std::max(joined[k], v[k]);
    }
    for (unsigned m = group; m; m &= m - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctz(m));
      std::memcpy(s->vc[base + i], joined, sizeof joined);
      ++s->vc[base + i][i];
    }
    todo &= ~group;
    todo &= ~(1u << first);
  }
  next_grant_generation(*s);  // the released lanes' clocks moved
}

void shared_variable(const void* p, size_t bytes, size_t elem_bytes, const char* name, const char* file, unsigned line) {
  ThreadState* s = tl_state;
  if (!s || !s->active) return;
  const auto lo = reinterpret_cast<uintptr_t>(p);
  s->vars.push_back({lo, lo + bytes, elem_bytes, name && *name ? name : "(unnamed)", file, line});
  const auto index = static_cast<uint8_t>(std::min<size_t>(s->vars.size(), 255));
  for (uintptr_t w = (lo - s->arena) >> 2; w < (lo - s->arena + bytes + 3) >> 2; ++w) s->cells[w].owner = index;
  s->arena_marked = std::max(s->arena_marked, (lo - s->arena + bytes + 3) & ~size_t{3});
}

void dynamic_shared_named(const char* name, size_t elem_bytes) {
  ThreadState* s = tl_state;
  if (!s || !s->active || s->dyn_name) return;
  s->dyn_name = name;
  s->dyn_elem = elem_bytes;
}

void fence() {
  ThreadState* s = tl_state;
  if (!s || !s->active || !(s->checks & kCheckRace) || !tl_lane) return;
  // Within the block: what this thread did so far is published (see shared_ordered).
  const unsigned me = tl_lane->linear;
  s->published[me] = s->vc[me][me & 31]++;
  next_grant_generation(*s);  // its clock moved
  const uint64_t block = s->block_linear;
  if (g_launch.nblocks > kFenceTableBlocks) {
    g_launch.any_fence.store(true, std::memory_order_relaxed);
    return;
  }
  static std::mutex table_mutex;
  if (!__atomic_load_n(&g_launch.fences, __ATOMIC_ACQUIRE)) {
    std::lock_guard lk(table_mutex);
    if (!g_launch.fences) {
      auto* t = new std::atomic<uint32_t>[g_launch.nblocks]();
      __atomic_store_n(&g_launch.fences, t, __ATOMIC_RELEASE);
    }
  }
  std::atomic<uint32_t>& f = g_launch.fences[block];
  const uint32_t v = (s->block_epoch & 0xfffff) + 1;
  if (f.load(std::memory_order_relaxed) < v) f.store(v, std::memory_order_release);
}

void note_copy(const void* dst, const void* src, size_t n) {
  if (!n) return;
  DeviceMemory& m = device_memory();
  Allocation* a = m.find_live(dst, n);
  if (!a) return;
  if (a->fully_written.load(std::memory_order_relaxed)) return;
  // Copying memory nobody wrote does not initialise the destination.
  if (src && g_init_bits && m.region_offset(reinterpret_cast<uintptr_t>(src)) != ~uintptr_t{0}) {
    Allocation* from = m.find_live(src, n);
    if (from && !from->fully_written.load(std::memory_order_relaxed)) {
      const uintptr_t so = m.region_offset(reinterpret_cast<uintptr_t>(src)), doff = m.region_offset(reinterpret_cast<uintptr_t>(dst));
      for (size_t i = 0; i < n; ++i) {
        if (bits_set(so + i, 1)) set_bits(doff + i, 1);
      }
      return;
    }
  }
  if (reinterpret_cast<uintptr_t>(dst) == a->base && n >= a->size) {
    a->fully_written.store(true, std::memory_order_relaxed);
    return;
  }
  if (!g_init_bits) {
    g_dev_lo = m.device_base();
    g_alias_lo = m.alias_base();
    g_region = m.region_size();
    ensure_global_shadow();
  }
  set_bits(m.region_offset(reinterpret_cast<uintptr_t>(dst)), n);
}

void note_free(size_t region_offset, size_t bytes) {
  if (!g_init_bits) return;
  // The shadow of freed memory goes back to the system (its cells and bits read as zero again).
  const size_t lo = region_offset & ~size_t{4095}, hi = (region_offset + bytes + 4095) & ~size_t{4095};
  madvise(reinterpret_cast<char*>(g_cells) + lo / 4 * sizeof(GlobalCell), (hi - lo) / 4 * sizeof(GlobalCell), MADV_DONTNEED);
  const size_t blo = lo / 8 & ~size_t{4095}, bhi = (hi / 8 + 4095) & ~size_t{4095};
  if (bhi > blo + 8192) madvise(reinterpret_cast<char*>(g_init_bits) + blo + 4096, bhi - blo - 8192, MADV_DONTNEED);
  for (size_t c = lo >> kChunkShift; c < (hi + (size_t{1} << kChunkShift) - 1) >> kChunkShift; ++c) {
    g_chunk_has_shadow[c].store(0, std::memory_order_relaxed);
  }
}

}  // namespace check
}  // namespace cudasim::detail

unsigned long long cudasim::checker_read_calls() {
  return detail::check::g_read_calls.load(std::memory_order_relaxed);
}

// ---- the instrumentation's entry points ------------------------------------------------------------

using cudasim::detail::check::access;
using cudasim::detail::check::access_rest;
using cudasim::detail::check::shared_fast4;
using cudasim::detail::check::note_poll;

extern "C" {

// Called by the constructor of every instrumented translation unit, before main.
void __tsan_init() { cudasim::detail::g_instrumented.store(true, std::memory_order_relaxed); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}

#define CUDASIM_TSAN_ACCESS(n)                                                                                  \
  void __tsan_unaligned_read##n(void* p) { access(p, n, false, false, false, __builtin_return_address(0)); }    \
  void __tsan_unaligned_write##n(void* p) { access(p, n, true, false, false, __builtin_return_address(0)); }    \
  void __tsan_volatile_read##n(void* p) {                                                                       \
    access(p, n, false, false, false, __builtin_return_address(0));                                             \
    note_poll(p, 8, "a volatile read polled in a loop", __builtin_return_address(0));                                                         \
  }                                                                                                             \
  void __tsan_volatile_write##n(void* p) { access(p, n, true, false, false, __builtin_return_address(0)); }     \
  void __tsan_unaligned_volatile_read##n(void* p) {                                                             \
    access(p, n, false, false, false, __builtin_return_address(0));                                             \
    note_poll(p, 8, "a volatile read polled in a loop", __builtin_return_address(0));                                                         \
  }                                                                                                             \
  void __tsan_unaligned_volatile_write##n(void* p) { access(p, n, true, false, false, __builtin_return_address(0)); }
#define CUDASIM_TSAN_PLAIN(n)                                                                                   \
  void __tsan_read##n(void* p) { access(p, n, false, false, n > 1, __builtin_return_address(0)); }              \
  void __tsan_write##n(void* p) { access(p, n, true, false, n > 1, __builtin_return_address(0)); }
CUDASIM_TSAN_PLAIN(1)
CUDASIM_TSAN_PLAIN(2)
CUDASIM_TSAN_PLAIN(8)
CUDASIM_TSAN_PLAIN(16)
#undef CUDASIM_TSAN_PLAIN
// The most frequent calls: tried on the fast path first, the rest reached by a tail call. Each
// starts a cache line of its own, so that its speed does not depend on where the linker put it
// (measured: up to 7% of a checked tiled matmul's time between two layouts of the same code).
[[gnu::aligned(64)]] void __tsan_read4(void* p) {
  if (!shared_fast4(p, false, __builtin_return_address(0))) access_rest(p, 4, false, false, true, __builtin_return_address(0));
}
[[gnu::aligned(64)]] void __tsan_write4(void* p) {
  if (!shared_fast4(p, true, __builtin_return_address(0))) access_rest(p, 4, true, false, true, __builtin_return_address(0));
}
CUDASIM_TSAN_ACCESS(1)
CUDASIM_TSAN_ACCESS(2)
CUDASIM_TSAN_ACCESS(4)
CUDASIM_TSAN_ACCESS(8)
CUDASIM_TSAN_ACCESS(16)
#undef CUDASIM_TSAN_ACCESS

void __tsan_read_range(void* p, unsigned long n) {
  if (n) access(p, n, false, false, false, __builtin_return_address(0));
}
void __tsan_write_range(void* p, unsigned long n) {
  if (n) access(p, n, true, false, false, __builtin_return_address(0));
}

// Atomics: the operation itself (sequentially consistent), recorded as an atomic access.
#define CUDASIM_TSAN_ATOMIC(bits, T)                                                                              \
  T __tsan_atomic##bits##_load(const volatile T* a, int) {                                                        \
    access(const_cast<T*>(a), sizeof(T), false, true, true, __builtin_return_address(0));                         \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                  \
  }                                                                                                               \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                                     \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                     \
  }                                                                                                               \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                                     \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                               \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {                                                    \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                            \
  }                                                                                                               \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {                                                    \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                            \
  }                                                                                                               \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {                                                    \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                            \
  }                                                                                                               \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {                                                     \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                             \
  }                                                                                                               \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {                                                    \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                            \
  }                                                                                                               \
  T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                                   \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                               \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                         \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                       \
  }                                                                                                               \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                           \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                        \
  }                                                                                                               \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                               \
    access(const_cast<T*>(a), sizeof(T), true, true, true, __builtin_return_address(0));                          \
    note_poll(const_cast<T*>(a), 3, "repeated atomics on one address", __builtin_return_address(0));                                           \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                             \
    return c;                                                                                                     \
  }
CUDASIM_TSAN_ATOMIC(8, char)
CUDASIM_TSAN_ATOMIC(16, short)
CUDASIM_TSAN_ATOMIC(32, int)
CUDASIM_TSAN_ATOMIC(64, long long)
#undef CUDASIM_TSAN_ATOMIC

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"
