// The profiling exercises without a GPU (handouts/profiling.md, "Profiling without a GPU"):
// two matmuls that differ only in how a warp reads w, and a tile transpose with and without
// padding. Built for counting mode, the program ends with a report of each kernel's sectors per
// request, bank conflicts and predicted roofline position:
//
//   build/bin/cudasim-cc --profile -O2 harness/cudasim/examples/coalescing.cu -o coalescing
//   ./coalescing                     (CUDASIM_GPU=t4 ./coalescing for one GPU's prediction)
//
// With nvcc it is an ordinary CUDA program (profile it with ncu to compare the figures).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

// y = x·wᵀ, w [n, k]: the 32 lanes of a warp are 32 columns, so they read w k floats apart.
__global__ void matmul_naive(const float* x, const float* w, float* y, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) {
    const float xv = x[row * k + i];
    const float wv = w[col * k + i];
    acc += xv * wv;
  }
  y[row * n + col] = acc;
}

// The same with w stored transposed, wt [k, n]: the lanes read consecutive floats.
__global__ void matmul_coalesced(const float* x, const float* wt, float* y, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) {
    const float xv = x[row * k + i];
    const float wv = wt[i * n + col];
    acc += xv * wv;
  }
  y[row * n + col] = acc;
}

// out = inᵀ for a 32·tiles × 32 matrix, one 32×32 tile per block, through shared memory.
template <int kPad>
__global__ void transpose(const float* in, float* out) {
  __shared__ float tile[32][32 + kPad];
  const int tx = threadIdx.x, ty = threadIdx.y, base = blockIdx.x * 1024;
  tile[ty][tx] = in[base + ty * 32 + tx];
  __syncthreads();
  out[base + ty * 32 + tx] = tile[tx][ty];
}

int main() {
  const int m = 128, n = 256, k = 256;
  std::vector<float> hx(m * k), hw(n * k);
  for (int i = 0; i < m * k; ++i) hx[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  for (int i = 0; i < n * k; ++i) hw[i] = static_cast<float>(i % 5) * 0.125f - 0.25f;
  float *x, *w, *y;
  cudaMalloc(&x, m * k * sizeof(float));
  cudaMalloc(&w, n * k * sizeof(float));
  cudaMalloc(&y, m * n * sizeof(float));
  cudaMemcpy(x, hx.data(), m * k * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(w, hw.data(), n * k * sizeof(float), cudaMemcpyHostToDevice);
  const dim3 block(32, 8), grid(n / 32, m / 8);
  const double flops = 2.0 * m * n * k;  // one multiply and one add per term
  matmul_naive<<<grid, block>>>(x, w, y, m, n, k);
#ifdef __CUDASIM__
  // What the launch computes, declared: the report prints it next to the count (a build without
  // the FLOP counter shows only this).
  cudasim::profile_flops(flops);
#endif
  matmul_coalesced<<<grid, block>>>(x, w, y, m, n, k);  // w read as if it were wt: same traffic
#ifdef __CUDASIM__
  cudasim::profile_flops(flops);
#endif
  transpose<0><<<8, dim3(32, 32)>>>(x, y);
  transpose<1><<<8, dim3(32, 32)>>>(x, y);
  std::vector<float> hy(m * n);
  cudaMemcpy(hy.data(), y, m * n * sizeof(float), cudaMemcpyDeviceToHost);
  bool ok = true;
  for (int t = 0; t < 8 && ok; ++t) {
    for (int r = 0; r < 32 && ok; ++r) {
      for (int c = 0; c < 32 && ok; ++c) ok = hy[t * 1024 + r * 32 + c] == hx[t * 1024 + c * 32 + r];
    }
  }
  std::printf("%s\n", ok ? "transpose correct" : "transpose WRONG");
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
  return ok ? 0 : 1;
}
