// Kernel execution on the CPU: blocks on a pool of OS threads, the threads of a block as fibers.
//
// A block runs on one OS thread. Each of its CUDA threads is a Boost.Context fiber that runs
// until it has to wait (a barrier it is the last to reach releases the others instead) and then
// hands control straight to the next runnable fiber; when none is left, control returns to this
// file's block scheduler, which opens a __syncthreads() everyone has reached, or reports a
// divergent barrier or a deadlock. A warp-synchronous call (__syncwarp, a shuffle or a vote) is
// released as soon as the lanes it names have arrived, whatever the rest of the block does, as
// on a GPU. Fibers and their stacks belong to the OS thread and are reused by every block and
// launch it runs.
//
// The order in which runnable threads take turns is a setting (CUDASIM_ORDER): forward, reverse,
// shuffled, or warp by warp. A correct kernel computes the same result in every order.
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "profile.h"
#include "cudasim/cudasim.h"
#include "cudasim/pipeline.h"
#include "cudasim/ptx_mma.h"
#include "cudasim/wmma.h"
#include "runtime_internal.h"
#include "symbolize.h"

namespace cudasim::detail {
namespace {

namespace bc = boost::context;

enum class Order { Forward, Reverse, Shuffle, Warps, WarpsReverse };

struct Options {
  unsigned threads = 1;
  Order order = Order::Forward;
  uint64_t seed = 0;
  size_t stack_bytes = 256 * 1024;
  bool poison = true;
  unsigned checks = 0;        // CheckKind mask asked for by CUDASIM_CHECK
  bool checks_given = false;  // CUDASIM_CHECK is set (a checked program checks everything otherwise)
  double spin_timeout_s = 20;  // a spin-wait without progress for this long is a livelock
  bool profile = false;        // counting mode (CUDASIM_PROFILE)
  bool inline_reads = true;    // the inline read check may skip calls (CUDASIM_INLINE_READS)
};

bool g_profile_by_default = false;  // set before main by programs built with --profile

unsigned long env_number(const char* name, unsigned long fallback, unsigned long lo, unsigned long hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long n = std::strtoul(v, &end, 10);
  if (*end || n < lo || n > hi) {
    std::fprintf(stderr, "cudasim: %s=%s is not a number in [%lu, %lu]\n", name, v, lo, hi);
    std::exit(2);
  }
  return n;
}

unsigned parse_checks(const char* v) {
  unsigned checks = 0;
  std::string s = v, item;
  std::stringstream in(s);
  while (std::getline(in, item, ',')) {
    if (item == "all" || item == "1") {
      checks |= kCheckRace | kCheckBounds | kCheckInit;
    } else if (item == "race" || item == "racecheck") {
      checks |= kCheckRace;
    } else if (item == "bounds" || item == "memcheck") {
      checks |= kCheckBounds;
    } else if (item == "init" || item == "initcheck") {
      checks |= kCheckInit;
    } else if (item == "none" || item == "0" || item.empty()) {
    } else {
      std::fprintf(stderr, "cudasim: CUDASIM_CHECK=%s: expected a list of race, bounds, init, or all/none\n", v);
      std::exit(2);
    }
  }
  return checks;
}

Options read_options() {
  Options o;
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  o.threads = static_cast<unsigned>(env_number("CUDASIM_THREADS", hw, 1, 1024));
  o.stack_bytes = env_number("CUDASIM_STACK_KB", 256, 16, 65536) * 1024;
  o.poison = env_number("CUDASIM_POISON", 1, 0, 1) != 0;
  o.spin_timeout_s = static_cast<double>(env_number("CUDASIM_SPIN_TIMEOUT", 20, 1, 86400));
  if (const char* v = std::getenv("CUDASIM_ORDER"); v && *v) {
    std::string s = v;
    if (s == "forward") {
      o.order = Order::Forward;
    } else if (s == "reverse") {
      o.order = Order::Reverse;
    } else if (s == "warps") {
      o.order = Order::Warps;
    } else if (s == "warps-reverse") {
      o.order = Order::WarpsReverse;
    } else if (s.rfind("shuffle", 0) == 0 && (s.size() == 7 || s[7] == ':')) {
      o.order = Order::Shuffle;
      if (s.size() > 8) o.seed = std::strtoull(s.c_str() + 8, nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "cudasim: CUDASIM_ORDER=%s: expected forward, reverse, warps, warps-reverse or shuffle[:seed]\n", v);
      std::exit(2);
    }
  }
  if (const char* v = std::getenv("CUDASIM_CHECK"); v && *v) {
    o.checks = parse_checks(v);
    o.checks_given = true;
  }
  o.profile = env_number("CUDASIM_PROFILE", g_profile_by_default ? 1 : 0, 0, 1) != 0;
  o.inline_reads = env_number("CUDASIM_INLINE_READS", 1, 0, 1) != 0;
  return o;
}

Options& current_options() {
  static Options o = read_options();
  return o;
}
const Options& options() { return current_options(); }

// Says once per process why CUDASIM_CHECK has no effect in a program built without checking.
// __shared__ memory starts as 16-bit words 0xFFF1: NaN as float, bf16, half and double, like
// cudaMalloc's 0xFF bytes, but a different NaN. x86 arithmetic passes a NaN operand's bits on, so
// an output computed from shared memory no thread wrote still shows 0xFFF1FFF1, and the test
// harness can say that instead of "nothing was written" (a missing barrier after a tile load).
void poison_shared(unsigned char* p, size_t bytes) {
  unsigned char* const end = p + bytes;
  if (p < end && (reinterpret_cast<uintptr_t>(p) & 1)) *p++ = 0xFF;  // high byte of a word
  constexpr uint64_t kWords = 0xFFF1FFF1FFF1FFF1ull;                  // from an even address
  for (; end - p >= 8; p += 8) std::memcpy(p, &kWords, 8);
  for (size_t i = 0; p + i < end; ++i) p[i] = (i & 1) ? 0xFF : 0xF1;
}

void explain_unchecked_build() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "cudasim: CUDASIM_CHECK=%s is set, but this program was built without checking, so no "
                 "race, bounds or initialisation check runs.\n"
                 "  Build it with checking: `cudasim-cc --check ...`, or in the CMake build run the "
                 "<test>_check binary (ctest's <test>.check entries; option CLOCKWORK_CUDASIM_CHECK=ON).\n",
                 check_names(requested_checks()).c_str());
  });
}

// Says once per process why CUDASIM_PROFILE has no effect in a program built without checking.
void explain_unprofiled_build() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "cudasim: CUDASIM_PROFILE=1 is set, but this program was built without instrumentation, so "
                 "nothing is counted.\n  Build it with `cudasim-cc --profile ...` (or --check), or in the CMake "
                 "build run the <test>_check binary.\n");
  });
}

// Fiber stacks: mmap'd with a guard page below, like boost's protected_fixedsize_stack, but each
// one starts at a different offset inside its top 64 KiB. Stacks of equal size would otherwise
// all begin at the same cache set, and the threads of a block, which run one after the other,
// would evict each other's stack frames at every switch. The usable range is recorded, for the
// checker (accesses to the own stack are private) and for reporting a stack overflow.
class ColoredStack {
 public:
  ColoredStack(size_t size, unsigned index, StackRange* out)
      : size_(size), offset_((index * 17u % 1024u) * 64u), out_(out) {}

  bc::stack_context allocate() {
    const size_t page = 4096, total = size_ + offset_ + page;
    void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    mprotect(base, page, PROT_NONE);  // overflowing the stack faults instead of corrupting memory
    bc::stack_context sc;
    sc.size = size_;
    sc.sp = static_cast<char*>(base) + total - offset_;
    out_->lo = reinterpret_cast<uintptr_t>(base) + page;
    out_->hi = reinterpret_cast<uintptr_t>(sc.sp);
    return sc;
  }
  void deallocate(bc::stack_context& sc) noexcept {
    const size_t page = 4096, total = size_ + offset_ + page;
    munmap(static_cast<char*>(sc.sp) + offset_ - total, total);
  }

 private:
  size_t size_, offset_;
  StackRange* out_;
};

struct Job {
  LaunchConfig cfg;
  const char* kernel;
  const char* file;
  unsigned line;
  void* ctx;
  void (*body)(void*);
  uint64_t nblocks;
  uint64_t launch_index;
  StaticSharedBudget static_shared;  // what the block's __shared__ variables may take
  std::atomic<uint64_t> next{0};
};

// Shared memory of one OS thread: the static arena and the dynamic region, each followed by an
// inaccessible page, so that running past the end of dynamic shared memory faults.
constexpr size_t kPage = 4096;
constexpr size_t kSharedRegionBytes = (kMaxSharedBytes + kPage - 1) / kPage * kPage;

// Blocks that finished anywhere: a thread spinning on something another block will do is not
// stuck while this moves.
std::atomic<uint64_t> g_blocks_finished{0};

// Everything one OS thread needs to run blocks. Never freed: fibers still suspended in their
// loop would otherwise be unwound at process exit, which buys nothing.
struct Worker {
  std::vector<Lane> lanes = std::vector<Lane>(kMaxThreadsPerBlock);
  std::vector<bc::fiber> fibers;
  std::vector<StackRange> stacks = std::vector<StackRange>(kMaxThreadsPerBlock);
  bc::fiber scheduler;            // this OS thread's own stack, while a block runs
  bc::fiber* resumer = nullptr;   // where the context that resumes someone is to be stored
  Block block{};
  // Runnable threads are taken from `order` at `pos`; lanes released or yielding in the middle
  // of a pass are added at either end, as the order setting says.
  std::vector<unsigned> base_order, order;
  size_t pos = 0;
  bool order_changed = false;  // `order` is no longer the base order (lanes were queued)
  Order order_kind = Order::Forward;
  std::mt19937_64 rng;
  // Per warp: lanes waiting in a warp-synchronous call, lanes that have exited.
  std::vector<unsigned> warp_waiting = std::vector<unsigned>(kMaxThreadsPerBlock / 32);
  std::vector<unsigned> warp_done = std::vector<unsigned>(kMaxThreadsPerBlock / 32);
  unsigned char* shared_window = nullptr;  // [arena | guard | dynamic | guard]
  unsigned char* arena = nullptr;          // static __shared__ variables
  unsigned char* dynamic_end = nullptr;    // dynamic shared memory ends here, at a guard page
  size_t arena_used = 0;
  size_t declared_shared = 0;  // bytes of the block's __shared__ variables, as a GPU counts them
  const Job* job = nullptr;
  bool checked = false;  // the running launch is checked
  // Checked builds look up `__shared__` declarations by key (see shared_slot).
  std::vector<std::pair<const void*, void*>> shared_slots;
  // Kept up to date as threads stop, so the end of a pass costs O(1) in the common case.
  unsigned n_done = 0, n_at_barrier = 0, n_at_warp = 0;
  const Lane* barrier_first = nullptr;  // first thread at the pending block barrier
  bool barrier_divergent = false;       // some thread waits at another barrier call site
  int barrier_count = 0;                // predicates of __syncthreads_count/and/or
  int barrier_result = 0;               // of the last released barrier
  // Spin-waits: per thread the address of its last atomic and how many in a row went there ...
  std::vector<const void*> spin_addr = std::vector<const void*>(kMaxThreadsPerBlock);
  std::vector<unsigned> spin_repeats = std::vector<unsigned>(kMaxThreadsPerBlock);
  // ... and the yields since a thread of the block last made progress.
  uint64_t progress = 0, spin_progress_seen = 0, spins = 0, spin_finished_seen = 0;
  std::chrono::steady_clock::time_point spin_since;
  // Asynchronous copies (cudasim/pipeline.h), per thread: the copies not yet waited for, where
  // each committed batch ends among them, and the ones the last wait took.
  struct AsyncQueue {
    std::vector<AsyncCopy> copies;
    std::vector<size_t> batch_ends;
    std::vector<AsyncCopy> taken;
  };
  std::vector<AsyncQueue> async = std::vector<AsyncQueue>(kMaxThreadsPerBlock);
  bool async_used = false;  // some thread of the running block started a copy or a batch
};

inline thread_local Worker* tl_worker = nullptr;

Worker& this_worker() {
  if (!tl_worker) {
    auto* w = new Worker;
    const size_t total = kPage + kSharedRegionBytes + kPage + kSharedRegionBytes + kPage;
    void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    auto* base = static_cast<unsigned char*>(p);
    mprotect(base, kPage, PROT_NONE);
    mprotect(base + kPage + kSharedRegionBytes, kPage, PROT_NONE);
    mprotect(base + 2 * kPage + 2 * kSharedRegionBytes, kPage, PROT_NONE);
    w->shared_window = base;
    w->arena = base + kPage;
    w->dynamic_end = base + 2 * kPage + 2 * kSharedRegionBytes;
    ensure_signal_stack();
    tl_worker = w;
  }
  return *tl_worker;
}

std::string dim_str(unsigned x, unsigned y, unsigned z) {
  return "(" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + ")";
}
std::string thread_str(const Lane& l) { return "thread " + dim_str(l.tid.x, l.tid.y, l.tid.z); }
std::string site_str(const Lane& l) { return std::string(l.what) + " at " + l.file + ":" + std::to_string(l.line); }
std::string kernel_str(const Worker& w) {
  const Block& b = w.block;
  return "kernel '" + std::string(b.kernel) + "' (launched at " + w.job->file + ":" +
         std::to_string(w.job->line) + "), block " + dim_str(b.idx.x, b.idx.y, b.idx.z);
}

// ---- switching between fibers ------------------------------------------------------------------

// Makes lane k the running one, where its fiber starts or resumes (the checker's inline read check
// needs its warp).
[[gnu::always_inline]] inline void run_lane(Worker& w, unsigned k) {
  tl_lane = &w.lanes[k];
  check::lane_running(w.lanes[k].linear);
}

// Both are forced inline: every call level between a barrier and the context switch costs a
// mispredicted return when the other fiber resumes (the CPU's return predictor cannot follow a
// stack switch), which is most of the price of a switch.
[[gnu::always_inline]] inline void jump(Worker& w, bc::fiber& target, bc::fiber* self) {
  w.resumer = self;
  bc::fiber from = std::move(target).resume();
  *tl_worker->resumer = std::move(from);
}

[[gnu::always_inline]] inline bool next_ready(Worker& w, unsigned& out) {
  while (w.pos < w.order.size()) {
    unsigned k = w.order[w.pos++];
    if (w.lanes[k].state == LaneState::Ready) {
      out = k;
      return true;
    }
  }
  return false;
}

// Called on a fiber that must wait: run the next runnable thread of this pass, or the scheduler.
[[gnu::always_inline]] inline void suspend(Worker& w, unsigned self) {
  unsigned next;
  if (next_ready(w, next)) {
    tl_lane = &w.lanes[next];
    jump(w, w.fibers[next], &w.fibers[self]);
  } else {
    jump(w, w.scheduler, &w.fibers[self]);
  }
  run_lane(w, self);
}

// Adds lane k to be run after everything queued, or before it.
void queue_back(Worker& w, unsigned k) {
  if (w.pos > 4096 && w.pos * 2 > w.order.size()) {  // drop what has been consumed
    w.order.erase(w.order.begin(), w.order.begin() + static_cast<std::ptrdiff_t>(w.pos));
    w.pos = 0;
  }
  w.order.push_back(k);
  w.order_changed = true;
}
void queue_front(Worker& w, unsigned k) {
  if (w.pos > 0) {
    w.order[--w.pos] = k;
  } else {
    w.order.insert(w.order.begin(), k);
  }
  w.order_changed = true;
}

// Queues the lanes of `released` (a mask in the warp at `base`) other than `self` to run, as the
// order setting says: warp by warp runs them next, the others after what is already queued.
void queue_released(Worker& w, unsigned base, unsigned released, unsigned self) {
  released &= ~(self >= base && self < base + 32 ? 1u << (self - base) : 0u);
  if (!released) return;
  switch (w.order_kind) {
    case Order::Forward:
      for (unsigned m = released; m; m &= m - 1) queue_back(w, base + static_cast<unsigned>(__builtin_ctz(m)));
      break;
    case Order::Reverse:
      for (unsigned m = released; m; m &= ~(1u << (31 - __builtin_clz(m))))
        queue_back(w, base + 31u - static_cast<unsigned>(__builtin_clz(m)));
      break;
    case Order::Shuffle: {
      unsigned ks[32], n = 0;
      for (unsigned m = released; m; m &= m - 1) ks[n++] = base + static_cast<unsigned>(__builtin_ctz(m));
      std::shuffle(ks, ks + n, w.rng);
      for (unsigned i = 0; i < n; ++i) queue_back(w, ks[i]);
      break;
    }
    case Order::Warps:  // lowest lane first: push the highest first
      for (unsigned m = released; m; m &= ~(1u << (31 - __builtin_clz(m))))
        queue_front(w, base + 31u - static_cast<unsigned>(__builtin_clz(m)));
      break;
    case Order::WarpsReverse:
      for (unsigned m = released; m; m &= m - 1) queue_front(w, base + static_cast<unsigned>(__builtin_ctz(m)));
      break;
  }
}

void lane_done(Worker& w, unsigned index) {
  w.lanes[index].state = LaneState::Done;
  w.warp_done[index >> 5] |= 1u << (index & 31u);
  ++w.n_done;
  ++w.progress;
}

bc::fiber make_fiber(Worker& w, unsigned index) {
  return bc::fiber(std::allocator_arg, ColoredStack(options().stack_bytes, index, &w.stacks[index]),
                   [index](bc::fiber&& from) -> bc::fiber {
                     Worker& w = *tl_worker;
                     *w.resumer = std::move(from);
                     run_lane(w, index);
                     for (;;) {
                       check::tl_checked = w.checked ? check::this_thread_state() : nullptr;
                       try {
                         w.job->body(w.job->ctx);
                       } catch (const std::exception& e) {
                         check::tl_checked = nullptr;
                         fatal(kernel_str(w) + ", " + thread_str(w.lanes[index]) +
                               ": uncaught exception: " + e.what());
                       }
                       check::tl_checked = nullptr;
                       lane_done(w, index);
                       suspend(w, index);  // resumed again by the next block or launch
                     }
                   });
}

// ---- the block scheduler -------------------------------------------------------------------------

void make_base_order(Worker& w, unsigned n) {
  w.base_order.resize(n);
  for (unsigned i = 0; i < n; ++i) w.base_order[i] = i;
  if (w.order_kind == Order::Reverse || w.order_kind == Order::WarpsReverse) {
    std::reverse(w.base_order.begin(), w.base_order.end());
  }
  if (w.order_kind == Order::Shuffle) std::shuffle(w.base_order.begin(), w.base_order.end(), w.rng);
}

bool same_site(const Lane& a, const Lane& b) {
  return a.line == b.line && a.what == b.what && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

// The warp matrix operations: wmma's functions, ldmatrix and mma.sync (cudasim/ptx_mma.h).
bool is_warp_matrix_op(const Lane& l) {
  return std::strncmp(l.what, "wmma::", 6) == 0 || std::strncmp(l.what, "ldmatrix", 8) == 0 ||
         std::strncmp(l.what, "mma.sync", 8) == 0;
}

[[noreturn]] void report_exited_lane(Worker& w, const Lane& l, unsigned base, unsigned gone) {
  std::ostringstream m;
  if (is_warp_matrix_op(l)) {
    m << kernel_str(w) << ", warp " << base / 32 << ": " << site_str(l) << " is reached by "
      << thread_str(l) << ", but lane " << gone << " (" << thread_str(w.lanes[base + gone])
      << ") has already exited.\n  Warp "
      << "matrix operations (wmma's load, store and mma, ldmatrix, mma.sync) are warp-collective: "
         "every lane of the warp must call them, at the same "
      << "line. A call inside a branch that only part of the warp takes is undefined on a GPU.";
    fatal(m.str());
  }
  m << kernel_str(w) << ", " << thread_str(l) << ": " << site_str(l) << " uses mask 0x" << std::hex << l.mask
    << std::dec << ", which names lane " << gone << " (" << thread_str(w.lanes[base + gone])
    << "), but that thread has already exited.\n  Every lane named in the mask must reach the same "
       "call; on a GPU this hangs or returns garbage. Build the mask from the lanes that are still "
       "active, e.g. __ballot_sync(0xffffffff, i < n) before the loop.";
  fatal(m.str());
}

// What a warp-synchronous call returns to lane `l`, whose group `group` was released together.
uint64_t warp_result(const Worker& w, const Lane& l, unsigned base, unsigned width, unsigned group, unsigned ready) {
  auto each = [&](auto f) {
    for (unsigned m = group; m; m &= m - 1) f(w.lanes[base + static_cast<unsigned>(__builtin_ctz(m))]);
  };
  switch (l.op) {
    case WarpOp::SyncWarp:
      return 0;
    case WarpOp::Shuffle:
      return (group >> l.src & 1u) ? w.lanes[base + l.src].value : ~0ull;
    case WarpOp::Ballot:
    case WarpOp::Any:
    case WarpOp::All: {
      unsigned ballot = 0;
      each([&](const Lane& o) { ballot |= o.pred ? 1u << (o.linear - base) : 0u; });
      return l.op == WarpOp::Ballot ? ballot : l.op == WarpOp::Any ? (ballot != 0) : (ballot == group);
    }
    case WarpOp::ActiveMask: {  // the lanes stopped at this same call site
      unsigned converged = 0;
      for (unsigned j = 0; j < width; ++j) {
        const Lane& o = w.lanes[base + j];
        if ((ready >> j & 1u) && o.op == WarpOp::ActiveMask && same_site(l, o)) converged |= 1u << j;
      }
      return converged;
    }
    case WarpOp::ReduceAdd: {
      uint32_t s = 0;
      each([&](const Lane& o) { s += static_cast<uint32_t>(o.value); });
      return s;
    }
    case WarpOp::ReduceMin:
    case WarpOp::ReduceMax: {
      int32_t r = static_cast<int32_t>(l.value);
      each([&](const Lane& o) {
        const int32_t v = static_cast<int32_t>(o.value);
        r = l.op == WarpOp::ReduceMin ? std::min(r, v) : std::max(r, v);
      });
      return static_cast<uint32_t>(r);
    }
    case WarpOp::ReduceUMin:
    case WarpOp::ReduceUMax: {
      uint32_t r = static_cast<uint32_t>(l.value);
      each([&](const Lane& o) {
        const uint32_t v = static_cast<uint32_t>(o.value);
        r = l.op == WarpOp::ReduceUMin ? std::min(r, v) : std::max(r, v);
      });
      return r;
    }
    case WarpOp::ReduceAnd:
    case WarpOp::ReduceOr:
    case WarpOp::ReduceXor: {
      uint32_t r = l.op == WarpOp::ReduceAnd ? ~0u : 0u;
      each([&](const Lane& o) {
        const uint32_t v = static_cast<uint32_t>(o.value);
        r = l.op == WarpOp::ReduceAnd ? (r & v) : l.op == WarpOp::ReduceOr ? (r | v) : (r ^ v);
      });
      return r;
    }
    case WarpOp::MatchAny:
    case WarpOp::MatchAll: {
      unsigned same = 0;
      each([&](const Lane& o) { same |= o.value == l.value ? 1u << (o.linear - base) : 0u; });
      return l.op == WarpOp::MatchAny ? same : (same == group ? group : 0u);
    }
  }
  return 0;
}

// Releases the groups of warp `wi` whose lanes have all arrived. `__activemask` waits until the
// whole block has stopped (`end_of_pass`). Returns the lanes released.
unsigned release_warp(Worker& w, unsigned wi, unsigned n, bool end_of_pass) {
  const unsigned base = wi * 32, width = std::min(32u, n - base);
  const unsigned exist = width == 32 ? ~0u : (1u << width) - 1u;
  const unsigned waiting = w.warp_waiting[wi], exited = w.warp_done[wi];
  if (!waiting) return 0;
  for (unsigned m = waiting; m; m &= m - 1) {
    const Lane& l = w.lanes[base + static_cast<unsigned>(__builtin_ctz(m))];
    if (l.mask & exited) report_exited_lane(w, l, base, static_cast<unsigned>(__builtin_ctz(l.mask & exited)));
  }
  // A lane may go once every lane its mask names is waiting too, and those may go as well.
  unsigned ready = 0;
  for (unsigned m = waiting; m; m &= m - 1) {
    const unsigned i = static_cast<unsigned>(__builtin_ctz(m));
    const Lane& l = w.lanes[base + i];
    if (l.op == WarpOp::ActiveMask && !end_of_pass) continue;
    if (((l.mask & exist) & ~waiting) == 0) ready |= 1u << i;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (unsigned m = ready; m; m &= m - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctz(m));
      if ((w.lanes[base + i].mask & exist) & ~ready) {
        ready &= ~(1u << i);
        changed = true;
      }
    }
  }
  if (!ready) return 0;
  for (unsigned m = ready; m; m &= m - 1) {
    const Lane& a = w.lanes[base + static_cast<unsigned>(__builtin_ctz(m))];
    if (a.op == WarpOp::SyncWarp) continue;
    for (unsigned g = a.mask & exist; g; g &= g - 1) {
      const Lane& b = w.lanes[base + static_cast<unsigned>(__builtin_ctz(g))];
      if (same_site(a, b)) continue;
      fatal(kernel_str(w) + ", warp " + std::to_string(base / 32) +
            ": lanes of one warp meet at different warp-synchronous calls:\n  " + thread_str(a) +
            " is at " + site_str(a) + "\n  " + thread_str(b) + " is at " + site_str(b) +
            (is_warp_matrix_op(a) || is_warp_matrix_op(b)
                 ? "\n  Warp matrix operations (wmma's load, store and mma, ldmatrix, mma.sync) "
                   "are warp-collective: every lane of the warp must "
                   "make the same call, at the same line."
                 : "\n  Every lane named in the mask must execute the same shuffle or vote."));
    }
  }
  for (unsigned m = ready; m; m &= m - 1) {
    Lane& l = w.lanes[base + static_cast<unsigned>(__builtin_ctz(m))];
    l.result = warp_result(w, l, base, width, l.mask & exist, ready);
  }
  if (w.checked) check::warp_released(w.lanes.data(), base, width, ready);
  for (unsigned m = ready; m; m &= m - 1) w.lanes[base + static_cast<unsigned>(__builtin_ctz(m))].state = LaneState::Ready;
  w.warp_waiting[wi] &= ~ready;
  w.n_at_warp -= static_cast<unsigned>(__builtin_popcount(ready));
  ++w.progress;
  return ready;
}

// End of a pass: whatever warp-synchronous call can now be released (`__activemask`).
bool release_warps(Worker& w, unsigned n) {
  bool released = false;
  for (unsigned wi = 0; wi * 32 < n; ++wi) released |= release_warp(w, wi, n, true) != 0;
  return released;
}

[[noreturn]] void report_stuck(Worker& w, unsigned n) {
  const Lane* at_bar = nullptr;
  for (unsigned i = 0; i < n; ++i) {
    const Lane& l = w.lanes[i];
    if (l.state != LaneState::AtBlockBarrier) continue;
    if (!at_bar) {
      at_bar = &l;
    } else if (!same_site(*at_bar, l)) {
      fatal(kernel_str(w) + ": divergent " + at_bar->what + ":\n  " + thread_str(*at_bar) + " waits at " +
            at_bar->file + ":" + std::to_string(at_bar->line) + "\n  " + thread_str(l) + " waits at " +
            l.file + ":" + std::to_string(l.line) +
            "\n  Every thread of a block must reach the same __syncthreads(). A barrier inside a branch "
            "that only some threads take hangs or corrupts results on a GPU: move it out of the branch.");
    }
  }
  std::ostringstream m;
  m << kernel_str(w) << ": deadlock: no thread can continue.";
  unsigned shown = 0;
  for (unsigned i = 0; i < n && shown < 6; ++i) {
    const Lane& l = w.lanes[i];
    if (l.state == LaneState::Done) continue;
    ++shown;
    m << "\n  " << thread_str(l) << " waits in " << site_str(l);
    if (l.state == LaneState::AtWarpSync) m << " (mask 0x" << std::hex << l.mask << std::dec << ")";
  }
  m << "\n  Threads waiting at __syncthreads() while others of their warp wait in a warp-synchronous "
       "call (or the other way round) never meet: make every thread reach the same barriers in the "
       "same order.";
  fatal(m.str());
}

void run_block(Worker& w, const Job& job, uint64_t k) {
  const dim3 g = job.cfg.grid, bd = job.cfg.block;
  const unsigned n = bd.x * bd.y * bd.z;
  Block& b = w.block;
  b.kernel = job.kernel;
  b.idx = make_uint3(static_cast<unsigned>(k % g.x), static_cast<unsigned>(k / g.x % g.y),
                     static_cast<unsigned>(k / (static_cast<uint64_t>(g.x) * g.y)));
  b.dim = bd;
  b.grid = g;
  b.nthreads = n;
  ++b.generation;
  // Dynamic shared memory ends at a guard page, so that running past its end faults.
  const size_t dyn = (job.cfg.dynamic_smem + 127) / 128 * 128;
  b.dynamic_smem = w.dynamic_end - dyn;
  b.dynamic_bytes = job.cfg.dynamic_smem;
  w.arena_used = 0;
  w.declared_shared = 0;
  w.shared_slots.clear();
  if (w.async_used) {  // copies the last block never waited for never land
    for (Worker::AsyncQueue& q : w.async) {
      q.copies.clear();
      q.batch_ends.clear();
    }
    w.async_used = false;
  }
  w.job = &job;
  w.checked = check::g_launch_checked;
  w.order_kind = options().order;
  if (options().poison) poison_shared(b.dynamic_smem, dyn);
  if (w.order_kind == Order::Shuffle) w.rng.seed(options().seed * 0x9e3779b97f4a7c15ull ^ (job.launch_index << 32) ^ k);

  while (w.fibers.size() < n) w.fibers.push_back(make_fiber(w, static_cast<unsigned>(w.fibers.size())));
  for (unsigned i = 0; i < n; ++i) {
    Lane& l = w.lanes[i];
    l = Lane{};
    l.tid = make_uint3(i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y));
    l.linear = i;
    l.state = LaneState::Ready;
    l.file = "";
    l.what = "";
    w.spin_addr[i] = nullptr;
    w.spin_repeats[i] = 0;
  }
  std::fill(w.warp_waiting.begin(), w.warp_waiting.begin() + (n + 31) / 32, 0u);
  std::fill(w.warp_done.begin(), w.warp_done.begin() + (n + 31) / 32, 0u);
  w.n_done = w.n_at_barrier = w.n_at_warp = 0;
  w.barrier_first = nullptr;
  w.barrier_divergent = false;
  w.barrier_count = 0;
  w.spins = 0;
  make_base_order(w, n);
  tl_block = &b;
  if (w.checked) {
    check::block_begin({w.lanes.data(), n, k, w.stacks.data(), w.arena, kSharedRegionBytes, b.dynamic_smem,
                        b.dynamic_bytes});
  }
  for (bool first = true;; first = false) {
    if (w.order_kind == Order::Shuffle && !first) make_base_order(w, n);
    if (w.order_changed || w.order_kind == Order::Shuffle || first) {
      w.order = w.base_order;
      w.order_changed = false;
    }
    w.pos = 0;
    unsigned next;
    if (next_ready(w, next)) {
      tl_lane = &w.lanes[next];
      jump(w, w.fibers[next], &w.scheduler);
      tl_lane = nullptr;
    }
    if (w.n_done == n) break;
    if (w.n_at_warp && release_warps(w, n)) continue;
    if (w.n_at_barrier && w.n_at_barrier + w.n_done == n && !w.barrier_divergent) {
      // PTX bar.sync: exited threads do not hold a block barrier back.
      w.barrier_result = w.barrier_count;
      for (unsigned i = 0; i < n; ++i)
        if (w.lanes[i].state == LaneState::AtBlockBarrier) w.lanes[i].state = LaneState::Ready;
      w.n_at_barrier = 0;
      w.barrier_first = nullptr;
      w.barrier_count = 0;
      if (w.checked) check::barrier_released();
      continue;
    }
    report_stuck(w, n);
  }
  if (w.checked) check::block_end();
  tl_block = nullptr;
  g_blocks_finished.fetch_add(1, std::memory_order_relaxed);
}

void run_blocks(Job& job) {
  Worker& w = this_worker();
  for (uint64_t k; (k = job.next.fetch_add(1)) < job.nblocks;) run_block(w, job, k);
}

// Persistent OS threads that take blocks of each launch; the launching thread takes blocks too.
class Pool {
 public:
  void run(Job& job) {
    const unsigned want = options().threads;
    if (want <= 1 || job.nblocks == 1) {
      run_blocks(job);
      return;
    }
    {
      std::lock_guard lk(m_);
      while (threads_ + 1 < want) {
        std::thread([this] { loop(); }).detach();
        ++threads_;
      }
      job_ = &job;
      ++epoch_;
      busy_ = threads_;
    }
    start_.notify_all();
    run_blocks(job);
    std::unique_lock lk(m_);
    done_.wait(lk, [&] { return busy_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop() {
    uint64_t seen = 0;
    std::unique_lock lk(m_);
    for (;;) {
      start_.wait(lk, [&] { return epoch_ != seen; });
      seen = epoch_;
      Job* job = job_;
      lk.unlock();
      run_blocks(*job);
      lk.lock();
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::mutex m_;
  std::condition_variable start_, done_;
  Job* job_ = nullptr;
  uint64_t epoch_ = 0;
  unsigned threads_ = 0, busy_ = 0;
};

// A thread that keeps yielding while nothing else happens in its block, or anywhere, for the
// spin timeout is in a livelock: stop with a diagnostic instead of hanging.
void note_spin(Worker& w, const char* why, const void* pc) {
  const uint64_t finished = g_blocks_finished.load(std::memory_order_relaxed);
  if (w.progress != w.spin_progress_seen || finished != w.spin_finished_seen || w.spins == 0) {
    w.spin_progress_seen = w.progress;
    w.spin_finished_seen = finished;
    w.spins = 1;
    w.spin_since = std::chrono::steady_clock::now();
    return;
  }
  if (++w.spins % 4096 != 0) return;
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - w.spin_since).count();
  if (waited < options().spin_timeout_s) return;
  std::ostringstream m;
  m << kernel_str(w) << ", " << thread_str(*tl_lane) << ": spin-wait without progress for "
    << static_cast<long>(waited) << " s (" << why << " at " << describe_code_address(pc) << ").\n"
    << "  No thread of the block reached a barrier or finished meanwhile, and no other block finished.";
  unsigned shown = 0;
  for (unsigned i = 0; i < w.block.nthreads && shown < 6; ++i) {
    const Lane& l = w.lanes[i];
    if (l.state == LaneState::Done || &l == tl_lane) continue;
    ++shown;
    m << "\n  " << thread_str(l) << (l.state == LaneState::Ready ? " is runnable (spinning too?)" : " waits in " + site_str(l));
  }
  m << "\n  The condition it waits for is never set. If another block is to set it, note that CUDA does not "
       "promise that all blocks of a grid run at the same time (here they run a few at a time, "
       "CUDASIM_THREADS); on a GPU this hangs too.";
  fatal(m.str());
}

}  // namespace

// ---- entry points used by cudasim.h -------------------------------------------------------------

int block_barrier(int pred, const char* what, std::source_location where) {
  check::RuntimeCode runtime;
  Lane& l = *tl_lane;
  Worker& w = *tl_worker;
  l.state = LaneState::AtBlockBarrier;
  l.pred = pred;
  l.what = what;
  l.file = where.file_name();
  l.line = where.line();
  ++w.n_at_barrier;
  ++w.progress;
  w.barrier_count += pred;
  if (!w.barrier_first) {
    w.barrier_first = &l;
  } else if (!same_site(*w.barrier_first, l)) {
    w.barrier_divergent = true;
  }
  suspend(w, l.linear);
  return w.barrier_result;
}

uint64_t warp_sync(WarpOp op, unsigned mask, int pred, uint64_t value, unsigned src, const char* what,
                   std::source_location where) {
  check::RuntimeCode runtime;
  const char* file = where.file_name();
  const unsigned line = where.line();
  Lane& l = *tl_lane;
  Worker& w = *tl_worker;
  const unsigned me = l.linear, wi = me >> 5, bit = 1u << (me & 31u);
  if (!(mask & bit)) {
    std::ostringstream m;
    m << kernel_str(w) << ", " << thread_str(l) << ": " << what << " at " << file << ":" << line
      << " is called with mask 0x" << std::hex << mask << std::dec << ", which does not include the calling lane "
      << (me & 31u) << ".\n  The mask must name every lane that makes the call, the caller included.";
    fatal(m.str());
  }
  l.state = LaneState::AtWarpSync;
  l.op = op;
  l.mask = mask;
  l.pred = pred;
  l.value = value;
  l.src = static_cast<uint8_t>(src);
  l.what = what;
  l.file = file;
  l.line = line;
  ++w.n_at_warp;
  ++w.progress;
  w.warp_waiting[wi] |= bit;
  if (mask & w.warp_done[wi]) report_exited_lane(w, l, wi * 32, static_cast<unsigned>(__builtin_ctz(mask & w.warp_done[wi])));
  // The last lane of a group to arrive releases it and goes on; the others run as the order says.
  const unsigned n = w.block.nthreads, width = std::min(32u, n - wi * 32);
  const unsigned exist = width == 32 ? ~0u : (1u << width) - 1u;
  if (op != WarpOp::ActiveMask && ((mask & exist) & ~w.warp_waiting[wi]) == 0) {
    const unsigned released = release_warp(w, wi, n, false);
    if (released & bit) {
      queue_released(w, wi * 32, released, me);
      return l.result;
    }
    if (released) queue_released(w, wi * 32, released, me);
  }
  suspend(w, me);
  return l.result;
}

// ---- warp matrix functions (cudasim/wmma.h) -----------------------------------------------------

namespace {
// What each lane gives a warp-collective matrix operation (its fragments, registers or row) while
// its warp meets, by linear thread index (a block runs on one OS thread).
thread_local const void* t_warp_operands[kMaxThreadsPerBlock];

// Lanes of warp `wi` that the block has.
unsigned warp_width(const Worker& w, unsigned wi) { return std::min(32u, w.block.nthreads - wi * 32); }

void wmma_whole_warp(Worker& w, const Lane& l, const char* what, std::source_location where) {
  const unsigned wi = l.linear / 32, width = warp_width(w, wi);
  if (width == 32) return;
  fatal(kernel_str(w) + ", warp " + std::to_string(wi) + ", " + thread_str(l) + ": " + what + " at " +
        where.file_name() + ":" + std::to_string(where.line()) + " needs a whole warp of 32 threads, but this warp " +
        "has " + std::to_string(width) + " (the block has " + std::to_string(w.block.nthreads) +
        " threads).\n  Launch blocks whose size is a multiple of 32.");
}

// The calling lane deposits `mine` and its warp meets at `what` (every lane of a whole warp must);
// returns the warp's 32 deposits, by lane. Each lane then computes its own results from them.
const void* const* warp_deposit(const void* mine, const char* what, std::source_location where) {
  const Lane& l = *tl_lane;
  wmma_whole_warp(*tl_worker, l, what, where);
  const unsigned lane = l.linear & 31u;
  t_warp_operands[l.linear] = mine;
  warp_sync(WarpOp::Shuffle, ~0u, 0, 0, lane, what, where);
  return t_warp_operands + (l.linear - lane);
}

// The warp meets again: no lane may change what it deposited before every lane has read it.
void warp_deposits_read(const char* what, std::source_location where) {
  warp_sync(WarpOp::Shuffle, ~0u, 0, 0, tl_lane->linear & 31u, what, where);
}

float wmma_get(WmmaType t, const void* x, unsigned slot) {
  switch (t) {
    case WmmaType::Half:
      return __half2float(static_cast<const __half*>(x)[slot]);
    case WmmaType::BFloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(x)[slot]);
    case WmmaType::Float:
      break;
  }
  return static_cast<const float*>(x)[slot];
}
}  // namespace

void wmma_meet(const char* what, std::source_location where) {
  check::RuntimeCode runtime;
  Lane& l = *tl_lane;
  wmma_whole_warp(*tl_worker, l, what, where);
  warp_sync(WarpOp::Shuffle, ~0u, 0, 0, l.linear & 31u, what, where);
}

void wmma_mma(const WmmaShape& s, const WmmaOperands& mine, const char* what, std::source_location where) {
  check::RuntimeCode runtime;
  const void* const* deposits = warp_deposit(&mine, what, where);
  const unsigned lane = tl_lane->linear & 31u;
  // Every lane's operands are known now. This lane's elements of D: element e of the m x n
  // matrix is in slot e / 32 of lane e % 32 (the mapping of cudasim/wmma.h); A is m x k and B is
  // k x n, numbered the same way, and their first copy is read.
  const auto ops = [&](unsigned other) {
    return static_cast<const WmmaOperands*>(deposits[other]);
  };
  for (unsigned slot = 0; slot < s.m * s.n / 32; ++slot) {
    const unsigned e = slot * 32 + lane, i = e / s.n, j = e % s.n;
    float acc = wmma_get(s.c, mine.c, slot);
    for (unsigned kk = 0; kk < s.k; ++kk) {
      const unsigned ea = i * s.k + kk, eb = kk * s.n + j;
      // Exact: the product of two 16-bit floats fits in a float's 24-bit significand.
      const float p =
          wmma_get(s.ab, ops(ea % 32)->a, ea / 32) * wmma_get(s.ab, ops(eb % 32)->b, eb / 32);
      acc += p;
    }
    if (s.d == WmmaType::Half) {
      static_cast<__half*>(mine.d)[slot] = __float2half_rn(acc);
    } else {
      static_cast<float*>(mine.d)[slot] = acc;
    }
  }
  // No lane may change its A or B (they are read by the others) before every lane is done.
  warp_deposits_read(what, where);
}

namespace {

// Stops the kernel: the running thread's call of `what` at `where` breaks a rule of its API.
[[noreturn]] void refuse_call(const char* what, std::source_location where, const std::string& problem) {
  check::RuntimeCode runtime;
  const Lane& l = *tl_lane;
  Worker& w = *tl_worker;
  fatal(kernel_str(w) + ", warp " + std::to_string(l.linear / 32) + ", " + thread_str(l) + ": " + what + " at " +
        where.file_name() + ":" + std::to_string(where.line()) + ": " + problem);
}

}  // namespace

void wmma_refuse(const char* what, std::source_location where, const char* problem) {
  refuse_call(what, where, problem);
}

// ---- asynchronous copies (cudasim/pipeline.h) ----------------------------------------------------

namespace {

// Copies and batches one thread may have in flight: far more than a pipeline of a few stages
// needs, and a bound on what a kernel that never waits can make cudasim hold.
constexpr size_t kMaxAsyncCopies = 1u << 16;

bool within(const void* p, size_t n, const unsigned char* lo, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(lo);
  return a >= b && a + n <= b + bytes;
}

std::string address_str(const void* p) {
  std::ostringstream o;
  o << p;
  return o.str();
}

}  // namespace

void pipeline_enqueue(void* dst, const void* src, size_t size, size_t zfill, std::source_location where) {
  check::RuntimeCode runtime;
  Worker& w = *tl_worker;
  const Lane& l = *tl_lane;
  const char* what = "__pipeline_memcpy_async";
  if (size != 4 && size != 8 && size != 16) {
    refuse_call(what, where, "size_and_align = " + std::to_string(size) + " must be 4, 8 or 16");
  }
  if (zfill > size) {
    refuse_call(what, where, "zfill = " + std::to_string(zfill) + " is more than size_and_align = " +
                                 std::to_string(size));
  }
  if (reinterpret_cast<uintptr_t>(dst) % size != 0 || reinterpret_cast<uintptr_t>(src) % size != 0) {
    refuse_call(what, where, "the destination " + address_str(dst) + " and the source " + address_str(src) +
                                 " must both be aligned to size_and_align = " + std::to_string(size) + " bytes");
  }
  if (!within(dst, size, w.arena, w.arena_used) && !within(dst, size, w.block.dynamic_smem, w.block.dynamic_bytes)) {
    refuse_call(what, where, "the destination " + address_str(dst) + " is not in the block's shared memory (" +
                                 std::to_string(size) + " bytes of a __shared__ variable or of the dynamic "
                                 "shared memory): asynchronous copies go from global to shared memory");
  }
  if (within(src, 1, w.shared_window, w.dynamic_end - w.shared_window)) {
    refuse_call(what, where, "the source " + address_str(src) +
                                 " is in shared memory: asynchronous copies go from global to shared memory");
  }
  const StackRange& stack = w.stacks[l.linear];
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (s >= stack.lo && s < stack.hi) {
    refuse_call(what, where, "the source " + address_str(src) +
                                 " is a local variable of the thread: asynchronous copies go from global memory");
  }
  Worker::AsyncQueue& q = w.async[l.linear];
  if (q.copies.size() >= kMaxAsyncCopies) {
    refuse_call(what, where, "this thread has " + std::to_string(kMaxAsyncCopies) +
                                 " copies in flight: wait for them with __pipeline_wait_prior()");
  }
  q.copies.push_back({static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                      static_cast<uint32_t>(size - zfill), static_cast<uint32_t>(size)});
  w.async_used = true;
}

void pipeline_commit(std::source_location where) {
  check::RuntimeCode runtime;
  Worker& w = *tl_worker;
  Worker::AsyncQueue& q = w.async[tl_lane->linear];
  if (q.batch_ends.size() >= kMaxAsyncCopies) {
    refuse_call("__pipeline_commit", where, "this thread has " + std::to_string(kMaxAsyncCopies) +
                                                " batches in flight: wait for them with __pipeline_wait_prior()");
  }
  q.batch_ends.push_back(q.copies.size());
  w.async_used = true;
}

size_t pipeline_take(size_t prior) {
  check::RuntimeCode runtime;
  Worker::AsyncQueue& q = tl_worker->async[tl_lane->linear];
  q.taken.clear();
  prior = std::min<size_t>(prior, 8);  // CUDA's header waits for all but 8 at most
  if (q.batch_ends.size() > prior) {
    const size_t batches = q.batch_ends.size() - prior, copies = q.batch_ends[batches - 1];
    q.taken.assign(q.copies.begin(), q.copies.begin() + static_cast<std::ptrdiff_t>(copies));
    q.copies.erase(q.copies.begin(), q.copies.begin() + static_cast<std::ptrdiff_t>(copies));
    q.batch_ends.erase(q.batch_ends.begin(), q.batch_ends.begin() + static_cast<std::ptrdiff_t>(batches));
    for (size_t& end : q.batch_ends) end -= copies;
  }
  return q.taken.size();
}

void pipeline_taken(size_t i, AsyncCopy* copy) {
  check::RuntimeCode runtime;
  *copy = tl_worker->async[tl_lane->linear].taken[i];
}

// ---- ldmatrix and mma.sync with PTX's register layouts (cudasim/ptx_mma.h) ----------------------

namespace {
// Half h of a 32-bit register holding two 16-bit elements: the lower-numbered element is half 0,
// the low 16 bits.
uint32_t half_of(uint32_t word, unsigned h) {
  return (word >> (16 * h)) & 0xffffu;
}

float bf16_bits_to_float(uint32_t bits) {
  const uint32_t u = bits << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace

void ldmatrix_check(const void* row, const char* what, std::source_location where) {
  check::RuntimeCode runtime;
  Worker& w = *tl_worker;
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0) {
    refuse_call(what, where,
                "the row address " + address_str(row) + " is not 16-byte aligned (it is " +
                    std::to_string(reinterpret_cast<uintptr_t>(row) % 16) +
                    " bytes past a 16-byte boundary); each lane gives the start of one row of 8 "
                    "16-bit elements, and a row's 16 bytes must be aligned");
  }
  if (!within(row, 16, w.arena, w.arena_used) &&
      !within(row, 16, w.block.dynamic_smem, w.block.dynamic_bytes)) {
    refuse_call(
        what, where,
        "the row address " + address_str(row) +
            " is not 16 bytes inside the block's shared memory (a __shared__ variable or the "
            "dynamic shared memory): ldmatrix loads from shared memory only");
  }
}

void ldmatrix_exchange(const uint32_t* mine, unsigned n, bool trans, uint32_t* r, const char* what,
                       std::source_location where) {
  check::RuntimeCode runtime;
  const void* const* deposits = warp_deposit(mine, what, where);
  const unsigned lane = tl_lane->linear & 31u, g = lane / 4, q = lane % 4;
  for (unsigned j = 0; j < n; ++j) {
    const auto row = [&](unsigned i) { return static_cast<const uint32_t*>(deposits[8 * j + i]); };
    // Without .trans lane (g, q) holds elements 2q, 2q + 1 of row g; with it, element g of rows
    // 2q and 2q + 1.
    r[j] = trans ? half_of(row(2 * q)[g / 2], g % 2) | half_of(row(2 * q + 1)[g / 2], g % 2) << 16
                 : row(g)[q];
  }
  // No lane may reuse its row buffer before every lane has read it.
  warp_deposits_read(what, where);
}

void ptx_mma_m16n8k16_bf16(const PtxMmaOperands& mine, const char* what,
                           std::source_location where) {
  check::RuntimeCode runtime;
  const void* const* deposits = warp_deposit(&mine, what, where);
  const unsigned lane = tl_lane->linear & 31u;
  const auto ops = [&](unsigned other) {
    return static_cast<const PtxMmaOperands*>(deposits[other]);
  };
  // A[row][k] is in lane 4·(row % 8) + (k % 8) / 2, register row / 8 + 2·(k / 8), half k % 2;
  // B[k][col] in lane 4·col + (k % 8) / 2, register k / 8, half k % 2 (PTX's layouts).
  const auto a_at = [&](unsigned row, unsigned k) {
    const uint32_t reg = ops(4 * (row % 8) + (k % 8) / 2)->a[row / 8 + 2 * (k / 8)];
    return bf16_bits_to_float(half_of(reg, k % 2));
  };
  const auto b_at = [&](unsigned k, unsigned col) {
    const uint32_t reg = ops(4 * col + (k % 8) / 2)->b[k / 8];
    return bf16_bits_to_float(half_of(reg, k % 2));
  };
  const unsigned g = lane / 4, q = lane % 4;
  float d[4];
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + 8 * (i / 2), col = 2 * q + i % 2;
    float acc = mine.c[i];
    // Exact: the product of two bf16 fits in a float's 24-bit significand.
    for (unsigned k = 0; k < 16; ++k) acc += a_at(row, k) * b_at(k, col);
    d[i] = acc;
  }
  for (unsigned i = 0; i < 4; ++i) mine.d[i] = d[i];  // after every read of C: d may be c
  // No lane may change its A or B (the others read them) before every lane is done.
  warp_deposits_read(what, where);
}

void* shared_alloc(size_t bytes, size_t align, size_t elem_bytes, const char* name, std::source_location where) {
  Worker& w = *tl_worker;
  const char* file = where.file_name();
  const unsigned line = where.line();
  // The limit counts the variables' own bytes (with alignment), as a GPU does.
  w.declared_shared = (w.declared_shared + align - 1) / align * align + bytes;
  const StaticSharedBudget& budget = w.job->static_shared;
  if (w.declared_shared > budget.bytes) {
    const std::string need = kernel_str(w) + ": the __shared__ variables of this kernel need " +
                             std::to_string(w.declared_shared) + " bytes (the one at " + file +
                             ":" + std::to_string(line) + " brings it over)";
    const std::string opt_in = "cudaFuncSetAttribute(" + std::string(w.block.kernel) +
                               ", cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)";
    if (w.declared_shared > kMaxStaticSharedBytes) {
      fatal(need + ", more than the " + std::to_string(kMaxStaticSharedBytes) +
            " bytes a block may declare statically. Use dynamic shared memory "
            "(extern __shared__) and cudaFuncSetAttribute for more.");
    } else if (!budget.opted_in) {
      fatal(need + ", and the launch asks for " + std::to_string(budget.dynamic_bytes) +
            " bytes of dynamic shared memory: together more than the " +
            std::to_string(kDefaultDynamicSharedBytes) + " bytes a block gets unless " + opt_in +
            " raises its dynamic limit. A GPU refuses this launch and runs nothing of it.");
    } else {
      fatal(need + ", and the kernel opted in to " + std::to_string(budget.dynamic_bytes) +
            " bytes of dynamic shared memory: together more than the " +
            std::to_string(kMaxSharedBytes) + " bytes a block may have. A GPU refuses that " +
            opt_in + ".");
    }
  }
  // A checked launch leaves a red zone before every variable: one element past another
  // variable's end is then no variable at all, and the checker can say so.
  const size_t red = w.checked ? check::kSharedRedZone : 0;
  const size_t at = (w.arena_used + red + align - 1) / align * align;
  if (at + bytes + red > kSharedRegionBytes) {
    fatal(kernel_str(w) + ": too many __shared__ variables to separate them for checking (the one at " + file +
          ":" + std::to_string(line) + ")");
  }
  w.arena_used = at + bytes;
  if (options().poison) poison_shared(w.arena + at, bytes);
  if (w.checked) check::shared_variable(w.arena + at, bytes, elem_bytes, name, file, line);
  return w.arena + at;
}

void* shared_slot(const void* key, size_t bytes, size_t align, size_t elem_bytes, const char* name,
                  std::source_location where) {
  check::RuntimeCode runtime;
  Worker& w = *tl_worker;
  for (const auto& [k, p] : w.shared_slots) {
    if (k == key) return p;
  }
  void* p = shared_alloc(bytes, align, elem_bytes, name, where);
  w.shared_slots.emplace_back(key, p);
  return p;
}

void* dynamic_shared_named(const char* name, size_t elem_bytes) {
  check::RuntimeCode runtime;
  Worker& w = *tl_worker;
  if (w.checked) check::dynamic_shared_named(name, elem_bytes);
  return w.block.dynamic_smem;
}

void launch_bounds_exceeded(long long max_threads) {
  check::RuntimeCode runtime;
  const Worker& w = *tl_worker;
  const dim3 d = w.block.dim;
  const unsigned long long threads = static_cast<unsigned long long>(d.x) * d.y * d.z;
  fatal(kernel_str(w) + ": a block of " + std::to_string(threads) + " threads, more than the " +
        std::to_string(max_threads) +
        " its __launch_bounds__ allow. A GPU refuses this launch and runs nothing of it: launch "
        "at most " +
        std::to_string(max_threads) + " threads per block, or raise the bound.");
}

void spin_yield(const char* why) { spin_yield_at(why, __builtin_return_address(0)); }

// Puts the running lane at the back of its worker's queue and runs the next ready one, if any.
void yield_lane(Worker& w, unsigned me) {
  queue_back(w, me);
  unsigned next;
  if (!next_ready(w, next) || next == me) return;
  tl_lane = &w.lanes[next];
  jump(w, w.fibers[next], &w.fibers[me]);
  run_lane(w, me);
}

void spin_yield_at(const char* why, const void* pc) {
  check::RuntimeCode runtime;
  Lane* l = tl_lane;
  if (!l || !tl_worker) return;  // host code
  note_spin(*tl_worker, why, pc);
  yield_lane(*tl_worker, l->linear);
}

void profile_yield() {
  check::RuntimeCode runtime;
  Lane* l = tl_lane;
  if (!l || !tl_worker) return;
  yield_lane(*tl_worker, l->linear);
}

void note_atomic(const void* p) {
  Lane* l = tl_lane;
  Worker* w = tl_worker;
  if (!l || !w) return;  // host code
  const unsigned me = l->linear;
  if (w->spin_addr[me] != p) {
    w->spin_addr[me] = p;
    w->spin_repeats[me] = 0;
  } else if (++w->spin_repeats[me] >= 3) {
    spin_yield_at("repeated atomics on one address", __builtin_return_address(0));
  }
}

void thread_fence() {
  check::RuntimeCode runtime;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!tl_lane || !tl_worker) return;
  if (tl_worker->checked) check::fence();
  spin_yield_at("__threadfence", __builtin_return_address(0));
}

void trap(const char* what, std::source_location where) {
  check::RuntimeCode runtime;
  const char* file = where.file_name();
  const unsigned line = where.line();
  if (tl_lane && tl_worker) {
    fatal(kernel_str(*tl_worker) + ", " + thread_str(*tl_lane) + ": " + what + " at " + file + ":" +
          std::to_string(line) + " stopped the kernel (on a GPU: an unspecified launch failure).");
  }
  fatal(std::string(what) + " called in host code at " + file + ":" + std::to_string(line));
}

unsigned simulated_multiprocessors() { return options().threads; }

bool poison_enabled() { return options().poison; }

bool profiling_requested() { return options().profile; }

void profile_by_default() {
  g_profile_by_default = true;
  reload_options();
}

bool inline_reads_enabled() { return options().inline_reads; }

unsigned requested_checks() {
  if (options().checks_given) return options().checks;
  // Counting: bounds only (cheap next to counting, and out-of-bounds accesses and reads of freed
  // memory are still stopped); CUDASIM_CHECK asks for more or for none.
  if (options().profile) return kCheckBounds;
  return program_is_instrumented() ? kCheckRace | kCheckBounds | kCheckInit : 0;
}

std::string check_names(unsigned checks) {
  std::string s;
  for (auto [bit, name] : {std::pair{kCheckRace, "race"}, {kCheckBounds, "bounds"}, {kCheckInit, "init"}}) {
    if (checks & bit) s += (s.empty() ? "" : ",") + std::string(name);
  }
  return s.empty() ? "none" : s;
}

std::string running_kernel_description(bool with_thread) {
  Worker* w = tl_worker;
  if (!w || !tl_block || !w->job) return "";
  std::string s = kernel_str(*w);
  if (with_thread && tl_lane) s += ", " + thread_str(*tl_lane);
  return s;
}

std::string describe_worker_address(uintptr_t addr) {
  Worker* w = tl_worker;
  if (!w) return "";
  for (unsigned i = 0; i < w->fibers.size(); ++i) {
    const StackRange& s = w->stacks[i];
    if (addr < s.lo && addr + 4096 >= s.lo) {
      return "stack overflow of the simulated " + thread_str(w->lanes[i]) + ": its stack is " +
             std::to_string(options().stack_bytes / 1024) +
             " KiB (CUDASIM_STACK_KB); a large local array or deep recursion needs more. On a GPU this is a "
             "local-memory overflow.";
    }
  }
  const auto a = reinterpret_cast<uintptr_t>(w->shared_window);
  if (addr >= a && addr < a + 3 * kPage + 2 * kSharedRegionBytes && tl_block) {
    const auto dyn = reinterpret_cast<uintptr_t>(tl_block->dynamic_smem);
    if (addr >= reinterpret_cast<uintptr_t>(w->dynamic_end) || (addr >= dyn - kPage && addr < dyn)) {
      return "out-of-bounds access to dynamic shared memory (extern __shared__): the launch gave " +
             std::to_string(tl_block->dynamic_bytes) + " bytes (the third <<<>>> argument), and byte " +
             std::to_string(static_cast<long long>(addr - dyn)) + " was accessed";
    }
    return "out-of-bounds access to shared memory, " + std::to_string(static_cast<long long>(addr - a - kPage)) +
           " bytes from the start of the block's __shared__ variables";
  }
  return "";
}

}  // namespace cudasim::detail

void cudasim::reload_options() { detail::current_options() = detail::read_options(); }

bool cudasim::checking() { return detail::requested_checks() && detail::program_is_instrumented(); }

namespace cudasim::detail {

void launch(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line, void* ctx,
            void (*body)(void*), const LaunchRange* ranges, size_t n_ranges) {
  if (tl_block) {
    fatal(std::string("kernel '") + kernel + "' launched at " + file + ":" + std::to_string(line) +
          " from inside another kernel: dynamic parallelism is not supported by the CPU backend.");
  }
  if (!check_launch(cfg, kernel, file, line)) return;
  install_crash_handlers();
  static std::mutex one_launch_at_a_time;
  static uint64_t launches = 0;
  std::lock_guard lk(one_launch_at_a_time);
  Job job;
  job.cfg = cfg;
  job.kernel = kernel;
  job.file = file;
  job.line = line;
  job.ctx = ctx;
  job.body = body;
  job.nblocks = static_cast<uint64_t>(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  job.launch_index = launches++;
  job.static_shared = static_shared_budget(cfg, kernel);
  const unsigned checks = requested_checks();
  if (checks && !program_is_instrumented()) explain_unchecked_build();
  if (options().profile && !program_is_instrumented()) explain_unprofiled_build();
  const bool profiled = options().profile && program_is_instrumented();
  const bool checked = (checks && program_is_instrumented()) || profiled;
  if (profiled) profile::launch_begin(kernel, cfg.grid, cfg.block);
  if (checked) check::launch_begin(cfg.grid, cfg.block, ranges, n_ranges);
  static Pool& pool = *new Pool;  // never destroyed: its threads wait on it until the process ends
  pool.run(job);
  if (checked) check::launch_end();
  if (profiled) profile::launch_end();
}

}  // namespace cudasim::detail
