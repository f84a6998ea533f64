// Atomics from many blocks at once: blocks run concurrently on several OS threads, so a
// non-atomic implementation would lose updates here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#define CHECK(call) ASSERT_EQ((call), cudaSuccess) << #call

struct Counters {
  int add_i, sub_i, max_i, min_i, and_i, or_i, cas_i;
  unsigned add_u, inc_u;
  unsigned long long add_ull;
  float add_f, max_f;
  double add_d;
  __half add_h;
  __nv_bfloat16 add_b;
  int exch_seen;
};

__global__ void hammer(Counters* c) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&c->add_i, 1);
  atomicSub(&c->sub_i, 2);
  atomicMax(&c->max_i, id);
  atomicMin(&c->min_i, -id);
  atomicAnd(&c->and_i, ~(1 << (id % 31)));
  atomicOr(&c->or_i, 1 << (id % 31));
  atomicAdd(&c->add_u, 3u);
  atomicInc(&c->inc_u, 1000u);
  atomicAdd(&c->add_ull, 1ull << 33);
  atomicAdd(&c->add_f, 0.5f);
  // CUDA has no float atomicMax: the usual compare-and-swap loop on the bit pattern.
  int* max_bits = reinterpret_cast<int*>(&c->max_f);
  int seen = *max_bits, expected;
  do {
    expected = seen;
    float next = fmaxf(__int_as_float(expected), static_cast<float>(id) * 0.25f);
    seen = atomicCAS(max_bits, expected, __float_as_int(next));
  } while (seen != expected);
  atomicAdd(&c->add_d, 0.125);
  if (id < 64) atomicAdd(&c->add_h, __float2half(1.0f));  // exact in fp16 up to 2048
  if (id < 64) atomicAdd(&c->add_b, __float2bfloat16(1.0f));  // exact in bf16 up to 256
  // A spin-free CAS increment: retry until our compare succeeds.
  int old = c->cas_i, assumed;
  do {
    assumed = old;
    old = atomicCAS(&c->cas_i, assumed, assumed + 1);
  } while (old != assumed);
  if (atomicExch(&c->exch_seen, id) == -1) atomicAdd(&c->add_i, 1000000);  // exactly one thread sees -1
}

TEST(Atomics, ConcurrentBlocksLoseNoUpdate) {
  const int blocks = 64, threads = 128, n = blocks * threads;
  Counters init{};
  init.and_i = -1;
  init.exch_seen = -1;
  init.max_f = -1.f;
  init.add_h = __float2half(0.f);
  init.add_b = __float2bfloat16(0.f);
  Counters* d;
  CHECK(cudaMalloc(&d, sizeof(Counters)));
  CHECK(cudaMemcpy(d, &init, sizeof init, cudaMemcpyHostToDevice));
  hammer<<<blocks, threads>>>(d);
  CHECK(cudaGetLastError());
  Counters c;
  CHECK(cudaMemcpy(&c, d, sizeof c, cudaMemcpyDeviceToHost));
  EXPECT_EQ(c.add_i, n + 1000000);
  EXPECT_EQ(c.sub_i, -2 * n);
  EXPECT_EQ(c.max_i, n - 1);
  EXPECT_EQ(c.min_i, -(n - 1));
  EXPECT_EQ(c.and_i, static_cast<int>(1u << 31));  // every bit below 31 was cleared by someone
  EXPECT_EQ(c.or_i, 0x7fffffff);
  EXPECT_EQ(c.add_u, 3u * n);
  EXPECT_EQ(c.inc_u, static_cast<unsigned>(n % 1001));  // wraps to 0 after 1000
  EXPECT_EQ(c.add_ull, static_cast<unsigned long long>(n) << 33);
  EXPECT_EQ(c.add_f, 0.5f * n);  // exact: all partial sums are representable
  EXPECT_EQ(c.max_f, (n - 1) * 0.25f);
  EXPECT_EQ(c.add_d, 0.125 * n);
  EXPECT_EQ(__half2float(c.add_h), 64.f);
  EXPECT_EQ(__bfloat162float(c.add_b), 64.f);
  EXPECT_EQ(c.cas_i, n);
  cudaFree(d);
}
