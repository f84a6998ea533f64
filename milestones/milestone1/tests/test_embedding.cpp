// Milestone 1: the embedding kernel against the reference, on both backends.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "harness/check/compare.h"
#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "kernels/kernels.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

struct EmbeddingCase {
  int s, d, vocab;
  const char* why;
};

// Awkward sizes on purpose: 1, primes, rows that are not a multiple of the block size.
const EmbeddingCase kCases[] = {
    {1, 1, 1, "the smallest case"},
    {7, 5, 13, "prime sizes"},
    {33, 300, 1000, "d not a multiple of the block size"},
    {4, 4096, 2048, "Llama-3-8B's hidden size"},
};

TEST(Embedding, MatchesReference) {
  for (const EmbeddingCase& c : kCases) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " d=" + std::to_string(c.d) + " vocab=" + std::to_string(c.vocab) +
                 " (" + c.why + ")");
    const uint64_t seed = test_seed(101 + c.d);
    const auto ids = random_ids(c.s, c.vocab, seed);
    const auto table = to_bf16(random_normal(static_cast<size_t>(c.vocab) * c.d, seed + 1));
    DeviceBuffer<int32_t> d_ids("ids", {c.s});
    DeviceBuffer<__nv_bfloat16> d_table("embed_tokens", {c.vocab, c.d});
    DeviceBuffer<float> x("x", {c.s, c.d});
    d_ids.upload(ids);
    d_table.upload(table);
    kernels::embedding(d_ids.data(), d_table.data(), x.data(), c.s, c.d, c.vocab);
    const auto expected = to_vector(ref::embedding(to_tensor(ids, {c.s}), to_tensor(table, {c.vocab, c.d})));
    EXPECT_TRUE(matches_reference(x, expected, tol::embedding()));
  }
}

TEST(Embedding, OutOfRangeIdIsAnErrorNamingIt) {
  const int s = 5, d = 8, vocab = 10;
  DeviceBuffer<__nv_bfloat16> table("embed_tokens", {vocab, d});
  table.upload(to_bf16(random_normal(vocab * d, test_seed(7))));
  DeviceBuffer<float> x("x", {s, d});
  for (int bad : {vocab, -1, 128256}) {
    DeviceBuffer<int32_t> ids("ids", {s});
    ids.upload({1, 2, bad, 3, 4});
    try {
      kernels::embedding(ids.data(), table.data(), x.data(), s, d, vocab);
      ADD_FAILURE() << "token id " << bad << " is outside [0, " << vocab << ") but no error was raised";
    } catch (const std::out_of_range& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("id " + std::to_string(bad)), std::string::npos) << what;
      EXPECT_NE(what.find("position 2"), std::string::npos) << what;
    }
    EXPECT_TRUE(guards_intact(x));
  }
}

}  // namespace
}  // namespace clockwork
