// A differential test of the checker's inline read check (harness/cudasim/plugins/inline_reads.cpp):
// a kernel runs a random program of shared-memory reads and writes, __syncwarp()s and
// __syncthreads(), made from a seed. inline_reads_diff.cmake runs each seed with
// CUDASIM_INLINE_READS=1 and =0: a read may skip the call into the checker only where the call
// would have changed nothing, so both runs must end the same way, with the same report or none.
// Every read is the same source line and so is every write, so a report names the same lines
// whichever read of a thread the checker kept.
//
//   inline_reads_diff SEED      runs the seed's program; exit 0 when nothing was reported
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

constexpr int kThreads = 64;  // two warps
constexpr int kWords = 8;
constexpr int kSteps = 48;
constexpr int kStride = 1 + kThreads;  // a step: its kind, then one action per thread

enum Step { kAccess = 0, kSyncwarp = 1, kSyncthreads = 2 };

// Per thread in an access step: -1 nothing, 0..7 read that word, 8..15 write word - 8.
__global__ void interpret(const int* program, float* out) {
  __shared__ float words[kWords];
  const int t = threadIdx.x;
  if (t < kWords) words[t] = static_cast<float>(t);
  __syncthreads();
  float acc = 0.f;
  for (int i = 0; i < kSteps; ++i) {
    const int* step = program + i * kStride;
    if (step[0] == kSyncwarp) {
      __syncwarp();
    } else if (step[0] == kSyncthreads) {
      __syncthreads();
    } else if (const int a = step[1 + t]; a >= kWords) {
      words[a - kWords] = acc;
    } else if (a >= 0) {
      acc += words[a];
    }
  }
  out[t] = acc;
}

// Two kinds of program. Odd seeds: every thread reads often and writes rarely (how rarely varies),
// so that many words are read by several threads of both warps, what the checker grants, before
// a race comes. Even seeds are race-free: in each barrier interval a word is either only read, or
// belongs to one warp, whose lanes take turns on it (one a step, with a __syncwarp() after).
std::vector<int> make_program(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const bool race_free = seed % 2 == 0;
  const double write_rate = 0.0005 + 0.01 * u(rng);
  std::vector<int> p(kSteps * kStride, -1);
  int owner[kWords];  // race-free programs: -1 read-only in this interval, else the warp it belongs to
  auto new_interval = [&] {
    for (int& o : owner) o = static_cast<int>(rng() % 3) - 1;
  };
  new_interval();
  bool turn_taken = false;  // a lane took its turn on a warp's word in the last step
  for (int i = 0; i < kSteps; ++i) {
    int* step = &p[i * kStride];
    const double r = u(rng);
    step[0] = turn_taken || r < 0.12 ? kSyncwarp : r < 0.2 ? kSyncthreads : kAccess;
    turn_taken = false;
    if (step[0] == kSyncthreads) new_interval();
    if (step[0] != kAccess) continue;
    if (!race_free) {
      for (int t = 0; t < kThreads; ++t) {
        const double v = u(rng);
        const int word = static_cast<int>(rng() % kWords);
        step[1 + t] = v < write_rate ? kWords + word : v < 0.7 ? word : -1;
      }
      continue;
    }
    for (int t = 0; t < kThreads; ++t) {
      const int word = static_cast<int>(rng() % kWords);
      if (owner[word] < 0 && u(rng) < 0.7) step[1 + t] = word;
    }
    for (int word = 0; word < kWords; ++word) {
      if (owner[word] < 0 || u(rng) < 0.5) continue;
      const int t = owner[word] * 32 + static_cast<int>(rng() % 32);
      step[1 + t] = u(rng) < 0.5 ? kWords + word : word;
      turn_taken = true;
    }
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SEED\n", argv[0]);
    return 2;
  }
  const std::vector<int> program = make_program(static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)));
  int* d_program = nullptr;
  float* d_out = nullptr;
  cudaMalloc(&d_program, program.size() * sizeof(int));
  cudaMalloc(&d_out, kThreads * sizeof(float));
  cudaMemcpy(d_program, program.data(), program.size() * sizeof(int), cudaMemcpyHostToDevice);
  interpret<<<1, kThreads>>>(d_program, d_out);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  std::vector<float> out(kThreads);
  cudaMemcpy(out.data(), d_out, kThreads * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0;
  for (float v : out) sum += v;
  std::printf("no report, outputs sum to %.9g\n", sum);
  return 0;
}
