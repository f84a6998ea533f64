// Kernel launch syntax and launch-time errors, as the rewriter and the runtime must handle them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace ops {
template <typename T>
__global__ void fill(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value + static_cast<T>(i);
}
}  // namespace ops

template <int Scale>
__global__ void scaled_index(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = Scale * static_cast<int>(threadIdx.x);
}

// Records every built-in of a 3-D launch.
__global__ void coordinates(int* out) {
  int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int id = b * (blockDim.x * blockDim.y * blockDim.z) + t;
  out[4 * id + 0] = b;
  out[4 * id + 1] = t;
  out[4 * id + 2] = blockDim.x * 100 + blockDim.y * 10 + blockDim.z;
  out[4 * id + 3] = gridDim.x * 100 + gridDim.y * 10 + gridDim.z;
}

// Parameters are per-thread copies: changing one must not leak into other threads.
__global__ void params_by_value(int* out, int start) {
  start += threadIdx.x;
  out[threadIdx.x] = start;
}

extern __shared__ float ns_dynamic[];  // namespace-scope dynamic shared memory

__global__ void reverse_in_dynamic_smem(const float* in, float* out, int n) {
  ns_dynamic[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = ns_dynamic[n - 1 - threadIdx.x];
}

__global__ void rotate_in_dynamic_smem(const float* in, float* out, int n) {
  extern __shared__ float staged[];
  staged[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = staged[(threadIdx.x + 1) % n];
}

template <int Threads>
__global__ void __launch_bounds__(Threads) within_bounds(int* out) {
  out[threadIdx.x] = static_cast<int>(threadIdx.x) + Threads;
}

// 16 KB of __shared__ variables and as much dynamic shared memory as the launch gives.
__global__ void static_and_dynamic(float* out) {
  __shared__ float fixed[4096];
  extern __shared__ float rest[];
  fixed[threadIdx.x] = static_cast<float>(threadIdx.x);
  rest[threadIdx.x] = 0.5f;
  __syncthreads();
  out[threadIdx.x] = fixed[(threadIdx.x + 1) % blockDim.x] + rest[threadIdx.x];
}

namespace {  // a symbol of its own for each instantiation, inside "(anonymous namespace)::"
template <int Shift>
__global__ void shift_in_dynamic_smem(const float* in, float* out, int n) {
  extern __shared__ float staged[];
  staged[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = staged[(threadIdx.x + Shift) % n];
}

// `shift_in_dynamic_smem<Shift>` as a launch inside a template writes it: one text, one function
// per instantiation.
template <int Shift>
cudaError_t launch_shift(const float* in, float* out, int n, size_t smem) {
  shift_in_dynamic_smem<Shift><<<1, n, smem>>>(in, out, n);
  return cudaGetLastError();
}
}  // namespace

__global__ void aligned_dynamic(unsigned long long* addr_mod, float* out) {
  extern __shared__ __align__(16) unsigned char raw[];
  float4* v = reinterpret_cast<float4*>(raw);
  if (threadIdx.x == 0) *addr_mod = reinterpret_cast<unsigned long long>(raw) % 16;
  v[threadIdx.x] = make_float4(1.f, 2.f, 3.f, static_cast<float>(threadIdx.x));
  __syncthreads();
  out[threadIdx.x] = v[blockDim.x - 1 - threadIdx.x].w;
}

__global__ void two_shared_arrays(int* out) {
  __shared__ int a[32], b[32];
  a[threadIdx.x] = static_cast<int>(threadIdx.x);
  b[threadIdx.x] = 100 + static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = a[31 - threadIdx.x] + b[threadIdx.x];
}

#define LAUNCH_FILL(ptr, v, n) ops::fill<<<((n) + 63) / 64, 64>>>(ptr, v, n)

template <class T>
std::vector<T> run_fill(int n, T value) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, n * sizeof(T)), cudaSuccess);
  ops::fill<<<(n + 31) / 32, 32>>>(d, value, n);  // deduced template arguments
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  return h;
}

TEST(Launch, DeducedTemplateArguments) {
  auto f = run_fill<float>(100, 0.5f);
  auto i = run_fill<int>(77, 3);
  for (int k = 0; k < 100; ++k) ASSERT_EQ(f[k], 0.5f + k);
  for (int k = 0; k < 77; ++k) ASSERT_EQ(i[k], 3 + k);
}

TEST(Launch, ExplicitTemplateArgumentsWhitespaceAndComments) {
  int* d;
  CHECK(cudaMalloc(&d, 64 * sizeof(int)));
  scaled_index<3>
      <<< /* grid */ dim3(2),
          dim3(64 >> 1),  // a shift inside the configuration
          0, 0 >>>(d);
  CHECK(cudaGetLastError());
  std::vector<int> h(64);
  CHECK(cudaMemcpy(h.data(), d, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int k = 0; k < 64; ++k) ASSERT_EQ(h[k], 3 * (k % 32)) << k;
  const char* not_a_launch = R"(kernel<<<1, 1>>>(x))";  // raw strings are left alone
  ASSERT_STREQ(not_a_launch, "kernel<<<1, 1>>>(x)");
  cudaFree(d);
}

TEST(Launch, LaunchInsideMacroAndLambda) {
  int* d;
  CHECK(cudaMalloc(&d, 100 * sizeof(int)));
  LAUNCH_FILL(d, 7, 100);
  auto again = [&](int v) { ops::fill<int><<<2, 64>>>(d, v, 100); };
  again(9);
  std::vector<int> h(100);
  CHECK(cudaMemcpy(h.data(), d, 100 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int k = 0; k < 100; ++k) ASSERT_EQ(h[k], 9 + k);
  cudaFree(d);
}

TEST(Launch, BuiltinsIn3D) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const int total = 12 * 24;
  int* d;
  CHECK(cudaMalloc(&d, 4 * total * sizeof(int)));
  coordinates<<<grid, block>>>(d);
  CHECK(cudaGetLastError());
  std::vector<int> h(4 * total);
  CHECK(cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int id = 0; id < total; ++id) {
    ASSERT_EQ(h[4 * id + 0], id / 24);
    ASSERT_EQ(h[4 * id + 1], id % 24);
    ASSERT_EQ(h[4 * id + 2], 432);
    ASSERT_EQ(h[4 * id + 3], 322);
  }
  cudaFree(d);
}

TEST(Launch, ParametersAreCopiedPerThread) {
  int* d;
  CHECK(cudaMalloc(&d, 64 * sizeof(int)));
  params_by_value<<<1, 64>>>(d, 1000);
  std::vector<int> h(64);
  CHECK(cudaMemcpy(h.data(), d, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int k = 0; k < 64; ++k) ASSERT_EQ(h[k], 1000 + k);
  cudaFree(d);
}

TEST(Launch, SharedMemoryDeclarations) {
  const int n = 128;
  std::vector<float> in(n), out(n);
  for (int k = 0; k < n; ++k) in[k] = 0.25f * k;
  float *din, *dout;
  CHECK(cudaMalloc(&din, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  reverse_in_dynamic_smem<<<1, n, n * sizeof(float)>>>(din, dout, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int k = 0; k < n; ++k) ASSERT_EQ(out[k], in[n - 1 - k]);

  unsigned long long* dmod;
  CHECK(cudaMalloc(&dmod, sizeof(unsigned long long)));
  aligned_dynamic<<<1, 64, 64 * sizeof(float4)>>>(dmod, dout);
  unsigned long long mod = 1;
  CHECK(cudaMemcpy(&mod, dmod, sizeof mod, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(out.data(), dout, 64 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(mod, 0u);
  for (int k = 0; k < 64; ++k) ASSERT_EQ(out[k], 63 - k);

  int* di;
  CHECK(cudaMalloc(&di, 32 * sizeof(int)));
  two_shared_arrays<<<1, 32>>>(di);
  std::vector<int> hi(32);
  CHECK(cudaMemcpy(hi.data(), di, 32 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int k = 0; k < 32; ++k) ASSERT_EQ(hi[k], 31 - k + 100 + k);
  cudaFree(din);
  cudaFree(dout);
  cudaFree(dmod);
  cudaFree(di);
}

// Invalid configurations must not run and must set the error CUDA sets: CUDA 13 answers
// cudaErrorInvalidValue to each of these (seen on an H200); CUDA 12 and older answered
// cudaErrorInvalidConfiguration to the first six.
struct BadLaunch {
  dim3 grid, block;
  size_t smem;
  cudaError_t expected;
};

TEST(Launch, InvalidConfigurationsAreRejected) {
  int* d;
  CHECK(cudaMalloc(&d, 4 * sizeof(int)));
  const BadLaunch cases[] = {
      {dim3(1), dim3(1025), 0, cudaErrorInvalidValue},         // over 1024 threads
      {dim3(1), dim3(32, 32, 2), 0, cudaErrorInvalidValue},    // 2048 threads in 3-D
      {dim3(1), dim3(1, 1, 65), 0, cudaErrorInvalidValue},     // z over 64
      {dim3(0), dim3(32), 0, cudaErrorInvalidValue},           // empty grid
      {dim3(1, 65536), dim3(32), 0, cudaErrorInvalidValue},    // grid.y over 65535
      {dim3(1), dim3(0), 0, cudaErrorInvalidValue},            // empty block
      {dim3(1), dim3(32), 200 * 1024, cudaErrorInvalidValue},  // more than any opt-in
  };
  for (const BadLaunch& c : cases) {
    const int marker = -12345;
    CHECK(cudaMemcpy(d, &marker, sizeof marker, cudaMemcpyHostToDevice));
    params_by_value<<<c.grid, c.block, c.smem>>>(d, 7);
    EXPECT_EQ(cudaPeekAtLastError(), c.expected) << "peek keeps the error";
    EXPECT_EQ(cudaGetLastError(), c.expected);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "get resets the error";
    int h = 0;
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    EXPECT_EQ(h, marker) << "a rejected launch must not run";
  }
  cudaFree(d);
}

TEST(Launch, DynamicSharedMemoryAbove48KBNeedsOptIn) {
  float *din, *dout;
  const int n = 64;
  CHECK(cudaMalloc(&din, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  CHECK(cudaMemset(din, 0, n * sizeof(float)));
  const size_t big = 64 * 1024;
  reverse_in_dynamic_smem<<<1, n, big>>>(din, dout, n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "64 KB without cudaFuncSetAttribute";
  CHECK(cudaFuncSetAttribute(reverse_in_dynamic_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)));
  reverse_in_dynamic_smem<<<1, n, big>>>(din, dout, n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // The attribute belongs to the kernel it was set for.
  unsigned long long* mod;
  CHECK(cudaMalloc(&mod, sizeof *mod));
  aligned_dynamic<<<1, 1, big>>>(mod, dout);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "64 KB for a kernel whose limit was not raised";
  cudaFree(mod);
  cudaFree(din);
  cudaFree(dout);
}

// A launch through a function pointer is a launch of the function it points to: the opt-in set
// for that function by name holds for it, and an opt-in set for another kernel does not.
TEST(Launch, ThroughAFunctionPointerTheKernelsOwnOptInHolds) {
  const int n = 64;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = 0.5f * static_cast<float>(i) + 1.f;
  float *din, *dout;
  CHECK(cudaMalloc(&din, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const size_t big = 64 * 1024;
  void (*kernel)(const float*, float*, int) = rotate_in_dynamic_smem;
  kernel<<<1, n, big>>>(din, dout, n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue)
      << "64 KB before rotate_in_dynamic_smem opted in";
  CHECK(cudaFuncSetAttribute(rotate_in_dynamic_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(big)));
  CHECK(cudaMemset(dout, 0xff, n * sizeof(float)));  // NaN until written
  kernel<<<1, n, big>>>(din, dout, n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the pointer's kernel opted in to 64 KB";
  std::vector<float> out(n);
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], in[(i + 1) % n]) << "element " << i;
  unsigned long long* mod;
  CHECK(cudaMalloc(&mod, sizeof *mod));
  void (*other)(unsigned long long*, float*) = aligned_dynamic;
  other<<<1, 1, big>>>(mod, dout);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "aligned_dynamic never opted in";
  cudaFree(mod);
  cudaFree(din);
  cudaFree(dout);
}

// An opt-in to more dynamic shared memory belongs to the one function it names: each
// instantiation of a kernel template is a function of its own, on a GPU as here.
TEST(Launch, AnOptInHoldsForTheInstantiationThatMadeItOnly) {
  const int n = 64;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = 0.25f * static_cast<float>(i) - 3.f;
  float *din, *dout;
  CHECK(cudaMalloc(&din, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const size_t big = 64 * 1024;
  CHECK(cudaFuncSetAttribute(shift_in_dynamic_smem<1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(big)));
  CHECK(cudaMemset(dout, 0xff, n * sizeof(float)));  // NaN until written
  EXPECT_EQ(launch_shift<1>(din, dout, n, big), cudaSuccess) << "shift_in_dynamic_smem<1> opted in";
  std::vector<float> out(n);
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], in[(i + 1) % n]) << "element " << i;

#ifdef __CUDASIM__  // the message names the instantiation, and why <1>'s opt-in does not count
  testing::internal::CaptureStderr();
#endif
  EXPECT_EQ(launch_shift<2>(din, dout, n, big), cudaErrorInvalidValue)
      << "shift_in_dynamic_smem<2> never opted in; <1> did";
#ifdef __CUDASIM__
  const std::string why = testing::internal::GetCapturedStderr();
  EXPECT_NE(why.find("launch of 'shift_in_dynamic_smem<2>'"), std::string::npos) << why;
  EXPECT_NE(why.find("cudaFuncSetAttribute(shift_in_dynamic_smem<2>,"), std::string::npos) << why;
  EXPECT_NE(why.find("another instantiation or overload of 'shift_in_dynamic_smem' opted in"),
            std::string::npos)
      << why;
#endif
  // Arguments whose types differ from the parameters' (float* for const float*) name the same
  // functions.
  float* in_rw = din;
  shift_in_dynamic_smem<2><<<1, n, big>>>(in_rw, dout, n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue)
      << "shift_in_dynamic_smem<2>, float* argument";
  shift_in_dynamic_smem<1><<<1, n, big>>>(in_rw, dout, n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "shift_in_dynamic_smem<1>, float* argument";

  cudaFuncAttributes opted{}, not_opted{};
  CHECK(cudaFuncGetAttributes(&opted, shift_in_dynamic_smem<1>));
  CHECK(cudaFuncGetAttributes(&not_opted, shift_in_dynamic_smem<2>));
  EXPECT_EQ(opted.maxDynamicSharedSizeBytes, static_cast<int>(big));
  EXPECT_EQ(not_opted.maxDynamicSharedSizeBytes, 48 * 1024)
      << "the default: 48 KB less the static 0";

  CHECK(cudaFuncSetAttribute(shift_in_dynamic_smem<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(big)));
  EXPECT_EQ(launch_shift<2>(din, dout, n, big), cudaSuccess) << "after its own opt-in";
  cudaFree(din);
  cudaFree(dout);
}

// Without an opt-in, the __shared__ variables and the dynamic shared memory of a block share
// 48 KB: 16 KB + 32 KB runs. An opt-in raises the dynamic part alone, and the static part comes on
// top. (Past those limits a GPU refuses the launch; the CPU backend stops with a diagnostic, see
// Diagnostics.StaticAndDynamicSharedMemoryTogether.)
TEST(Launch, StaticAndDynamicSharedMemoryShareADefault48KB) {
  const int n = 64;
  float* dout;
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  std::vector<float> out(n);
  for (const size_t dynamic : {size_t{32} * 1024, size_t{96} * 1024}) {
    if (dynamic > 48 * 1024) {
      CHECK(cudaFuncSetAttribute(static_and_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(dynamic)));
    }
    CHECK(cudaMemset(dout, 0xff, n * sizeof(float)));  // NaN until written
    static_and_dynamic<<<1, n, dynamic>>>(dout);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess)
        << "16 KB static beside " << dynamic << " bytes dynamic";
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(out[i], static_cast<float>((i + 1) % n) + 0.5f) << "element " << i;
  }
  cudaFree(dout);
}

// A block of at most __launch_bounds__ threads runs. (More is refused on a GPU; the CPU backend
// stops with a diagnostic, see Diagnostics.MoreThreadsThanTheLaunchBounds.)
TEST(Launch, WithinTheLaunchBoundsRuns) {
  int* d;
  CHECK(cudaMalloc(&d, 64 * sizeof(int)));
  within_bounds<64><<<1, 64>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  within_bounds<128><<<1, 64>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h(64);
  CHECK(cudaMemcpy(h.data(), d, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(h[i], i + 128) << "element " << i;
#ifndef __CUDASIM__  // what the hardware says to one thread too many
  within_bounds<32><<<1, 64>>>(d);
  const cudaError_t refused = cudaGetLastError();
  EXPECT_NE(refused, cudaSuccess) << "64 threads for __launch_bounds__(32)";
  std::printf("a launch beyond __launch_bounds__: %s\n", cudaGetErrorName(refused));
#endif
  cudaFree(d);
}
