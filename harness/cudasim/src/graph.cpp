// Stream capture and CUDA graphs on the CPU backend.
//
// Between cudaStreamBeginCapture and cudaStreamEndCapture, work queued on the stream is recorded
// instead of run: a kernel launch keeps its own copy of the arguments (made at the launch, as
// CUDA copies them into the node), an asynchronous copy or memset keeps its pointers and size (the
// bytes are read when the graph runs), a host function keeps its function and data pointer. A
// graph is a list of such nodes in the order they were queued; every stream here is in order, so
// that order is a valid execution order of the dependencies CUDA would have recorded.
// cudaGraphLaunch runs the nodes one after another, synchronously like every stream here.
//
// The rules of capture are CUDA's (cuda_runtime_api.h, cudaStreamBeginCapture and
// cudaThreadExchangeStreamCaptureMode): the legacy default stream cannot be captured, and using
// it while a blocking stream captures fails with cudaErrorStreamCaptureImplicit; allocation,
// freeing and device synchronisation fail with cudaErrorStreamCaptureUnsupported while the
// calling thread's capture mode forbids them; waiting for a capturing stream fails likewise. Each
// such failure invalidates the capture, so cudaStreamEndCapture then returns
// cudaErrorStreamCaptureInvalidated and no graph.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime_internal.h"

struct CUgraphNode_st {
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  std::shared_ptr<cudasim::detail::CapturedLaunch> kernel;  // cudaGraphNodeTypeKernel
  const char* kernel_name = "";
  void* dst = nullptr;  // memcpy and memset
  const void* src = nullptr;
  size_t bytes = 0;
  cudaMemcpyKind kind = cudaMemcpyDefault;
  int value = 0;
  cudaHostFn_t fn = nullptr;  // host function
  void* data = nullptr;
};

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};

struct CUgraphExec_st {
  std::vector<CUgraphNode_st> nodes;  // copies: the graph may be destroyed after instantiation
};

namespace cudasim::detail {
namespace {

std::mutex capture_mutex;
std::vector<CUstream_st*> capturing;  // streams between BeginCapture and EndCapture
std::atomic<size_t> n_capturing{0};   // capturing.size(), read without the lock on every launch
thread_local cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

std::string stream_name(cudaStream_t s) {
  std::ostringstream m;
  m << "stream " << static_cast<const void*>(s);
  return m.str();
}

void add_node(cudaStream_t stream, CUgraphNode_st node) {
  std::lock_guard lk(capture_mutex);
  stream->graph->nodes.push_back(std::make_unique<CUgraphNode_st>(std::move(node)));
}

// The capturing blocking streams (not cudaStreamNonBlocking): work on the legacy stream would wait
// for them. Called with the lock held.
std::vector<CUstream_st*> blocking_captures() {
  std::vector<CUstream_st*> r;
  for (CUstream_st* s : capturing)
    if (!(s->flags & cudaStreamNonBlocking)) r.push_back(s);
  return r;
}

cudaError_t refuse(cudaError_t e, const std::vector<CUstream_st*>& invalidated, const std::string& why) {
  for (CUstream_st* s : invalidated) s->capture = cudaStreamCaptureStatusInvalidated;
  explain_call(why + " (" + cudaGetErrorName(e) + (invalidated.empty() ? "" : "; the capture is invalidated") + ")");
  return set_last_error(e);
}

// Legacy-stream work while blocking streams capture. Called with the lock held.
cudaError_t legacy_while_capturing(const char* call) {
  std::vector<CUstream_st*> blocking = blocking_captures();
  if (blocking.empty()) return cudaSuccess;
  return refuse(cudaErrorStreamCaptureImplicit, blocking,
                std::string(call) + " on the legacy default stream while " + stream_name(blocking.front()) +
                    " is capturing: the legacy stream waits for every blocking stream, so this would make the "
                    "capture depend on uncaptured work. Queue it on the capturing stream (the Async call with "
                    "that stream), or do it before cudaStreamBeginCapture or after cudaStreamEndCapture");
}

}  // namespace

StreamUse stream_use(cudaStream_t stream, const char* call) {
  if (n_capturing.load(std::memory_order_acquire) == 0) return StreamUse::Run;
  std::lock_guard lk(capture_mutex);
  if (is_legacy(stream)) return legacy_while_capturing(call) ? StreamUse::Refused : StreamUse::Run;
  if (stream == cudaStreamPerThread) return StreamUse::Run;
  switch (stream->capture) {
    case cudaStreamCaptureStatusActive: return StreamUse::Record;
    case cudaStreamCaptureStatusInvalidated:
      refuse(cudaErrorStreamCaptureInvalidated, {},
             std::string(call) + " on " + stream_name(stream) +
                 ", whose capture was invalidated by an earlier error: end it with cudaStreamEndCapture");
      return StreamUse::Refused;
    case cudaStreamCaptureStatusNone: break;
  }
  return StreamUse::Run;
}

cudaError_t forbidden_during_capture(const char* call) {
  if (n_capturing.load(std::memory_order_acquire) == 0) return cudaSuccess;
  std::lock_guard lk(capture_mutex);
  if (thread_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  // Forbidden by this thread's own capture (unless relaxed), and in global mode by another
  // thread's global capture too.
  std::vector<CUstream_st*> why;
  for (CUstream_st* s : capturing) {
    if (s->capture_mode == cudaStreamCaptureModeRelaxed) continue;
    if (s->capture_thread == std::this_thread::get_id() ||
        (thread_mode == cudaStreamCaptureModeGlobal && s->capture_mode == cudaStreamCaptureModeGlobal))
      why.push_back(s);
  }
  if (why.empty()) return cudaSuccess;
  return refuse(cudaErrorStreamCaptureUnsupported, why,
                std::string(call) + " while " + stream_name(why.front()) +
                    " is capturing: the call is not recorded into the graph, so a replay would not repeat it. "
                    "Allocate before the capture and free after it");
}

void forget_capture(cudaStream_t stream) {
  std::lock_guard lk(capture_mutex);
  if (stream->capture == cudaStreamCaptureStatusNone) return;
  capturing.erase(std::find(capturing.begin(), capturing.end(), stream));
  n_capturing.store(capturing.size(), std::memory_order_release);
  stream->capture = cudaStreamCaptureStatusNone;
  delete stream->graph;
  stream->graph = nullptr;
}

cudaError_t wait_for_stream(cudaStream_t stream, const char* call) {
  if (n_capturing.load(std::memory_order_acquire) == 0) return cudaSuccess;
  std::lock_guard lk(capture_mutex);
  if (is_legacy(stream)) return legacy_while_capturing(call);
  if (stream == cudaStreamPerThread || stream->capture == cudaStreamCaptureStatusNone) return cudaSuccess;
  return refuse(cudaErrorStreamCaptureUnsupported, {stream},
                std::string(call) + " on " + stream_name(stream) +
                    ", which is capturing: nothing it recorded has run yet. Synchronise after "
                    "cudaGraphLaunch instead");
}

LaunchMode launch_mode(const LaunchConfig& cfg, const char* kernel, const char* file, unsigned line) {
  if (n_capturing.load(std::memory_order_acquire) == 0) return LaunchMode::Run;
  const std::string call = "launch of '" + std::string(kernel) + "' at " + file + ":" + std::to_string(line);
  switch (stream_use(cfg.stream, call.c_str())) {
    case StreamUse::Run: return LaunchMode::Run;
    case StreamUse::Refused: return LaunchMode::Refused;
    case StreamUse::Record: break;
  }
  // A bad configuration is reported by the launch, as CUDA does, and nothing is recorded.
  return check_launch(cfg, kernel, file, line) ? LaunchMode::Record : LaunchMode::Refused;
}

void capture_launch(cudaStream_t stream, const char* kernel, CapturedLaunch* node) {
  CUgraphNode_st n;
  n.type = cudaGraphNodeTypeKernel;
  n.kernel.reset(node);
  n.kernel_name = kernel;
  add_node(stream, std::move(n));
}

void record_copy(cudaStream_t stream, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  CUgraphNode_st n;
  n.type = cudaGraphNodeTypeMemcpy;
  n.dst = dst;
  n.src = src;
  n.bytes = bytes;
  n.kind = kind;
  add_node(stream, std::move(n));
}

void record_memset(cudaStream_t stream, void* p, int value, size_t bytes) {
  CUgraphNode_st n;
  n.type = cudaGraphNodeTypeMemset;
  n.dst = p;
  n.value = value;
  n.bytes = bytes;
  add_node(stream, std::move(n));
}

void record_host_fn(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  CUgraphNode_st n;
  n.type = cudaGraphNodeTypeHost;
  n.fn = fn;
  n.data = data;
  add_node(stream, std::move(n));
}

}  // namespace cudasim::detail

using cudasim::detail::capture_mutex;
using cudasim::detail::capturing;
using cudasim::detail::is_legacy;
using cudasim::detail::n_capturing;
using cudasim::detail::set_last_error;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return set_last_error(cudaErrorInvalidValue);
  if (is_legacy(stream) || stream == cudaStreamPerThread) {
    cudasim::detail::explain_call(
        is_legacy(stream)
            ? "cudaStreamBeginCapture on the legacy default stream: it cannot be captured; create a stream with "
              "cudaStreamCreate and launch the work on it (cudaErrorStreamCaptureUnsupported)"
            : "cudaStreamBeginCapture on cudaStreamPerThread: not supported by the CPU backend; capture a stream "
              "made with cudaStreamCreate (cudaErrorStreamCaptureUnsupported)");
    return set_last_error(cudaErrorStreamCaptureUnsupported);
  }
  std::lock_guard lk(capture_mutex);
  if (stream->capture != cudaStreamCaptureStatusNone) return set_last_error(cudaErrorIllegalState);
  stream->capture = cudaStreamCaptureStatusActive;
  stream->capture_mode = mode;
  stream->capture_thread = std::this_thread::get_id();
  stream->graph = new CUgraph_st;
  capturing.push_back(stream);
  n_capturing.store(capturing.size(), std::memory_order_release);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!graph) return set_last_error(cudaErrorInvalidValue);
  if (is_legacy(stream) || stream == cudaStreamPerThread) return set_last_error(cudaErrorIllegalState);
  std::lock_guard lk(capture_mutex);
  if (stream->capture == cudaStreamCaptureStatusNone) return set_last_error(cudaErrorIllegalState);
  if (stream->capture_mode != cudaStreamCaptureModeRelaxed && stream->capture_thread != std::this_thread::get_id())
    return set_last_error(cudaErrorStreamCaptureWrongThread);
  capturing.erase(std::find(capturing.begin(), capturing.end(), stream));
  n_capturing.store(capturing.size(), std::memory_order_release);
  const bool invalidated = stream->capture == cudaStreamCaptureStatusInvalidated;
  stream->capture = cudaStreamCaptureStatusNone;
  std::unique_ptr<CUgraph_st> g(stream->graph);
  stream->graph = nullptr;
  if (invalidated) {
    *graph = nullptr;
    return set_last_error(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return set_last_error(cudaErrorInvalidValue);
  std::lock_guard lk(capture_mutex);
  if (is_legacy(stream)) {
    // Asking about the legacy stream while a blocking stream captures is itself an error (the
    // capture stays valid).
    for (CUstream_st* s : capturing)
      if (!(s->flags & cudaStreamNonBlocking)) return set_last_error(cudaErrorStreamCaptureImplicit);
    *status = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  *status = stream == cudaStreamPerThread ? cudaStreamCaptureStatusNone : stream->capture;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                *mode != cudaStreamCaptureModeRelaxed))
    return set_last_error(cudaErrorInvalidValue);
  std::swap(*mode, cudasim::detail::thread_mode);
  return cudaSuccess;
}

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  if (!graph || flags != 0) return set_last_error(cudaErrorInvalidValue);
  *graph = new CUgraph_st;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return set_last_error(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (!graph || !count) return set_last_error(cudaErrorInvalidValue);
  if (nodes) {
    const size_t n = std::min(*count, graph->nodes.size());
    for (size_t i = 0; i < n; ++i) nodes[i] = graph->nodes[i].get();
    for (size_t i = n; i < *count; ++i) nodes[i] = nullptr;
  }
  *count = graph->nodes.size();
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
  if (!node || !type) return set_last_error(cudaErrorInvalidValue);
  *type = node->type;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  if (!exec || !graph) return set_last_error(cudaErrorInvalidValue);
  constexpr unsigned long long known = cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
                                       cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;
  if (flags & ~known) return set_last_error(cudaErrorInvalidValue);
  auto* e = new CUgraphExec_st;
  for (const auto& n : graph->nodes) e->nodes.push_back(*n);
  *exec = e;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}

// Same node count and node types in the same order: the parameters (kernel arguments, grid,
// copy addresses and sizes) are taken over; anything else is a topology change.
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  if (!exec || !graph) return set_last_error(cudaErrorInvalidValue);
  cudaGraphExecUpdateResultInfo r{};
  r.result = cudaGraphExecUpdateSuccess;
  if (graph->nodes.size() != exec->nodes.size()) {
    r.result = cudaGraphExecUpdateErrorTopologyChanged;
  } else {
    for (size_t i = 0; i < graph->nodes.size(); ++i) {
      const CUgraphNode_st& want = *graph->nodes[i];
      if (want.type != exec->nodes[i].type) {
        r.result = cudaGraphExecUpdateErrorNodeTypeChanged;
        r.errorNode = graph->nodes[i].get();
        break;
      }
      if (want.type == cudaGraphNodeTypeMemcpy && want.kind != exec->nodes[i].kind) {
        r.result = cudaGraphExecUpdateErrorParametersChanged;
        r.errorNode = graph->nodes[i].get();
        break;
      }
    }
  }
  if (info) *info = r;
  if (r.result != cudaGraphExecUpdateSuccess) return set_last_error(cudaErrorGraphExecUpdateFailure);
  for (size_t i = 0; i < graph->nodes.size(); ++i) exec->nodes[i] = *graph->nodes[i];
  return cudaSuccess;
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t) {
  return exec ? cudaSuccess : set_last_error(cudaErrorInvalidValue);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return set_last_error(cudaErrorInvalidValue);
  switch (cudasim::detail::stream_use(stream, "cudaGraphLaunch")) {
    case cudasim::detail::StreamUse::Refused: return cudaPeekAtLastError();
    case cudasim::detail::StreamUse::Record:  // a graph launched into a capture: its nodes are recorded
      for (const CUgraphNode_st& n : exec->nodes) cudasim::detail::add_node(stream, n);
      return cudaSuccess;
    case cudasim::detail::StreamUse::Run: break;
  }
  for (const CUgraphNode_st& n : exec->nodes) {
    cudaError_t e = cudaSuccess;
    switch (n.type) {
      case cudaGraphNodeTypeKernel: n.kernel->run(); break;
      case cudaGraphNodeTypeMemcpy:
        e = cudasim::detail::copy_now(n.dst, n.src, n.bytes, n.kind, "a graph's memcpy node");
        break;
      case cudaGraphNodeTypeMemset:
        e = cudasim::detail::memset_now(n.dst, n.value, n.bytes, "a graph's memset node");
        break;
      case cudaGraphNodeTypeHost: n.fn(n.data); break;
      default: break;
    }
    if (e) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec) return set_last_error(cudaErrorInvalidValue);
  delete exec;
  return cudaSuccess;
}

}  // extern "C"
