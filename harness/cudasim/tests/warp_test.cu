// Warp shuffles, votes and __syncwarp, with full and partial masks and sub-warp widths.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

// out[4*t + k]: result of shuffle variant k for thread t, on values in[t].
__global__ void shuffles(const int* in, int* out, int width) {
  int t = threadIdx.x, v = in[t];
  out[4 * t + 0] = __shfl_sync(0xffffffffu, v, 3, width);
  out[4 * t + 1] = __shfl_up_sync(0xffffffffu, v, 2, width);
  out[4 * t + 2] = __shfl_down_sync(0xffffffffu, v, 5, width);
  out[4 * t + 3] = __shfl_xor_sync(0xffffffffu, v, 6, width);
}

__global__ void shuffle_float_double(const float* f, const double* d, float* fo, double* dout) {
  int t = threadIdx.x;
  fo[t] = __shfl_xor_sync(0xffffffffu, f[t], 1);
  dout[t] = __shfl_sync(0xffffffffu, d[t], 31 - (t & 31));
}

__global__ void votes(const int* pred, unsigned* ballot, int* any, int* all) {
  int t = threadIdx.x, p = pred[t];
  ballot[t] = __ballot_sync(0xffffffffu, p);
  any[t] = __any_sync(0xffffffffu, p);
  all[t] = __all_sync(0xffffffffu, p);
}

// Lanes 0..15 reduce among themselves with a half-warp mask; lanes 16..31 do something else.
__global__ void partial_mask(const int* in, int* out) {
  int lane = threadIdx.x & 31, v = in[threadIdx.x];
  if (lane < 16) {
    for (int o = 8; o > 0; o >>= 1) v += __shfl_down_sync(0x0000ffffu, v, o, 16);
  } else {
    v = -v;
    __syncwarp(0xffff0000u);
  }
  out[threadIdx.x] = v;
}

// The classic warp-shuffle block reduction: shfl_down in warps, partials in dynamic shared memory.
__global__ void block_sum(const float* x, float* out, int n) {
  extern __shared__ float warp_sums[];
  float v = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (lane == 0) warp_sums[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) atomicAdd(out, v);
  }
}

// The usual use: inside divergent code, shuffle among the lanes that took the branch.
__global__ void active_mask(unsigned* out, int* sums) {
  int lane = threadIdx.x & 31;
  if (lane < 20) {
    unsigned m = __activemask();
    int v = lane;
    for (int o = 16; o > 0; o >>= 1) {
      int other = __shfl_down_sync(m, v, o);
      if (lane + o < 20) v += other;
    }
    out[threadIdx.x] = m;
    sums[threadIdx.x] = v;
  } else {
    out[threadIdx.x] = __activemask();
  }
}

// Reference of one shuffle on the host: the CUDA Programming Guide's definitions.
int host_shuffle(const std::vector<int>& v, int t, int kind, int width) {
  int lane = t & 31, base = t - lane, seg = lane & ~(width - 1), src = lane;
  switch (kind) {
    case 0: src = seg + (3 % width); break;
    case 1: src = (lane - seg) >= 2 ? lane - 2 : lane; break;
    case 2: src = (lane - seg) + 5 < width ? lane + 5 : lane; break;
    // xor may read an earlier group of `width` lanes, never a later one.
    case 3: src = (lane ^ 6) < seg + width ? lane ^ 6 : lane; break;
  }
  return v[base + src];
}

TEST(Warp, ShufflesMatchTheProgrammingGuideForEveryWidth) {
  const int n = 64;
  std::vector<int> in(n);
  std::mt19937 rng(11);
  for (auto& x : in) x = static_cast<int>(rng() % 100000);
  int *din, *dout;
  CHECK(cudaMalloc(&din, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, 4 * n * sizeof(int)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  for (int width : {32, 16, 8, 4}) {
    shuffles<<<1, n>>>(din, dout, width);
    CHECK(cudaGetLastError());
    std::vector<int> out(4 * n);
    CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (int t = 0; t < n; ++t)
      for (int k = 0; k < 4; ++k)
        ASSERT_EQ(out[4 * t + k], host_shuffle(in, t, k, width)) << "thread " << t << " variant " << k << " width " << width;
  }
  cudaFree(din);
  cudaFree(dout);
}

TEST(Warp, ShufflesOfFloatAndDouble) {
  const int n = 64;
  std::vector<float> f(n);
  std::vector<double> d(n);
  for (int t = 0; t < n; ++t) {
    f[t] = 0.5f * t - 3.f;
    d[t] = 1e300 / (t + 1);
  }
  float *df, *dfo;
  double *dd, *ddo;
  CHECK(cudaMalloc(&df, n * 4));
  CHECK(cudaMalloc(&dfo, n * 4));
  CHECK(cudaMalloc(&dd, n * 8));
  CHECK(cudaMalloc(&ddo, n * 8));
  CHECK(cudaMemcpy(df, f.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dd, d.data(), n * 8, cudaMemcpyHostToDevice));
  shuffle_float_double<<<1, n>>>(df, dd, dfo, ddo);
  std::vector<float> fo(n);
  std::vector<double> dout(n);
  CHECK(cudaMemcpy(fo.data(), dfo, n * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(dout.data(), ddo, n * 8, cudaMemcpyDeviceToHost));
  for (int t = 0; t < n; ++t) {
    ASSERT_EQ(fo[t], f[t ^ 1]);
    ASSERT_EQ(dout[t], d[(t & ~31) + 31 - (t & 31)]);
  }
}

TEST(Warp, Votes) {
  const int n = 96;
  std::vector<int> p(n, 0);
  for (int t = 0; t < 32; ++t) p[t] = (t % 3 == 0);  // warp 0: some
  for (int t = 32; t < 64; ++t) p[t] = 0;            // warp 1: none
  for (int t = 64; t < 96; ++t) p[t] = 5;            // warp 2: all (non-zero counts as true)
  unsigned expected0 = 0;
  for (int t = 0; t < 32; ++t) expected0 |= static_cast<unsigned>(p[t] != 0) << t;
  int *dp, *dany, *dall;
  unsigned* dballot;
  CHECK(cudaMalloc(&dp, n * 4));
  CHECK(cudaMalloc(&dany, n * 4));
  CHECK(cudaMalloc(&dall, n * 4));
  CHECK(cudaMalloc(&dballot, n * 4));
  CHECK(cudaMemcpy(dp, p.data(), n * 4, cudaMemcpyHostToDevice));
  votes<<<1, n>>>(dp, dballot, dany, dall);
  std::vector<unsigned> ballot(n);
  std::vector<int> any(n), all(n);
  CHECK(cudaMemcpy(ballot.data(), dballot, n * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(any.data(), dany, n * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(all.data(), dall, n * 4, cudaMemcpyDeviceToHost));
  for (int t = 0; t < n; ++t) {
    int w = t / 32;
    ASSERT_EQ(ballot[t], w == 0 ? expected0 : w == 1 ? 0u : 0xffffffffu) << t;
    ASSERT_EQ(any[t] != 0, w != 1) << t;
    ASSERT_EQ(all[t] != 0, w == 2) << t;
  }
}

TEST(Warp, PartialMasksAndSubWarpReduction) {
  const int n = 64;
  std::vector<int> in(n);
  std::iota(in.begin(), in.end(), 1);
  int *din, *dout;
  CHECK(cudaMalloc(&din, n * 4));
  CHECK(cudaMalloc(&dout, n * 4));
  CHECK(cudaMemcpy(din, in.data(), n * 4, cudaMemcpyHostToDevice));
  partial_mask<<<1, n>>>(din, dout);
  CHECK(cudaGetLastError());
  std::vector<int> out(n);
  CHECK(cudaMemcpy(out.data(), dout, n * 4, cudaMemcpyDeviceToHost));
  for (int w = 0; w < 2; ++w) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += in[32 * w + l];
    EXPECT_EQ(out[32 * w], sum) << "lane 0 of warp " << w << " holds the half-warp sum";
    for (int l = 16; l < 32; ++l) EXPECT_EQ(out[32 * w + l], -in[32 * w + l]);
  }
}

TEST(Warp, BlockReductionWithSharedMemoryAndAtomics) {
  const int n = 100003;  // prime: the grid-stride loop has a ragged end
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  double ref = 0;
  for (auto& v : x) ref += (v = u(rng));
  float *dx, *dout;
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dout, 4));
  CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dout, 0, 4));
  block_sum<<<8, 256, (256 / 32) * sizeof(float)>>>(dx, dout, n);
  CHECK(cudaGetLastError());
  float got = 0;
  CHECK(cudaMemcpy(&got, dout, 4, cudaMemcpyDeviceToHost));
  // fp32 sum of 1e5 values in unit range: rounding error grows like sqrt(n)·2^-24·|partial sums|.
  EXPECT_NEAR(got, ref, 2e-3);
}

TEST(Warp, ActiveMaskNamesTheLanesOfTheBranch) {
  unsigned* d;
  int* sums;
  CHECK(cudaMalloc(&d, 64 * 4));
  CHECK(cudaMalloc(&sums, 64 * 4));
  active_mask<<<1, 64>>>(d, sums);
  CHECK(cudaGetLastError());
  std::vector<unsigned> h(64);
  std::vector<int> s(64);
  CHECK(cudaMemcpy(h.data(), d, 64 * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(s.data(), sums, 64 * 4, cudaMemcpyDeviceToHost));
  for (int t = 0; t < 64; ++t) ASSERT_EQ(h[t], (t & 31) < 20 ? 0x000fffffu : 0xfff00000u) << t;
  EXPECT_EQ(s[0], 190);  // 0 + 1 + ... + 19
  EXPECT_EQ(s[32], 190);
}
