// cudasim-bench: what the CPU backend costs. Prints the time of one thread switch at a barrier,
// the fixed cost of a launch, a 16x16-tiled 256^3 matmul and a 1024-thread block reduction, on
// one OS thread (CUDASIM_THREADS=1) and on all of them. Figures are CPU times, not GPU estimates.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

constexpr int T = 16;

__global__ void barriers(int rounds, int* sink) {
  int v = 0;
  for (int r = 0; r < rounds; ++r) {
    v += r;
    __syncthreads();
  }
  if (v == -1) *sink = v;
}

__global__ void empty_kernel() {}

__global__ void matmul_tiled(const float* A, const float* B, float* C, int n) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < n; k0 += T) {
    As[ty][tx] = A[row * n + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

__global__ void block_reduce(const float* x, float* out, int n) {
  __shared__ float s[1024];
  float v = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = s[0];
}

double now_ms(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// Median time of `reps` calls of f, in milliseconds. With one OS thread the CPU time of this
// thread is measured (it does all the work, and other processes on the machine do not inflate
// it); with several, wall time.
template <class F>
double median_ms(int reps, bool single, F f) {
  const clockid_t clock = single ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_ms(clock);
    f();
    cudaDeviceSynchronize();
    t.push_back(now_ms(clock) - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void use_threads(const char* n) {
#ifdef __CUDASIM__
  setenv("CUDASIM_THREADS", n, 1);
  cudasim::reload_options();
#else
  (void)n;
#endif
}

int main() {
  const int n = 256;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f);
  float *da, *db, *dc, *dout;
  int* sink;
  cudaMalloc(&da, n * n * 4);
  cudaMalloc(&db, n * n * 4);
  cudaMalloc(&dc, n * n * 4);
  cudaMalloc(&dout, 4);
  cudaMalloc(&sink, 4);
  cudaMemcpy(da, a.data(), n * n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * n * 4, cudaMemcpyHostToDevice);

  const char* cores = std::getenv("CUDASIM_THREADS");
  std::string all = cores ? cores : std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%-44s %12s %12s %10s\n", "what", "1 thread", (all + " threads").c_str(), "goal");
  std::printf("%-44s %12s %12s\n", "", "(CPU time)", "(wall time)");
  auto row = [&](const char* what, const char* unit, double scale, const char* goal, auto f) {
    use_threads("1");
    f();  // warm-up: creates the fibers of this OS thread
    double one = median_ms(7, true, f) * scale;
    use_threads(all.c_str());
    f();
    double many = median_ms(7, false, f) * scale;
    std::printf("%-44s %9.2f %-2s %9.2f %-2s %10s\n", what, one, unit, many, unit, goal);
  };
  const int rounds = 200, threads = 1024;
  row("thread switch at a barrier (1024 threads)", "ns", 1e6 / (static_cast<double>(rounds) * threads), "<= 20 ns",
      [&] { barriers<<<1, threads>>>(rounds, sink); });
  row("launch overhead (<<<1, 1>>> empty kernel)", "ms", 1.0 / 100, "<= 0.2 ms", [&] {
    for (int i = 0; i < 100; ++i) empty_kernel<<<1, 1>>>();
  });
  row("launch overhead (<<<64, 32>>> empty kernel)", "ms", 1.0 / 100, "", [&] {
    for (int i = 0; i < 100; ++i) empty_kernel<<<64, 32>>>();
  });
  row("16x16 tiled matmul 256^3", "ms", 1.0, "<= 50 ms", [&] {
    matmul_tiled<<<dim3(n / T, n / T), dim3(T, T)>>>(da, db, dc, n);
  });
  row("1024-thread block reduction (65536 floats)", "ms", 1.0, "", [&] {
    block_reduce<<<1, 1024>>>(da, dout, n * n);
  });
  std::vector<float> c(n * n);
  cudaMemcpy(c.data(), dc, n * n * 4, cudaMemcpyDeviceToHost);
  float red = 0;
  cudaMemcpy(&red, dout, 4, cudaMemcpyDeviceToHost);
  const bool ok = c[0] == 0.5f * 0.25f * n && c[n * n - 1] == c[0] && red == 0.5f * n * n;
  std::printf("results %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
