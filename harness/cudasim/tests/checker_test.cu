// What the CPU backend reports about buggy kernels: one kernel per kind of mistake a GPU (or
// compute-sanitizer) exposes, each with its correct twin. The mistake must stop the program with
// a message naming the kernel, block, thread(s), the source line(s) and the element; the twin
// must run to the right answer with every check on (no false alarms).
//
// The checked build (cudasim_checker_test_check, ctest cudasim_checker_test.check) runs all of
// them. The normal build runs what needs no checking: crashes inside kernels (a null write, a
// division by zero, reading past a buffer's last page, dynamic shared memory the launch did not
// give, a stack overflow) and the order-dependent bugs, which show as wrong answers in the
// warp-by-warp reverse order. On a GPU these kernels are undefined or hang: the CUDA build skips.
//
// The tests check the source lines of some kernels: keep the kernels where they are.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

// ---- shared-memory hazards ---------------------------------------------------------------------

// Softmax's block max, then its sum, through one scratch array: the barrier between the end of the
// first reduction (every thread reads red[0]) and the start of the second (threads overwrite red)
// is the one that is forgotten.
template <bool kBarrier>
__global__ void softmax_scratch(const float* x, float* out) {
  __shared__ float red[64];
  const int t = threadIdx.x;
  const float v = x[t];
  red[t] = v;
  __syncthreads();
  for (int s = 32; s > 0; s >>= 1) {
    if (t < s) red[t] = fmaxf(red[t], red[t + s]);
    __syncthreads();
  }
  const float m = red[0];  // every thread reads the maximum
  if (kBarrier) __syncthreads();
  red[t] = __expf(v - m);  // the second reduction starts
  __syncthreads();
  for (int s = 32; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    __syncthreads();
  }
  out[t] = __expf(v - m) / red[0];
}

// Two warps combine their partial results; __syncwarp() orders only the lanes of one warp.
template <bool kBlockBarrier>
__global__ void warp_partials(const float* x, float* out) {
  __shared__ float partial[2];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float v = x[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0) partial[warp] = v;
  if (kBlockBarrier) {
    __syncthreads();
  } else {
    __syncwarp();
  }
  if (threadIdx.x == 0) out[0] = partial[0] + partial[1];
}

// A histogram in shared memory: `hist[b] += 1` is a read and a write that other threads interleave.
template <bool kAtomic>
__global__ void histogram(const int* bins, int* out) {
  __shared__ int hist[8];
  if (threadIdx.x < 8) hist[threadIdx.x] = 0;
  __syncthreads();
  const int b = bins[threadIdx.x];
  if (kAtomic) {
    atomicAdd(&hist[b], 1);
  } else {
    hist[b] += 1;
  }
  __syncthreads();
  if (threadIdx.x < 8) out[threadIdx.x] = hist[threadIdx.x];
}

// Thread 0 computes a row's maximum for the others. Without the barrier, whether they see it
// depends on which thread runs first: right in forward order, wrong warp by warp from the back.
template <bool kBarrier>
__global__ void subtract_row_max(const float* x, float* y, int n) {
  __shared__ float row_max;
  const float* row = x + blockIdx.x * n;
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int j = 0; j < n; ++j) m = fmaxf(m, row[j]);
    row_max = m;
  }
  if (kBarrier) __syncthreads();
  y[blockIdx.x * n + threadIdx.x] = row[threadIdx.x] - row_max;
}

// Lane 0 of each warp loads a value for its warp; the others must wait for it with __syncwarp().
template <bool kSyncwarp>
__global__ void warp_broadcast(const float* x, float* y) {
  __shared__ float value[2];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) value[warp] = 2.f * x[warp];
  if (kSyncwarp) __syncwarp();
  y[threadIdx.x] = value[warp];
}

// ---- global-memory races -----------------------------------------------------------------------

// Every block adds its sum into one total: with += two blocks read the same old value.
template <bool kAtomic>
__global__ void block_sums(const float* x, float* total) {
  __shared__ float warp_sum[2];
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    if (kAtomic) {
      atomicAdd(total, warp_sum[0] + warp_sum[1]);
    } else {
      *total += warp_sum[0] + warp_sum[1];
    }
  }
}

// Lane 1 publishes a value with a fence and a flag; lane 0 of the same warp spins until it sees
// the flag. Legal with independent thread scheduling (Volta and later), and not a race.
__global__ void lane_handoff(int* flag, int* data) {
  if (threadIdx.x == 1) {
    data[0] = 42;
    __threadfence();
    atomicExch(flag, 1);
  }
  if (threadIdx.x == 0) {
    while (atomicAdd(flag, 0) == 0) {
    }
    data[1] = data[0] + 1;
  }
}

// The last block to finish adds up every block's partial result (fence, then a counter).
__global__ void last_block_sums(const float* x, float* partial, unsigned* done, float* total) {
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = x[blockIdx.x];
    __threadfence();
    if (atomicInc(done, gridDim.x) == gridDim.x - 1) {
      float s = 0.f;
      for (unsigned b = 0; b < gridDim.x; ++b) s += partial[b];
      *total = s;
    }
  }
}

// ---- bounds --------------------------------------------------------------------------------------

// Each thread reads its right neighbour's element: the last thread reads one past the tile.
template <bool kGuard>
__global__ void tile_neighbour(const float* x, float* y) {
  __shared__ float tile[32];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  const bool has_right = !kGuard || threadIdx.x + 1 < 32;
  y[threadIdx.x] = has_right ? tile[threadIdx.x + 1] : 0.f;
}

// Dynamic shared memory sized by the launch (n floats).
__global__ void reverse_dynamic(const float* x, float* y) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

// y[i] for i <= n: the bounds test is off by one.
template <bool kBug>
__global__ void scale(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (kBug ? i <= n : i < n) y[i] = 2.f * x[i];
}

// Written as floats into a buffer the host allocated for halves.
__global__ void fill_floats(float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 1.f;
}

__global__ void copy(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }

// A float4 load from an address that is not a multiple of 16 bytes.
template <int kOffset>
__global__ void load_float4(const float* x, float* y) {
  const float4 v = *reinterpret_cast<const float4*>(x + kOffset + 4 * threadIdx.x);
  y[threadIdx.x] = v.x + v.y + v.z + v.w;
}

// ---- crashes -------------------------------------------------------------------------------------

__global__ void store(int* p) { p[threadIdx.x] = 1; }

__global__ void divide(const int* a, const int* b, int* q) { q[threadIdx.x] = a[threadIdx.x] / b[threadIdx.x]; }

__device__ int depth(int n, volatile int* sink) {
  volatile int frame[64];  // used after the call too: every level keeps its frame
  frame[n & 63] = n;
  const int below = n == 0 ? 0 : depth(n - 1, sink);
  *sink = frame[n & 63];
  return below + 1;
}
__global__ void recurse(int n, int* out) {
  __shared__ int sink;
  out[threadIdx.x] = depth(n, &sink);
}

// Lane 0 waits for a flag that no thread sets.
__global__ void wait_forever(int* flag) {
  if (threadIdx.x == 0) {
    while (atomicAdd(flag, 0) == 0) {
    }
  }
}

// ---- the C++ library called from a kernel ---------------------------------------------------------

// On the CPU backend a kernel can call the C++ library: build a message, or throw from a stub's
// "not implemented" path. The library's accesses to its own heap memory are not the kernel's (on a
// GPU this does not compile: the CUDA build leaves it out).
constexpr int kLabelledCopyReadLine = __LINE__ + 9;
__global__ void labelled_copy(const float* x, float* y) {
#ifdef __CUDASIM__
  const std::string label = "labelled_copy, block " + std::to_string(blockIdx.x) + ", thread " +
                            std::to_string(threadIdx.x) + ": long enough to live on the heap";
  const float n = static_cast<float>(label.size());
#else
  const float n = 0.f;
#endif
  y[threadIdx.x] = x[threadIdx.x] + n;
}

__global__ void stubbed_copy(const float* x, float* y) {
#ifdef __CUDASIM__
  if (threadIdx.x == 3) {
    throw std::runtime_error("stubbed_copy: not implemented yet (block " + std::to_string(blockIdx.x) +
                             "): write the body of this kernel");
  }
#endif
  y[threadIdx.x] = x[threadIdx.x];
}

// ---- the tests -----------------------------------------------------------------------------------

// (Included here, below the kernels, so that their line numbers, which the tests name, stay put.)
#include "diagnostic_exit.h"

namespace {

using cudasim_tests::checked;
using cudasim_tests::kDiagnostic;

// `n` floats on the device, copied from `h`. (Not device_floats.h's: the tests name this file as
// the place their buffers were allocated.)
float* upload(const std::vector<float>& h) {
  float* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}
std::vector<float> download(const float* d, size_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}
float* zeros(size_t n) {
  float* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, n * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemset(d, 0, n * sizeof(float)), cudaSuccess);
  return d;
}
std::vector<float> ramp(size_t n, float scale = 0.25f) {
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = scale * static_cast<float>((i * 7) % 13) - 1.f;
  return h;
}

void set_order(const char* order) {
#ifdef __CUDASIM__
  setenv("CUDASIM_ORDER", order, 1);
  cudasim::reload_options();
#else
  (void)order;
#endif
}

}  // namespace

class Checker : public cudasim_tests::CpuBackendDiagnostics {
 protected:
  void SetUp() override {
    CpuBackendDiagnostics::SetUp();
    if (IsSkipped()) return;
    order_ = std::getenv("CUDASIM_ORDER") ? std::getenv("CUDASIM_ORDER") : "";
  }
  void TearDown() override {
#ifdef __CUDASIM__
    if (order_.empty()) {
      unsetenv("CUDASIM_ORDER");
    } else {
      setenv("CUDASIM_ORDER", order_.c_str(), 1);
    }
    cudasim::reload_options();
#endif
  }
  std::string order_;
};

// Tests of what only the checked build can see.
class Checked : public Checker {
 protected:
  void SetUp() override {
    Checker::SetUp();
    if (!checked()) GTEST_SKIP() << "needs the checked build (cudasim_checker_test_check, CUDASIM_CHECK=all)";
  }
};

// -- shared-memory hazards

TEST_F(Checked, ReductionScratchReusedWithoutBarrier) {
  float* x = upload(ramp(64));
  float* out = zeros(64);
  auto run = [&] { softmax_scratch<false><<<1, 64>>>(x, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'softmax_scratch<false>'.*block \\(0,0,0\\).*shared-memory race \\((write after read|read after "
              "write)\\) on element 0 of __shared__ array 'red' \\(declared at .*checker_test.cu:32\\).*"
              "checker_test.cu:4[13] .*checker_test.cu:4[13] .*__syncthreads\\(\\)");
}

TEST_F(Checker, ReductionScratchWithBarrierIsCorrect) {
  const std::vector<float> h = ramp(64);
  float* x = upload(h);
  float* out = zeros(64);
  softmax_scratch<true><<<1, 64>>>(x, out);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(out, 64);
  double m = -INFINITY, sum = 0;
  for (float v : h) m = std::fmax(m, v);
  for (float v : h) sum += std::exp(v - m);
  // __expf's error (a few ulp) and a 64-term fp32 sum: 1e-5 relative.
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(got[i], std::exp(h[i] - m) / sum, 1e-5 * std::exp(h[i] - m) / sum) << i;
}

TEST_F(Checked, CrossWarpResultsProtectedBySyncwarpOnly) {
  float* x = upload(ramp(64));
  float* out = zeros(1);
  auto run = [&] { warp_partials<false><<<1, 64>>>(x, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'warp_partials<false>'.*shared-memory race .* on element 1 of __shared__ array 'partial'.*"
              "thread \\((0|32),0,0\\) .*checker_test.cu:(59|65).*thread \\((0|32),0,0\\) .*checker_test.cu:(59|65)");
}

TEST_F(Checker, CrossWarpResultsAfterSyncthreadsAreCorrect) {
  const std::vector<float> h = ramp(64);
  float* x = upload(h);
  float* out = zeros(1);
  warp_partials<true><<<1, 64>>>(x, out);
  CHECK(cudaGetLastError());
  double sum = 0;
  for (float v : h) sum += v;
  EXPECT_NEAR(download(out, 1)[0], sum, 1e-4);  // 64 fp32 additions in a tree
}

TEST_F(Checked, SharedHistogramWithPlainIncrement) {
  std::vector<int> bins(128);
  for (int i = 0; i < 128; ++i) bins[i] = (i * 5) % 8;
  int *db, *out;
  CHECK(cudaMalloc(&db, 128 * sizeof(int)));
  CHECK(cudaMalloc(&out, 8 * sizeof(int)));
  CHECK(cudaMemcpy(db, bins.data(), 128 * sizeof(int), cudaMemcpyHostToDevice));
  auto run = [&] { histogram<false><<<1, 128>>>(db, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "shared-memory race .* on element [0-7] of __shared__ array 'hist'.*checker_test.cu:78.*"
              "checker_test.cu:78.*atomicAdd");
}

TEST_F(Checker, SharedHistogramWithAtomicAddIsCorrect) {
  std::vector<int> bins(128);
  for (int i = 0; i < 128; ++i) bins[i] = (i * 5) % 8;
  int *db, *out;
  CHECK(cudaMalloc(&db, 128 * sizeof(int)));
  CHECK(cudaMalloc(&out, 8 * sizeof(int)));
  CHECK(cudaMemcpy(db, bins.data(), 128 * sizeof(int), cudaMemcpyHostToDevice));
  histogram<true><<<1, 128>>>(db, out);
  CHECK(cudaGetLastError());
  std::vector<int> h(8);
  CHECK(cudaMemcpy(h.data(), out, 8 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < 8; ++b) EXPECT_EQ(h[b], 16) << b;
}

// The order-dependent bugs: hidden in forward order, wrong in the order of the checked tests
// (warp by warp, last first), and named by the checker.
TEST_F(Checker, RowMaxWithoutBarrierDependsOnTheOrder) {
  const int rows = 2, n = 64;
  const std::vector<float> h = ramp(rows * n);
  float* x = upload(h);
  float* y = zeros(rows * n);
  if (checked()) {
    auto run = [&] { subtract_row_max<false><<<rows, n>>>(x, y, n); cudaDeviceSynchronize(); };
    EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
                "kernel 'subtract_row_max<false>'.*shared-memory race .* on __shared__ variable "
                "'row_max'.*checker_test.cu:(93|96).*checker_test.cu:(93|96)");
    return;
  }
  auto wrong = [&] {
    subtract_row_max<false><<<rows, n>>>(x, y, n);
    const std::vector<float> got = download(y, rows * n);
    int bad = 0;
    for (int r = 0; r < rows; ++r) {
      float m = -INFINITY;
      for (int j = 0; j < n; ++j) m = std::fmax(m, h[r * n + j]);
      for (int j = 0; j < n; ++j) bad += !(got[r * n + j] == h[r * n + j] - m);
    }
    return bad;
  };
  set_order("forward");
  EXPECT_EQ(wrong(), 0) << "forward order: thread 0 runs first and hides the missing barrier";
  set_order("warps-reverse");
  EXPECT_GT(wrong(), 0) << "warps-reverse: the other threads read row_max before thread 0 wrote it";
}

TEST_F(Checker, WarpBroadcastWithoutSyncwarpDependsOnTheOrder) {
  float* x = upload({1.5f, -2.f});
  float* y = zeros(64);
  if (checked()) {
    auto run = [&] { warp_broadcast<false><<<1, 64>>>(x, y); cudaDeviceSynchronize(); };
    EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
                "shared-memory race .* on element [01] of __shared__ array 'value'.*checker_test.cu:(104|106).*"
                "checker_test.cu:(104|106).*__syncwarp\\(\\) \\(both threads are in one warp\\)");
    return;
  }
  set_order("forward");
  warp_broadcast<false><<<1, 64>>>(x, y);
  std::vector<float> got = download(y, 64);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], t < 32 ? 3.f : -4.f) << "forward order hides it, thread " << t;
  set_order("warps-reverse");
  warp_broadcast<false><<<1, 64>>>(x, y);
  got = download(y, 64);
  int bad = 0;
  for (int t = 0; t < 64; ++t) bad += got[t] != (t < 32 ? 3.f : -4.f);
  EXPECT_GT(bad, 0) << "warps-reverse: lanes 31..1 read before lane 0 wrote";
}

TEST_F(Checker, WarpBroadcastWithSyncwarpIsCorrect) {
  float* x = upload({1.5f, -2.f});
  float* y = zeros(64);
  for (const char* order : {"forward", "reverse", "warps", "warps-reverse", "shuffle:5"}) {
    set_order(order);
    warp_broadcast<true><<<1, 64>>>(x, y);
    const std::vector<float> got = download(y, 64);
    for (int t = 0; t < 64; ++t) ASSERT_EQ(got[t], t < 32 ? 3.f : -4.f) << order << ", thread " << t;
  }
}

// -- global memory

TEST_F(Checked, BlocksAddIntoOneValueWithPlainAdd) {
  float* x = upload(ramp(4 * 64));
  float* total = zeros(1);
  auto run = [&] { block_sums<false><<<4, 64>>>(x, total); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'block_sums<false>'.*global-memory race \\(.* between blocks\\) on element 0 of the 4-byte "
              "buffer allocated at .*checker_test.cu:[0-9]+.*thread \\(0,0,0\\) of block \\([0-3],0,0\\) .*"
              "checker_test.cu:123.*thread \\(0,0,0\\) of block \\([0-3],0,0\\) .*checker_test.cu:123");
}

TEST_F(Checker, BlocksAddWithAtomicAddAreCorrect) {
  const std::vector<float> h = ramp(4 * 64);
  float* x = upload(h);
  float* total = zeros(1);
  block_sums<true><<<4, 64>>>(x, total);
  CHECK(cudaGetLastError());
  double sum = 0;
  for (float v : h) sum += v;
  EXPECT_NEAR(download(total, 1)[0], sum, 1e-3);  // 256 fp32 additions in any order
}

TEST_F(Checker, IntraWarpSpinWaitFinishes) {
  int *flag, *data;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMalloc(&data, 2 * sizeof(int)));
  CHECK(cudaMemset(flag, 0, sizeof(int)));
  for (const char* order : {"forward", "reverse", "warps", "warps-reverse"}) {
    set_order(order);
    CHECK(cudaMemset(flag, 0, sizeof(int)));
    lane_handoff<<<1, 32>>>(flag, data);
    CHECK(cudaGetLastError());
    int h[2];
    CHECK(cudaMemcpy(h, data, sizeof h, cudaMemcpyDeviceToHost));
    EXPECT_EQ(h[0], 42) << order;
    EXPECT_EQ(h[1], 43) << order;
  }
}

TEST_F(Checker, LastBlockReductionWithFenceIsNotARace) {
  const int blocks = 16;
  const std::vector<float> h = ramp(blocks);
  float* x = upload(h);
  float* partial = zeros(blocks);
  float* total = zeros(1);
  unsigned* done;
  CHECK(cudaMalloc(&done, sizeof(unsigned)));
  CHECK(cudaMemset(done, 0, sizeof(unsigned)));
  last_block_sums<<<blocks, 32>>>(x, partial, done, total);
  CHECK(cudaGetLastError());
  double sum = 0;
  for (float v : h) sum += v;
  EXPECT_NEAR(download(total, 1)[0], sum, 1e-5);
}

// -- bounds

TEST_F(Checked, OneElementPastASharedArray) {
  float* x = upload(ramp(32));
  float* y = zeros(32);
  auto run = [&] { tile_neighbour<false><<<1, 32>>>(x, y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'tile_neighbour<false>'.*thread \\(31,0,0\\): out-of-bounds read of 4 bytes in shared memory "
              "at .*checker_test.cu:165.*element 32 of __shared__ array 'tile' \\(declared at .*checker_test.cu:161; "
              "it has 32 elements\\)");
}

TEST_F(Checker, GuardedNeighbourReadIsCorrect) {
  const std::vector<float> h = ramp(32);
  float* x = upload(h);
  float* y = zeros(32);
  tile_neighbour<true><<<1, 32>>>(x, y);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(y, 32);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(got[t], t < 31 ? h[t + 1] : 0.f) << t;
}

TEST_F(Checker, ExternSharedWithoutDynamicSize) {
  float* x = upload(ramp(64));
  float* y = zeros(64);
  auto run = [&] { reverse_dynamic<<<1, 64>>>(x, y); cudaDeviceSynchronize(); };
  // Checked: the checker's bounds message; otherwise the fault past the (empty) dynamic region.
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'reverse_dynamic'.*thread \\([0-9]+,0,0\\).*checker_test.cu:171.*dynamic shared memory.*("
              "launch gave no dynamic shared memory|gave 0 bytes)");
}

TEST_F(Checker, ExternSharedWithTooLittleDynamicSize) {
  float* x = upload(ramp(64));
  float* y = zeros(64);
  auto run = [&] { reverse_dynamic<<<1, 64, 32 * sizeof(float)>>>(x, y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'reverse_dynamic'.*thread \\([0-9]+,0,0\\).*checker_test.cu:171.*dynamic shared memory.*"
              "(gave 128 bytes|128 bytes)");
}

TEST_F(Checker, ExternSharedWithItsSizeIsCorrect) {
  const std::vector<float> h = ramp(64);
  float* x = upload(h);
  float* y = zeros(64);
  reverse_dynamic<<<1, 64, 64 * sizeof(float)>>>(x, y);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(y, 64);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], h[63 - t]) << t;
}

TEST_F(Checked, WriteOneElementPastTheEnd) {
  const int n = 100;  // 400 bytes: the write lands inside the 512 bytes a GPU would round it to
  float* x = upload(ramp(n + 1));
  float* y = zeros(n);
  auto run = [&] { scale<true><<<1, 128>>>(x, y, n); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'scale<true>'.*thread \\(100,0,0\\): out-of-bounds write of 4 bytes at .*checker_test.cu:180.*"
              "element 100 of the 400-byte buffer allocated at .*checker_test.cu:[0-9]+.*100 elements of 4 bytes: 1 "
              "element past its end");
}

TEST_F(Checker, ReadOneElementPastTheEndOfA256ByteMultiple) {
  const int n = 64;  // 256 bytes: the next byte is on the guard page, also without checking
  float* x = upload(ramp(n));
  float* y = zeros(n + 1);
  auto run = [&] { scale<true><<<1, 128>>>(x, y, n); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'scale<true>'.*thread \\(64,0,0\\).*checker_test.cu:180.*element 64 of the 256-byte buffer "
              "allocated at .*checker_test.cu:[0-9]+.*1 element past its end");
}

TEST_F(Checker, BoundsTestedScaleIsCorrect) {
  const int n = 100;
  const std::vector<float> h = ramp(n);
  float* x = upload(h);
  float* y = zeros(n);
  scale<false><<<1, 128>>>(x, y, n);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(y, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], 2.f * h[i]) << i;
}

TEST_F(Checker, HalvesAllocatedFloatsWritten) {
  const int n = 128;
  float* y = nullptr;
  CHECK(cudaMalloc(&y, n * sizeof(__half)));  // the bug: sizeof(__half) for a float buffer
  auto run = [&] { fill_floats<<<1, n>>>(y, n); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'fill_floats'.*thread \\([0-9]+,0,0\\).*checker_test.cu:186.*element [0-9]+ of the 256-byte buffer "
              "allocated at .*checker_test.cu:[0-9]+");
}

TEST_F(Checked, ReadOfMemoryNothingWrote) {
  float* x = nullptr;
  CHECK(cudaMalloc(&x, 64 * sizeof(float)));
  float* y = zeros(64);
  auto run = [&] { copy<<<1, 64>>>(x, y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'copy'.*uninitialised read of 4 bytes at .*checker_test.cu:189.*element [0-9]+ of the 256-byte "
              "buffer allocated at .*checker_test.cu:[0-9]+.*No cudaMemcpy, cudaMemset or kernel has written");
}

TEST_F(Checker, MemoryWrittenByAKernelOrACopyIsInitialised) {
  const std::vector<float> h = ramp(64);
  float* x = upload(h);
  float *mid = nullptr, *y = nullptr;
  CHECK(cudaMalloc(&mid, 64 * sizeof(float)));
  CHECK(cudaMalloc(&y, 64 * sizeof(float)));
  copy<<<1, 64>>>(x, mid);  // a kernel writes mid ...
  copy<<<1, 64>>>(mid, y);  // ... so the next one may read it
  CHECK(cudaGetLastError());
  EXPECT_EQ(download(y, 64), h);
}

TEST_F(Checker, ReadOfAFreedBuffer) {
  float* x = upload(ramp(64));
  float* y = zeros(64);
  CHECK(cudaFree(x));
  auto run = [&] { copy<<<1, 64>>>(x, y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'copy'.*checker_test.cu:189.*element [0-9]+ of the 256-byte buffer allocated at "
              ".*checker_test.cu:[0-9]+.*which was freed at .*checker_test.cu:[0-9]+ \\(use after free\\)");
}

TEST_F(Checked, HostPointerPassedToAKernel) {
  std::vector<float> host(64, 1.f);
  float* y = zeros(64);
  auto run = [&] { copy<<<1, 64>>>(host.data(), y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'copy'.*invalid memory access: read of 4 bytes at .*checker_test.cu:189.* to address 0x[0-9a-f]+, "
              "which is not device memory: a host pointer");
}

TEST_F(Checker, KernelThatBuildsAStringWithTheLibraryIsCorrect) {
  const std::vector<float> h = ramp(64);
  float* x = upload(h);
  float* y = zeros(64);
  labelled_copy<<<1, 64>>>(x, y);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(y, 64);
  for (int t = 0; t < 64; ++t) {
    const std::string label = "labelled_copy, block 0, thread " + std::to_string(t) + ": long enough to live on the heap";
    EXPECT_EQ(got[t], h[t] + static_cast<float>(label.size())) << t;
  }
}

TEST_F(Checked, HostPointerReadAfterLibraryCodeIsStillReported) {
  std::vector<float> host(64, 1.f);
  float* y = zeros(64);
  auto run = [&] { labelled_copy<<<1, 64>>>(host.data(), y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'labelled_copy'.*invalid memory access: read of 4 bytes at .*checker_test.cu:" +
                  std::to_string(kLabelledCopyReadLine) + ".* to address 0x[0-9a-f]+, which is not device memory");
}

TEST_F(Checker, StubThatThrowsSaysSoAndNothingElse) {
  float* x = upload(ramp(32));
  float* y = zeros(32);
  auto run = [&] { stubbed_copy<<<1, 32>>>(x, y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'stubbed_copy'.*thread \\(3,0,0\\): uncaught exception: stubbed_copy: not implemented yet "
              "\\(block 0\\): write the body of this kernel");
}

TEST_F(Checker, MappedHostMemoryIsUsableByKernels) {
  float* host = nullptr;
  CHECK(cudaHostAlloc(&host, 64 * sizeof(float), cudaHostAllocMapped));
  for (int i = 0; i < 64; ++i) host[i] = static_cast<float>(i);
  float* dev = nullptr;
  CHECK(cudaHostGetDevicePointer(&dev, host, 0));
  float* y = zeros(64);
  copy<<<1, 64>>>(dev, y);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(y, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], static_cast<float>(i));
  CHECK(cudaFreeHost(host));
}

TEST_F(Checked, HostCodeDereferencesADevicePointer) {
  const int line = __LINE__ + 3;
  auto run = [&] {
    float* d = zeros(16);
    d[3] = 1.f;
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "host code at .*checker_test.cu:" + std::to_string(line) +
                  ".*dereferenced a device pointer: byte 12 of the 64-byte buffer allocated at .*checker_test.cu:[0-9]+.*"
                  "copy it with cudaMemcpy");
}

TEST_F(Checked, HostDereferenceIsFoundUnderAFileSizeLimit) {
  // Graders limit the size of files a test may write (RLIMIT_FSIZE). The checked runtime's two
  // views of device memory must not count as a file, or sizing them kills the program (SIGXFSZ).
  // The death test's process inherits the limit and sets up device memory afresh.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  auto run = [&] {
    float* d = zeros(1 << 21);  // 8 MiB, written by cudaMemset: more than the limit
    d[5] = 1.f;
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "dereferenced a device pointer: byte 20 of the 8388608-byte");
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
}

TEST_F(Checked, MisalignedFloat4Load) {
  float* x = upload(ramp(256));
  float* y = zeros(32);
  auto run = [&] { load_float4<1><<<1, 32>>>(x, y); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'load_float4<1>'.*misaligned 16-byte read at .*checker_test.cu:194.*: address 0x[0-9a-f]+ is not "
              "a multiple of 16 \\(byte [0-9]+ of the 1024-byte buffer");
}

TEST_F(Checker, AlignedFloat4LoadIsCorrect) {
  const std::vector<float> h = ramp(256);
  float* x = upload(h);
  float* y = zeros(32);
  load_float4<0><<<1, 32>>>(x, y);
  CHECK(cudaGetLastError());
  const std::vector<float> got = download(y, 32);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(got[t], h[4 * t] + h[4 * t + 1] + h[4 * t + 2] + h[4 * t + 3]) << t;
}

// -- crashes, in every build

TEST_F(Checker, NullPointerWrite) {
  auto run = [&] { store<<<1, 32>>>(nullptr); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'store'.*block \\(0,0,0\\), thread \\([0-9]+,0,0\\).*checker_test.cu:200.*a null pointer");
}

TEST_F(Checker, IntegerDivisionByZero) {
  int *a, *b, *q;
  CHECK(cudaMalloc(&a, 32 * sizeof(int)));
  CHECK(cudaMalloc(&b, 32 * sizeof(int)));
  CHECK(cudaMalloc(&q, 32 * sizeof(int)));
  CHECK(cudaMemset(a, 1, 32 * sizeof(int)));
  CHECK(cudaMemset(b, 0, 32 * sizeof(int)));
  auto run = [&] { divide<<<1, 32>>>(a, b, q); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'divide'.*thread \\([0-9]+,0,0\\): integer division by zero \\(SIGFPE\\) at "
              ".*checker_test.cu:202");
}

TEST_F(Checker, StackOverflowSaysSo) {
  int* out = nullptr;
  CHECK(cudaMalloc(&out, sizeof(int)));
  auto run = [&] { recurse<<<1, 1>>>(1 << 20, out); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'recurse'.*thread \\(0,0,0\\).*stack overflow of the simulated thread \\(0,0,0\\).*"
              "CUDASIM_STACK_KB");
}

// -- API misuse

__device__ float coeffs[4];
__device__ float after_coeffs[4];
__global__ void read_after(float* out) { out[threadIdx.x] = after_coeffs[threadIdx.x]; }

TEST_F(Checker, MemcpyToSymbolPastItsEndIsRefused) {
  const float init[4] = {9.f, 9.f, 9.f, 9.f};
  CHECK(cudaMemcpyToSymbol(after_coeffs, init, sizeof init));
  const float eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(cudaMemcpyToSymbol(coeffs, eight, sizeof eight), cudaErrorInvalidValue)
      << "8 floats into a 4-float symbol must fail, not overwrite the next variable";
  (void)cudaGetLastError();
  float* out = zeros(4);
  read_after<<<1, 4>>>(out);
  EXPECT_EQ(download(out, 4), std::vector<float>(4, 9.f)) << "the next variable was overwritten";
  CHECK(cudaMemcpyToSymbol(coeffs, eight, 4 * sizeof(float)));  // what fits is fine
  CHECK(cudaMemcpyToSymbol(coeffs, eight, 2 * sizeof(float), 2 * sizeof(float)));
}

// -- spin-waits

TEST_F(Checker, SpinWaitWithoutProgressIsALivelock) {
  int* flag;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMemset(flag, 0, sizeof(int)));
  setenv("CUDASIM_SPIN_TIMEOUT", "1", 1);  // the death test's process reads it
  auto run = [&] { wait_forever<<<1, 32>>>(flag); cudaDeviceSynchronize(); };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'wait_forever'.*thread \\(0,0,0\\): spin-wait without progress for [0-9]+ s \\(repeated "
              "atomics on one address at .*checker_test.cu:219.*The condition it waits for is never set");
  unsetenv("CUDASIM_SPIN_TIMEOUT");
}

// Warp 0 scales an input the host uploaded in place while warp 1 copies it, with no barrier
// between. In forward order warp 0 runs first: warp 1's reads come after the writes. Every byte of
// the buffer was written by the host, and the block's first access checked its bounds, which is
// what lets the checker take reads of such a buffer on its fast path: the writes must still be
// seen there.
constexpr unsigned kLineScaleRead = __LINE__ + 4;
__global__ void scale_while_copied(float* x, float* y) {
  const int t = threadIdx.x;
  if (t < 32) x[t] *= 2.f;
  else y[t - 32] = x[t - 32];
}

TEST_F(Checked, UploadedInputWrittenWhileAnotherWarpReadsIt) {
  float* x = upload(ramp(64));
  float* y = zeros(32);
  auto run = [&] {
    set_order("forward");
    scale_while_copied<<<1, 64>>>(x, y);
    cudaDeviceSynchronize();
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'scale_while_copied'.*global-memory race \\(read after write\\) on element 0 of the 256-byte "
              "buffer allocated at .*thread \\(32,0,0\\) of block \\(0,0,0\\) reads it at .*checker_test.cu:" +
                  std::to_string(kLineScaleRead) + ".*thread \\(0,0,0\\) of block \\(0,0,0\\) wrote it at .*checker_test.cu:" +
                  std::to_string(kLineScaleRead - 1));
}

// -- the inline read check (checked builds with cudasim's GCC plugins)

// Lanes 0 and 1 read s[0], which leaves one more read of it by their warp needing nothing. After a
// __syncwarp() lane 0 reads it again, and lane 2 overwrites it with no second __syncwarp(): that
// read is not ordered before the write. The checker must see it, although the same lane's read of
// the same word was recorded before the __syncwarp().
constexpr unsigned kLineReread = __LINE__ + 7;
__global__ void reread_after_syncwarp(float* out) {
  __shared__ float s[1];
  if (threadIdx.x == 0) s[0] = 1.f;
  __syncthreads();
  float v = threadIdx.x < 2 ? s[0] : 0.f;
  __syncwarp();
  if (threadIdx.x == 0) v += s[0];
  if (threadIdx.x == 2) s[0] = 2.f;
  out[threadIdx.x] = v;
}

TEST_F(Checked, ReadRepeatedAfterSyncwarpRacesWithALaterWrite) {
  float* out = zeros(32);
  auto run = [&] {
    set_order("forward");
    reread_after_syncwarp<<<1, 32>>>(out);
    cudaDeviceSynchronize();
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(kDiagnostic),
              "kernel 'reread_after_syncwarp'.*shared-memory race \\(write after read\\) on __shared__ variable 's'.*"
              "thread \\(2,0,0\\) writes it at .*checker_test.cu:" +
                  std::to_string(kLineReread + 1) + ".*thread \\(0,0,0\\) read it at .*checker_test.cu:" +
                  std::to_string(kLineReread));
}

// Both warps read all of one shared row: 2048 reads of 32 words.
__global__ void everyone_reads_the_row(float* out) {
  __shared__ float row[32];
  if (threadIdx.x < 32) row[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  float v = 0.f;
  for (int k = 0; k < 32; ++k) v += row[k];
  out[threadIdx.x] = v;
}

TEST_F(Checked, MostReadsOfASharedWordSkipTheCallIntoTheChecker) {
#ifndef CUDASIM_TEST_INLINE_READS
  GTEST_SKIP() << "built without cudasim's GCC plugins: every read calls the checker";
#else
  float* out = zeros(64);
  for (const char* order : {"forward", "warps-reverse", "shuffle:7"}) {
    set_order(order);
    const unsigned long long before = cudasim::checker_read_calls();
    everyone_reads_the_row<<<1, 64>>>(out);
    CHECK(cudaDeviceSynchronize());
    const unsigned long long calls = cudasim::checker_read_calls() - before;
    // Whatever the order, the checker records a word's first two readers, and then a third when
    // those two are of one warp and a thread of the other warp reads: 2 or 3 calls a word. Without
    // the inline check all 2048 reads call.
    EXPECT_GE(calls, 2u * 32) << order;
    EXPECT_LE(calls, 3u * 32) << order;
    EXPECT_EQ(download(out, 64), std::vector<float>(64, 496.f)) << order;  // 0 + 1 + ... + 31, exact
  }
#endif
}
