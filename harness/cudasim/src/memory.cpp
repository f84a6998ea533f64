// Device memory: a reserved region, page-granular allocations with guard pages, a lock-free page
// table, a quarantine for freed ranges, and in checked programs a second (host) view. See memory.h.
#include "memory.h"

#include <execinfo.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <sstream>

#include "check.h"
#include "runtime_internal.h"
#include "symbolize.h"

namespace cudasim::detail {
namespace {

constexpr size_t kDefaultRegion = size_t{256} << 30;      // address space reserved for device memory
constexpr size_t kQuarantineBytes = size_t{256} << 20;    // freed memory kept out of circulation
constexpr size_t kQuarantineCount = 4096;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::mutex& region_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

// Free page ranges of the region (offset -> pages), coalesced.
std::map<size_t, size_t>& free_ranges() {
  static auto* f = new std::map<size_t, size_t>;
  return *f;
}
std::map<uintptr_t, Allocation*>& live() {
  static auto* l = new std::map<uintptr_t, Allocation*>;
  return *l;
}
std::deque<Allocation*>& quarantine() {
  static auto* q = new std::deque<Allocation*>;
  return *q;
}
size_t quarantine_bytes = 0;
size_t bump_pages = 0;
uint64_t serials = 0;

}  // namespace

CallStack capture_call_stack() {
  CallStack s;
  void* frames[kStackFrames + 2];
  const int n = backtrace(frames, kStackFrames + 2);
  // Frame 0 is this function, frame 1 the runtime entry point that asked.
  for (int i = 2; i < n; ++i) s.frames[s.depth++] = frames[i];
  return s;
}

const char* Allocation::kind_name() const {
  switch (kind) {
    case MemKind::Device: return "cudaMalloc";
    case MemKind::Managed: return "cudaMallocManaged";
    case MemKind::Pinned: return "cudaMallocHost";
  }
  return "";
}

std::string Allocation::describe() const {
  std::ostringstream o;
  if (!label.empty()) {
    o << "buffer " << label << " (" << (view_hi - view_lo) << " bytes, allocated at "
      << describe_call_site(allocated.frames, allocated.depth) << ")";
  } else {
    o << "the " << size << "-byte buffer allocated at " << describe_call_site(allocated.frames, allocated.depth);
    if (kind != MemKind::Device) o << " (" << kind_name() << ")";
  }
  return o.str();
}

void DeviceMemory::reserve() {
  // Address space only; pages are committed when written. A limit on address space (ulimit -v)
  // shrinks the region.
  size_t size = kDefaultRegion;
  if (const char* v = std::getenv("CUDASIM_DEVICE_MEMORY_GB"); v && *v) size = std::strtoull(v, nullptr, 10) << 30;
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) size = std::min<size_t>(size, lim.rlim_cur / 4);
  size = std::max<size_t>(round_up(size, kPage), size_t{1} << 30);
  // A checked program gets the two views of one shared anonymous mapping (mremap with old size 0
  // maps the same pages again); its device view starts closed to host code. Not a memfd: a memfd
  // is a file, and a grader's file size limit (RLIMIT_FSIZE) would kill the program with SIGXFSZ
  // when it is sized.
  if (program_is_instrumented()) {
    void* d = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void* a = d == MAP_FAILED ? MAP_FAILED : mremap(d, 0, size, MREMAP_MAYMOVE);
    // Closed only when bounds are checked: only a checked launch opens it for its kernel, so
    // with CUDASIM_CHECK=none a closed view would fault on the kernel's first access.
    const bool protect = (requested_checks() & kCheckBounds) != 0;
    if (a != MAP_FAILED && (!protect || mprotect(d, size, PROT_NONE) == 0)) {
      device_ = reinterpret_cast<uintptr_t>(d);
      alias_ = reinterpret_cast<uintptr_t>(a);
      host_protected_ = protect;
    } else {
      if (d != MAP_FAILED) munmap(d, size);
      if (a != MAP_FAILED) munmap(a, size);
    }
  }
  if (!device_) {
    void* d = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d == MAP_FAILED) {
      std::fprintf(stderr, "cudasim: cannot reserve %zu GiB of address space for device memory\n", size >> 30);
      std::abort();
    }
    device_ = reinterpret_cast<uintptr_t>(d);
  }
  void* table = mmap(nullptr, (size >> kPageShift) * sizeof(std::atomic<Allocation*>), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (table == MAP_FAILED) std::abort();
  page_table_ = static_cast<std::atomic<Allocation*>*>(table);
  size_ = size;
  // A checked program learns about host dereferences of device memory from the crash handler.
  install_crash_handlers();
}

Allocation* DeviceMemory::allocate(size_t bytes, MemKind kind, bool poison, const CallStack& where) {
  std::lock_guard lk(region_mutex());
  if (!size_) reserve();
  // The data ends where its pages end (a 256-byte multiple, the alignment cudaMalloc promises), so
  // the guard page follows the last byte a GPU would let a kernel touch.
  const size_t rounded = round_up(std::max<size_t>(bytes, 1), 256);
  const size_t pages = round_up(rounded, kPage) >> kPageShift;
  const size_t need = pages + 1;  // and the guard page
  size_t first = ~size_t{0};
  for (auto it = free_ranges().begin(); it != free_ranges().end(); ++it) {
    if (it->second < need) continue;
    first = it->first;
    if (it->second > need) free_ranges()[it->first + need] = it->second - need;
    free_ranges().erase(it);
    break;
  }
  if (first == ~size_t{0}) {
    if ((bump_pages + need) << kPageShift > size_) return nullptr;
    first = bump_pages;
    bump_pages += need;
    extent_.store(bump_pages, std::memory_order_relaxed);
  }
  const uintptr_t start = device_ + (first << kPageShift);
  if (!alias_ || !host_protected_) {
    if (mprotect(reinterpret_cast<void*>(start), pages << kPageShift, PROT_READ | PROT_WRITE) != 0) {
      free_ranges()[first] = need;  // (too many mappings) give the range back
      return nullptr;
    }
  }
  auto* a = new Allocation;
  a->kind = kind;
  a->size = bytes;
  a->serial = ++serials;
  a->allocated = where;
  a->first_page = first;
  a->pages = pages;
  const uintptr_t data = start + (pages << kPageShift) - rounded;
  // Pinned and managed memory is used by host code too: in a checked program it lives in the
  // host view, which is never closed.
  a->base = (kind != MemKind::Device && alias_) ? alias_ + (data - device_) : data;
  a->view_lo = a->base;
  a->view_hi = a->base + bytes;
  // Host code writes pinned and managed memory directly, which no one sees: count it as written.
  if (kind != MemKind::Device) a->fully_written.store(true, std::memory_order_relaxed);
  for (size_t p = 0; p < pages; ++p) page_table_[first + p].store(a, std::memory_order_release);
  if (poison) std::memset(host_address(reinterpret_cast<void*>(data)), 0xff, rounded);
  live()[a->base] = a;
  return a;
}

bool DeviceMemory::release(void* p, MemKind kind, const CallStack& where) {
  std::lock_guard lk(region_mutex());
  auto it = live().find(reinterpret_cast<uintptr_t>(p));
  if (it == live().end()) return false;
  Allocation* a = it->second;
  if ((a->kind == MemKind::Pinned) != (kind == MemKind::Pinned)) return false;
  live().erase(it);
  a->freed = where;
  a->is_freed.store(true, std::memory_order_release);
  // The pages go back to the system now; the addresses stay reserved for a while.
  const uintptr_t start = device_ + (a->first_page << kPageShift);
  const size_t len = a->pages << kPageShift;
  if (alias_) {
    // Both views share the pages: removing them through one frees them for both.
    madvise(reinterpret_cast<void*>(alias_ + (start - device_)), len, MADV_REMOVE);
  } else {
    madvise(reinterpret_cast<void*>(start), len, MADV_DONTNEED);
    mprotect(reinterpret_cast<void*>(start), len, PROT_NONE);
  }
  check::note_free(start - device_, len);
  quarantine().push_back(a);
  quarantine_bytes += len;
  while (quarantine().size() > kQuarantineCount || quarantine_bytes > kQuarantineBytes) {
    Allocation* old = quarantine().front();
    quarantine().pop_front();
    quarantine_bytes -= old->pages << kPageShift;
    for (size_t q = 0; q < old->pages; ++q) page_table_[old->first_page + q].store(nullptr, std::memory_order_release);
    // Give the range (with its guard page) back, merged with free neighbours.
    size_t first = old->first_page, n = old->pages + 1;
    auto next = free_ranges().lower_bound(first);
    if (next != free_ranges().end() && next->first == first + n) {
      n += next->second;
      next = free_ranges().erase(next);
    }
    if (next != free_ranges().begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == first) {
        first = prev->first;
        n += prev->second;
        free_ranges().erase(prev);
      }
    }
    free_ranges()[first] = n;
    delete old;
  }
  return true;
}

void DeviceMemory::release_all() {
  std::vector<std::pair<void*, MemKind>> all;
  {
    std::lock_guard lk(region_mutex());
    for (auto& [p, a] : live()) all.emplace_back(reinterpret_cast<void*>(p), a->kind);
  }
  for (auto& [p, k] : all) release(p, k, CallStack{});
}

Allocation* DeviceMemory::find_live(const void* p, size_t n) {
  std::lock_guard lk(region_mutex());
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = live().upper_bound(a);
  if (it == live().begin()) return nullptr;
  --it;
  Allocation* al = it->second;
  return a >= al->base && n <= al->size && a - al->base <= al->size - n ? al : nullptr;
}

Allocation* DeviceMemory::nearest_below(uintptr_t addr) const {
  const uintptr_t off = region_offset(addr);
  if (off == ~uintptr_t{0}) return nullptr;
  for (size_t page = off >> kPageShift, steps = 0; page-- > 0 && steps < 64; ++steps) {
    if (Allocation* a = page_table_[page].load(std::memory_order_acquire)) return a;
  }
  return nullptr;
}

void DeviceMemory::open_for_kernels() {
  std::lock_guard lk(region_mutex());
  if (!alias_ || !host_protected_) return;
  mprotect(reinterpret_cast<void*>(device_), extent() << kPageShift, PROT_READ | PROT_WRITE);
  host_protected_ = false;
}

void DeviceMemory::close_for_host(bool protect) {
  std::lock_guard lk(region_mutex());
  if (!alias_ || host_protected_ == protect) return;
  mprotect(reinterpret_cast<void*>(device_), extent() << kPageShift, protect ? PROT_NONE : PROT_READ | PROT_WRITE);
  host_protected_ = protect;
}

DeviceMemory& device_memory() {
  static auto* m = new DeviceMemory;  // outlives static destructors that may still free memory
  return *m;
}

std::string describe_device_address(uintptr_t addr, size_t access_bytes) {
  DeviceMemory& m = device_memory();
  if (m.region_offset(addr) == ~uintptr_t{0}) return "";
  std::ostringstream o;
  Allocation* a = m.lookup(addr);
  if (!a) a = m.nearest_below(addr);
  if (!a) return "an address in device memory that no allocation ever used";
  const size_t unit = a->elem_bytes ? a->elem_bytes : std::max<size_t>(access_bytes, 1);
  const auto view = [&](uintptr_t p) { return m.region_offset(p); };
  const long long rel = static_cast<long long>(view(addr)) - static_cast<long long>(view(a->view_lo));
  const long long elem = rel >= 0 ? rel / static_cast<long long>(unit) : -((-rel + static_cast<long long>(unit) - 1) / static_cast<long long>(unit));
  if (a->is_freed.load(std::memory_order_acquire)) {
    o << (unit == 1 ? "byte " : "element ") << elem << " of " << a->describe() << ", which was freed at "
      << describe_call_site(a->freed.frames, a->freed.depth) << " (use after free)";
    return o.str();
  }
  const long long n = static_cast<long long>((a->view_hi - a->view_lo) / unit);
  const char* what = unit == 1 ? "byte" : "element";
  o << what << " " << elem << " of " << a->describe();
  if (unit > 1) o << ", which has " << n << (n == 1 ? " element" : " elements") << " of " << unit << " bytes";
  if (elem >= n) o << ": " << (elem - n + 1) << " " << what << (elem - n + 1 == 1 ? "" : "s") << " past its end";
  if (elem < 0) o << ": " << -elem << " " << what << (elem == -1 ? "" : "s") << " before its start";
  return o.str();
}

}  // namespace cudasim::detail

// The test harness names its buffers (harness/check/device_buffer.cpp), and says which part of the
// allocation a kernel is given, so that messages say "element 16384 of 'q' [4 x 4096]" and an
// access to the harness's guard bands is out of bounds. A weak symbol on its side: the same
// harness links against libcudart, which has no such function.
extern "C" void cudasim_name_allocation(const void* base, const void* view, size_t view_bytes, size_t elem_bytes,
                                        const char* label) {
  using namespace cudasim::detail;
  Allocation* a = device_memory().find_live(base, 1);
  if (!a || reinterpret_cast<uintptr_t>(base) != a->base) return;
  const auto lo = reinterpret_cast<uintptr_t>(view);
  if (lo < a->base || view_bytes > a->size || lo - a->base > a->size - view_bytes) return;
  a->label = label ? label : "";
  a->view_lo = lo;
  a->view_hi = lo + view_bytes;
  a->elem_bytes = elem_bytes;
}
