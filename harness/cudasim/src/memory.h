// Device memory of the CPU backend: one reserved address range, from which every cudaMalloc gets
// whole pages of its own, followed by an inaccessible page.
//
// - An overflow can never reach the simulator's own memory (its heap, stacks and tables), only
//   the guard page or another device allocation; reading just past the end of a buffer whose
//   size is a multiple of 256 bytes faults (the buffer ends where its pages end) and is reported.
// - A page table maps every page to its allocation, so that the checker and the crash handler
//   find the allocation of an address without a lock, including recently freed ones (which are
//   kept out of circulation for a while, so that a use after free is recognised as one).
// - In a checked program, device memory is a shared memory file mapped twice: the "device view"
//   the program gets pointers into, which is inaccessible to host code while no kernel runs (a
//   host dereference of a device pointer faults and is reported), and a "host view" that the
//   runtime's own copies and memsets use. Pinned and managed memory live in the host view.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cudasim::detail {

enum class MemKind : uint8_t {
  Device,   // cudaMalloc, cudaMallocAsync, cudaMallocPitch
  Managed,  // cudaMallocManaged: usable by host and device
  Pinned,   // cudaMallocHost / cudaHostAlloc: host memory the device may use
};

inline constexpr int kStackFrames = 10;

/// Where a piece of code was called from: return addresses, innermost first.
struct CallStack {
  void* frames[kStackFrames] = {};
  int depth = 0;
};
/// The caller's call stack, without the frames of the runtime itself.
CallStack capture_call_stack();

struct Allocation {
  uintptr_t base = 0;  // the address the program got
  size_t size = 0;     // bytes asked for
  MemKind kind = MemKind::Device;
  uint64_t serial = 0;  // the n-th allocation of the process
  CallStack allocated, freed;
  std::atomic<bool> is_freed{false};
  size_t first_page = 0, pages = 0;  // the pages it occupies in the region (guard page excluded)
  // What the test harness said about the buffer: its name, and the part of the allocation a
  // kernel is given (the harness puts guard bands around it). Set before any kernel runs.
  std::string label;
  uintptr_t view_lo = 0, view_hi = 0;
  size_t elem_bytes = 0;
  // Initialisation: set once host copies or memsets have written every byte.
  std::atomic<bool> fully_written{false};

  const char* kind_name() const;
  /// "the 1024-byte buffer allocated at test.cu:12" (with the harness's name when there is one).
  std::string describe() const;
};

class DeviceMemory {
 public:
  /// A new allocation of `bytes` (poisoned when `poison`), or nullptr when out of memory.
  Allocation* allocate(size_t bytes, MemKind kind, bool poison, const CallStack& where);
  /// Frees the allocation starting at `p`. Returns false when `p` is not the start of a live
  /// allocation of `kind` (nothing happens then).
  bool release(void* p, MemKind kind, const CallStack& where);
  void release_all();

  /// The live allocation holding [p, p+n), or nullptr.
  Allocation* find_live(const void* p, size_t n);
  /// The allocation (live or recently freed) whose pages hold `addr`, without locking; nullptr
  /// for a guard page or an address outside device memory.
  Allocation* lookup(uintptr_t addr) const {
    const uintptr_t off = region_offset(addr);
    if (off == ~uintptr_t{0}) return nullptr;
    return page_table_[off >> kPageShift].load(std::memory_order_acquire);
  }
  /// The nearest allocation (live or recently freed) below `addr`, for messages about an
  /// address just past an allocation.
  Allocation* nearest_below(uintptr_t addr) const;

  /// The address at which the runtime itself reads and writes the memory at `p` (the host view
  /// in a checked program; `p` otherwise).
  void* host_address(const void* p) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (alias_ && a - device_ < size_) return reinterpret_cast<void*>(alias_ + (a - device_));
    return const_cast<void*>(p);
  }

  /// Offset of `addr` in the region (device or host view), or ~0 when it is in neither.
  uintptr_t region_offset(uintptr_t addr) const {
    if (addr - device_ < size_) return addr - device_;
    if (alias_ && addr - alias_ < size_) return addr - alias_;
    return ~uintptr_t{0};
  }
  bool in_device_view(uintptr_t addr) const { return addr - device_ < size_; }
  uintptr_t region_size() const { return size_; }
  uintptr_t device_base() const { return device_; }
  uintptr_t alias_base() const { return alias_; }
  /// Pages of the region that have ever been handed out.
  size_t extent() const { return extent_.load(std::memory_order_relaxed); }

  /// Whether host code may touch the device view (a checked program closes it between kernels).
  void open_for_kernels();
  void close_for_host(bool protect);
  bool host_protected() const { return host_protected_; }
  bool checked_layout() const { return alias_ != 0; }

  static constexpr unsigned kPageShift = 12;
  static constexpr size_t kPage = size_t{1} << kPageShift;

 private:
  void reserve();

  uintptr_t device_ = 0, alias_ = 0;
  size_t size_ = 0;
  std::atomic<Allocation*>* page_table_ = nullptr;
  std::atomic<size_t> extent_{0};
  bool host_protected_ = false;
};

/// The process's device memory (created on first use).
DeviceMemory& device_memory();

/// What a fault address in device memory means ("4 bytes past the end of the ... buffer"), or "".
std::string describe_device_address(uintptr_t addr, size_t access_bytes);

}  // namespace cudasim::detail
