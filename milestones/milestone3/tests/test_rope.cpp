// Milestone 3: RoPE — inverse frequencies, the cos/sin tables and the rotation of Q and K.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "milestones/milestone3/tests/candidates.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

// Llama 3.1's rope_scaling, and a tiny one whose bands fall inside a short head.
const RopeScaling kLlama31{"llama3", 8.0, 1.0, 4.0, 8192};
const RopeScaling kTinyScaling{"llama3", 8.0, 1.0, 4.0, 16};

kernels::RopeScalingParams params_of(const RopeScaling& s) {
  return {s.factor, s.low_freq_factor, s.high_freq_factor,
          static_cast<double>(s.original_max_position_embeddings)};
}

std::vector<double> inv_freq_of(int head_dim, double theta,
                                const std::optional<RopeScaling>& scaling) {
  if (!scaling) return kernels::rope_inv_freq(head_dim, theta);
  const kernels::RopeScalingParams p = params_of(*scaling);
  return kernels::rope_inv_freq(head_dim, theta, &p);
}

std::vector<int32_t> positions_from(int first, int s) {
  std::vector<int32_t> p(static_cast<size_t>(s));
  for (int i = 0; i < s; ++i) p[static_cast<size_t>(i)] = first + i;
  return p;
}

torch::Tensor positions_tensor(const std::vector<int32_t>& p) {
  return to_tensor(p, {static_cast<int64_t>(p.size())}).to(torch::kLong);
}

// The inverse frequencies on the device (DeviceBuffer holds float, int and bf16 only).
class DeviceDoubles {
 public:
  explicit DeviceDoubles(const std::vector<double>& host) {
    if (cudaMalloc(&data_, host.size() * sizeof(double)) != cudaSuccess ||
        cudaMemcpy(data_, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice) !=
            cudaSuccess) {
      throw std::runtime_error("cannot upload the inverse frequencies");
    }
  }
  ~DeviceDoubles() { cudaFree(data_); }
  DeviceDoubles(const DeviceDoubles&) = delete;
  DeviceDoubles& operator=(const DeviceDoubles&) = delete;
  const double* data() const { return data_; }

 private:
  double* data_ = nullptr;
};

// Device tables for `positions`, from the student's rope_inv_freq and rope_tables.
struct Tables {
  DeviceBuffer<float> cos, sin;
};

Tables device_tables(const std::vector<int32_t>& positions, int head_dim, double theta,
                     const std::optional<RopeScaling>& scaling) {
  const int s = static_cast<int>(positions.size()), half = head_dim / 2;
  DeviceBuffer<int32_t> d_pos("positions", {s});
  d_pos.upload(positions);
  const DeviceDoubles d_inv(inv_freq_of(head_dim, theta, scaling));
  Tables t{DeviceBuffer<float>("cos_table", {s, half}),
           DeviceBuffer<float>("sin_table", {s, half})};
  kernels::rope_tables(d_pos.data(), d_inv.data(), t.cos.data(), t.sin.data(), s, half);
  return t;
}

struct FreqCase {
  int head_dim;
  double theta;
  std::optional<RopeScaling> scaling;
  const char* why;
};

// What a wrong set of frequencies looks like, named from the mistakes that give it: each
// candidate is the whole table a known slip computes; the first that matches every entry names
// the failure. Otherwise the formula itself is repeated.
std::string explain_frequencies(const std::vector<double>& got, const FreqCase& c) {
  const auto table = [](const torch::Tensor& t) {
    const torch::Tensor d = t.contiguous();
    return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  };
  const auto plain = [&](double theta, double exponent_scale, bool fp32) {
    std::vector<double> f(static_cast<size_t>(c.head_dim / 2));
    for (size_t i = 0; i < f.size(); ++i) {
      const double e = -exponent_scale * static_cast<double>(i) / c.head_dim;
      f[i] = fp32 ? std::pow(static_cast<float>(theta), static_cast<float>(e)) : std::pow(theta, e);
    }
    return f;
  };
  std::vector<std::pair<std::vector<double>, std::string>> mistakes;
  if (c.scaling) {
    mistakes.push_back({plain(c.theta, 2, false),
                        "these are the frequencies without rope_scaling: apply the llama3 "
                        "scaling (wavelengths above original/low_freq_factor divided by factor, "
                        "those between the two bounds blended)"});
  }
  for (double fixed : {500000.0, 10000.0}) {
    if (fixed == c.theta) continue;
    mistakes.push_back({table(ref::rope_inv_freq(c.head_dim, fixed, c.scaling)),
                        "these are the frequencies of rope_theta = " +
                            std::to_string(static_cast<long long>(fixed)) +
                            ": use the rope_theta passed in (the model's config), not a constant"});
  }
  if (!c.scaling) {
    mistakes.push_back({plain(c.theta, 1, false),
                        "the exponent is -2i/h_d, not -i/h_d: pair i turns at rope_theta^(-2i/h_d)"});
    mistakes.push_back({plain(c.theta, 2, true),
                        "computed in fp32: form rope_theta^(-2i/h_d) in double (fp32 loses the "
                        "low frequencies' digits, which long positions multiply)"});
  }
  for (const auto& [table_of_mistake, why] : mistakes) {
    bool all = table_of_mistake.size() == got.size();
    for (size_t i = 0; all && i < got.size(); ++i) {
      all = std::fabs(got[i] - table_of_mistake[i]) <= 1e-9 * std::fabs(table_of_mistake[i]);
    }
    if (all) return "This looks like a known mistake: " + why;
  }
  return "theta_i = rope_theta^(-2i/h_d) for i = 0 .. h_d/2 - 1, with the rope_theta passed in" +
         std::string(c.scaling ? ", then the llama3 scaling" : "");
}

TEST(Rope, InverseFrequenciesMatchReference) {
  const FreqCase cases[] = {
      {128, 500000.0, std::nullopt, "Llama-3-8B"},
      {128, 500000.0, kLlama31, "Llama 3.1 scaling: wavelengths above, inside and below the band"},
      {16, 500000.0, kTinyScaling, "a short head whose 8 frequencies cross every branch"},
      {2, 10000.0, std::nullopt, "one pair"},
      {64, 10000.0, std::nullopt, "base 10000: theta comes from the argument, not from Llama 3"},
      {128, 1.0e6, kLlama31, "base 1e6 with Llama 3.1 scaling"},
  };
  for (const FreqCase& c : cases) {
    SCOPED_TRACE("h_d=" + std::to_string(c.head_dim) + " (" + c.why + ")");
    const std::vector<double> got = inv_freq_of(c.head_dim, c.theta, c.scaling);
    const torch::Tensor want_t = ref::rope_inv_freq(c.head_dim, c.theta, c.scaling).contiguous();
    const double* want = want_t.data_ptr<double>();
    ASSERT_EQ(got.size(), static_cast<size_t>(c.head_dim / 2));
    for (size_t i = 0; i < got.size(); ++i) {
      // Same double formula: only a different order of the same few operations may differ.
      EXPECT_NEAR(got[i], want[i], 1e-12 * want[i])
          << "theta_" << i << " for rope_theta = " << c.theta << ". "
          << explain_frequencies(got, c);
      if (std::fabs(got[i] - want[i]) > 1e-12 * want[i]) break;  // one report per table
    }
  }
  EXPECT_THROW(kernels::rope_inv_freq(7, 500000.0), std::invalid_argument);
  EXPECT_THROW(kernels::rope_inv_freq(8, 0.0), std::invalid_argument);
}

struct TableCase {
  int s, head_dim, first;
  std::optional<RopeScaling> scaling;
  const char* why;
  double theta = 500000.0;
};

// The student's tables against the reference at the tight table tolerance (tol::rope_table):
// angles and their cos/sin belong in double. Mistakes of the tables are named.
void check_tables(const TableCase& c) {
  SCOPED_TRACE("s=" + std::to_string(c.s) + " h_d=" + std::to_string(c.head_dim) +
               " first position " + std::to_string(c.first) + " theta " +
               std::to_string(c.theta) + " (" + c.why + ")");
  const std::vector<int32_t> pos = positions_from(c.first, c.s);
  const Tables got = device_tables(pos, c.head_dim, c.theta, c.scaling);
  const torch::Tensor tp = positions_tensor(pos);
  const ref::RopeTables want = ref::rope_tables(tp, c.head_dim, c.theta, c.scaling);
  RopeTableCandidates wrong = rope_table_pitfalls(tp, c.head_dim, c.theta, c.scaling);
  EXPECT_TRUE(matches_reference(got.cos, to_vector(want.cos), tol::rope_table(),
                                explaining(std::move(wrong.cos), got.cos)));
  EXPECT_TRUE(matches_reference(got.sin, to_vector(want.sin), tol::rope_table(),
                                explaining(std::move(wrong.sin), got.sin)));
}

TEST(Rope, TablesMatchReference) {
  const TableCase cases[] = {
      {1, 2, 0, std::nullopt, "one position, one pair"},
      {7, 10, 0, std::nullopt, "a prompt of 7; h_d/2 = 5 is odd"},
      {5, 128, 1000, std::nullopt, "positions 1000..1004: fp32 angles would lose digits here"},
      {3, 128, 8189, std::nullopt, "the end of Llama-3-8B's 8192-token context"},
      {4, 128, 6000, kLlama31, "Llama 3.1 scaling at long range"},
      {6, 64, 40, std::nullopt, "base 10000: theta comes from the argument", 10000.0},
      {6, 64, 40, kTinyScaling, "base 1e6 with scaling", 1.0e6},
  };
  for (const TableCase& c : cases) check_tables(c);
}

// Llama 3.1 runs to position 131071 (128K context): there an angle p·θ_i formed in fp32 (fp32 θ_i
// times p, one rounding) is off by up to 0.0058 in cos and sin, about 97000·u, against the 4·u
// that tables computed in double and rounded once stay within (tol::rope_table). Measured for
// h_d = 128, θ = 500000, eight positions each: 5000·u from position 8192, 12000·u from 16380,
// 42000·u from 65533, 97000·u from 131064, with and without llama3 scaling alike (the largest
// errors come from the high frequencies, which scaling leaves as they are).
TEST(Rope, TablesAtLongRangeAreFormedInDouble) {
  for (const auto& scaling : {std::optional<RopeScaling>{}, std::optional<RopeScaling>{kLlama31}}) {
    check_tables({8, 128, 8192, scaling, "just past Llama-3-8B's context"});
    check_tables({8, 128, 65533, scaling, "positions 65533..65540"});
    check_tables({8, 128, 131064, scaling, "the last positions of a 128K context"});
  }
  check_tables({4, 64, 131068, kLlama31, "base 10000 at 128K", 10000.0});
}

struct ApplyCase {
  int s, n_heads, head_dim, first;
  std::optional<RopeScaling> scaling;
  const char* why;
  double theta = 500000.0;
  // Tolerance: tol::rope(last position) by default; long-range cases check the rotation alone
  // (tol::rope_rotation), since their tables must be exact to one rounding.
  bool rotation_only = false;
};

// Rotates x with tables from the student's kernels and checks against the reference, naming
// the even/odd pairing and the base-10000 mistakes when the output matches them.
void check_apply(const ApplyCase& c) {
  SCOPED_TRACE("s=" + std::to_string(c.s) + " heads=" + std::to_string(c.n_heads) +
               " h_d=" + std::to_string(c.head_dim) + " first position " + std::to_string(c.first) +
               " theta " + std::to_string(c.theta) + " (" + c.why + ")");
  const double theta = c.theta;
  const int64_t width = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const std::vector<int32_t> pos = positions_from(c.first, c.s);
  const auto x = random_normal(static_cast<size_t>(c.s * width),
                               test_seed(700 + c.s * 31 + c.head_dim + c.first));
  const Tables tables = device_tables(pos, c.head_dim, theta, c.scaling);
  DeviceBuffer<float> d_x("x (rotated in place)", {c.s, c.n_heads, c.head_dim});
  d_x.upload(x);
  kernels::rope_apply(d_x.data(), tables.cos.data(), tables.sin.data(), c.s, c.n_heads, c.head_dim);

  const torch::Tensor tx = to_tensor(x, {c.s, width});
  const torch::Tensor tp = positions_tensor(pos);
  const torch::Tensor want =
      ref::apply_rope(tx, ref::rope_tables(tp, c.head_dim, theta, c.scaling), c.n_heads);
  const Tolerance t = c.rotation_only ? tol::rope_rotation() : tol::rope(c.first + c.s - 1);
  EXPECT_TRUE(matches_reference(d_x, to_vector(want), t,
                                explaining(rope_pitfalls(tx, tp, c.n_heads, theta, c.scaling), d_x),
                                {"row", "head", "dim"}));
}

TEST(Rope, RotatesQueriesAndKeysLikeReference) {
  const ApplyCase cases[] = {
      {1, 1, 2, 0, std::nullopt, "one token at position 0: nothing turns"},
      {5, 3, 10, 0, std::nullopt, "odd number of pairs per head, 3 heads"},
      {7, 4, 16, 3, std::nullopt, "positions 3..9"},
      {9, 2, 64, 20, kTinyScaling, "llama3 scaling with every band inside the head"},
      {7, 4, 16, 3, std::nullopt, "base 10000, taken from the argument", 10000.0},
      {5, 2, 32, 11, kTinyScaling, "base 1e6 with scaling", 1.0e6},
  };
  for (const ApplyCase& c : cases) check_apply(c);
}

TEST(Rope, LlamaThreeEightBShapes) {
  check_apply({4, 32, 128, 0, std::nullopt, "Q: h = 32 heads of 128"});
  check_apply({4, 8, 128, 0, std::nullopt, "K: h_k = 8 heads of 128"});
  check_apply({3, 8, 128, 8189, std::nullopt, "K at the end of the 8192-token context"});
  check_apply({2, 8, 128, 7000, kLlama31, "K with Llama 3.1 scaling"});
}

// Q and K rotated at positions up to 131071, each with tables from the student's kernels: a
// rotation from exact tables is within tol::rope_rotation, while tables from fp32 angles are off
// by up to 0.0058 there (see TablesAtLongRangeAreFormedInDouble), thousands of times more.
TEST(Rope, RotatesAtLongRange) {
  check_apply({4, 8, 128, 8192, std::nullopt, "K past 8K", 500000.0, true});
  check_apply({4, 8, 128, 131068, std::nullopt, "K at the end of 128K", 500000.0, true});
  check_apply({4, 8, 128, 131068, kLlama31, "K at the end of 128K, Llama 3.1 scaling", 500000.0,
               true});
  check_apply({3, 4, 64, 100000, kLlama31, "base 10000 at long range", 10000.0, true});
}

TEST(Rope, RejectsBadArguments) {
  DeviceBuffer<float> x("x", {2, 6}), c("cos", {2, 3}), s("sin", {2, 3});
  EXPECT_THROW(kernels::rope_apply(x.data(), c.data(), s.data(), 2, 2, 3),
               std::invalid_argument);  // odd h_d
  EXPECT_THROW(kernels::rope_apply(x.data(), c.data(), s.data(), -1, 1, 6), std::invalid_argument);
  DeviceBuffer<int32_t> p("positions", {2});
  const DeviceDoubles f({1.0, 0.1, 0.01});
  EXPECT_THROW(kernels::rope_tables(p.data(), f.data(), c.data(), c.data(), 2, 3),
               std::invalid_argument);
  EXPECT_THROW(kernels::rope_tables(p.data(), f.data(), c.data(), s.data(), 2, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace clockwork
