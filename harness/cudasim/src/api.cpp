// The CUDA runtime API subset the course uses, implemented for the CPU backend with the real
// headers' signatures, so host code links against this library instead of libcudart.
//
// "Device" memory is host memory. Allocations are tracked so that copies naming a device pointer
// that is not inside a live allocation fail with cudaErrorInvalidValue, as they do on a GPU, and
// new allocations are poisoned (all bits set: NaN as float) so reading memory nobody wrote shows.
// Streams and events are synchronous: work finishes before the call that queued it returns, and
// events record host time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

#include <unistd.h>

#include "runtime_internal.h"

// The opaque handle types of the runtime API, given a body here.
struct CUstream_st {
  int unused;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when;
  bool recorded = false;
};

namespace cudasim::detail {
namespace {

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

bool quiet() {
  static const bool q = std::getenv("CUDASIM_QUIET") != nullptr;
  return q;
}

class Allocations {
 public:
  void* allocate(size_t n, bool poison) {
    const size_t rounded = (std::max<size_t>(n, 1) + 255) / 256 * 256;  // cudaMalloc aligns to 256
    void* p = std::aligned_alloc(256, rounded);
    if (!p) return nullptr;
    if (poison) std::memset(p, 0xff, rounded);
    std::lock_guard lk(m_);
    live_[reinterpret_cast<uintptr_t>(p)] = n;
    return p;
  }
  bool release(void* p) {
    std::lock_guard lk(m_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(p));
    if (it == live_.end()) return false;
    live_.erase(it);
    std::free(p);
    return true;
  }
  /// Is [p, p+n) inside one live allocation?
  bool contains(const void* p, size_t n) {
    std::lock_guard lk(m_);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
  }
  void release_all() {
    std::lock_guard lk(m_);
    for (auto& [p, n] : live_) std::free(reinterpret_cast<void*>(p));
    live_.clear();
  }

 private:
  std::mutex m_;
  std::map<uintptr_t, size_t> live_;
};

Allocations& device_memory() {
  static auto* a = new Allocations;  // outlives static destructors that may still free memory
  return *a;
}

size_t max_dynamic_smem_set = kDefaultDynamicSharedBytes;  // see cudaFuncSetAttribute
std::mutex attr_mutex;

// Checks the device side(s) of a copy; host pointers cannot be checked and are trusted.
cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (n == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
  if ((dst_dev && !device_memory().contains(dst, n)) || (src_dev && !device_memory().contains(src, n))) {
    if (!quiet()) {
      std::fprintf(stderr,
                   "cudasim: cudaMemcpy of %zu bytes, kind %d: the %s pointer is not inside a device "
                   "allocation of that size (swapped arguments or kind? too many bytes?)\n",
                   n, static_cast<int>(kind), dst_dev && !device_memory().contains(dst, n) ? "destination" : "source");
    }
    return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

}  // namespace

[[noreturn]] void fatal(const std::string& message) {
  static std::mutex once;  // the first report wins; later ones wait here until the process ends
  once.lock();
  std::fflush(stdout);
  std::fprintf(stderr, "\ncudasim: error in %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(kDiagnosticExitStatus);
}

bool check_launch(const LaunchConfig& c, const char* kernel, const char* file, unsigned line) {
  std::string why;
  cudaError_t err = cudaErrorInvalidConfiguration;
  const unsigned long long threads = static_cast<unsigned long long>(c.block.x) * c.block.y * c.block.z;
  auto d3 = [](dim3 d) {
    return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
  };
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0) {
    why = "grid " + d3(c.grid) + " has a zero dimension";
  } else if (c.block.x == 0 || c.block.y == 0 || c.block.z == 0) {
    why = "block " + d3(c.block) + " has a zero dimension";
  } else if (threads > 1024) {
    why = "block " + d3(c.block) + " has " + std::to_string(threads) + " threads; at most 1024 are allowed";
  } else if (c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64) {
    why = "block " + d3(c.block) + " exceeds the per-dimension limits (1024, 1024, 64)";
  } else if (c.grid.x > 2147483647u || c.grid.y > 65535 || c.grid.z > 65535) {
    why = "grid " + d3(c.grid) + " exceeds the limits (2^31-1, 65535, 65535)";
  } else {
    std::lock_guard lk(attr_mutex);
    if (c.dynamic_smem > max_dynamic_smem_set) {
      err = cudaErrorInvalidValue;
      why = std::to_string(c.dynamic_smem) + " bytes of dynamic shared memory requested; the limit is " +
            std::to_string(max_dynamic_smem_set) +
            (max_dynamic_smem_set == kDefaultDynamicSharedBytes
                 ? " unless cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) "
                   "raises it (up to " + std::to_string(kMaxSharedBytes) + ")"
                 : "");
    }
  }
  if (why.empty()) return true;
  last_error = err;
  if (!quiet()) {
    std::fprintf(stderr, "cudasim: launch of '%s' at %s:%u not run: %s (%s)\n", kernel, file, line, why.c_str(),
                 cudaGetErrorName(err));
  }
  return false;
}

}  // namespace cudasim::detail

using cudasim::detail::device_memory;
using cudasim::detail::fail;
using cudasim::detail::last_error;

extern "C" {

// ---- errors ----------------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define CUDASIM_ERR(name, text) \
  case name:                    \
    return #name;
#include "errors.def"
#undef CUDASIM_ERR
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
#define CUDASIM_ERR(name, text) \
  case name:                    \
    return text;
#include "errors.def"
#undef CUDASIM_ERR
    default:
      return "unknown error";
  }
}

// ---- device management -----------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return fail(cudaErrorInvalidValue);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "cudasim (CPU backend)");
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  prop->totalGlobalMem = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  prop->sharedMemPerBlock = cudasim::detail::kMaxStaticSharedBytes;
  prop->sharedMemPerBlockOptin = cudasim::detail::kMaxSharedBytes;
  prop->sharedMemPerMultiprocessor = cudasim::detail::kMaxSharedBytes + 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 64 * 1024;
  prop->major = 8;
  prop->minor = 0;
  prop->multiProcessorCount = static_cast<int>(cudasim::detail::simulated_multiprocessors());
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->unifiedAddressing = 1;
  prop->managedMemory = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return fail(cudaErrorInvalidValue);
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, device)) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaDeviceReset(void) {
  device_memory().release_all();
  last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func) return fail(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > cudasim::detail::kMaxSharedBytes) return fail(cudaErrorInvalidValue);
    // Kernels are called directly, not through their address, so the limit cannot be tied to one
    // kernel: the largest value set for any kernel applies to all.
    std::lock_guard lk(cudasim::detail::attr_mutex);
    cudasim::detail::max_dynamic_smem_set = std::max(cudasim::detail::max_dynamic_smem_set, static_cast<size_t>(value));
    return cudaSuccess;
  }
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  return fail(cudaErrorInvalidValue);
}

// ---- memory ------------------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = device_memory().allocate(size, cudasim::detail::poison_enabled());
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int) { return cudaMalloc(ptr, size); }

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  return device_memory().release(ptr) ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = std::malloc(std::max<size_t>(size, 1));
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (cudaError_t e = cudasim::detail::check_copy(dst, src, count, kind)) return e;
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidPitchValue);
  for (size_t r = 0; r < height; ++r) {
    cudaError_t e = cudaMemcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                               width, kind);
    if (e) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  if (count == 0) return cudaSuccess;
  if (!device_memory().contains(ptr, count)) return fail(cudaErrorInvalidValue);
  std::memset(ptr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t) { return cudaMemset(ptr, value, count); }

// A __device__ or __constant__ variable is an ordinary global here; its address is the symbol.
cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               cudaMemcpyKind) {
  if (!symbol || (!src && count)) return fail(cudaErrorInvalidSymbol);
  std::memcpy(static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind) {
  if (!symbol || (!dst && count)) return fail(cudaErrorInvalidSymbol);
  std::memcpy(dst, static_cast<const char*>(symbol) + offset, count);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (free_bytes) *free_bytes = static_cast<size_t>(avail) * static_cast<size_t>(page);
  if (total_bytes) *total_bytes = static_cast<size_t>(pages) * static_cast<size_t>(page);
  return cudaSuccess;
}

// ---- streams and events (synchronous) -------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  if (!stream) return fail(cudaErrorInvalidValue);
  *stream = new CUstream_st{};
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) { return cudaStreamCreate(stream); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (!event) return fail(cudaErrorInvalidValue);
  *event = new CUevent_st{};
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return fail(cudaErrorInvalidValue);
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

}  // extern "C"
