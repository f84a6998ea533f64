// Milestone 4: decode attention against the reference. One query row per head attends to the
// len positions of a cache, contiguous or paged (pages of 1, 3 and 16), for several GQA ratios
// and for lengths that are not multiples of the kernel's tile, the split size or the page size;
// one pass and split-KV. Slots that hold no position of the sequence are filled with decoys
// (other random rows), so reading a wrong slot gives a finite wrong answer that the report can
// name. Then the merge of attention states on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
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
#include "milestones/milestone4/tests/device_cache.h"
#include "reference/ops.h"
#include "reference/pitfalls.h"

namespace clockwork {
namespace {

float poison_value() {
  const uint32_t bits = 0xFFFFFFFFu;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Decode attention reads len positions: the tolerance of milestone 3's attention over len keys
// (scores summed over h_d in another order, exp turning their rounding into relative error, the
// weighted sum over len positions) holds for the online softmax too.
Tolerance decode_tolerance(int head_dim, int len) {
  return tol::attention(head_dim, len);
}

// Split-KV adds the merge: each chunk's output is rescaled by exp(LSE_c − LSE) (fast exp: a few
// ulp) and the chunks are added in another order than one pass would.
Tolerance split_tolerance(int head_dim, int len, int chunks) {
  Tolerance t = tol::attention(head_dim, len);
  const double extra = 16 * tol::kUnitRoundoff * (std::sqrt(static_cast<double>(chunks)) + 8);
  t.rtol += extra;
  t.rms_atol += extra;
  t.why =
      "one pass's allowance (scores over h_d, exp, the weighted sum over len positions) plus the "
      "merge: exp(LSE_c − LSE) of each chunk is a few ulp off and the chunks add up in another "
      "order";
  return t;
}

struct DecodeCase {
  int h, h_k, h_d, len;
  int page_size;  // 0: contiguous
  const char* why;
};

std::string describe(const DecodeCase& c) {
  return "h=" + std::to_string(c.h) + " h_k=" + std::to_string(c.h_k) +
         " h_d=" + std::to_string(c.h_d) + " len=" + std::to_string(c.len) + ", " +
         (c.page_size ? "paged, page_size=" + std::to_string(c.page_size) : "contiguous") + " (" +
         c.why + ")";
}

// A cache holding len random positions (rows in their slots) and decoys everywhere else, with
// room for 3 more positions and 2 spare pages; and a random query.
struct Filled {
  DeviceCache cache;
  std::vector<float> q;        // [h·h_d]
  std::vector<float> k, v;     // [len, h_k·h_d] in position order
  std::vector<float> storage_k, storage_v;  // [slots, h_k·h_d] as uploaded

  Filled(const DecodeCase& c, bool decoys)
      : cache(c.h_k, c.h_d, c.len + 3, c.page_size) {
    const int width = c.h_k * c.h_d;
    const uint64_t seed = test_seed(4500 + c.len * 13 + c.h * 5 + c.h_k + c.page_size * 7);
    q = random_normal(static_cast<size_t>(c.h) * c.h_d, seed);
    k = random_normal(static_cast<size_t>(c.len) * width, seed + 1);
    v = random_normal(static_cast<size_t>(c.len) * width, seed + 2);
    const size_t n = static_cast<size_t>(cache.slots()) * width;
    if (decoys) {
      storage_k = random_normal(n, seed + 3);
      storage_v = random_normal(n, seed + 4);
    } else {
      storage_k.assign(n, poison_value());
      storage_v.assign(n, poison_value());
    }
    for (int p = 0; p < c.len; ++p) {
      const size_t slot = static_cast<size_t>(cache.slot_of(p));
      std::copy_n(k.begin() + static_cast<long>(p) * width, width,
                  storage_k.begin() + static_cast<long>(slot * width));
      std::copy_n(v.begin() + static_cast<long>(p) * width, width,
                  storage_v.begin() + static_cast<long>(slot * width));
    }
    cache.k.upload(storage_k);
    cache.v.upload(storage_v);
  }

  // Rows of storage read through `slot_of` for positions 0 .. n−1 ([n, width]), or empty when
  // some position has no slot.
  std::vector<float> gather(const std::vector<float>& storage, int n, int width,
                            const std::function<long(int)>& slot_of) const {
    std::vector<float> rows;
    const long slots = static_cast<long>(storage.size() / static_cast<size_t>(width));
    for (int p = 0; p < n; ++p) {
      const long s = slot_of(p);
      if (s < 0 || s >= slots) return {};
      rows.insert(rows.end(), storage.begin() + s * width, storage.begin() + (s + 1) * width);
    }
    return rows;
  }
};

// The known mistakes of decode attention, as outputs for this query and cache.
std::vector<PitfallCandidate> decode_pitfalls(const DecodeCase& c, const Filled& f) {
  const int width = c.h_k * c.h_d;
  const torch::Tensor tq = to_tensor(f.q, {1, c.h * c.h_d});
  const torch::Tensor tk = to_tensor(f.k, {c.len, width});
  const torch::Tensor tv = to_tensor(f.v, {c.len, width});
  std::vector<PitfallCandidate> out;
  // Attention over the first n rows of k and v.
  auto over = [&](const std::vector<float>& k, const std::vector<float>& v, int n) {
    const auto rows = static_cast<long>(n) * width;
    return to_vector(ref::causal_gqa_attention(
        tq, to_tensor(std::vector<float>(k.begin(), k.begin() + rows), {n, width}),
        to_tensor(std::vector<float>(v.begin(), v.begin() + rows), {n, width}), c.h, c.h_k));
  };
  if (c.h_k > 1 && c.h_k < c.h) {
    out.push_back({"gqa_head_modulo",
                   "query head i read KV head i mod h_k; heads of a group are consecutive: "
                   "g = i / (h/h_k), so block g serves query heads g·(h/h_k) .. (g+1)·(h/h_k) − 1",
                   to_vector(ref::wrong::attention_gqa_modulo(tq, tk, tv, c.h, c.h_k))});
  }
  out.push_back({"attention_no_scale",
                 "the scores were not multiplied by 1/sqrt(h_d) before the softmax",
                 to_vector(ref::wrong::attention_no_scale(tq, tk, tv, c.h, c.h_k))});
  if (c.len >= 2) {
    out.push_back({"excludes_current",
                   "the query attended to positions 0 .. len−2 only: the new token's own key "
                   "(position len − 1 = pos) is in the cache and must be attended to as well",
                   over(f.k, f.v, c.len - 1)});
  }
  if (c.len > 32) {
    // An online softmax that never rescales: each 32-position tile's terms keep the weights
    // relative to the running maximum of their own time, e^(s − m_then), not e^(s − m_final).
    const int group = c.h / c.h_k;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.h_d));
    std::vector<float> o(static_cast<size_t>(c.h) * c.h_d);
    for (int i = 0; i < c.h; ++i) {
      const int g = i / group;
      double m = -INFINITY, l = 0;
      std::vector<double> acc(static_cast<size_t>(c.h_d), 0.0);
      for (int t0 = 0; t0 < c.len; t0 += 32) {
        const int n = std::min(32, c.len - t0);
        std::vector<double> sc(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          double dot = 0;
          for (int e = 0; e < c.h_d; ++e) {
            dot += static_cast<double>(f.q[static_cast<size_t>(i * c.h_d + e)]) *
                   f.k[static_cast<size_t>((t0 + r) * width + g * c.h_d + e)];
          }
          sc[static_cast<size_t>(r)] = dot * scale;
          m = std::max(m, sc[static_cast<size_t>(r)]);
        }
        for (int r = 0; r < n; ++r) {
          const double p = std::exp(sc[static_cast<size_t>(r)] - m);
          l += p;
          for (int e = 0; e < c.h_d; ++e)
            acc[static_cast<size_t>(e)] += p * f.v[static_cast<size_t>((t0 + r) * width + g * c.h_d + e)];
        }
      }
      for (int e = 0; e < c.h_d; ++e)
        o[static_cast<size_t>(i * c.h_d + e)] = static_cast<float>(acc[static_cast<size_t>(e)] / l);
    }
    out.push_back({"online_softmax_not_rescaled",
                   "when a tile raised the running maximum, the earlier tiles' sum and "
                   "accumulator were not rescaled by exp(m_old − m_new)",
                   o});
  }
  auto wrong_slots = [&](const char* name, const char* message,
                         const std::function<long(int)>& slot, int n) {
    const std::vector<float> k = f.gather(f.storage_k, n, width, slot);
    const std::vector<float> v = f.gather(f.storage_v, n, width, slot);
    if (!k.empty()) out.push_back({name, message, over(k, v, n)});
  };
  wrong_slots("one_position_too_many",
              "the query attended to len + 1 positions: positions 0 .. len − 1 are the whole "
              "sequence, the new token included",
              [&](int p) { return f.cache.slot_of(p); }, c.len + 1);
  if (!f.cache.table.empty()) {
    const std::vector<int32_t>& table = f.cache.table;
    const int ps = c.page_size;
    wrong_slots("page_table_ignored",
                "K and V were read from slot = pos, as if the cache were contiguous: the slot "
                "of position p is page_table[p / page_size]·page_size + p % page_size",
                [](int p) { return static_cast<long>(p); }, c.len);
    wrong_slots("page_and_offset_swapped",
                "page and offset are swapped: the logical page of position p is p / page_size "
                "and its offset p % page_size",
                [&](int p) -> long {
                  const size_t page = static_cast<size_t>(p % ps);
                  return page < table.size() ? static_cast<long>(table[page]) * ps + p / ps : -1;
                },
                c.len);
  }
  return out;
}

void check_decode(const DecodeCase& c, int split_size) {
  SCOPED_TRACE(describe(c) + (split_size ? ", split into chunks of " + std::to_string(split_size)
                                         : std::string(", one pass")));
  const Filled f(c, /*decoys=*/true);
  DeviceBuffer<float> q("q", {c.h * c.h_d}), out("decode attention output", {1, c.h, c.h_d});
  q.upload(f.q);
  const kernels::KvCacheView view = f.cache.view();
  std::vector<PitfallCandidate> pitfalls = decode_pitfalls(c, f);
  Tolerance t = decode_tolerance(c.h_d, c.len);
  if (split_size == 0) {
    kernels::decode_attention(q.data(), view, c.len, out.data(), c.h);
  } else {
    const int chunks = kernels::decode_attention_splits(c.len, split_size);
    DeviceBuffer<float> po("partial_o", {chunks, c.h * c.h_d}), pl("partial_lse", {chunks, c.h});
    kernels::decode_attention_split(q.data(), view, c.len, out.data(), c.h, split_size, po.data(),
                                    pl.data());
    EXPECT_TRUE(guards_intact(po));
    EXPECT_TRUE(guards_intact(pl));
    t = split_tolerance(c.h_d, c.len, chunks);
    // Merging without the LSE weights: the plain mean of the chunks' outputs.
    const torch::Tensor tq = to_tensor(f.q, {1, c.h * c.h_d});
    const int width = c.h_k * c.h_d;
    std::vector<ref::AttentionState> states;
    for (int first = 0; first < c.len; first += split_size) {
      const int n = std::min(split_size, c.len - first);
      states.push_back(ref::attention_state(
          tq, to_tensor(f.k, {c.len, width}).narrow(0, first, n),
          to_tensor(f.v, {c.len, width}).narrow(0, first, n), c.h, c.h_k));
    }
    if (states.size() > 1) {
      torch::Tensor mean = torch::zeros_like(states[0].out);
      for (const ref::AttentionState& s : states) mean = mean + s.out;
      pitfalls.push_back({"merge_plain_mean",
                          "the chunks were merged by a plain mean of their outputs: weight chunk "
                          "c by e^(LSE_c − LSE), its share of the softmax's denominator",
                          to_vector(mean / static_cast<double>(states.size()))});
    }
  }
  EXPECT_TRUE(guards_intact(q));
  const torch::Tensor expected = ref::causal_gqa_attention(
      to_tensor(f.q, {1, c.h * c.h_d}), to_tensor(f.k, {c.len, c.h_k * c.h_d}),
      to_tensor(f.v, {c.len, c.h_k * c.h_d}), c.h, c.h_k);
  EXPECT_TRUE(matches_reference(out, to_vector(expected), t, explaining(pitfalls, out),
                                {"row", "head", "dim"}));
}

// Lengths around the kernel's 32-position tiles and the page sizes.
const int kLengths[] = {1, 5, 32, 33, 70};

void check_layout(int page_size, const char* why) {
  for (int len : kLengths) {
    check_decode({4, 4, 16, len, page_size, why}, 0);   // ratio 1
    check_decode({8, 2, 16, len, page_size, why}, 0);   // ratio 4
  }
  check_decode({6, 3, 24, 45, page_size, why}, 0);     // ratio 2, h_d = 24
}

TEST(DecodeAttention, ContiguousCache) {
  check_layout(0, "slot = position");
}

TEST(DecodeAttention, PagedCachePageSizeOne) {
  check_layout(1, "every position on its own page");
}

TEST(DecodeAttention, PagedCachePageSizeThree) {
  check_layout(3, "pages that no tile boundary lines up with");
}

TEST(DecodeAttention, PagedCachePageSizeSixteen) {
  check_layout(16, "two pages per tile");
}

TEST(DecodeAttention, OneKvHeadForEveryQueryHead) {
  check_decode({4, 1, 32, 40, 0, "h_k = 1: one block holds all four query heads"}, 0);
  check_decode({4, 1, 32, 40, 3, "h_k = 1, paged"}, 0);
}

TEST(DecodeAttention, LlamaThreeEightBShapes) {
  check_decode({32, 8, 128, 37, 16, "h = 32, h_k = 8, h_d = 128"}, 0);
}

TEST(DecodeAttentionSplit, ChunksThatDoNotDivideTheCache) {
  check_decode({8, 2, 16, 100, 0, "4 chunks of 32, the last of 4"}, 32);
  check_decode({8, 2, 16, 100, 3, "paged, chunks of 7: 15 chunks, the last of 2"}, 7);
  check_decode({4, 4, 16, 33, 16, "chunks of 50 > len: one chunk"}, 50);
  check_decode({4, 2, 16, 9, 1, "chunks of one position each"}, 1);
  check_decode({6, 3, 24, 70, 0, "ratio 2, chunks of 45 spanning two tiles"}, 45);
}

TEST(DecodeAttentionSplit, LlamaThreeEightBShapes) {
  check_decode({32, 8, 128, 77, 16, "h = 32, h_k = 8, h_d = 128, 3 chunks"}, 32);
}

// Slots beyond the sequence hold the poison: a kernel that reads one of them turns its output
// into NaN. Nothing beyond position len − 1 may be read.
TEST(DecodeAttention, ReadsNoSlotBeyondTheSequence) {
  for (int split : {0, 16}) {
    for (int page_size : {0, 3}) {
      const DecodeCase c{4, 2, 16, 35, page_size, "everything else is poison"};
      SCOPED_TRACE(describe(c) + (split ? ", chunks of 16" : ", one pass"));
      const Filled f(c, /*decoys=*/false);
      DeviceBuffer<float> q("q", {c.h * c.h_d}), out("out", {1, c.h, c.h_d});
      DeviceBuffer<float> po("partial_o", {3, c.h * c.h_d}), pl("partial_lse", {3, c.h});
      q.upload(f.q);
      const kernels::KvCacheView view = f.cache.view();
      if (split) {
        kernels::decode_attention_split(q.data(), view, c.len, out.data(), c.h, split, po.data(),
                                        pl.data());
      } else {
        kernels::decode_attention(q.data(), view, c.len, out.data(), c.h);
      }
      const std::vector<float> got = out.download();
      size_t nonfinite = 0;
      for (float x : got) nonfinite += !std::isfinite(x);
      const torch::Tensor expected = ref::causal_gqa_attention(
          to_tensor(f.q, {1, c.h * c.h_d}), to_tensor(f.k, {c.len, c.h_k * c.h_d}),
          to_tensor(f.v, {c.len, c.h_k * c.h_d}), c.h, c.h_k);
      EXPECT_TRUE(matches_reference(out, to_vector(expected), decode_tolerance(c.h_d, c.len), {},
                                    {"row", "head", "dim"}))
          << (nonfinite ? "NaN in the output: every slot other than positions 0 .. len−1 holds "
                          "NaN here, so the kernel read a slot that is not in the sequence (a "
                          "position >= len, a wrong page, or a tile row past the end)"
                        : "");
    }
  }
}

TEST(DecodeAttention, RejectsBadArguments) {
  DeviceCache cache(2, 8, 10, 3);
  DeviceBuffer<float> q("q", {32}), out("out", {32}), po("po", {4, 32}), pl("pl", {4, 4});
  const kernels::KvCacheView view = cache.view();
  auto expect_error = [](auto&& call, const std::string& fragment, bool out_of_range) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected an error mentioning '" << fragment << "'";
    } catch (const std::out_of_range& e) {
      EXPECT_TRUE(out_of_range) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    } catch (const std::invalid_argument& e) {
      EXPECT_FALSE(out_of_range) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  // 4 page-table entries of 3 positions: 12 positions.
  expect_error([&] { kernels::decode_attention(q.data(), view, 13, out.data(), 4); }, "len = 13",
               true);
  expect_error([&] { kernels::decode_attention(q.data(), view, 0, out.data(), 4); }, "len", false);
  expect_error([&] { kernels::decode_attention(q.data(), view, 5, out.data(), 3); }, "n_heads",
               false);
  expect_error([&] { kernels::decode_attention(q.data(), view, 5, q.data(), 4); }, "alias", false);
  expect_error(
      [&] {
        kernels::decode_attention_split(q.data(), view, 5, out.data(), 4, 0, po.data(), pl.data());
      },
      "split_size", false);
  expect_error(
      [&] {
        kernels::decode_attention_split(q.data(), view, 5, out.data(), 4, 2, po.data(), po.data());
      },
      "distinct", false);
  kernels::KvCacheView big = view;
  big.head_dim = 1024;  // 1 query head per KV head still needs 2·1024 + 32·1025 floats
  expect_error([&] { kernels::decode_attention(q.data(), big, 5, out.data(), 4); }, "shared memory",
               false);
}

// ---- merging attention states ----------------------------------------------------------------

// The merge's own rounding: exp of LSE differences (fast exp, a few ulp), a sum of n_states
// weighted terms, one division. States and the expected union come from the reference in double.
Tolerance merge_tolerance(int n_states) {
  const double t = 16 * tol::kUnitRoundoff * (std::sqrt(static_cast<double>(n_states)) + 16);
  return {0, t,
          "each state is weighted by exp(LSE_j − LSE) (fast exp: a few ulp), the weighted states "
          "are summed and divided by the total weight",
          t};
}

struct MergeCase {
  int h, h_k, h_d;
  std::vector<int> sizes;  // keys of each state (0: an empty state)
  float q_scale;           // multiplies the query: scores of order q_scale
  const char* why;
};

void check_merge(const MergeCase& c) {
  std::string sizes;
  for (int n : c.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(n);
  SCOPED_TRACE("h=" + std::to_string(c.h) + " h_k=" + std::to_string(c.h_k) + " states of " +
               sizes + " keys (" + c.why + ")");
  const int width = c.h_k * c.h_d, n_states = static_cast<int>(c.sizes.size());
  const uint64_t seed = test_seed(4700 + n_states * 11 + c.h);
  std::vector<float> qv = random_normal(static_cast<size_t>(c.h) * c.h_d, seed);
  for (float& x : qv) x *= c.q_scale;
  const torch::Tensor q = to_tensor(qv, {1, c.h * c.h_d});
  std::vector<ref::AttentionState> states;
  std::vector<torch::Tensor> all_k, all_v;
  std::vector<float> o, lse;
  for (int j = 0; j < n_states; ++j) {
    const int n = c.sizes[static_cast<size_t>(j)];
    const torch::Tensor k =
        n ? to_tensor(random_normal(static_cast<size_t>(n) * width, seed + 2 * j + 1), {n, width})
          : torch::zeros({0, width});
    const torch::Tensor v =
        n ? to_tensor(random_normal(static_cast<size_t>(n) * width, seed + 2 * j + 2), {n, width})
          : torch::zeros({0, width});
    all_k.push_back(k);
    all_v.push_back(v);
    states.push_back(ref::attention_state(q, k, v, c.h, c.h_k));
    std::vector<float> so = to_vector(states.back().out);
    if (n == 0) so.assign(so.size(), poison_value());  // an empty state's output is meaningless
    o.insert(o.end(), so.begin(), so.end());
    const std::vector<float> sl = to_vector(states.back().lse);
    lse.insert(lse.end(), sl.begin(), sl.end());
  }
  const ref::AttentionState whole =
      ref::attention_state(q, torch::cat(all_k), torch::cat(all_v), c.h, c.h_k);

  DeviceBuffer<float> d_o("states' outputs", {n_states, c.h * c.h_d}), d_lse("states' LSEs",
                                                                             {n_states, c.h});
  DeviceBuffer<float> out("merged output", {1, c.h, c.h_d}), out_lse("merged LSE", {c.h});
  d_o.upload(o);
  d_lse.upload(lse);
  kernels::merge_attention_states(d_o.data(), d_lse.data(), n_states, out.data(), out_lse.data(),
                                  c.h, c.h_d);

  // Known mistakes, computed from the same states (only non-empty ones).
  std::vector<PitfallCandidate> pitfalls;
  torch::Tensor mean = torch::zeros_like(whole.out), unnormalised = torch::zeros_like(whole.out),
                relative = torch::zeros_like(whole.out);
  torch::Tensor lse_max;  // [h]: the largest LSE of each head over the non-empty states
  for (int j = 0; j < n_states; ++j) {
    if (c.sizes[static_cast<size_t>(j)] == 0) continue;
    const torch::Tensor l = states[static_cast<size_t>(j)].lse.to(torch::kDouble);
    lse_max = lse_max.defined() ? torch::maximum(lse_max, l) : l;
  }
  int non_empty = 0;
  for (int j = 0; j < n_states; ++j) {
    if (c.sizes[static_cast<size_t>(j)] == 0) continue;
    ++non_empty;
    mean = mean + states[static_cast<size_t>(j)].out;
    // Weights relative to the largest LSE, still not divided by their total.
    const torch::Tensor w_rel =
        torch::exp(states[static_cast<size_t>(j)].lse.to(torch::kDouble) - lse_max)
            .repeat_interleave(c.h_d);
    relative = relative +
               (w_rel * states[static_cast<size_t>(j)].out.to(torch::kDouble).reshape({-1}))
                   .reshape_as(whole.out)
                   .to(torch::kFloat);
    const torch::Tensor w =
        torch::exp(states[static_cast<size_t>(j)].lse.to(torch::kDouble)).repeat_interleave(c.h_d);
    unnormalised = unnormalised + (w * states[static_cast<size_t>(j)].out.to(torch::kDouble).reshape({-1}))
                                      .reshape_as(whole.out)
                                      .to(torch::kFloat);
  }
  if (non_empty > 1) {
    pitfalls.push_back({"merge_plain_mean",
                        "the states were averaged: weight state j by e^(LSE_j − LSE), its share "
                        "of the whole softmax denominator",
                        to_vector(mean / static_cast<double>(non_empty))});
    pitfalls.push_back({"merge_not_normalised",
                        "each state was weighted by e^(LSE_j) but the sum was not divided by the "
                        "total weight Σ_j e^(LSE_j) (subtract the largest LSE first)",
                        to_vector(unnormalised)});
    pitfalls.push_back({"merge_not_normalised_relative",
                        "each state was weighted by e^(LSE_j − max LSE) but the sum was not "
                        "divided by the total weight Σ_j e^(LSE_j − max LSE)",
                        to_vector(relative)});
  }
  const std::vector<float> got = out.download();
  bool finite = true;
  for (float x : got) finite = finite && std::isfinite(x);
  EXPECT_TRUE(matches_reference(out, to_vector(whole.out), merge_tolerance(n_states),
                                explaining(pitfalls, out), {"row", "head", "dim"}))
      << (finite ? ""
                 : "Non-finite merged output: with LSEs this large e^(LSE_j) overflows fp32; "
                   "subtract the largest LSE_j before exponentiating (an empty state, LSE = "
                   "−inf, must weigh nothing even though its output holds NaN)");
  // The merged LSE: the log of a sum of n_states weights, plus the largest LSE.
  Tolerance lse_tol = merge_tolerance(n_states);
  lse_tol.why = "log of the sum of the weights (fast exp, logf) added to the largest LSE";
  EXPECT_TRUE(matches_reference(out_lse, to_vector(whole.lse), lse_tol, {}, {"head"}));
}

TEST(MergeAttentionStates, TwoStatesEqualAttentionOverTheUnion) {
  check_merge({4, 2, 16, {7, 12}, 1.f, "two key sets of different sizes"});
  check_merge({32, 8, 128, {20, 45}, 1.f, "Llama-3-8B's heads"});
}

TEST(MergeAttentionStates, ManyStatesOfUnevenSizes) {
  check_merge({8, 2, 16, {1, 4, 9, 2, 30}, 1.f, "five chunks"});
  check_merge({4, 4, 8, {13}, 1.f, "a single state merges into itself"});
}

TEST(MergeAttentionStates, LargeLogSumExpsNeedTheMaximum) {
  // Scores of order 1e2 ... 1e3: e^(LSE) overflows fp32 unless the largest LSE is subtracted.
  check_merge({4, 2, 16, {6, 9, 3}, 60.f, "LSEs in the hundreds"});
}

TEST(MergeAttentionStates, EmptyStatesWeighNothing) {
  check_merge({4, 2, 16, {5, 0, 8}, 1.f, "the middle state covers no keys: LSE = −inf, output NaN"});
}

TEST(MergeAttentionStates, RejectsBadArguments) {
  DeviceBuffer<float> o("o", {2, 16}), lse("lse", {2, 2}), out("out", {16});
  EXPECT_THROW(kernels::merge_attention_states(o.data(), lse.data(), 0, out.data(), nullptr, 2, 8),
               std::invalid_argument);
  EXPECT_THROW(kernels::merge_attention_states(o.data(), lse.data(), 2, o.data(), nullptr, 2, 8),
               std::invalid_argument);
  EXPECT_THROW(
      kernels::merge_attention_states(o.data(), lse.data(), 2, out.data(), out.data(), 2, 8),
      std::invalid_argument);
}

}  // namespace
}  // namespace clockwork
