// Greedy and temperature / top-k / top-p sampling (see sampling.h).
#include "tools/clockwork/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace clockwork::cli {

SamplingOptions sampling_from_args(const Args& args) {
  SamplingOptions o;
  o.temperature = args.get_double("temperature", 0.0, 0.0, 100.0);
  if (o.temperature == 0.0) {
    for (const char* name : {"top-k", "top-p", "seed"}) {
      if (args.has(name)) {
        throw UsageError(std::string("--") + name +
                         " applies to sampling; add --temperature T (> 0), or drop it for greedy");
      }
    }
    return o;
  }
  o.top_k = args.get_int("top-k", 0, 0, INT32_MAX);
  o.top_p = args.get_double("top-p", 1.0, 1e-9, 1.0);
  o.seed = args.has("seed") ? static_cast<uint64_t>(args.get_int("seed", 0, 0, INT64_MAX))
                            : std::random_device{}() & 0xffffffffULL;
  return o;
}

std::string describe(const SamplingOptions& o) {
  if (o.temperature == 0.0) return "greedy";
  std::ostringstream ss;
  ss << "sampling: temperature " << o.temperature;
  if (o.top_k > 0) ss << ", top-k " << o.top_k;
  if (o.top_p < 1.0) ss << ", top-p " << o.top_p;
  ss << ", seed " << o.seed;
  return ss.str();
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}

int32_t Sampler::pick(const std::vector<float>& logits, int32_t limit) {
  const int32_t n = std::min<int32_t>(limit, static_cast<int32_t>(logits.size()));
  if (options_.temperature == 0.0) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + n) -
                                logits.begin());
  }
  // Candidates, most likely first (ties by id, so the order is deterministic).
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const int32_t k =
      options_.top_k > 0 ? static_cast<int32_t>(std::min<int64_t>(options_.top_k, n)) : n;
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
  order.resize(k);

  // Softmax of logits / T over the candidates, the largest subtracted first for stability.
  std::vector<double> p(k);
  const double top = logits[order[0]];
  double sum = 0;
  for (int32_t i = 0; i < k; ++i) {
    p[i] = std::exp((logits[order[i]] - top) / options_.temperature);
    sum += p[i];
  }
  // Nucleus: the shortest prefix whose probability reaches top_p (at least one token).
  int32_t keep = k;
  if (options_.top_p < 1.0) {
    double cumulative = 0;
    for (int32_t i = 0; i < k; ++i) {
      cumulative += p[i] / sum;
      if (cumulative >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  const double kept = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * kept;  // [0, kept)
  double cumulative = 0;
  for (int32_t i = 0; i < keep; ++i) {
    cumulative += p[i];
    if (u < cumulative) return order[i];
  }
  return order[keep - 1];  // u landed on the rounding error at the very end
}

}  // namespace clockwork::cli
