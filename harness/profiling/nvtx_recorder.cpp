// The NVTX recorder (nvtx_recorder.h): a minimal NVTX tool, linked statically into test binaries.
//
// NVTX's loader calls InitializeInjectionNvtx2_fnptr (when no profiler is attached) with a
// function that returns NVTX's export tables; the tool replaces the entries it implements in the
// CORE2 (domain) function table. Only three are needed: creating a domain, pushing a range and
// popping it. Every other NVTX call stays a no-op.

#include "harness/profiling/nvtx_recorder.h"

// A tool takes NVTX's types and declarations only; the implementation (and its weak default of
// the injection symbol, which this file defines) comes with the code that makes the calls.
#define NVTX_NO_IMPL

#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace clockwork::nvtx_recorder {
namespace {

struct DomainRecord {
  std::string name;
};

std::mutex mutex;
std::vector<RecordedRange> recorded;  // guarded by mutex
std::vector<DomainRecord*> domains;   // guarded by mutex; never freed (handles live on)
std::atomic<bool> installed{false};
thread_local std::vector<std::string> stack;  // names of the ranges open on this thread

nvtxDomainHandle_t domain_create(const char* name) {
  std::lock_guard<std::mutex> lock(mutex);
  domains.push_back(new DomainRecord{name ? name : ""});
  return reinterpret_cast<nvtxDomainHandle_t>(domains.back());
}

int range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string name;
  if (attributes && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII &&
      attributes->message.ascii) {
    name = attributes->message.ascii;
  }
  std::string path;
  for (const std::string& outer : stack) path += outer + " > ";
  path += name;
  const int depth = static_cast<int>(stack.size());
  stack.push_back(name);
  std::lock_guard<std::mutex> lock(mutex);
  const auto* d = reinterpret_cast<const DomainRecord*>(domain);
  recorded.push_back({d ? d->name : "", name, path, depth});
  return depth;
}

int range_pop(nvtxDomainHandle_t) {
  if (stack.empty()) return -1;  // NVTX's convention for a pop without a push
  stack.pop_back();
  return static_cast<int>(stack.size());
}

int initialize(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
      size <= NVTX_CBID_CORE2_DomainCreateA) {
    return 0;  // NVTX then makes every call a no-op
  }
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&domain_create);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&range_push);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&range_pop);
  installed = true;
  return 1;
}

}  // namespace

bool recorder_installed() {
  return installed;
}

void clear() {
  std::lock_guard<std::mutex> lock(mutex);
  recorded.clear();
}

std::vector<RecordedRange> ranges() {
  std::lock_guard<std::mutex> lock(mutex);
  return recorded;
}

int open_ranges() {
  return static_cast<int>(stack.size());
}

}  // namespace clockwork::nvtx_recorder

// The static-injection hook NVTX's loader checks (a weak symbol in every file that includes the
// NVTX headers; this definition replaces it).
extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr =
    &clockwork::nvtx_recorder::initialize;
}
