// Kernel execution on the CPU: blocks on a pool of OS threads, the threads of a block as fibers.
//
// A block runs on one OS thread. Each of its CUDA threads is a Boost.Context fiber that runs
// until it reaches a barrier (or exits) and then hands control straight to the next runnable
// fiber; when none is left, control returns to this file's block scheduler, which decides which
// barriers can be released, or reports a divergent barrier or a deadlock. Fibers and their stacks
// belong to the OS thread and are reused by every block and launch it runs.
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cudasim/cudasim.h"
#include "runtime_internal.h"

namespace cudasim::detail {
namespace {

namespace bc = boost::context;

constexpr unsigned kMaxThreadsPerBlock = 1024;

enum class Order { Forward, Reverse, Shuffle };

struct Options {
  unsigned threads = 1;
  Order order = Order::Forward;
  uint64_t seed = 0;
  size_t stack_bytes = 256 * 1024;
  bool poison = true;
};

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

Options read_options() {
  Options o;
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  o.threads = static_cast<unsigned>(env_number("CUDASIM_THREADS", hw, 1, 1024));
  o.stack_bytes = env_number("CUDASIM_STACK_KB", 256, 16, 65536) * 1024;
  o.poison = env_number("CUDASIM_POISON", 1, 0, 1) != 0;
  if (const char* v = std::getenv("CUDASIM_ORDER"); v && *v) {
    std::string s = v;
    if (s == "forward") {
      o.order = Order::Forward;
    } else if (s == "reverse") {
      o.order = Order::Reverse;
    } else if (s.rfind("shuffle", 0) == 0 && (s.size() == 7 || s[7] == ':')) {
      o.order = Order::Shuffle;
      if (s.size() > 8) o.seed = std::strtoull(s.c_str() + 8, nullptr, 10);
    } else {
      std::fprintf(stderr, "cudasim: CUDASIM_ORDER=%s: expected forward, reverse or shuffle[:seed]\n", v);
      std::exit(2);
    }
  }
  return o;
}

Options& current_options() {
  static Options o = read_options();
  return o;
}
const Options& options() { return current_options(); }

// Fiber stacks: mmap'd with a guard page below, like boost's protected_fixedsize_stack, but each
// one starts at a different offset inside its top 64 KiB. Stacks of equal size would otherwise
// all begin at the same cache set, and the threads of a block, which run one after the other,
// would evict each other's stack frames at every switch.
class ColoredStack {
 public:
  ColoredStack(size_t size, unsigned index) : size_(size), offset_((index * 17u % 1024u) * 64u) {}

  bc::stack_context allocate() {
    const size_t page = 4096, total = size_ + offset_ + page;
    void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    mprotect(base, page, PROT_NONE);  // overflowing the stack faults instead of corrupting memory
    bc::stack_context sc;
    sc.size = size_;
    sc.sp = static_cast<char*>(base) + total - offset_;
    return sc;
  }
  void deallocate(bc::stack_context& sc) noexcept {
    const size_t page = 4096, total = size_ + offset_ + page;
    munmap(static_cast<char*>(sc.sp) + offset_ - total, total);
  }

 private:
  size_t size_, offset_;
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
  std::atomic<uint64_t> next{0};
};

// Everything one OS thread needs to run blocks. Never freed: fibers still suspended in their
// loop would otherwise be unwound at process exit, which buys nothing.
struct Worker {
  std::vector<Lane> lanes = std::vector<Lane>(kMaxThreadsPerBlock);
  std::vector<bc::fiber> fibers;
  bc::fiber scheduler;            // this OS thread's own stack, while a block runs
  bc::fiber* resumer = nullptr;   // where the context that resumes someone is to be stored
  Block block{};
  std::vector<uint64_t> snapshot = std::vector<uint64_t>(kMaxThreadsPerBlock);
  std::vector<unsigned> vote = std::vector<unsigned>(kMaxThreadsPerBlock);
  std::vector<unsigned> participants = std::vector<unsigned>(kMaxThreadsPerBlock);
  std::vector<unsigned> order;
  size_t pos = 0;
  std::mt19937_64 rng;
  unsigned char* dynamic = nullptr;  // dynamic shared memory, kMaxSharedBytes
  unsigned char* arena = nullptr;    // static __shared__ variables, kMaxSharedBytes
  size_t arena_used = 0;
  const Job* job = nullptr;
  // Kept up to date as threads stop, so the end of a pass costs O(1) in the common case.
  unsigned n_done = 0, n_at_barrier = 0, n_at_warp = 0;
  const Lane* barrier_first = nullptr;  // first thread at the pending block barrier
  bool barrier_divergent = false;       // some thread waits at another barrier call site
  int barrier_count = 0;                // predicates of __syncthreads_count/and/or
};

inline thread_local Worker* tl_worker = nullptr;

Worker& this_worker() {
  if (!tl_worker) {
    auto* w = new Worker;
    w->dynamic = static_cast<unsigned char*>(std::aligned_alloc(1024, kMaxSharedBytes));
    w->arena = static_cast<unsigned char*>(std::aligned_alloc(1024, kMaxSharedBytes));
    w->block.lanes = w->lanes.data();
    w->block.snapshot = w->snapshot.data();
    w->block.vote = w->vote.data();
    w->block.participants = w->participants.data();
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
  tl_lane = &w.lanes[self];
}

bc::fiber make_fiber(unsigned index) {
  return bc::fiber(std::allocator_arg, ColoredStack(options().stack_bytes, index),
                   [index](bc::fiber&& from) -> bc::fiber {
                     Worker& w = *tl_worker;
                     *w.resumer = std::move(from);
                     tl_lane = &w.lanes[index];
                     for (;;) {
                       try {
                         w.job->body(w.job->ctx);
                       } catch (const std::exception& e) {
                         fatal(kernel_str(w) + ", " + thread_str(w.lanes[index]) +
                               ": uncaught exception: " + e.what());
                       }
                       w.lanes[index].state = LaneState::Done;
                       ++w.n_done;
                       suspend(w, index);  // resumed again by the next block or launch
                     }
                   });
}

// ---- the block scheduler -------------------------------------------------------------------------

void make_order(Worker& w, unsigned n) {
  w.order.resize(n);
  for (unsigned i = 0; i < n; ++i) w.order[i] = i;
  if (options().order == Order::Reverse) std::reverse(w.order.begin(), w.order.end());
  if (options().order == Order::Shuffle) std::shuffle(w.order.begin(), w.order.end(), w.rng);
}

bool same_site(const Lane& a, const Lane& b) {
  return a.line == b.line && a.what == b.what && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

// Releases every group of lanes whose warp sync is complete. Returns whether any was released.
bool release_warps(Worker& w, unsigned n) {
  bool released = false;
  for (unsigned base = 0; base < n; base += 32) {
    const unsigned width = std::min(32u, n - base);
    const unsigned exist = width == 32 ? ~0u : (1u << width) - 1u;
    unsigned waiting = 0, exited = 0;
    for (unsigned i = 0; i < width; ++i) {
      if (w.lanes[base + i].state == LaneState::AtWarpSync) waiting |= 1u << i;
      if (w.lanes[base + i].state == LaneState::Done) exited |= 1u << i;
    }
    if (!waiting) continue;
    for (unsigned i = 0; i < width; ++i) {
      const Lane& l = w.lanes[base + i];
      if (!(waiting >> i & 1u) || !(l.mask & exited)) continue;
      unsigned gone = static_cast<unsigned>(__builtin_ctz(l.mask & exited));
      std::ostringstream m;
      m << kernel_str(w) << ", " << thread_str(l) << ": " << site_str(l) << " uses mask 0x" << std::hex
        << l.mask << std::dec << ", which names lane " << gone << " (" << thread_str(w.lanes[base + gone])
        << "), but that thread has already exited.\n  Every lane named in the mask must reach the same "
           "call; on a GPU this hangs or returns garbage. Build the mask from the lanes that are still "
           "active, e.g. __ballot_sync(0xffffffff, i < n) before the loop.";
      fatal(m.str());
    }
    // A lane may go once every lane its mask names is waiting too, and those may go as well.
    unsigned ready = 0;
    for (unsigned i = 0; i < width; ++i)
      if ((waiting >> i & 1u) && ((w.lanes[base + i].mask & exist) & ~waiting) == 0) ready |= 1u << i;
    for (bool changed = true; changed;) {
      changed = false;
      for (unsigned i = 0; i < width; ++i)
        if ((ready >> i & 1u) && ((w.lanes[base + i].mask & exist) & ~ready)) {
          ready &= ~(1u << i);
          changed = true;
        }
    }
    if (!ready) continue;
    for (unsigned i = 0; i < width; ++i) {
      if (!(ready >> i & 1u)) continue;
      const Lane& a = w.lanes[base + i];
      if (a.op == WarpOp::SyncWarp) continue;
      for (unsigned j = 0; j < width; ++j) {
        const Lane& b = w.lanes[base + j];
        if (!((a.mask & exist) >> j & 1u) || same_site(a, b)) continue;
        fatal(kernel_str(w) + ": lanes of one warp meet at different warp-synchronous calls:\n  " +
              thread_str(a) + " is at " + site_str(a) + "\n  " + thread_str(b) + " is at " + site_str(b) +
              "\n  Every lane named in the mask must execute the same shuffle or vote.");
      }
    }
    for (unsigned i = 0; i < width; ++i)
      if (ready >> i & 1u) w.snapshot[base + i] = w.lanes[base + i].value;
    for (unsigned i = 0; i < width; ++i) {
      if (!(ready >> i & 1u)) continue;
      Lane& l = w.lanes[base + i];
      const unsigned group = l.mask & exist;
      unsigned ballot = 0;
      for (unsigned j = 0; j < width; ++j)
        if ((group >> j & 1u) && w.lanes[base + j].pred) ballot |= 1u << j;
      w.participants[base + i] = group;
      unsigned converged = 0;  // for __activemask: lanes stopped at the same call site
      if (l.op == WarpOp::ActiveMask)
        for (unsigned j = 0; j < width; ++j)
          if ((ready >> j & 1u) && w.lanes[base + j].op == WarpOp::ActiveMask && same_site(l, w.lanes[base + j]))
            converged |= 1u << j;
      w.vote[base + i] = l.op == WarpOp::ActiveMask ? converged
                         : l.op == WarpOp::Ballot ? ballot
                         : l.op == WarpOp::Any  ? (ballot != 0)
                         : l.op == WarpOp::All  ? (ballot == group)
                                                : 0;
      l.state = LaneState::Ready;
      --w.n_at_warp;
    }
    released = true;
  }
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
  b.dynamic_smem = w.dynamic;
  b.dynamic_bytes = job.cfg.dynamic_smem;
  w.arena_used = 0;
  w.job = &job;
  if (options().poison) std::memset(w.dynamic, 0xff, job.cfg.dynamic_smem);
  if (options().order == Order::Shuffle) w.rng.seed(options().seed * 0x9e3779b97f4a7c15ull ^ (job.launch_index << 32) ^ k);

  while (w.fibers.size() < n) w.fibers.push_back(make_fiber(static_cast<unsigned>(w.fibers.size())));
  for (unsigned i = 0; i < n; ++i) {
    Lane& l = w.lanes[i];
    l = Lane{};
    l.tid = make_uint3(i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y));
    l.linear = i;
    l.state = LaneState::Ready;
    l.file = "";
    l.what = "";
  }
  w.n_done = w.n_at_barrier = w.n_at_warp = 0;
  w.barrier_first = nullptr;
  w.barrier_divergent = false;
  w.barrier_count = 0;
  make_order(w, n);
  tl_block = &b;
  for (;;) {
    if (options().order == Order::Shuffle) make_order(w, n);
    w.pos = 0;
    unsigned first;
    if (next_ready(w, first)) {
      tl_lane = &w.lanes[first];
      jump(w, w.fibers[first], &w.scheduler);
      tl_lane = nullptr;
    }
    if (w.n_done == n) break;
    if (w.n_at_warp && release_warps(w, n)) continue;
    if (w.n_at_barrier && w.n_at_barrier + w.n_done == n && !w.barrier_divergent) {
      // PTX bar.sync: exited threads do not hold a block barrier back.
      b.barrier_result = w.barrier_count;
      for (unsigned i = 0; i < n; ++i)
        if (w.lanes[i].state == LaneState::AtBlockBarrier) w.lanes[i].state = LaneState::Ready;
      w.n_at_barrier = 0;
      w.barrier_first = nullptr;
      w.barrier_count = 0;
      continue;
    }
    report_stuck(w, n);
  }
  tl_block = nullptr;
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

}  // namespace

// ---- entry points used by cudasim.h -------------------------------------------------------------

void block_barrier(int pred, const char* what, const char* file, unsigned line) {
  Lane& l = *tl_lane;
  Worker& w = *tl_worker;
  l.state = LaneState::AtBlockBarrier;
  l.pred = pred;
  l.what = what;
  l.file = file;
  l.line = line;
  ++w.n_at_barrier;
  w.barrier_count += pred;
  if (!w.barrier_first) {
    w.barrier_first = &l;
  } else if (!same_site(*w.barrier_first, l)) {
    w.barrier_divergent = true;
  }
  suspend(w, l.linear);
}

void warp_sync(WarpOp op, unsigned mask, int pred, uint64_t value, const char* what, const char* file,
               unsigned line) {
  Lane& l = *tl_lane;
  Worker& w = *tl_worker;
  if (!(mask >> (l.linear & 31u) & 1u)) {
    std::ostringstream m;
    m << kernel_str(w) << ", " << thread_str(l) << ": " << what << " at " << file << ":" << line
      << " is called with mask 0x" << std::hex << mask << std::dec << ", which does not include the calling lane "
      << (l.linear & 31u) << ".\n  The mask must name every lane that makes the call, the caller included.";
    fatal(m.str());
  }
  l.state = LaneState::AtWarpSync;
  ++w.n_at_warp;
  l.op = op;
  l.mask = mask;
  l.pred = pred;
  l.value = value;
  l.what = what;
  l.file = file;
  l.line = line;
  suspend(w, l.linear);
}

void* shared_alloc(size_t bytes, size_t align, const char* file, unsigned line) {
  Worker& w = *tl_worker;
  size_t at = (w.arena_used + align - 1) / align * align;
  if (at + bytes > kMaxStaticSharedBytes) {
    fatal(kernel_str(w) + ": the __shared__ variables of this kernel need " + std::to_string(at + bytes) +
          " bytes (the one at " + file + ":" + std::to_string(line) + " brings it over), more than the " +
          std::to_string(kMaxStaticSharedBytes) + " bytes a block may declare statically. Use dynamic "
          "shared memory (extern __shared__) and cudaFuncSetAttribute for more.");
  }
  w.arena_used = at + bytes;
  if (options().poison) std::memset(w.arena + at, 0xff, bytes);
  return w.arena + at;
}

unsigned simulated_multiprocessors() { return options().threads; }

bool poison_enabled() { return options().poison; }

}  // namespace cudasim::detail

void cudasim::reload_options() { detail::current_options() = detail::read_options(); }

namespace cudasim::detail {

void launch(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line, void* ctx,
            void (*body)(void*)) {
  if (tl_block) {
    fatal(std::string("kernel '") + kernel + "' launched at " + file + ":" + std::to_string(line) +
          " from inside another kernel: dynamic parallelism is not supported by the CPU backend.");
  }
  if (!check_launch(cfg, kernel, file, line)) return;
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
  static Pool& pool = *new Pool;  // never destroyed: its threads wait on it until the process ends
  pool.run(job);
}

}  // namespace cudasim::detail
