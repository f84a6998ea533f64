// Counting mode (CUDASIM_PROFILE=1): the profiling exercises of the course, re-done from counts.
// Each kernel is a textbook case whose Nsight Compute figures can be worked out by hand from its
// indexing; the tests compare the counts with those figures.
//
// Tolerance: none. The counts are a deterministic function of the addresses the threads use (the
// allocations are 256-byte aligned, like cudaMalloc's), whatever the order the CPU backend runs
// the threads in or how many OS threads run the blocks: any difference from the hand-computed
// value is a bug in the counting, not noise.
//
// The tests name some kernels' source lines (kLine* below): keep the kernels where they are.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

// ---- the kernels -------------------------------------------------------------------------------

// y = x·wᵀ with w [n, k]: a warp's 32 threads are 32 consecutive columns, so at each step they read
// 32 elements of w that are k floats apart (down a column of wᵀ): one sector each.
constexpr unsigned kLineNaiveX = __LINE__ + 8;
constexpr unsigned kLineNaiveW = __LINE__ + 8;
__global__ void matmul_naive(const float* x, const float* w, float* y, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) {
    const float xv = x[static_cast<size_t>(row) * k + i];
    const float wv = w[static_cast<size_t>(col) * k + i];
    acc += xv * wv;
  }
  y[static_cast<size_t>(row) * n + col] = acc;
}

// The same product with w stored transposed, wt [k, n]: the warp reads 32 consecutive floats of a
// row of wt, 128 bytes in 4 sectors.
constexpr unsigned kLineCoalescedW = __LINE__ + 9;
constexpr unsigned kLineCoalescedY = __LINE__ + 11;
__global__ void matmul_coalesced(const float* x, const float* wt, float* y, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) {
    const float xv = x[static_cast<size_t>(row) * k + i];
    const float wv = wt[static_cast<size_t>(i) * n + col];
    acc += xv * wv;
  }
  y[static_cast<size_t>(row) * n + col] = acc;
}

// A 32×32 tile transposed through shared memory (block 32×32, one tile per block). Reading the
// tile down a column puts the 32 lanes of a warp on words 32 + kPad apart: without padding all in
// one bank (32-way conflict), with one float of padding in 32 different banks.
template <int kPad>
__global__ void transpose_tile(const float* in, float* out) {
  __shared__ float tile[32][32 + kPad];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const size_t base = static_cast<size_t>(blockIdx.x) * 1024;
  tile[ty][tx] = in[base + ty * 32 + tx];
  __syncthreads();
  out[base + ty * 32 + tx] = tile[tx][ty];
}
constexpr unsigned kLineTileRead = __LINE__ - 2;

// RMSNorm as the course writes it: one block of 256 threads per row, a pass over the row for the
// sum of squares, a shared-memory tree reduction, and a second pass over the row to scale it.
constexpr unsigned kLinePass1 = __LINE__ + 9;
constexpr unsigned kLinePass2 = __LINE__ + 20;
__global__ void rmsnorm_two_pass(const float* x, float* y, int d) {
  __shared__ float partial[256];
  __shared__ float scale;
  const float* xr = x + static_cast<size_t>(blockIdx.x) * d;
  float* yr = y + static_cast<size_t>(blockIdx.x) * d;
  float sum = 0.f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = xr[j];
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) scale = rsqrtf(partial[0] / d + 1e-5f);
  __syncthreads();
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = xr[j];
    yr[j] = v * scale;
  }
}

// The lm_head's shape: a matrix-vector product, one warp per output row, the lanes striding along
// the row (coalesced) and a shuffle reduction. 2 FLOPs per 4-byte weight: far below every GPU's
// ridge point.
__global__ void gemv_rows(const float* w, const float* x, float* y, int n, int k) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= n) return;
  float acc = 0.f;
  for (int i = lane; i < k; i += 32) acc += w[static_cast<size_t>(row) * k + i] * x[i];
  for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = acc;
}

// Every thread adds 1 to one of 4 counters: one atomic request per warp, its 32 lanes' updates
// landing in 4 ints of one sector.
__global__ void count_mod4(int* counters) { atomicAdd(&counters[threadIdx.x % 4], 1); }

// 8-byte shared-memory reads: a warp reads 32 consecutive float2 (256 bytes), served a half warp
// at a time (128 bytes each): 2 wavefronts, no conflict.
__global__ void read_float2(const float2* in, float2* out) {
  __shared__ float2 buf[64];
  buf[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = buf[threadIdx.x];
}

// float4 reads whose fields are then used apart: one 16-byte load per lane, as the GPU's vector
// load (LDG.128), so a warp's request covers 512 contiguous bytes, 16 sectors, all needed; in
// shared memory such a read is served a quarter warp at a time, 4 wavefronts, no conflict.
__global__ void read_float4_fields(const float* in, float* out) {
  __shared__ float buf[64 * 4];
  const int t = threadIdx.x;
  const float4 v = *reinterpret_cast<const float4*>(in + 4 * t);
  out[t] = v.x * v.y;
  out[64 + t] = v.z - v.w;
  buf[4 * t] = v.w;
  buf[4 * t + 1] = v.z;
  buf[4 * t + 2] = v.y;
  buf[4 * t + 3] = v.x;
  __syncthreads();
  const float4 w = *reinterpret_cast<const float4*>(buf + 4 * (63 - t));
  out[128 + t] = w.x * w.y;
  out[192 + t] = w.z - w.w;
}

// Lanes 0-15 of each warp make 10 loads of 64 bytes (2 sectors) before or after a loop of
// `steps` loads of 128 bytes (4 sectors) that every lane makes: with more steps than a thread's log
// holds, the lanes agree for whole logs and differ at the start or at the end, which the counting
// handles in different ways that must give the same counts.
template <bool kTailFirst>
__global__ void diverging_lanes(const float* x, float* y, int steps) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  float acc = 0.f;
  if (kTailFirst && lane < 16) {
    for (int i = 0; i < 10; ++i) acc += x[i * 16 + lane];
  }
  for (int i = 0; i < steps; ++i) acc += x[i * 32 + lane];
  if (!kTailFirst && lane < 16) {
    for (int i = 0; i < 10; ++i) acc += x[i * 16 + lane];
  }
  y[threadIdx.x] = acc;
}

// ---- helpers -----------------------------------------------------------------------------------

// Floating-point operations with a count worked out by hand, as Nsight Compute counts them: an
// addition, subtraction, multiplication or division one, a fused multiply-add two; comparisons,
// conversions, negation, min and the intrinsics cudasim emulates nothing. Each result is stored,
// so that the compiler keeps every operation.
__global__ void arithmetic(const float* x, float* out, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  out[6 * i + 0] = a * v + 1.0f;                                       // 2
  out[6 * i + 1] = fmaf(v, a, -v);                                     // 2
  out[6 * i + 2] = v / (a - 3.0f);                                     // 2
  out[6 * i + 3] = static_cast<float>(static_cast<double>(v) * 0.5);   // 1 (fp64 counts too)
  out[6 * i + 4] = fminf(v, a) > 0.f ? __expf(v) : -v;                 // 0
  float acc = 0.f;
  for (int j = 0; j < i % 4; ++j) acc += v;                            // 1 per iteration
  out[6 * i + 5] = acc;
}
constexpr double kArithmeticFlops(int n) {  // 7 per thread below n, and 0 + 1 + 2 + 3 per 4 threads
  double f = 0;
  for (int i = 0; i < n; ++i) f += 7 + i % 4;
  return f;
}

class Profile : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("CUDASIM_PROFILE", "1", 1);
    cudasim::reload_options();
    ASSERT_TRUE(cudasim::profiling()) << "this test must be built for checking (cudasim_add_executable CHECKED)";
    cudasim::profile_reset();
  }
  void TearDown() override {
    cudasim::profile_reset();
    unsetenv("CUDASIM_ORDER");
    unsetenv("CUDASIM_PROFILE");
    cudasim::reload_options();
  }

  static float* upload(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> h(n);
    for (float& v : h) v = u(rng);
    float* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, n * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  static float* zeros(size_t n) {
    float* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, n * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemset(d, 0, n * sizeof(float)), cudaSuccess);
    return d;
  }

  // `all` must outlive the reference.
  static const cudasim::KernelProfile& kernel(const std::vector<cudasim::KernelProfile>& all, const std::string& name) {
    for (const auto& k : all) {
      if (k.kernel.find(name) != std::string::npos) return k;
    }
    ADD_FAILURE() << "no profile for kernel '" << name << "'";
    static cudasim::KernelProfile none;
    return none;
  }
  static cudasim::ProfileLine line(const cudasim::KernelProfile& k, unsigned at, cudasim::AccessKind kind) {
    for (const auto& l : k.lines) {
      if (l.line == at && l.kind == kind) return l;
    }
    std::string seen;
    for (const auto& l : k.lines) seen += " " + std::to_string(l.line) + "/" + std::to_string(static_cast<int>(l.kind));
    ADD_FAILURE() << "kernel '" << k.kernel << "': no access of kind " << static_cast<int>(kind) << " counted at line "
                  << at << " (lines/kinds counted:" << seen << "); were the kernels moved?";
    return {};
  }
};

using K = cudasim::AccessKind;

// ---- coalescing --------------------------------------------------------------------------------

TEST_F(Profile, NaiveMatmulReadsOneSectorPerLaneCoalescedReadsFour) {
  const int m = 64, n = 64, k = 64;
  float* x = upload(size_t{m} * k, 1);
  float* w = upload(size_t{n} * k, 2);
  float* y = zeros(size_t{m} * n);
  const dim3 block(32, 8), grid(n / 32, m / 8);
  matmul_naive<<<grid, block>>>(x, w, y, m, n, k);
  matmul_coalesced<<<grid, block>>>(x, w, y, m, n, k);
  CHECK(cudaDeviceSynchronize());
  const auto all = cudasim::profile_results();
  // Requests per load line: one per warp per step of k; a warp is one row and 32 columns.
  const uint64_t requests = uint64_t{m} * n / 32 * k;
  {
    const auto& p = kernel(all, "matmul_naive");
    const auto wl = line(p, kLineNaiveW, K::GlobalLoad);
    EXPECT_EQ(wl.requests, requests);
    EXPECT_EQ(wl.sectors, requests * 32) << "w read down a column: 32 lanes, 32 sectors k*4 = 256 bytes apart";
    EXPECT_EQ(wl.bytes_requested, requests * 32 * 4);
    EXPECT_EQ(wl.ideal_sectors, requests * 4) << "the 128 distinct bytes would fit in 4 sectors";
    const auto xl = line(p, kLineNaiveX, K::GlobalLoad);
    EXPECT_EQ(xl.sectors, requests) << "x: the 32 lanes of a warp read the same float (one sector)";
    EXPECT_EQ(xl.ideal_sectors, requests) << "a broadcast needs one sector";
  }
  {
    const auto& p = kernel(all, "matmul_coalesced");
    const auto wl = line(p, kLineCoalescedW, K::GlobalLoad);
    EXPECT_EQ(wl.requests, requests);
    EXPECT_EQ(wl.sectors, requests * 4) << "32 consecutive floats: 128 bytes, 4 sectors";
    const auto yl = line(p, kLineCoalescedY, K::GlobalStore);
    EXPECT_EQ(yl.requests, uint64_t{m} * n / 32);
    EXPECT_EQ(yl.sectors, uint64_t{m} * n / 32 * 4);
    // The 8x difference in traffic is what the exercise is about.
    EXPECT_EQ(kernel(all, "matmul_naive").global_bytes_moved() - p.global_bytes_moved(), requests * 28 * 32);
  }
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
}

// Grouping lanes into warp instructions must not depend on the order the CPU backend runs them in.
TEST_F(Profile, CountsDoNotDependOnThreadOrder) {
  const int m = 32, n = 64, k = 48;
  float* x = upload(size_t{m} * k, 3);
  float* w = upload(size_t{n} * k, 4);
  float* y = zeros(size_t{m} * n);
  std::vector<std::vector<cudasim::ProfileLine>> runs;
  for (const char* order : {"forward", "warps-reverse", "shuffle:7"}) {
    setenv("CUDASIM_ORDER", order, 1);
    cudasim::reload_options();
    cudasim::profile_reset();
    matmul_naive<<<dim3(n / 32, m / 8), dim3(32, 8)>>>(x, w, y, m, n, k);
    CHECK(cudaDeviceSynchronize());
    runs.push_back(kernel(cudasim::profile_results(), "matmul_naive").lines);
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_EQ(runs[r][i].requests, runs[0][i].requests) << "line " << runs[0][i].line << ", order " << r;
      EXPECT_EQ(runs[r][i].sectors, runs[0][i].sectors) << "line " << runs[0][i].line << ", order " << r;
    }
  }
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
}

// Warps whose lanes make the same accesses for longer than a thread's log, then differ (or differ
// first): per warp 200 requests of 4 sectors and 10 of 2, whatever the order the threads run in.
TEST_F(Profile, LanesThatDivergeAroundALongLoopAreCountedAsOneWarp) {
  const int steps = 200, warps = 3;
  float* x = upload(size_t{steps} * 32, 9);
  float* y = zeros(size_t{warps} * 32);
  for (const char* order : {"forward", "warps-reverse", "shuffle:7"}) {
    setenv("CUDASIM_ORDER", order, 1);
    cudasim::reload_options();
    for (const bool tail_first : {false, true}) {
      cudasim::profile_reset();
      if (tail_first) {
        diverging_lanes<true><<<1, warps * 32>>>(x, y, steps);
      } else {
        diverging_lanes<false><<<1, warps * 32>>>(x, y, steps);
      }
      CHECK(cudaDeviceSynchronize());
      const auto all = cudasim::profile_results();
      const auto t = kernel(all, "diverging_lanes").totals();
      const int ld = static_cast<int>(K::GlobalLoad);
      const std::string where = std::string("order ") + order + (tail_first ? ", extra loads first" : ", extra loads last");
      EXPECT_EQ(t.requests[ld], uint64_t{warps} * (steps + 10)) << where;
      EXPECT_EQ(t.lane_accesses[ld], uint64_t{warps} * (steps * 32 + 10 * 16)) << where;
      EXPECT_EQ(t.sectors[ld], uint64_t{warps} * (steps * 4 + 10 * 2)) << where;
      EXPECT_EQ(t.ideal_sectors[ld], uint64_t{warps} * (steps * 4 + 10 * 2)) << where;
    }
  }
  cudaFree(x);
  cudaFree(y);
}

// ---- bank conflicts ----------------------------------------------------------------------------

TEST_F(Profile, TransposedTileHas32WayConflictsUnlessPadded) {
  const int blocks = 3;
  float* in = upload(size_t{blocks} * 1024, 5);
  float* out = zeros(size_t{blocks} * 1024);
  transpose_tile<0><<<blocks, dim3(32, 32)>>>(in, out);
  transpose_tile<1><<<blocks, dim3(32, 32)>>>(in, out);
  CHECK(cudaDeviceSynchronize());
  const auto all = cudasim::profile_results();
  ASSERT_EQ(all.size(), 2u);
  const uint64_t requests = uint64_t{blocks} * 32;  // one per warp, 32 warps per block
  // all[0] is the first launched: no padding.
  const auto plain = line(all[0], kLineTileRead, K::SharedLoad);
  EXPECT_EQ(plain.requests, requests);
  EXPECT_EQ(plain.wavefronts, requests * 32) << "tile[tx][ty]: 32 words 32 floats apart, all in bank ty";
  EXPECT_EQ(plain.wavefronts - plain.ideal_wavefronts, requests * 31);
  const auto padded = line(all[1], kLineTileRead, K::SharedLoad);
  EXPECT_EQ(padded.requests, requests);
  EXPECT_EQ(padded.wavefronts, requests) << "tile[tx][ty] with 33 floats per row: banks (tx + ty) % 32, all different";
  // The row-wise stores conflict in neither.
  for (const auto* p : {&all[0], &all[1]}) {
    const auto st = p->totals();
    EXPECT_EQ(st.requests[static_cast<int>(K::SharedStore)], requests);
    EXPECT_EQ(st.wavefronts[static_cast<int>(K::SharedStore)], requests);
  }
  cudaFree(in);
  cudaFree(out);
}

// ---- bytes ---------------------------------------------------------------------------------------

TEST_F(Profile, RmsnormTwoPassesReadTheRowTwice) {
  const int rows = 6, d = 1024;
  float* x = upload(size_t{rows} * d, 6);
  float* y = zeros(size_t{rows} * d);
  rmsnorm_two_pass<<<rows, 256>>>(x, y, d);
  CHECK(cudaDeviceSynchronize());
  const auto all = cudasim::profile_results();
  const auto& p = kernel(all, "rmsnorm_two_pass");
  const uint64_t row_bytes = uint64_t{rows} * d * 4;
  const auto pass1 = line(p, kLinePass1, K::GlobalLoad), pass2 = line(p, kLinePass2, K::GlobalLoad);
  EXPECT_EQ(pass1.bytes_requested, row_bytes);
  EXPECT_EQ(pass2.bytes_requested, row_bytes);
  EXPECT_EQ(pass1.sectors * 32, row_bytes) << "each pass is coalesced: bytes moved = bytes requested";
  EXPECT_EQ(pass2.sectors * 32, row_bytes);
  const auto t = p.totals();
  EXPECT_EQ(t.bytes_requested[static_cast<int>(K::GlobalLoad)], 2 * row_bytes) << "x is read twice";
  EXPECT_EQ(t.sectors[static_cast<int>(K::GlobalStore)] * 32, row_bytes) << "y is written once";
  // The tree reduction reads partial[tid] and partial[tid + stride]: consecutive words, no conflicts.
  EXPECT_EQ(t.wavefronts[static_cast<int>(K::SharedLoad)], t.ideal_wavefronts[static_cast<int>(K::SharedLoad)]);
  cudaFree(x);
  cudaFree(y);
}

// ---- the roofline --------------------------------------------------------------------------------

TEST_F(Profile, GemvIsPredictedMemoryBoundOnEveryGpu) {
  const int n = 256, k = 512;
  float* w = upload(size_t{n} * k, 7);
  float* x = upload(size_t{k}, 8);
  float* y = zeros(size_t{n});
  gemv_rows<<<n / 8, 256>>>(w, x, y, n, k);
  CHECK(cudaDeviceSynchronize());
  cudasim::profile_flops(2.0 * n * k);
  const auto all = cudasim::profile_results();
  const auto& p = kernel(all, "gemv_rows");
  // w: n*k floats once; x: k floats per row; y: one float per row, a sector per store.
  const uint64_t moved = uint64_t{n} * k * 4 + uint64_t{n} * k * 4 + uint64_t{n} * 32;
  EXPECT_EQ(p.global_bytes_moved(), moved);
  const std::string report = cudasim::profile_report(nullptr);
  std::printf("%s", report.c_str());
  for (const char* gpu : {"h100", "a100", "rtx4090", "t4"}) {
    EXPECT_NE(report.find(std::string("    ") + gpu), std::string::npos) << gpu;
  }
  EXPECT_NE(report.find("memory-bound"), std::string::npos) << report;
  EXPECT_EQ(report.find("compute-bound"), std::string::npos) << "AI = 2nk / " << moved << " B is far below every ridge";
  EXPECT_NE(report.find("prediction"), std::string::npos);
  // One GPU by name, and a wrong name explained.
  const std::string h100 = cudasim::profile_report("h100");
  EXPECT_EQ(h100.find("    t4"), std::string::npos);
  EXPECT_NE(cudasim::profile_report("h200").find("unknown GPU 'h200'"), std::string::npos);
  cudaFree(w);
  cudaFree(x);
  cudaFree(y);
}

// ---- atomics and wide accesses -----------------------------------------------------------------

TEST_F(Profile, AtomicsAreOneRequestPerWarp) {
  int* counters = nullptr;
  CHECK(cudaMalloc(&counters, 4 * sizeof(int)));
  CHECK(cudaMemset(counters, 0, 4 * sizeof(int)));
  count_mod4<<<2, 128>>>(counters);
  CHECK(cudaDeviceSynchronize());
  const auto all = cudasim::profile_results();
  const auto t = kernel(all, "count_mod4").totals();
  const int a = static_cast<int>(K::GlobalAtomic);
  EXPECT_EQ(t.requests[a], 2u * 4) << "2 blocks of 4 warps";
  EXPECT_EQ(t.lane_accesses[a], 2u * 128);
  EXPECT_EQ(t.sectors[a], 2u * 4) << "4 ints in one sector per request";
  int h[4];
  CHECK(cudaMemcpy(h, counters, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT_EQ(h[0] + h[1] + h[2] + h[3], 256);
  cudaFree(counters);
}

TEST_F(Profile, EightByteSharedReadsTakeTwoWavefronts) {
  float2 *in = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&in, 64 * sizeof(float2)));
  CHECK(cudaMalloc(&out, 64 * sizeof(float2)));
  CHECK(cudaMemset(in, 0, 64 * sizeof(float2)));
  read_float2<<<1, 64>>>(in, out);
  CHECK(cudaDeviceSynchronize());
  const auto all = cudasim::profile_results();
  const auto t = kernel(all, "read_float2").totals();
  const int ld = static_cast<int>(K::SharedLoad);
  EXPECT_EQ(t.requests[ld], 2u);
  EXPECT_EQ(t.bytes_requested[ld], 64u * 8) << "one 8-byte access per thread (not split by the compiler)";
  EXPECT_EQ(t.wavefronts[ld], 4u) << "two half-warp phases per request";
  EXPECT_EQ(t.ideal_wavefronts[ld], 4u) << "consecutive float2: no conflicts";
  cudaFree(in);
  cudaFree(out);
}

TEST_F(Profile, Float4LoadsAreOneSixteenByteRequest) {
  float* in = upload(64 * 4, 12);
  float* out = zeros(256);
  read_float4_fields<<<1, 64>>>(in, out);
  CHECK(cudaDeviceSynchronize());
  const auto all = cudasim::profile_results();
  const auto t = kernel(all, "read_float4_fields").totals();
  const int ld = static_cast<int>(K::GlobalLoad), sld = static_cast<int>(K::SharedLoad);
  EXPECT_EQ(t.requests[ld], 2u) << "one request per warp: the compiler must not split the float4 into four loads";
  EXPECT_EQ(t.bytes_requested[ld], 64u * 16);
  EXPECT_EQ(t.sectors[ld], 2u * 16) << "512 contiguous bytes per warp";
  EXPECT_EQ(t.ideal_sectors[ld], 2u * 16);
  EXPECT_EQ(t.requests[sld], 2u);
  EXPECT_EQ(t.wavefronts[sld], 2u * 4) << "four quarter-warp phases per request";
  EXPECT_EQ(t.ideal_wavefronts[sld], 2u * 4) << "consecutive float4 (reversed): no conflicts";
  cudaFree(in);
  cudaFree(out);
}

// ---- FLOPs -------------------------------------------------------------------------------------

TEST_F(Profile, FlopsAreCountedFromTheKernelsArithmetic) {
#ifndef CUDASIM_TEST_FLOP_COUNTER
  GTEST_SKIP() << "this build has no FLOP counter (GCC's plugin headers were missing when it was configured)";
#endif
  const int n = 100;
  float* x = upload(n, 11);
  float* out = zeros(size_t{6} * n);
  arithmetic<<<2, 64>>>(x, out, 1.5f, n);
  CHECK(cudaDeviceSynchronize());
  auto all = cudasim::profile_results();
  const auto& once = kernel(all, "arithmetic");
  ASSERT_TRUE(once.flops_counted) << "the kernel was compiled without cudasim's FLOP counter";
  EXPECT_EQ(once.counted_flops, kArithmeticFlops(n)) << "7 per thread plus the loop's i % 4 additions";
  EXPECT_EQ(once.flops, 0.0) << "nothing was declared";
  EXPECT_EQ(once.roofline_flops(), once.counted_flops);
  // Added up per launch, the same in another thread order; declared FLOPs are shown beside.
  setenv("CUDASIM_ORDER", "warps-reverse", 1);
  cudasim::reload_options();
  arithmetic<<<2, 64>>>(x, out, 1.5f, n);
  CHECK(cudaDeviceSynchronize());
  cudasim::profile_flops(1234);
  all = cudasim::profile_results();
  const auto& twice = kernel(all, "arithmetic");
  EXPECT_EQ(twice.counted_flops, 2 * kArithmeticFlops(n));
  EXPECT_EQ(twice.flops, 1234.0);
  const std::string report = cudasim::profile_report("h100");
  EXPECT_NE(report.find("FLOPs (counted): 1.70K (declared: 1.23K)"), std::string::npos) << report;
  cudaFree(x);
  cudaFree(out);
}
