// Seeds and generators for test data (see random.h).
#include "harness/check/random.h"

#include "harness/check/grader_seed.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace clockwork {

namespace {

// splitmix64: a tiny, well-mixed 64-bit generator. Each call advances the state by a constant.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// splitmix64's state after `draws` calls from `seed`: it only ever adds the constant, so any
// position of a stream can be reached directly, which lets a long stream be filled in parallel
// with exactly the values a single loop would give.
uint64_t state_after(uint64_t seed, size_t draws) {
  return seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(draws);
}

// Calls fill(first, end) over [0, n) split into one chunk per hardware thread; short ranges (the
// usual test tensor) stay on the calling thread. Filling the weights of a real-size projection
// (58 M values for Llama-3-8B's up_proj) is otherwise a large part of a test's time.
template <typename Fill>
void parallel_chunks(size_t n, Fill&& fill) {
  constexpr size_t kMinChunk = size_t{1} << 20;
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                          std::max<size_t>(1, n / kMinChunk));
  if (threads <= 1) {
    fill(size_t{0}, n);
    return;
  }
  std::vector<std::thread> workers;
  const size_t chunk = (n + threads - 1) / threads;
  for (size_t t = 1; t < threads; ++t) {
    const size_t first = std::min(n, t * chunk), end = std::min(n, first + chunk);
    workers.emplace_back([&fill, first, end] { fill(first, end); });
  }
  fill(size_t{0}, std::min(n, chunk));
  for (std::thread& w : workers) w.join();
}

constexpr double kTwoPi = 6.283185307179586476925;

// Uniform double in [0, 1) from the top 53 bits.
double unit(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1p-53;
}

// What the running test recorded through test_seed().
struct SeedRecord {
  std::string test;             // full GoogleTest name, "" outside a test
  std::vector<uint64_t> seeds;  // every seed handed out to it, in order, without repeats
  std::string env;              // CLOCKWORK_SEED as given, "" when unset
  bool secret = false;          // drawn from the grader's seed: nothing of it is printed
};

// The grader's seed channel. take_grader_seed() may run before any dynamic initialisation, so
// this is constant-initialised plain data only.
enum class Channel { unread, absent, ok, empty, malformed, bad_fd };
struct GraderSeed {
  Channel state;
  uint64_t value;
};
constinit GraderSeed grader_seed{Channel::unread, 0};

// `name`'s value in `envp`, or nullptr.
const char* env_value(char** envp, const char* name) {
  const size_t n = std::strlen(name);
  for (char** e = envp; e && *e; ++e) {
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

// A seed as CLOCKWORK_SEED takes it: an unsigned 64-bit number, decimal or 0x-hex, alone.
bool parse_seed(const char* text, uint64_t& out) {
  if (!text || !*text || !(*text >= '0' && *text <= '9')) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') return false;
  out = v;
  return true;
}

std::string channel_problem() {
  switch (grader_seed.state) {
    case Channel::empty:
      return "the autograder's seed channel (CLOCKWORK_SEED_FD) was empty or already closed: something in "
             "this process read it before the tests could";
    case Channel::malformed:
      return "the autograder's seed channel (CLOCKWORK_SEED_FD) did not hold a number";
    case Channel::bad_fd:
      return "CLOCKWORK_SEED_FD is not a descriptor number";
    case Channel::unread:
      return "CLOCKWORK_SEED_FD is set, but this test program never read the seed from it (its seed reader, "
             "grading/hidden/seed_channel.cpp, is not linked in)";
    default:
      return "";
  }
}

std::mutex seed_mutex;
SeedRecord last_seed;
bool have_seed = false;

std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!info) return "";
  return std::string(info->test_suite_name()) + "." + info->name();
}

uint16_t bf16_bits(__nv_bfloat16 v) {
  uint16_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

__nv_bfloat16 bf16_from_bits(uint16_t b) {
  __nv_bfloat16_raw raw;
  raw.x = b;
  return __nv_bfloat16(raw);
}

}  // namespace

void take_grader_seed(char** envp) {
  if (grader_seed.state != Channel::unread) return;
  grader_seed.state = Channel::absent;
  const char* fd_text = env_value(envp, "CLOCKWORK_SEED_FD");
  if (!fd_text) return;
  uint64_t fd = 0;
  if (!parse_seed(fd_text, fd) || fd > 65535) {
    grader_seed.state = Channel::bad_fd;
    return;
  }
  // Read to the end: the grader wrote the seed and closed its end before the program started.
  char text[64];
  size_t n = 0;
  bool too_long = false;
  for (;;) {
    char* at = n < sizeof text - 1 ? text + n : nullptr;
    char spill[16];
    const ssize_t got = read(static_cast<int>(fd), at ? at : spill, at ? sizeof text - 1 - n : sizeof spill);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (at) {
      n += static_cast<size_t>(got);
    } else {
      too_long = true;
    }
  }
  close(static_cast<int>(fd));
  text[n] = '\0';
  if (n == 0) {
    grader_seed.state = Channel::empty;
  } else if (too_long || !parse_seed(text, grader_seed.value)) {
    grader_seed.state = Channel::malformed;
  } else {
    grader_seed.state = Channel::ok;
  }
}

uint64_t test_seed(uint64_t fallback) {
  uint64_t seed = fallback;
  std::string env_text;
  bool secret = false;
  if (grader_seed.state == Channel::ok) {
    uint64_t state = grader_seed.value ^ (fallback * 0xD1B54A32D192ED03ull);
    seed = splitmix64(state);
    secret = true;
  } else if (grader_seed.state != Channel::absent &&
             (grader_seed.state != Channel::unread || std::getenv("CLOCKWORK_SEED_FD"))) {
    throw std::invalid_argument(channel_problem());
  } else if (const char* env = std::getenv("CLOCKWORK_SEED"); env && *env) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 0);
    if (errno != 0 || end == env || *end != '\0') {
      throw std::invalid_argument(std::string("CLOCKWORK_SEED='") + env +
                                  "' is not a number (decimal or 0x-hex)");
    }
    uint64_t state = static_cast<uint64_t>(v) ^ (fallback * 0xD1B54A32D192ED03ull);
    seed = splitmix64(state);
    env_text = env;
  }
  const std::string test = current_test_name();
  std::lock_guard<std::mutex> lk(seed_mutex);
  if (!have_seed || last_seed.test != test) last_seed = SeedRecord{test, {}, "", false};
  have_seed = true;
  last_seed.env = env_text;
  last_seed.secret = secret;
  if (std::find(last_seed.seeds.begin(), last_seed.seeds.end(), seed) == last_seed.seeds.end()) {
    last_seed.seeds.push_back(seed);
  }
  return seed;
}

std::string seed_note() {
  std::lock_guard<std::mutex> lk(seed_mutex);
  if (!have_seed || last_seed.test != current_test_name() || last_seed.seeds.empty()) return "";
  const bool one = last_seed.seeds.size() == 1;
  // The seeds derived from the grader's seed would give it away (the mixing can be undone).
  if (last_seed.secret) return "test data: drawn from the autograder's secret seed (not shown)";
  std::string list;
  for (size_t i = 0; i < last_seed.seeds.size(); ++i) {
    list += (i ? ", " : "") + std::to_string(last_seed.seeds[i]);
  }
  std::string note = std::string("test data: ") + (one ? "seed " : "seeds ") + list;
  if (last_seed.env.empty()) {
    return note + (one ? " (the test's fixed seed" : " (the test's fixed seeds") +
           "; set CLOCKWORK_SEED=<n> to try other data)";
  }
  return note + ", derived from CLOCKWORK_SEED=" + last_seed.env +
         " (run with the same CLOCKWORK_SEED to reproduce)";
}

std::vector<float> random_normal(size_t n, uint64_t seed, float stddev, float mean) {
  if (!(stddev > 0.f)) {
    throw std::invalid_argument("random_normal: stddev must be > 0 (got " + std::to_string(stddev) +
                                ")");
  }
  std::vector<float> out(n);
  // Box-Muller: two independent normals from two uniforms. Pair p uses draws 2p and 2p+1.
  parallel_chunks((n + 1) / 2, [&](size_t first_pair, size_t end_pair) {
    uint64_t state = state_after(seed, 2 * first_pair);
    for (size_t p = first_pair; p < end_pair; ++p) {
      const size_t i = 2 * p;
      const double u1 = 1.0 - unit(state);  // (0, 1]: log stays finite
      const double u2 = unit(state);
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double a = kTwoPi * u2;
      out[i] = static_cast<float>(mean + stddev * r * std::cos(a));
      if (i + 1 < n) out[i + 1] = static_cast<float>(mean + stddev * r * std::sin(a));
    }
  });
  return out;
}

std::vector<float> random_uniform(size_t n, uint64_t seed, float lo, float hi) {
  if (!(lo < hi)) {
    throw std::invalid_argument("random_uniform: need lo < hi (got " + std::to_string(lo) + ", " +
                                std::to_string(hi) + ")");
  }
  std::vector<float> out(n);
  parallel_chunks(n, [&](size_t first, size_t end) {
    uint64_t state = state_after(seed, first);
    for (size_t i = first; i < end; ++i) {
      float v = static_cast<float>(lo + (static_cast<double>(hi) - lo) * unit(state));
      out[i] = v < hi ? v : lo;  // rounding to float can reach hi; keep the interval half-open
    }
  });
  return out;
}

std::vector<int32_t> random_ids(size_t n, int64_t vocab, uint64_t seed) {
  if (vocab <= 0 || vocab > INT32_MAX) {
    throw std::invalid_argument("random_ids: vocab must be in [1, 2^31) (got " +
                                std::to_string(vocab) + ")");
  }
  std::vector<int32_t> out(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<int32_t>(splitmix64(state) % static_cast<uint64_t>(vocab));
  }
  if (n >= 2 && vocab >= 2) {
    bool all_same = true;
    for (size_t i = 1; i < n && all_same; ++i) all_same = out[i] == out[0];
    if (all_same) out[n - 1] = static_cast<int32_t>((out[0] + 1) % vocab);
  }
  return out;
}

std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& values) {
  std::vector<__nv_bfloat16> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t x;
    std::memcpy(&x, &values[i], sizeof x);
    uint16_t b;
    if (std::isnan(values[i])) {
      b = static_cast<uint16_t>((x >> 16) | 0x0040u);  // keep sign and payload top, stay quiet NaN
    } else {
      const uint32_t lsb = (x >> 16) & 1u;
      b = static_cast<uint16_t>((x + 0x7FFFu + lsb) >> 16);  // round to nearest, ties to even
    }
    out[i] = bf16_from_bits(b);
  }
  return out;
}

std::vector<float> from_bf16(const std::vector<__nv_bfloat16>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t b = bf16_bits(values[i]);
    const uint32_t x = b == 0xFFFFu ? 0xFFFFFFFFu : static_cast<uint32_t>(b) << 16;
    std::memcpy(&out[i], &x, sizeof x);
  }
  return out;
}

std::vector<float> round_to_bf16(const std::vector<float>& values) {
  return from_bf16(to_bf16(values));
}

}  // namespace clockwork
