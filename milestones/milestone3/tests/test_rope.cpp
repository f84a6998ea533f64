// Milestone 3: RoPE — inverse frequencies, the cos/sin tables and the rotation of Q and K.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
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

TEST(Rope, InverseFrequenciesMatchReference) {
  const FreqCase cases[] = {
      {128, 500000.0, std::nullopt, "Llama-3-8B"},
      {128, 500000.0, kLlama31, "Llama 3.1 scaling: wavelengths above, inside and below the band"},
      {16, 500000.0, kTinyScaling, "a short head whose 8 frequencies cross every branch"},
      {2, 10000.0, std::nullopt, "one pair"},
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
          << "theta_" << i << " (first half pairs with second half; "
          << "theta_i = rope_theta^(-2i/h_d))";
    }
  }
  EXPECT_THROW(kernels::rope_inv_freq(7, 500000.0), std::invalid_argument);
  EXPECT_THROW(kernels::rope_inv_freq(8, 0.0), std::invalid_argument);
}

struct TableCase {
  int s, head_dim, first;
  std::optional<RopeScaling> scaling;
  const char* why;
};

TEST(Rope, TablesMatchReference) {
  const TableCase cases[] = {
      {1, 2, 0, std::nullopt, "one position, one pair"},
      {7, 10, 0, std::nullopt, "a prompt of 7; h_d/2 = 5 is odd"},
      {5, 128, 1000, std::nullopt, "positions 1000..1004: fp32 angles would lose digits here"},
      {3, 128, 8189, std::nullopt, "the end of Llama-3-8B's 8192-token context"},
      {4, 128, 6000, kLlama31, "Llama 3.1 scaling at long range"},
  };
  for (const TableCase& c : cases) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " h_d=" + std::to_string(c.head_dim) +
                 " first position " + std::to_string(c.first) + " (" + c.why + ")");
    const std::vector<int32_t> pos = positions_from(c.first, c.s);
    const Tables got = device_tables(pos, c.head_dim, 500000.0, c.scaling);
    const ref::RopeTables want =
        ref::rope_tables(positions_tensor(pos), c.head_dim, 500000.0, c.scaling);
    const Tolerance t = tol::rope(c.first + c.s - 1);
    EXPECT_TRUE(matches_reference(got.cos, to_vector(want.cos), t));
    EXPECT_TRUE(matches_reference(got.sin, to_vector(want.sin), t));
  }
}

struct ApplyCase {
  int s, n_heads, head_dim, first;
  std::optional<RopeScaling> scaling;
  const char* why;
};

// Rotates x with tables from the student's kernels and checks against the reference, naming
// the even/odd pairing and the base-10000 mistakes when the output matches them.
void check_apply(const ApplyCase& c) {
  SCOPED_TRACE("s=" + std::to_string(c.s) + " heads=" + std::to_string(c.n_heads) +
               " h_d=" + std::to_string(c.head_dim) + " first position " + std::to_string(c.first) +
               " (" + c.why + ")");
  const double theta = 500000.0;
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
  EXPECT_TRUE(matches_reference(d_x, to_vector(want), tol::rope(c.first + c.s - 1),
                                explaining(rope_pitfalls(tx, tp, c.n_heads, theta, c.scaling), d_x),
                                {"row", "head", "dim"}));
}

TEST(Rope, RotatesQueriesAndKeysLikeReference) {
  const ApplyCase cases[] = {
      {1, 1, 2, 0, std::nullopt, "one token at position 0: nothing turns"},
      {5, 3, 10, 0, std::nullopt, "odd number of pairs per head, 3 heads"},
      {7, 4, 16, 3, std::nullopt, "positions 3..9"},
      {9, 2, 64, 20, kTinyScaling, "llama3 scaling with every band inside the head"},
  };
  for (const ApplyCase& c : cases) check_apply(c);
}

TEST(Rope, LlamaThreeEightBShapes) {
  check_apply({4, 32, 128, 0, std::nullopt, "Q: h = 32 heads of 128"});
  check_apply({4, 8, 128, 0, std::nullopt, "K: h_k = 8 heads of 128"});
  check_apply({3, 8, 128, 8189, std::nullopt, "K at the end of the 8192-token context"});
  check_apply({2, 8, 128, 7000, kLlama31, "K with Llama 3.1 scaling"});
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
