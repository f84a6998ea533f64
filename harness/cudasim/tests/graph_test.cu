// Stream capture and CUDA graphs: work queued on a capturing stream is recorded, not run; a replay
// runs it with the arguments copied at capture time and the device memory as it is at the replay;
// the calls that capture forbids fail with CUDA's error codes and invalidate the capture. The
// same checks hold on a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace {

__global__ void add_value(int* p, int v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}

__global__ void scale(float* out, const float* in, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i];
}

struct Affine {
  float mul, add;
};

__global__ void affine(float* x, Affine f, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = f.mul * x[i] + f.add;
}

// Adds the device-side scalar *step to every element: a value that changes between replays is
// read from device memory (written by a memcpy node), not captured as an argument.
__global__ void add_device_scalar(int* p, const int* step, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += *step;
}

std::vector<int> to_host(const int* d, int n) {
  std::vector<int> h(static_cast<size_t>(n));
  EXPECT_EQ(cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

struct Stream {
  cudaStream_t s = nullptr;
  explicit Stream(unsigned flags = cudaStreamDefault) { EXPECT_EQ(cudaStreamCreateWithFlags(&s, flags), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

constexpr int kN = 300;  // not a multiple of the block: the bounds guard is exercised

TEST(Graph, CaptureRecordsInsteadOfRunningAndEveryReplayRuns) {
  Stream st;
  int* d = nullptr;
  CHECK(cudaMalloc(&d, kN * sizeof(int)));
  CHECK(cudaMemset(d, 0, kN * sizeof(int)));

  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(st.s, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamIsCapturing(st.s, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  add_value<<<(kN + 127) / 128, 128, 0, st.s>>>(d, 3, kN);
  CHECK(cudaGetLastError());
  CHECK(cudaMemsetAsync(d + kN - 1, 0, sizeof(int), st.s));
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(st.s, &graph));
  ASSERT_NE(graph, nullptr);
  CHECK(cudaStreamIsCapturing(st.s, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  for (int v : to_host(d, kN)) ASSERT_EQ(v, 0) << "the captured kernel ran during the capture";

  size_t count = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  ASSERT_EQ(count, 2u);
  cudaGraphNode_t nodes[2];
  CHECK(cudaGraphGetNodes(graph, nodes, &count));
  cudaGraphNodeType type;
  CHECK(cudaGraphNodeGetType(nodes[0], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeKernel);
  CHECK(cudaGraphNodeGetType(nodes[1], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeMemset);

  cudaGraphExec_t exec = nullptr;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));  // the executable graph does not need it any more
  for (int replay = 1; replay <= 3; ++replay) {
    CHECK(cudaGraphLaunch(exec, st.s));
    CHECK(cudaStreamSynchronize(st.s));
    const std::vector<int> h = to_host(d, kN);
    for (int i = 0; i < kN - 1; ++i) ASSERT_EQ(h[i], 3 * replay) << "element " << i << " after replay " << replay;
    ASSERT_EQ(h[kN - 1], 0) << "the memset node runs after the kernel, in capture order";
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaFree(d));
}

TEST(Graph, ReplaySeesTheCurrentContentsOfDeviceMemory) {
  Stream st;
  float *in = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&in, kN * sizeof(float)));
  CHECK(cudaMalloc(&out, kN * sizeof(float)));
  std::vector<float> h(kN);
  for (int i = 0; i < kN; ++i) h[i] = 0.5f * static_cast<float>(i) - 7.f;
  CHECK(cudaMemcpy(in, h.data(), kN * sizeof(float), cudaMemcpyHostToDevice));

  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  scale<<<(kN + 63) / 64, 64, 0, st.s>>>(out, in, 2.f, kN);
  CHECK(cudaStreamEndCapture(st.s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (int round = 0; round < 2; ++round) {
    // New input after the capture: the replay reads the buffer, not what it held at capture.
    for (int i = 0; i < kN; ++i) h[i] = static_cast<float>((i * 37 + round * 11) % 101) - 50.f;
    CHECK(cudaMemcpy(in, h.data(), kN * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaGraphLaunch(exec, st.s));
    CHECK(cudaStreamSynchronize(st.s));
    std::vector<float> got(kN);
    CHECK(cudaMemcpy(got.data(), out, kN * sizeof(float), cudaMemcpyDeviceToHost));
    // Exact: one multiplication by 2 of a small integer.
    for (int i = 0; i < kN; ++i) ASSERT_EQ(got[i], 2.f * h[i]) << "element " << i << ", round " << round;
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
}

TEST(Graph, KernelArgumentsAreCapturedByValue) {
  Stream st;
  float* x = nullptr;
  CHECK(cudaMalloc(&x, kN * sizeof(float)));
  CHECK(cudaMemset(x, 0, kN * sizeof(float)));
  int* p = nullptr;
  CHECK(cudaMalloc(&p, kN * sizeof(int)));
  CHECK(cudaMemset(p, 0, kN * sizeof(int)));

  int v = 2;
  Affine f{3.f, 1.f};
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  add_value<<<(kN + 127) / 128, 128, 0, st.s>>>(p, v, kN);
  affine<<<(kN + 127) / 128, 128, 0, st.s>>>(x, f, kN);
  CHECK(cudaStreamEndCapture(st.s, &graph));
  v = 100;  // changing the host variables after the capture changes nothing
  f = {-1.f, -1.f};
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, st.s));
  CHECK(cudaGraphLaunch(exec, st.s));
  CHECK(cudaStreamSynchronize(st.s));
  for (int got : to_host(p, kN)) ASSERT_EQ(got, 4);
  std::vector<float> hx(kN);
  CHECK(cudaMemcpy(hx.data(), x, kN * sizeof(float), cudaMemcpyDeviceToHost));
  for (float got : hx) ASSERT_EQ(got, 4.f) << "3·(3·0 + 1) + 1: the struct as it was at the capture";
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(p));
  CHECK(cudaFree(x));
}

TEST(Graph, AMemcpyNodeUpdatesADeviceScalarBetweenReplays) {
  Stream st;
  int *p = nullptr, *step = nullptr, *host_step = nullptr;
  CHECK(cudaMalloc(&p, kN * sizeof(int)));
  CHECK(cudaMalloc(&step, sizeof(int)));
  CHECK(cudaMallocHost(&host_step, sizeof(int)));  // pinned: what a memcpy node should read from
  CHECK(cudaMemset(p, 0, kN * sizeof(int)));
  *host_step = 1;

  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemcpyAsync(step, host_step, sizeof(int), cudaMemcpyHostToDevice, st.s));
  add_device_scalar<<<(kN + 127) / 128, 128, 0, st.s>>>(p, step, kN);
  CHECK(cudaStreamEndCapture(st.s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  int want = 0;
  for (int k : {5, 7, -3}) {
    *host_step = k;  // read by the copy node when the graph runs
    want += k;
    CHECK(cudaGraphLaunch(exec, st.s));
    CHECK(cudaStreamSynchronize(st.s));
    for (int got : to_host(p, kN)) ASSERT_EQ(got, want) << "after adding " << k;
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFreeHost(host_step));
  CHECK(cudaFree(step));
  CHECK(cudaFree(p));
}

TEST(Graph, HostFunctionsRunAtEachReplay) {
  Stream st;
  int calls = 0;
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  CHECK(cudaLaunchHostFunc(st.s, [](void* c) { ++*static_cast<int*>(c); }, &calls));
  CHECK(cudaStreamEndCapture(st.s, &graph));
  EXPECT_EQ(calls, 0);
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, st.s));
  CHECK(cudaGraphLaunch(exec, st.s));
  CHECK(cudaStreamSynchronize(st.s));
  EXPECT_EQ(calls, 2);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
}

TEST(Graph, AnUpdateTakesTheNewArgumentsAndRefusesAnotherTopology) {
  Stream st;
  int* p = nullptr;
  CHECK(cudaMalloc(&p, kN * sizeof(int)));
  CHECK(cudaMemset(p, 0, kN * sizeof(int)));
  auto capture = [&](int v, int launches) {
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal), cudaSuccess);
    for (int i = 0; i < launches; ++i) add_value<<<(kN + 127) / 128, 128, 0, st.s>>>(p, v, kN);
    EXPECT_EQ(cudaStreamEndCapture(st.s, &g), cudaSuccess);
    return g;
  };
  cudaGraph_t first = capture(1, 2), second = capture(10, 2), other = capture(1, 3);
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, first, 0));
  cudaGraphExecUpdateResultInfo info{};
  CHECK(cudaGraphExecUpdate(exec, second, &info));
  EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
  CHECK(cudaGraphLaunch(exec, st.s));
  CHECK(cudaStreamSynchronize(st.s));
  for (int got : to_host(p, kN)) ASSERT_EQ(got, 20) << "two launches with the updated argument 10";

  EXPECT_EQ(cudaGraphExecUpdate(exec, other, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  EXPECT_EQ(cudaGetLastError(), cudaErrorGraphExecUpdateFailure);
  CHECK(cudaGraphLaunch(exec, st.s));  // still the graph it was
  CHECK(cudaStreamSynchronize(st.s));
  for (int got : to_host(p, kN)) ASSERT_EQ(got, 40);

  for (cudaGraph_t g : {first, second, other}) CHECK(cudaGraphDestroy(g));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaFree(p));
}

__global__ void sub_value(int* p, int v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] -= v;
}

// Launches through a function pointer that lives only during this call.
void launch_through_a_local_pointer(cudaStream_t s, int* p, bool add) {
  void (*const kernel)(int*, int, int) = add ? add_value : sub_value;
  kernel<<<(kN + 127) / 128, 128, 0, s>>>(p, 6, kN);
}

TEST(Graph, ALaunchThroughALocalFunctionPointerOutlivesThePointer) {
  Stream st;
  int* p = nullptr;
  CHECK(cudaMalloc(&p, kN * sizeof(int)));
  CHECK(cudaMemset(p, 0, kN * sizeof(int)));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  launch_through_a_local_pointer(st.s, p, false);
  CHECK(cudaStreamEndCapture(st.s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  launch_through_a_local_pointer(st.s, p, true);  // the same stack slot now holds add_value
  CHECK(cudaGraphLaunch(exec, st.s));
  CHECK(cudaStreamSynchronize(st.s));
  for (int got : to_host(p, kN)) ASSERT_EQ(got, 0) << "+6 by the direct launch, -6 by the replay";
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(p));
}

// Ends a capture that an illegal call should have invalidated.
void expect_invalidated(cudaStream_t s) {
  cudaStreamCaptureStatus status;
  EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&status);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  (void)cudaGetLastError();
}

TEST(Graph, TheLegacyStreamCannotBeCaptured) {
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
}

TEST(Graph, AllocationDuringACaptureFailsAndInvalidatesIt) {
  Stream st;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 256), cudaErrorStreamCaptureUnsupported);
  expect_invalidated(st.s);
  // After the capture, allocation works again.
  CHECK(cudaMalloc(&p, 256));
  CHECK(cudaFree(p));
}

TEST(Graph, SynchronisingTheCapturingStreamFailsAndInvalidatesIt) {
  Stream st;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaStreamSynchronize(st.s), cudaErrorStreamCaptureUnsupported);
  expect_invalidated(st.s);
}

TEST(Graph, TheLegacyStreamDuringACaptureOfABlockingStreamFails) {
  int* d = nullptr;
  CHECK(cudaMalloc(&d, kN * sizeof(int)));
  CHECK(cudaMemset(d, 0, kN * sizeof(int)));
  {  // a synchronous copy runs on the legacy stream
    Stream st;
    CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
    int h = 5;
    EXPECT_EQ(cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice), cudaErrorStreamCaptureImplicit);
    expect_invalidated(st.s);
  }
  {  // so does a launch without a stream
    Stream st;
    CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal));
    add_value<<<(kN + 127) / 128, 128>>>(d, 1, kN);
    EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureImplicit);
    expect_invalidated(st.s);
  }
  for (int v : to_host(d, kN)) ASSERT_EQ(v, 0) << "nothing refused was run";
  CHECK(cudaFree(d));
}

TEST(Graph, DestroyingACapturingStreamEndsItsCapture) {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  (void)cudaStreamDestroy(s);
  (void)cudaGetLastError();
  // Nothing captures any more: the legacy stream and allocation work.
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(nullptr, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 64));
  CHECK(cudaMemset(p, 0, 64));
  CHECK(cudaFree(p));
}

TEST(Graph, EndingACaptureThatWasNeverBegunFails) {
  Stream st;
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(st.s, &graph), cudaErrorIllegalState);
  (void)cudaGetLastError();
}

}  // namespace
