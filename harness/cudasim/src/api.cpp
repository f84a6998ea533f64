// The CUDA runtime API, implemented for the CPU backend with the real headers' signatures, so host
// code links against this library instead of libcudart: the calls the course uses and the ones a
// student plausibly reaches for.
//
// "Device" memory comes from memory.cpp: every allocation is tracked, so that copies naming a
// device pointer that is not inside a live allocation fail with cudaErrorInvalidValue, as they do
// on a GPU, and new allocations are poisoned (all bits set: NaN as float) so reading memory
// nobody wrote shows. Streams and events are synchronous: work finishes before the call that
// queued it returns, and events record host time. A stream that is capturing (graph.cpp) records
// the work instead, and the calls that stream capture forbids fail as they do with CUDA.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <unistd.h>

#include "check.h"
#include "memory.h"
#include "runtime_internal.h"
#include "symbolize.h"

// The opaque handle types of the runtime API, given a body here (streams: runtime_internal.h).
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

void explain(const std::string& why) {
  if (!quiet()) std::fprintf(stderr, "cudasim: %s\n", why.c_str());
}

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n), per function, as
// on a GPU; a launch that cannot tell which function it runs (LaunchConfig::function is null)
// goes by the name written at it, and the opt-ins are kept by name too (from the symbol table).
std::mutex attr_mutex;
std::map<const void*, size_t>& smem_limits_by_function() {
  static auto* m = new std::map<const void*, size_t>;
  return *m;
}
std::map<std::string, size_t>& smem_limits() {
  static auto* m = new std::map<std::string, size_t>;
  return *m;
}
size_t unnamed_smem_limit = kDefaultDynamicSharedBytes;  // set for a function whose name is unknown

// Host memory registered with cudaHostRegister: start -> bytes.
std::mutex registered_mutex;
std::map<uintptr_t, size_t> registered;

bool is_registered(const void* p, size_t n) {
  std::lock_guard lk(registered_mutex);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = registered.upper_bound(a);
  if (it == registered.begin()) return false;
  --it;
  return a >= it->first && a - it->first <= it->second && n <= it->second - (a - it->first);
}

size_t limits[7] = {1024, 1 << 20, 8 << 20, 2, 2048, 64, 0};  // see cudaDeviceSetLimit

const char* kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "an invalid kind";
}

// Checks the device side(s) of a copy; host pointers cannot be checked and are trusted.
cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* call) {
  if (n == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
  DeviceMemory& m = device_memory();
  bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) {  // unified addressing: the pointers say where they are
    dst_dev = m.region_offset(reinterpret_cast<uintptr_t>(dst)) != ~uintptr_t{0};
    src_dev = m.region_offset(reinterpret_cast<uintptr_t>(src)) != ~uintptr_t{0};
  }
  const bool bad_dst = dst_dev && !m.find_live(dst, n), bad_src = src_dev && !m.find_live(src, n);
  if (bad_dst || bad_src) {
    const void* p = bad_dst ? dst : src;
    std::string what = describe_device_address(reinterpret_cast<uintptr_t>(p), 1);
    explain(std::string(call) + " of " + std::to_string(n) + " bytes, " + kind_name(kind) + ": the " +
            (bad_dst ? "destination" : "source") + " is not inside a device allocation of that size" +
            (what.empty() ? " (swapped arguments or kind? a host pointer?)" : " (" + what + ")") +
            "; called at " + describe_call_site(capture_call_stack().frames, capture_call_stack().depth));
    return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

// The copy itself, through the runtime's own view of device memory, and what it initialises.
void do_copy(void* dst, const void* src, size_t n) {
  DeviceMemory& m = device_memory();
  void* d = m.host_address(dst);
  const void* s = m.host_address(src);
  if (n) std::memmove(d, s, n);
  if (program_is_instrumented()) check::note_copy(dst, src, n);
}

cudaError_t alloc(void** ptr, size_t size, MemKind kind) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  Allocation* a = device_memory().allocate(size, kind, poison_enabled(), capture_call_stack());
  *ptr = a ? reinterpret_cast<void*>(a->base) : nullptr;
  return a ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t free_memory(void* ptr, MemKind kind, const char* call) {
  if (!ptr) return cudaSuccess;
  if (device_memory().release(ptr, kind, capture_call_stack())) return cudaSuccess;
  std::string what = describe_device_address(reinterpret_cast<uintptr_t>(ptr), 1);
  explain(std::string(call) + "(" + (what.empty() ? "a pointer that no allocation returned" : what) + ") at " +
          describe_call_site(capture_call_stack().frames, capture_call_stack().depth) +
          ": not the start of a live allocation of this kind (freed twice? the wrong free function?)");
  return fail(cudaErrorInvalidValue);
}

}  // namespace

cudaError_t set_last_error(cudaError_t e) { return fail(e); }

void explain_call(const std::string& why) { explain(why); }

cudaError_t copy_now(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* call) {
  if (cudaError_t e = check_copy(dst, src, n, kind, call)) return e;
  do_copy(dst, src, n);
  return cudaSuccess;
}

cudaError_t memset_now(void* ptr, int value, size_t count, const char* call) {
  if (count == 0) return cudaSuccess;
  if (!device_memory().find_live(ptr, count)) {
    std::string what = describe_device_address(reinterpret_cast<uintptr_t>(ptr), 1);
    explain(std::string(call) + " of " + std::to_string(count) + " bytes: not inside a device allocation of that size" +
            (what.empty() ? "" : " (" + what + ")"));
    return fail(cudaErrorInvalidValue);
  }
  std::memset(device_memory().host_address(ptr), value, count);
  if (program_is_instrumented()) check::note_copy(ptr, nullptr, count);
  return cudaSuccess;
}

namespace {

// A copy or memset queued on `stream`: done now, recorded by the stream's capture, or refused.
cudaError_t copy_on(cudaStream_t stream, void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* call) {
  const StreamUse use = stream_use(stream, call);
  if (use == StreamUse::Refused) return last_error;
  if (use == StreamUse::Run) return copy_now(dst, src, n, kind, call);
  if (cudaError_t e = check_copy(dst, src, n, kind, call)) return e;  // refused at capture, as CUDA does
  record_copy(stream, dst, src, n, kind);
  return cudaSuccess;
}

cudaError_t memset_on(cudaStream_t stream, void* ptr, int value, size_t n, const char* call) {
  const StreamUse use = stream_use(stream, call);
  if (use == StreamUse::Refused) return last_error;
  if (use == StreamUse::Run) return memset_now(ptr, value, n, call);
  if (n && !device_memory().find_live(ptr, n)) return memset_now(ptr, value, n, call);  // explains and fails
  record_memset(stream, ptr, value, n);
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

namespace {
// The dynamic shared memory the launched function opted in to, if it did (attr_mutex held): by
// its address where the launch knows it, else by the name written at the launch, else the opt-in
// of a function the symbol table could not name.
std::optional<size_t> opted_in_limit(const char* kernel, const void* function) {
  if (function) {
    const auto it = smem_limits_by_function().find(function);
    if (it == smem_limits_by_function().end()) return std::nullopt;
    return it->second;
  }
  if (const auto it = smem_limits().find(base_function_name(kernel)); it != smem_limits().end())
    return it->second;
  if (unnamed_smem_limit > kDefaultDynamicSharedBytes) return unnamed_smem_limit;
  return std::nullopt;
}
}  // namespace

size_t dynamic_smem_limit(const char* kernel, const void* function) {
  std::lock_guard lk(attr_mutex);
  const size_t limit = opted_in_limit(kernel, function).value_or(kDefaultDynamicSharedBytes);
  return function ? limit : std::max(limit, unnamed_smem_limit);
}

StaticSharedBudget static_shared_budget(const LaunchConfig& c, const char* kernel) {
  std::lock_guard lk(attr_mutex);
  if (const std::optional<size_t> opted = opted_in_limit(kernel, c.function)) {
    return {std::min(kMaxStaticSharedBytes, kMaxSharedBytes - std::min(*opted, kMaxSharedBytes)),
            true, *opted};
  }
  const size_t dynamic = std::min(c.dynamic_smem, kDefaultDynamicSharedBytes);
  return {std::min(kMaxStaticSharedBytes, kDefaultDynamicSharedBytes - dynamic), false,
          c.dynamic_smem};
}

bool host_registered(const void* p, size_t n) { return is_registered(p, n); }

bool check_launch(const LaunchConfig& c, const char* kernel, const char* file, unsigned line) {
  std::string why;
  // CUDA 13 reports every rejected configuration as cudaErrorInvalidValue (seen on an H200 with
  // CUDA 13.0: a 1025-thread block, a zero grid, grid.y 65536 ...); older toolkits said
  // cudaErrorInvalidConfiguration. The explanation below names the limit either way.
  cudaError_t err = cudaErrorInvalidValue;
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
  } else if (const size_t limit = dynamic_smem_limit(kernel, c.function); c.dynamic_smem > limit) {
    why = std::to_string(c.dynamic_smem) +
          " bytes of dynamic shared memory requested; the limit for this kernel is " +
          std::to_string(limit);
    if (limit == kDefaultDynamicSharedBytes) {
      // A launch that knows its function is named with the function's template arguments.
      const std::string base = base_function_name(kernel);
      why += " unless cudaFuncSetAttribute(" + std::string(c.function ? kernel : base.c_str()) +
             ", cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) raises it (up to " +
             std::to_string(kMaxSharedBytes) + ")";
      std::lock_guard lk(attr_mutex);
      if (c.function && smem_limits().count(base)) {
        const std::string others = "another instantiation or overload of '" + base + "'";
        why += ". An opt-in holds for the one function it names: " + others +
               " opted in, this one did not";
      }
    }
  }
  if (why.empty()) return true;
  last_error = err;
  explain("launch of '" + std::string(kernel) + "' at " + file + ":" + std::to_string(line) + " not run: " + why +
          " (" + cudaGetErrorName(err) + ")");
  return false;
}

cudaError_t copy_symbol(void* symbol, size_t symbol_bytes, void* host, size_t count, size_t offset, bool to_symbol,
                        const char* file, unsigned line) {
  const char* call = to_symbol ? "cudaMemcpyToSymbol" : "cudaMemcpyFromSymbol";
  if (!symbol || (!host && count)) return fail(cudaErrorInvalidValue);
  if (offset > symbol_bytes || count > symbol_bytes - offset) {
    explain(std::string(call) + " at " + file + ":" + std::to_string(line) + ": " + std::to_string(count) +
            " bytes at offset " + std::to_string(offset) + " do not fit the symbol, which has " +
            std::to_string(symbol_bytes) + " bytes (cudaErrorInvalidValue; nothing was copied)");
    return fail(cudaErrorInvalidValue);
  }
  if (to_symbol) {
    std::memcpy(static_cast<char*>(symbol) + offset, host, count);
  } else {
    std::memcpy(host, static_cast<const char*>(symbol) + offset, count);
  }
  return cudaSuccess;
}

}  // namespace cudasim::detail

using cudasim::detail::device_memory;
using cudasim::detail::fail;
using cudasim::detail::last_error;
using cudasim::detail::MemKind;

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

cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp*) { return cudaGetDevice(device); }

cudaError_t cudaSetDeviceFlags(unsigned int) { return cudaSuccess; }

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (!flags) return fail(cudaErrorInvalidValue);
  *flags = cudaDeviceMapHost;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) { return cudaDriverGetVersion(version); }

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
  prop->regsPerMultiprocessor = 65536;
  prop->warpSize = 32;
  prop->memPitch = 2147483647;
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
  prop->textureAlignment = 512;
  prop->texturePitchAlignment = 32;
  prop->multiProcessorCount = static_cast<int>(cudasim::detail::simulated_multiprocessors());
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->maxBlocksPerMultiProcessor = 32;
  prop->l2CacheSize = 40 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->unifiedAddressing = 1;
  prop->managedMemory = 1;
  prop->canMapHostMemory = 1;
  prop->concurrentManagedAccess = 1;
  prop->pageableMemoryAccess = 0;
  prop->streamPrioritiesSupported = 1;
  prop->globalL1CacheSupported = 1;
  prop->localL1CacheSupported = 1;
  prop->asyncEngineCount = 1;
  prop->reservedSharedMemPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return fail(cudaErrorInvalidValue);
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, device)) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = static_cast<int>(p.sharedMemPerMultiprocessor); break;
    case cudaDevAttrReservedSharedMemoryPerBlock: *value = static_cast<int>(p.reservedSharedMemPerBlock); break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrTotalConstantMemory: *value = static_cast<int>(p.totalConstMem); break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    case cudaDevAttrManagedMemory: *value = 1; break;
    case cudaDevAttrConcurrentManagedAccess: *value = 1; break;
    case cudaDevAttrCanMapHostMemory: *value = 1; break;
    case cudaDevAttrStreamPrioritiesSupported: *value = 1; break;
    case cudaDevAttrTextureAlignment: *value = static_cast<int>(p.textureAlignment); break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudasim::detail::forbidden_during_capture("cudaDeviceSynchronize"); }

cudaError_t cudaDeviceReset(void) {
  device_memory().release_all();
  last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  if (static_cast<unsigned>(limit) >= std::size(cudasim::detail::limits)) return fail(cudaErrorUnsupportedLimit);
  cudasim::detail::limits[limit] = value;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  if (!value) return fail(cudaErrorInvalidValue);
  if (static_cast<unsigned>(limit) >= std::size(cudasim::detail::limits)) return fail(cudaErrorUnsupportedLimit);
  *value = cudasim::detail::limits[limit];
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) { return cudaSuccess; }

cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* config) {
  if (!config) return fail(cudaErrorInvalidValue);
  *config = cudaFuncCachePreferNone;
  return cudaSuccess;
}

// One device: there is no peer.
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!can) return fail(cudaErrorInvalidValue);
  if (device != 0 || peer != 0) return fail(cudaErrorInvalidDevice);
  *can = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceEnablePeerAccess(int, unsigned int) { return fail(cudaErrorInvalidDevice); }
cudaError_t cudaDeviceDisablePeerAccess(int) { return fail(cudaErrorInvalidDevice); }

cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

// ---- kernels ---------------------------------------------------------------------------------------

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  using namespace cudasim::detail;
  if (!func) return fail(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kMaxSharedBytes) return fail(cudaErrorInvalidValue);
    const std::string name = base_function_name(function_symbol(func));
    std::lock_guard lk(attr_mutex);
    smem_limits_by_function()[func] = static_cast<size_t>(value);
    if (name.empty()) {  // no symbol table: the limit cannot be tied to one kernel
      unnamed_smem_limit = std::max(unnamed_smem_limit, static_cast<size_t>(value));
    } else {
      smem_limits()[name] = static_cast<size_t>(value);
    }
    return cudaSuccess;
  }
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  using namespace cudasim::detail;
  if (!attr) return fail(cudaErrorInvalidValue);
  if (!func) return fail(cudaErrorInvalidDeviceFunction);
  std::memset(attr, 0, sizeof *attr);
  attr->maxThreadsPerBlock = 1024;
  attr->numRegs = 32;
  attr->ptxVersion = 80;
  attr->binaryVersion = 80;
  attr->maxDynamicSharedSizeBytes = static_cast<int>(dynamic_smem_limit("", func));
  attr->preferredShmemCarveout = -1;
  return cudaSuccess;
}

cudaError_t cudaFuncSetCacheConfig(const void* func, cudaFuncCache) {
  return func ? cudaSuccess : fail(cudaErrorInvalidDeviceFunction);
}

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  if (!name || !func) return fail(cudaErrorInvalidValue);
  *name = cudasim::detail::function_name(func);
  return cudaSuccess;
}

// Blocks of `block_size` threads and `smem` bytes of dynamic shared memory that fit on one
// multiprocessor of the device presented (2048 threads, 32 blocks, 164 KiB of shared memory).
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func, int block_size,
                                                                   size_t smem, unsigned int) {
  if (!blocks || !func) return fail(cudaErrorInvalidValue);
  if (block_size <= 0 || block_size > 1024) return fail(cudaErrorInvalidValue);
  const int warps = (block_size + 31) / 32;
  int n = std::min(64 / warps, 32);
  if (smem) n = std::min<int>(n, static_cast<int>((cudasim::detail::kMaxSharedBytes + 1024) / (smem + 1024)));
  *blocks = std::max(n, 0);
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size, smem, 0);
}

cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* smem, const void* func, int blocks, int block_size) {
  if (!smem || !func || blocks <= 0 || block_size <= 0) return fail(cudaErrorInvalidValue);
  *smem = std::min(cudasim::detail::kMaxSharedBytes, (cudasim::detail::kMaxSharedBytes + 1024) / static_cast<size_t>(blocks) - 1024);
  return cudaSuccess;
}

// Without the kernel's parameter types its arguments cannot be unpacked; the C++ overload in
// cudasim.h (a typed kernel pointer) is what a launch through cudaLaunchKernel uses.
cudaError_t cudaLaunchKernel(const void* func, dim3, dim3, void**, size_t, cudaStream_t) {
  cudasim::detail::explain("cudaLaunchKernel with an untyped function pointer (" +
                           std::string(cudasim::detail::function_name(func)) +
                           ") cannot be run by the CPU backend: pass the kernel itself, "
                           "cudaLaunchKernel(kernel, grid, block, args), so its parameter types are known");
  return fail(cudaErrorInvalidDeviceFunction);
}

// ---- memory ------------------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (cudaError_t e = cudasim::detail::forbidden_during_capture("cudaMalloc")) return e;
  return cudasim::detail::alloc(ptr, size, MemKind::Device);
}

cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t) { return cudaMalloc(ptr, size); }

cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int) {
  if (cudaError_t e = cudasim::detail::forbidden_during_capture("cudaMallocManaged")) return e;
  return cudasim::detail::alloc(ptr, size, MemKind::Managed);
}

cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
  if (!ptr || !pitch) return fail(cudaErrorInvalidValue);
  *pitch = (std::max<size_t>(width, 1) + 511) / 512 * 512;  // rows start at the texture alignment
  return cudaMalloc(ptr, *pitch * height);
}

cudaError_t cudaFree(void* ptr) {
  if (cudaError_t e = cudasim::detail::forbidden_during_capture("cudaFree")) return e;
  return cudasim::detail::free_memory(ptr, MemKind::Device, "cudaFree");
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return cudaFree(ptr); }

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (cudaError_t e = cudasim::detail::forbidden_during_capture("cudaMallocHost")) return e;
  return cudasim::detail::alloc(ptr, size, MemKind::Pinned);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t e = cudasim::detail::forbidden_during_capture("cudaFreeHost")) return e;
  return cudasim::detail::free_memory(ptr, MemKind::Pinned, "cudaFreeHost");
}

cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int flags) {
  if (!device || !host || flags != 0) return fail(cudaErrorInvalidValue);
  cudasim::detail::Allocation* a = device_memory().find_live(host, 1);
  if ((!a || a->kind == MemKind::Device) && !cudasim::detail::is_registered(host, 1)) {
    cudasim::detail::explain("cudaHostGetDevicePointer: the host pointer was not allocated with cudaHostAlloc / "
                             "cudaMallocHost nor registered with cudaHostRegister");
    return fail(cudaErrorInvalidValue);
  }
  *device = host;  // unified addressing: the same address on both sides
  return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int* flags, void* host) {
  if (!flags || !host) return fail(cudaErrorInvalidValue);
  cudasim::detail::Allocation* a = device_memory().find_live(host, 1);
  if ((!a || a->kind != MemKind::Pinned) && !cudasim::detail::is_registered(host, 1)) return fail(cudaErrorInvalidValue);
  *flags = cudaHostAllocMapped;
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int) {
  if (!ptr || !size) return fail(cudaErrorInvalidValue);
  std::lock_guard lk(cudasim::detail::registered_mutex);
  if (cudasim::detail::registered.count(reinterpret_cast<uintptr_t>(ptr))) return fail(cudaErrorHostMemoryAlreadyRegistered);
  cudasim::detail::registered[reinterpret_cast<uintptr_t>(ptr)] = size;
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  std::lock_guard lk(cudasim::detail::registered_mutex);
  if (!cudasim::detail::registered.erase(reinterpret_cast<uintptr_t>(ptr))) return fail(cudaErrorHostMemoryNotRegistered);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  if (!attr) return fail(cudaErrorInvalidValue);
  std::memset(attr, 0, sizeof *attr);
  attr->device = 0;
  if (cudasim::detail::Allocation* a = device_memory().find_live(ptr, 1)) {
    attr->type = a->kind == MemKind::Device ? cudaMemoryTypeDevice
                 : a->kind == MemKind::Managed ? cudaMemoryTypeManaged
                                               : cudaMemoryTypeHost;
    attr->devicePointer = const_cast<void*>(ptr);
    attr->hostPointer = a->kind == MemKind::Device ? nullptr : const_cast<void*>(ptr);
  } else if (cudasim::detail::is_registered(ptr, 1)) {
    attr->type = cudaMemoryTypeHost;
    attr->devicePointer = attr->hostPointer = const_cast<void*>(ptr);
  } else {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    attr->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMemAdvise(const void*, size_t, cudaMemoryAdvise, cudaMemLocation) { return cudaSuccess; }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return cudasim::detail::copy_on(nullptr, dst, src, count, kind, "cudaMemcpy");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  return cudasim::detail::copy_on(stream, dst, src, count, kind, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
  if (dst_device != 0 || src_device != 0) return fail(cudaErrorInvalidDevice);
  return cudaMemcpy(dst, src, count, cudaMemcpyDeviceToDevice);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                cudaStream_t stream) {
  if (dst_device != 0 || src_device != 0) return fail(cudaErrorInvalidDevice);
  return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  // A width over the pitch: CUDA 13 answers cudaErrorInvalidValue (seen on an H200), not
  // cudaErrorInvalidPitchValue.
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; ++r) {
    cudaError_t e = cudasim::detail::copy_on(stream, static_cast<char*>(dst) + r * dpitch,
                                             static_cast<const char*>(src) + r * spitch, width, kind,
                                             stream ? "cudaMemcpy2DAsync" : "cudaMemcpy2D");
    if (e) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, nullptr);
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  return cudasim::detail::memset_on(nullptr, ptr, value, count, "cudaMemset");
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  return cudasim::detail::memset_on(stream, ptr, value, count, "cudaMemsetAsync");
}

cudaError_t cudaMemset2DAsync(void* ptr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream) {
  if (width > pitch) return fail(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; ++r) {
    if (cudaError_t e = cudasim::detail::memset_on(stream, static_cast<char*>(ptr) + r * pitch, value, width,
                                                   stream ? "cudaMemset2DAsync" : "cudaMemset2D"))
      return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height) {
  return cudaMemset2DAsync(ptr, pitch, value, width, height, nullptr);
}

// A __device__ or __constant__ variable is an ordinary global here; its address is the symbol.
// (The C++ overloads in cudasim.h know the symbol's size and refuse copies past its end.)
cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind) {
  if (!symbol || (!src && count)) return fail(cudaErrorInvalidSymbol);
  std::memcpy(static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind) {
  if (!symbol || (!dst && count)) return fail(cudaErrorInvalidSymbol);
  std::memcpy(dst, static_cast<const char*>(symbol) + offset, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                    cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind,
                                      cudaStream_t) {
  return cudaMemcpyFromSymbol(dst, symbol, count, offset, kind);
}

cudaError_t cudaGetSymbolAddress(void** ptr, const void* symbol) {
  if (!ptr || !symbol) return fail(cudaErrorInvalidSymbol);
  *ptr = const_cast<void*>(symbol);
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

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (cudaError_t e = cudaStreamCreate(stream)) return e;
  (*stream)->flags = flags;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  if (cudaError_t e = cudaStreamCreateWithFlags(stream, flags)) return e;
  (*stream)->priority = std::clamp(priority, -5, 0);
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  if (!priority) return fail(cudaErrorInvalidValue);
  *priority = stream ? stream->priority : 0;
  return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  if (!flags) return fail(cudaErrorInvalidValue);
  *flags = stream ? stream->flags : 0;
  return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t, int* device) { return cudaGetDevice(device); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return cudaSuccess;
  cudasim::detail::forget_capture(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return cudasim::detail::wait_for_stream(stream, "cudaStreamSynchronize");
}
cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudasim::detail::wait_for_stream(stream, "cudaStreamQuery"); }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }

// Work on a stream is done when the call that queued it returns: the callback runs now.
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* data, unsigned int) {
  if (!callback) return fail(cudaErrorInvalidValue);
  switch (cudasim::detail::stream_use(stream, "cudaStreamAddCallback")) {
    case cudasim::detail::StreamUse::Refused: return last_error;
    // Not capturable (cudaLaunchHostFunc is): refused on a capturing stream, as by CUDA.
    case cudasim::detail::StreamUse::Record: return cudasim::detail::wait_for_stream(stream, "cudaStreamAddCallback");
    case cudasim::detail::StreamUse::Run: break;
  }
  callback(stream, cudaSuccess, data);
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  if (!fn) return fail(cudaErrorInvalidValue);
  switch (cudasim::detail::stream_use(stream, "cudaLaunchHostFunc")) {
    case cudasim::detail::StreamUse::Refused: return last_error;
    case cudasim::detail::StreamUse::Record: cudasim::detail::record_host_fn(stream, fn, data); return cudaSuccess;
    case cudasim::detail::StreamUse::Run: break;
  }
  fn(data);
  return cudaSuccess;
}

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

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int) {
  return cudaEventRecord(event, stream);
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
