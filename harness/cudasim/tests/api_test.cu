// The runtime API beyond the course's own calls: what a student may reach for (stream-ordered
// allocation, pitched memory, mapped host memory, pointer attributes, occupancy, limits, stream
// priorities, host functions, launches through cudaLaunchKernel). The same checks hold on a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

__global__ void add_one(int* p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

__global__ void saxpy(float a, const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Adds the row index to every element of a pitched 2-D array.
__global__ void add_row(float* base, size_t pitch, int width, int height) {
  const int x = threadIdx.x, y = blockIdx.x;
  if (x < width && y < height) reinterpret_cast<float*>(reinterpret_cast<char*>(base) + y * pitch)[x] += static_cast<float>(y);
}

TEST(Api, StreamOrderedAllocation) {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  int* p = nullptr;
  CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p), 100 * sizeof(int), s));
  CHECK(cudaMemsetAsync(p, 0, 100 * sizeof(int), s));
  add_one<<<1, 128, 0, s>>>(p, 100);
  CHECK(cudaGetLastError());
  std::vector<int> h(100);
  CHECK(cudaMemcpyAsync(h.data(), p, 100 * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int v : h) ASSERT_EQ(v, 1);
  CHECK(cudaFreeAsync(p, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamDestroy(s));
}

TEST(Api, PitchedMemoryCopiesAndMemsets) {
  const int width = 37, height = 5;  // 148-byte rows: the pitch pads them
  float* d = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(reinterpret_cast<void**>(&d), &pitch, width * sizeof(float), height));
  EXPECT_GE(pitch, width * sizeof(float));
  EXPECT_EQ(pitch % 32, 0u) << "rows start aligned";
  CHECK(cudaMemset2D(d, pitch, 0, width * sizeof(float), height));
  std::vector<float> h(width * height);
  std::iota(h.begin(), h.end(), 0.f);
  CHECK(cudaMemcpy2D(d, pitch, h.data(), width * sizeof(float), width * sizeof(float), height, cudaMemcpyHostToDevice));
  add_row<<<height, 64>>>(d, pitch, width, height);
  CHECK(cudaGetLastError());
  std::vector<float> back(width * height, -1.f);
  CHECK(cudaMemcpy2D(back.data(), width * sizeof(float), d, pitch, width * sizeof(float), height, cudaMemcpyDeviceToHost));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) ASSERT_EQ(back[y * width + x], h[y * width + x] + y) << x << "," << y;
  EXPECT_EQ(cudaMemcpy2D(d, 8, h.data(), 8, 16, 1, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "a width larger than the pitch";
  (void)cudaGetLastError();
  CHECK(cudaFree(d));
}

TEST(Api, MappedAndRegisteredHostMemory) {
  int* host = nullptr;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), 64 * sizeof(int), cudaHostAllocMapped));
  for (int i = 0; i < 64; ++i) host[i] = i;
  int* dev = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0));
  add_one<<<1, 64>>>(dev, 64);
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < 64; ++i) ASSERT_EQ(host[i], i + 1);
  unsigned flags = 0;
  CHECK(cudaHostGetFlags(&flags, host));
  CHECK(cudaFreeHost(host));

  std::vector<int> v(32, 5);
  CHECK(cudaHostRegister(v.data(), v.size() * sizeof(int), cudaHostRegisterMapped));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), v.data(), 0));
  add_one<<<1, 32>>>(dev, 32);
  CHECK(cudaDeviceSynchronize());
  for (int x : v) ASSERT_EQ(x, 6);
  CHECK(cudaHostUnregister(v.data()));
  EXPECT_NE(cudaHostUnregister(v.data()), cudaSuccess) << "unregistered twice";
  (void)cudaGetLastError();
}

TEST(Api, PointerAttributesTellMemoryKinds) {
  void *dev, *managed, *pinned;
  CHECK(cudaMalloc(&dev, 64));
  CHECK(cudaMallocManaged(&managed, 64));
  CHECK(cudaMallocHost(&pinned, 64));
  int on_stack = 0;
  cudaPointerAttributes a;
  CHECK(cudaPointerGetAttributes(&a, dev));
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.devicePointer, dev);
  CHECK(cudaPointerGetAttributes(&a, static_cast<char*>(dev) + 10));
  EXPECT_EQ(a.type, cudaMemoryTypeDevice) << "an address inside the allocation";
  CHECK(cudaPointerGetAttributes(&a, managed));
  EXPECT_EQ(a.type, cudaMemoryTypeManaged);
  CHECK(cudaPointerGetAttributes(&a, pinned));
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  CHECK(cudaPointerGetAttributes(&a, &on_stack));
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  static_cast<int*>(managed)[3] = 7;  // managed memory is usable by host code
  EXPECT_EQ(static_cast<int*>(managed)[3], 7);
  CHECK(cudaFree(dev));
  CHECK(cudaFree(managed));
  CHECK(cudaFreeHost(pinned));
}

TEST(Api, FunctionAttributesAndOccupancy) {
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, saxpy));
  EXPECT_GE(attr.maxThreadsPerBlock, 256);
  int blocks = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, saxpy, 256, 0));
  EXPECT_GE(blocks, 1);
  int more = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&more, saxpy, 64, 0));
  EXPECT_GE(more, blocks) << "smaller blocks fit at least as often";
  int min_grid = 0, block = 0;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, saxpy));
  EXPECT_GE(block, 32);
  EXPECT_LE(block, 1024);
  EXPECT_GE(min_grid, 1);
  int sms = 0, per_sm = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, 0));
  EXPECT_GE(sms, 1);
  EXPECT_GE(per_sm, 1024);
}

TEST(Api, LimitsStreamPrioritiesEventsAndHostFunctions) {
  CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 16 << 20));
  size_t heap = 0;
  CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
  EXPECT_GE(heap, static_cast<size_t>(16 << 20));
  int least = 0, greatest = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT_LE(greatest, least) << "a lower number is a higher priority";
  cudaStream_t s;
  CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  int prio = 1;
  CHECK(cudaStreamGetPriority(s, &prio));
  EXPECT_EQ(prio, greatest);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecordWithFlags(start, s, 0));
  int called = 0;
  CHECK(cudaLaunchHostFunc(s, [](void* p) { *static_cast<int*>(p) = 1; }, &called));
  CHECK(cudaEventRecord(stop, s));
  CHECK(cudaStreamSynchronize(s));
  EXPECT_EQ(called, 1);
  float ms = -1.f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 0.f);
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaStreamDestroy(s));
}

TEST(Api, LaunchKernelWithAnArgumentArray) {
  const int n = 200;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * i;
    y[i] = 1.f;
  }
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  float a = 3.f;
  int count = n;
  void* args[] = {&a, &dx, &dy, &count};
  CHECK(cudaLaunchKernel(saxpy, dim3((n + 127) / 128), dim3(128), args, 0, nullptr));
  CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], 3.f * 0.5f * i + 1.f) << i;
  // One device: a peer copy is a copy.
  CHECK(cudaMemcpyPeer(dx, 0, dy, 0, n * sizeof(float)));
  CHECK(cudaMemcpy(x.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(x, y);
  int can = -1;
  CHECK(cudaDeviceCanAccessPeer(&can, 0, 0));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
}
