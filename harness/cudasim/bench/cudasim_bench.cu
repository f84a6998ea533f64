// cudasim-bench: what the CPU backend costs. Prints the time of one thread switch at a barrier,
// the fixed cost of a launch, 16x16-tiled 256^3 and 512^3 matmuls and a 1024-thread block
// reduction, on one OS thread (CUDASIM_THREADS=1) and on all of them, then the cost of checking
// and of counting mode: the same 512^3 matmul in this program built for checking
// (cudasim-bench-check, next to this one) with CUDASIM_CHECK=all, then with CUDASIM_PROFILE=1.
// Figures are CPU times, not GPU estimates.
//
//   cudasim-bench                 the table
//   cudasim-bench --matmul-512    one line: the 512^3 matmul's median time in ms (what the table
//                                 runs the checked build with)
#include <cuda_runtime.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
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

// Median CPU time of the 16x16-tiled 512^3 matmul on one OS thread, in ms.
double matmul_512_ms() {
  const int m = 512;
  std::vector<float> a(m * m, 0.5f), b(m * m, 0.25f);
  float *da, *db, *dc;
  cudaMalloc(&da, m * m * 4);
  cudaMalloc(&db, m * m * 4);
  cudaMalloc(&dc, m * m * 4);
  cudaMemcpy(da, a.data(), m * m * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), m * m * 4, cudaMemcpyHostToDevice);
  use_threads("1");
  auto f = [&] { matmul_tiled<<<dim3(m / T, m / T), dim3(T, T)>>>(da, db, dc, m); };
  f();
  const double ms = median_ms(3, true, f);
  std::vector<float> c(m * m);
  cudaMemcpy(c.data(), dc, m * m * 4, cudaMemcpyDeviceToHost);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return c[0] == 0.5f * 0.25f * m && c[m * m - 1] == c[0] ? ms : -1.0;
}

// The checked build of this program, next to it, run with `env` (CUDASIM_CHECK=all: checking;
// CUDASIM_PROFILE=1: counting mode): its 512^3 matmul time, or a negative number.
double checked_matmul_512_ms(const std::string& env) {
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return -1;
  self[len] = '\0';
  std::string dir = self;
  dir = dir.substr(0, dir.rfind('/') + 1);
  const std::string cmd = env + " CUDASIM_THREADS=1 '" + dir + "cudasim-bench-check' --matmul-512 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  double ms = -1;
  if (std::fscanf(p, "%lf", &ms) != 1) ms = -1;
  pclose(p);
  return ms;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--matmul-512") == 0) {
    const double ms = matmul_512_ms();
    std::printf("%.2f\n", ms);
    return ms < 0;
  }
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
  bool ok = c[0] == 0.5f * 0.25f * n && c[n * n - 1] == c[0] && red == 0.5f * n * n;
  const double plain = matmul_512_ms();
  ok = ok && plain > 0;
  std::printf("%-44s %9.2f %-2s\n", "16x16 tiled matmul 512^3", plain, "ms");
#ifdef __CUDASIM__
  // The cost of checking: the same kernel in the build that checks every access.
  const double checked = checked_matmul_512_ms("CUDASIM_CHECK=all");
  if (checked > 0) {
    std::printf("%-44s %9.2f %-2s %12s %10s\n", "  the same, checked (CUDASIM_CHECK=all)", checked, "ms", "", "");
    std::printf("%-44s %9.2f x  %12s %10s\n", "  cost of checking", checked / plain, "", "<= 3 x");
    // Counting mode (memory requests, sectors, bank conflicts) on the same build, without checks.
    const double counted = checked_matmul_512_ms("CUDASIM_PROFILE=1");
    if (counted > 0) {
      std::printf("%-44s %9.2f %-2s %12s %10s\n", "  the same, counted (CUDASIM_PROFILE=1)", counted, "ms", "", "");
      std::printf("%-44s %9.2f x  %12s %10s\n", "  cost of counting", counted / plain, "", "<= 5 x");
    }
  } else {
    std::printf("  (no checked figures: cudasim-bench-check is not built next to this program)\n");
  }
#endif
  std::printf("results %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
