// A standalone CUDA program that runs unchanged on a GPU (nvcc showcase.cu) and on the CPU
// (cudasim-cc showcase.cu). It checks its own results and exits non-zero on a mismatch.
//
//   build/bin/cudasim-cc harness/cudasim/examples/showcase.cu -o showcase && ./showcase
//   ./showcase --divergent     # a deliberate bug: the CPU backend reports it with file:line
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// C[m,n] = A[m,k]·B[k,n] with TILE×TILE shared-memory tiles; any shape (edges are guarded).
template <int TILE, typename T>
__global__ void matmul_tiled(const T* A, const T* B, T* C, int m, int n, int k) {
  __shared__ T As[TILE][TILE];
  __shared__ T Bs[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  T acc = 0;
  for (int k0 = 0; k0 < k; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < m && k0 + threadIdx.x < k) ? A[row * k + k0 + threadIdx.x] : T(0);
    Bs[threadIdx.y][threadIdx.x] = (k0 + threadIdx.y < k && col < n) ? B[(k0 + threadIdx.y) * n + col] : T(0);
    __syncthreads();
    for (int kk = 0; kk < TILE; ++kk) acc += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) C[row * n + col] = acc;
}

// Sum of x: warp shuffles, per-warp partials in dynamic shared memory, one atomicAdd per block.
template <typename T>
__global__ void reduce_sum(const T* x, T* out, int n) {
  extern __shared__ unsigned char smem[];
  T* partial = reinterpret_cast<T*>(smem);
  T v = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
  for (int o = warpSize / 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / warpSize ? partial[lane] : T(0);
    for (int o = warpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) atomicAdd(out, v);
  }
}

// Histogram with integer atomics on global memory.
__global__ void histogram(const int* values, unsigned* bins, int n, int nbins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[values[i] % nbins], 1u);
}

// The bug: a barrier inside a branch. Threads 0-15 wait at the first __syncthreads while threads
// 16-31 wait at the second one: on a GPU two different barriers, a hang or garbage.
__global__ void divergent_barrier(float* x) {
  if (threadIdx.x < 16) {
    x[threadIdx.x] *= 2.f;
    __syncthreads();
  }
  x[threadIdx.x] += 1.f;
  __syncthreads();
  x[threadIdx.x] -= x[31 - threadIdx.x];
}

int main(int argc, char** argv) {
  bool ok = true;
  if (argc > 1 && std::strcmp(argv[1], "--divergent") == 0) {
    float* d;
    CUDA_CHECK(cudaMalloc(&d, 32 * sizeof(float)));
    divergent_barrier<<<1, 32>>>(d);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("divergent_barrier finished: on a GPU this is undefined behaviour\n");
    return 0;
  }

  // Matmul with a shape that is not a multiple of the tile.
  const int m = 70, n = 45, k = 33;
  std::vector<float> a(m * k), b(k * n), c(m * n), ref(m * n, 0.f);
  for (int i = 0; i < m * k; ++i) a[i] = std::sin(0.1f * i);
  for (int i = 0; i < k * n; ++i) b[i] = std::cos(0.07f * i);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p)
      for (int j = 0; j < n; ++j) ref[i * n + j] += a[i * k + p] * b[p * n + j];
  float *da, *db, *dc;
  CUDA_CHECK(cudaMalloc(&da, a.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&db, b.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dc, c.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  constexpr int TILE = 16;
  dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE), block(TILE, TILE);
  matmul_tiled<TILE><<<grid, block>>>(da, db, dc, m, n, k);  // T deduced from the arguments
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double err = 0;
  for (int i = 0; i < m * n; ++i) err = std::fmax(err, std::fabs(c[i] - ref[i]));
  std::printf("matmul_tiled<16>  %dx%dx%d   max |error| %.2e\n", m, n, k, err);
  ok &= err < 1e-4;  // fp32 sums of 33 products of unit-sized values, summed in another order

  // Reduction in double precision: deduced T = double, dynamic shared memory sized per warp.
  const int len = 1 << 16;
  std::vector<double> x(len);
  double sum = 0;
  for (int i = 0; i < len; ++i) sum += (x[i] = 1.0 / (1 + i));
  double *dx, *dsum, got = 0;
  CUDA_CHECK(cudaMalloc(&dx, len * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&dsum, sizeof(double)));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), len * sizeof(double), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dsum, 0, sizeof(double)));
  reduce_sum<<<32, 256, (256 / 32) * sizeof(double)>>>(dx, dsum, len);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(&got, dsum, sizeof(double), cudaMemcpyDeviceToHost));
  std::printf("reduce_sum<double> n=%d   sum %.12f (expected %.12f)\n", len, got, sum);
  ok &= std::fabs(got - sum) < 1e-9;

  // Histogram.
  const int nv = 10007, nbins = 13;
  std::vector<int> values(nv);
  std::vector<unsigned> expected(nbins, 0), bins(nbins);
  for (int i = 0; i < nv; ++i) expected[(values[i] = (i * 7919) % 1000) % nbins]++;
  int* dv;
  unsigned* dbins;
  CUDA_CHECK(cudaMalloc(&dv, nv * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&dbins, nbins * sizeof(unsigned)));
  CUDA_CHECK(cudaMemcpy(dv, values.data(), nv * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dbins, 0, nbins * sizeof(unsigned)));
  histogram<<<(nv + 255) / 256, 256>>>(dv, dbins, nv, nbins);
  CUDA_CHECK(cudaMemcpy(bins.data(), dbins, nbins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::printf("histogram         %d values into %d bins: %s\n", nv, nbins, bins == expected ? "exact" : "WRONG");
  ok &= bins == expected;

  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dx);
  cudaFree(dsum);
  cudaFree(dv);
  cudaFree(dbins);
  std::printf("%s\n", ok ? "all results correct" : "SOME RESULTS ARE WRONG");
  return ok ? 0 : 1;
}
