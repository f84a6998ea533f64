// Milestone 5: the batched decode kernels over one shared page pool, and the balanced split-KV.
//
// A ragged batch (requests of different lengths, each with its own page table into one pool,
// pages handed out in a scrambled order so that no request's pages are consecutive) checks:
//   * batched_kv_cache_append writes each request's new row into its own slot and nothing else;
//     when a row lands elsewhere the test says where, and which known mistake that looks like
//     (another request's page table, another request's position, the request index as position);
//   * batched_decode_attention gives, per request, attention over its own positions (a host
//     reference in double), for GQA ratios 1 to 12 and head dimensions 6 to 200 (each side of
//     the kernel's float4 and register limits), and names the same mistakes;
//   * plan_split_kv's default target fills one wave of blocks on a GPU of 132 multiprocessors;
//   * plan_split_kv cuts a batch mixing lengths 1 and 4000 into chunks of about equal size
//     (longest chunk against the ideal share and the mean, printed), and the split kernel with
//     the per-request merge equals the one-pass kernel and the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "harness/check/device_buffer.h"
#include "harness/check/random.h"
#include "harness/pipeline/kv_cache.h"
#include "harness/pipeline/split_kv_plan.h"
#include "kernels/kernels.h"

namespace clockwork {
namespace {

// A pool shared by a batch: request b holds positions 0 .. lens[b] − 1 through its own table.
// The pool has two spare pages nobody holds. Slots of held positions get seeded values; every
// other slot stays poisoned (NaN), so reading a wrong slot shows up.
struct Batch {
  int h_k, h_d, page_size, stride, num_pages;
  std::vector<int> lens;
  std::vector<std::vector<int32_t>> tables;
  DeviceBuffer<float> k, v;
  DeviceBuffer<int32_t> d_tables, d_lens;

  Batch(std::vector<int> lens_, int h_k_, int h_d_, int page_size_)
      : h_k(h_k_),
        h_d(h_d_),
        page_size(page_size_),
        stride(max_pages(lens_, page_size_)),
        num_pages(total_pages(lens_, page_size_) + 2),
        lens(std::move(lens_)),
        k("K pool", {num_pages, page_size, h_k, h_d}),
        v("V pool", {num_pages, page_size, h_k, h_d}),
        d_tables("page tables", {static_cast<int64_t>(lens.size()), stride}),
        d_lens("lens", {static_cast<int64_t>(lens.size())}) {
    const std::vector<int32_t> order = shuffled_page_order(num_pages);
    size_t next = 0;
    std::vector<int32_t> flat(lens.size() * static_cast<size_t>(stride), -1);
    for (size_t b = 0; b < lens.size(); ++b) {
      tables.emplace_back();
      for (int p = 0; p < (lens[b] + page_size - 1) / page_size; ++p) {
        tables[b].push_back(order[next++]);
        flat[b * static_cast<size_t>(stride) + static_cast<size_t>(p)] = tables[b].back();
      }
    }
    d_tables.upload(flat);
    d_lens.upload(std::vector<int32_t>(lens.begin(), lens.end()));
  }

  static int max_pages(const std::vector<int>& lens, int ps) {
    int m = 1;
    for (int l : lens) m = std::max(m, (l + ps - 1) / ps);
    return m;
  }
  static int total_pages(const std::vector<int>& lens, int ps) {
    int t = 0;
    for (int l : lens) t += (l + ps - 1) / ps;
    return t;
  }
  int width() const { return h_k * h_d; }
  int batch() const { return static_cast<int>(lens.size()); }
  size_t slot(int b, int pos) const {
    return static_cast<size_t>(tables[static_cast<size_t>(b)][static_cast<size_t>(pos / page_size)]) *
               page_size +
           pos % page_size;
  }

  // Seeded K and V in every held slot (positions < upto[b]); the rest of the pool poisoned.
  void fill(uint64_t seed, const std::vector<int>& upto, std::vector<float>& hk,
            std::vector<float>& hv) {
    hk.assign(static_cast<size_t>(num_pages) * page_size * width(), std::nanf(""));
    hv = hk;
    const std::vector<float> rk = random_normal(hk.size(), seed);
    const std::vector<float> rv = random_normal(hv.size(), seed + 1);
    for (int b = 0; b < batch(); ++b) {
      for (int p = 0; p < upto[static_cast<size_t>(b)]; ++p) {
        const size_t s = slot(b, p) * static_cast<size_t>(width());
        for (int e = 0; e < width(); ++e) {
          hk[s + static_cast<size_t>(e)] = rk[s + static_cast<size_t>(e)];
          hv[s + static_cast<size_t>(e)] = rv[s + static_cast<size_t>(e)];
        }
      }
    }
    k.upload(hk);
    v.upload(hv);
  }

  kernels::BatchedKvView view() const {
    kernels::BatchedKvView c;
    c.k = const_cast<float*>(k.data());
    c.v = const_cast<float*>(v.data());
    c.page_tables = d_tables.data();
    c.lens = d_lens.data();
    c.batch = batch();
    c.table_stride = stride;
    c.num_pages = num_pages;
    c.page_size = page_size;
    c.n_kv_heads = h_k;
    c.head_dim = h_d;
    return c;
  }
};

// ---- append ----------------------------------------------------------------------------------

// Where did request b's row go, if not to its own slot? Names the mistake the place suggests.
std::string diagnose_append(const Batch& bt, const std::vector<float>& pool,
                            const std::vector<float>& rows, int b) {
  const int w = bt.width();
  auto holds = [&](size_t slot) {
    for (int e = 0; e < w; ++e) {
      if (pool[slot * w + e] != rows[static_cast<size_t>(b) * w + e]) return false;
    }
    return true;
  };
  const int pos = bt.lens[static_cast<size_t>(b)] - 1;
  for (int o = 0; o < bt.batch(); ++o) {
    if (o == b || pos >= bt.lens[static_cast<size_t>(o)]) continue;
    if (holds(bt.slot(o, pos))) {
      return "it landed at position " + std::to_string(pos) + " of request " + std::to_string(o) +
             "'s pages: the page table was indexed with another request's row (use row b of "
             "page_tables, b = blockIdx.x)";
    }
  }
  for (int p = 0; p < bt.lens[static_cast<size_t>(b)]; ++p) {
    if (p == pos || !holds(bt.slot(b, p))) continue;
    if (p == b) {
      return "it landed at position " + std::to_string(p) + " of its own pages, the request's "
             "index: the request index was used as the position (the position is lens[b] − 1)";
    }
    for (int o = 0; o < bt.batch(); ++o) {
      if (o != b && p == bt.lens[static_cast<size_t>(o)] - 1) {
        return "it landed at position " + std::to_string(p) + " of its own pages, which is request " +
               std::to_string(o) + "'s position: another request's length was used";
      }
    }
    return "it landed at position " + std::to_string(p) + " of its own pages instead of " +
           std::to_string(pos);
  }
  return "it is nowhere in the pool (was anything written?)";
}

void check_append(Batch& bt, const std::vector<float>& before_k, const std::vector<float>& before_v,
                  const std::vector<float>& rk, const std::vector<float>& rv) {
  const std::vector<float> got_k = bt.k.download(), got_v = bt.v.download();
  const int w = bt.width();
  std::vector<char> expected(got_k.size() / static_cast<size_t>(w), 0);
  for (int b = 0; b < bt.batch(); ++b) {
    const size_t s = bt.slot(b, bt.lens[static_cast<size_t>(b)] - 1);
    expected[s] = 1;
    bool ok = true;
    for (int e = 0; e < w && ok; ++e) {
      ok = got_k[s * w + e] == rk[static_cast<size_t>(b) * w + e] &&
           got_v[s * w + e] == rv[static_cast<size_t>(b) * w + e];
    }
    EXPECT_TRUE(ok) << "request " << b << " (length " << bt.lens[static_cast<size_t>(b)]
                    << "): its new K/V row is not in its slot (page "
                    << bt.tables[static_cast<size_t>(b)][static_cast<size_t>(
                           (bt.lens[static_cast<size_t>(b)] - 1) / bt.page_size)]
                    << "); " << diagnose_append(bt, got_k, rk, b);
  }
  size_t changed = 0, first = 0;
  for (size_t s = 0; s < expected.size(); ++s) {
    if (expected[s]) continue;
    for (int e = 0; e < w; ++e) {
      const float a = got_k[s * w + e], b0 = before_k[s * w + e];
      const float c = got_v[s * w + e], d0 = before_v[s * w + e];
      const bool same_k = (a == b0) || (std::isnan(a) && std::isnan(b0));
      const bool same_v = (c == d0) || (std::isnan(c) && std::isnan(d0));
      if (!same_k || !same_v) {
        if (changed++ == 0) first = s;
        break;
      }
    }
  }
  EXPECT_EQ(changed, 0u) << changed << " slot(s) that no request's new token belongs to were "
                         << "written, the first slot " << first << " (page "
                         << first / static_cast<size_t>(bt.page_size) << ")";
}

TEST(BatchedKvAppend, EachRequestWritesItsOwnSlotAndNothingElse) {
  // Lengths chosen so that positions, indices and pages all differ between requests; request 2's
  // position (2) equals its index only by the "request index" mistake's reading for request 2.
  for (int page_size : {1, 4, 16}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    Batch bt({5, 1, 17, 9, 33, 2}, 2, 16, page_size);
    std::vector<int> upto;
    for (int l : bt.lens) upto.push_back(l - 1);  // the new positions are not written yet
    std::vector<float> hk, hv;
    bt.fill(4100 + static_cast<uint64_t>(page_size), upto, hk, hv);
    const size_t n = static_cast<size_t>(bt.batch()) * bt.width();
    const std::vector<float> rk = random_normal(n, 4200), rv = random_normal(n, 4201);
    DeviceBuffer<float> dk("k rows", {bt.batch(), bt.width()}), dv("v rows", {bt.batch(), bt.width()});
    dk.upload(rk);
    dv.upload(rv);
    kernels::batched_kv_cache_append(dk.data(), dv.data(), bt.view());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    check_append(bt, hk, hv, rk, rv);
  }
}

TEST(BatchedKvAppend, BadViewsAreNamed) {
  Batch bt({3, 4}, 2, 16, 4);
  DeviceBuffer<float> dk("k rows", {2, 32}), dv("v rows", {2, 32});
  kernels::BatchedKvView c = bt.view();
  c.lens = nullptr;
  try {
    kernels::batched_kv_cache_append(dk.data(), dv.data(), c);
    FAIL() << "a view without lens was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cache.lens"), std::string::npos) << e.what();
  }
  c = bt.view();
  c.table_stride = 0;
  EXPECT_THROW(kernels::batched_kv_cache_append(dk.data(), dv.data(), c), std::invalid_argument);
}

// ---- attention -------------------------------------------------------------------------------

// Reference: request b's query against positions 0 .. len − 1 read through `table` (double).
std::vector<double> reference_one(const Batch& bt, const std::vector<float>& hk,
                                  const std::vector<float>& hv, const float* q, int table_of,
                                  int len, int n_heads) {
  const int group = n_heads / bt.h_k, w = bt.width(), h_d = bt.h_d;
  std::vector<double> out(static_cast<size_t>(n_heads) * h_d, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(h_d));
  for (int i = 0; i < n_heads; ++i) {
    const int g = i / group;
    std::vector<double> s(static_cast<size_t>(len));
    double m = -INFINITY;
    for (int p = 0; p < len; ++p) {
      const size_t slot = bt.slot(table_of, p) * static_cast<size_t>(w) + static_cast<size_t>(g) * h_d;
      double dot = 0;
      for (int e = 0; e < h_d; ++e) dot += static_cast<double>(q[i * h_d + e]) * hk[slot + e];
      s[static_cast<size_t>(p)] = dot * scale;
      m = std::max(m, s[static_cast<size_t>(p)]);
    }
    double l = 0;
    for (double& x : s) l += (x = std::exp(x - m));
    for (int p = 0; p < len; ++p) {
      const size_t slot = bt.slot(table_of, p) * static_cast<size_t>(w) + static_cast<size_t>(g) * h_d;
      for (int e = 0; e < h_d; ++e)
        out[static_cast<size_t>(i) * h_d + e] += s[static_cast<size_t>(p)] / l * hv[slot + e];
    }
  }
  return out;
}

// Tolerance: every output is a convex combination of V values ~N(0, 1), computed in fp32 with
// __expf (a few ulp) and sums over at most a few thousand terms, so the error stays well below
// 1e-4 in absolute terms; a wrong position, page or softmax is off by O(0.1) or more.
constexpr double kAtol = 2e-4, kRtol = 1e-4;  // as printed in the messages below

bool close_to(const float* got, const std::vector<double>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= kAtol + kRtol * std::fabs(want[i]))) return false;
  }
  return true;
}

// For a request whose output is wrong: which known mistake reproduces it?
std::string diagnose_attention(const Batch& bt, const std::vector<float>& hk,
                               const std::vector<float>& hv, const float* q, const float* got,
                               int b, int n_heads) {
  const int len = bt.lens[static_cast<size_t>(b)];
  if (std::all_of(got, got + static_cast<ptrdiff_t>(n_heads) * bt.h_d,
                  [](float x) { return std::isnan(x); })) {
    return "the output row still holds its poison (NaN): nothing was written to it";
  }
  for (int o = 0; o < bt.batch(); ++o) {
    if (o != b && len <= bt.lens[static_cast<size_t>(o)] &&
        close_to(got, reference_one(bt, hk, hv, q, o, len, n_heads))) {
      return "it equals attention through request " + std::to_string(o) +
             "'s page table: the table was indexed with another request's row";
    }
  }
  for (int o = 0; o < bt.batch(); ++o) {
    const int l = bt.lens[static_cast<size_t>(o)];
    if (o != b && l != len && l <= len && close_to(got, reference_one(bt, hk, hv, q, b, l, n_heads))) {
      return "it equals attention over the first " + std::to_string(l) +
             " positions, request " + std::to_string(o) + "'s length: another request's length "
             "was used";
    }
  }
  return "no known mistake reproduces it";
}

void run_attention_case(const std::vector<int>& lens, int h_k, int group, uint64_t seed,
                        int h_d = 16) {
  const int n_heads = h_k * group;
  Batch bt(lens, h_k, h_d, 4);
  std::vector<float> hk, hv;
  bt.fill(seed, lens, hk, hv);
  const size_t qw = static_cast<size_t>(n_heads) * h_d;
  const std::vector<float> q = random_normal(static_cast<size_t>(bt.batch()) * qw, seed + 7);
  DeviceBuffer<float> dq("q", {bt.batch(), static_cast<int64_t>(qw)});
  DeviceBuffer<float> dout("out", {bt.batch(), static_cast<int64_t>(qw)});
  dq.upload(q);
  kernels::batched_decode_attention(dq.data(), bt.view(), dout.data(), n_heads);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = dout.download();
  for (int b = 0; b < bt.batch(); ++b) {
    const float* qb = q.data() + static_cast<size_t>(b) * qw;
    const float* gb = got.data() + static_cast<size_t>(b) * qw;
    const std::vector<double> want =
        reference_one(bt, hk, hv, qb, b, bt.lens[static_cast<size_t>(b)], n_heads);
    EXPECT_TRUE(close_to(gb, want))
        << "request " << b << " (length " << bt.lens[static_cast<size_t>(b)]
        << "): attention output differs from the reference beyond |d| <= 2e-4 + 1e-4·|want| "
        << "(first values: got " << gb[0] << ", want " << want[0] << "); "
        << diagnose_attention(bt, hk, hv, qb, gb, b, n_heads);
  }
}

TEST(BatchedDecodeAttention, RaggedBatchMatchesTheReferencePerRequest) {
  const std::vector<int> lens = {1, 5, 33, 64, 100, 7};
  for (int group : {1, 2, 4}) {
    SCOPED_TRACE("GQA ratio " + std::to_string(group));
    run_attention_case(lens, 2, group, 4300 + static_cast<uint64_t>(group));
  }
}

// The kernel reads a row with 2 to 32 lanes by head dimension (8 floats each, in float4 pieces,
// or scalars when h_d is not a multiple of 4, pieces past h_d masked) and a block serves at most
// 8 query heads: every lane count, and groups on each side of that limit, Llama's 128 with GQA 4
// among them.
TEST(BatchedDecodeAttention, HeadDimensionsAndLargeGroups) {
  const std::vector<int> lens = {1, 5, 33, 64, 100, 7};
  const struct {
    int h_d, group;
  } cases[] = {{128, 4}, {6, 2}, {24, 1}, {200, 3}, {64, 12}, {36, 8}};
  for (const auto& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.h_d) + ", GQA ratio " + std::to_string(c.group));
    run_attention_case(lens, 2, c.group, 4350 + static_cast<uint64_t>(c.h_d), c.h_d);
  }
}

// ---- balanced split-KV ------------------------------------------------------------------------

TEST(SplitKvPlan, CoversEveryRequestInOrderWithinTheLimit) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::vector<int> lens;
    for (int32_t id : random_ids(9, 3000, 4400 + seed)) lens.push_back(1 + id);
    const SplitKvPlan p = plan_split_kv(lens, 8, 264, 64);
    ASSERT_EQ(p.first_chunk.size(), lens.size() + 1);
    for (size_t b = 0; b < lens.size(); ++b) {
      int at = 0;
      for (int c = p.first_chunk[b]; c < p.first_chunk[b + 1]; ++c) {
        EXPECT_EQ(p.chunk_request[static_cast<size_t>(c)], static_cast<int32_t>(b));
        EXPECT_EQ(p.chunk_begin[static_cast<size_t>(c)], at) << "request " << b << " chunk " << c;
        EXPECT_LE(p.chunk_end[static_cast<size_t>(c)] - at, p.chunk_limit);
        EXPECT_GT(p.chunk_end[static_cast<size_t>(c)], at) << "empty chunk " << c;
        at = p.chunk_end[static_cast<size_t>(c)];
      }
      EXPECT_EQ(at, lens[b]) << "request " << b << "'s chunks do not end at its length";
    }
    EXPECT_LE(p.n_chunks(), max_split_kv_chunks(static_cast<int>(lens.size()), 8, 264));
  }
  try {
    plan_split_kv({3, 0, 2}, 2, 8, 4);
    FAIL() << "a request of length 0 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("request 1"), std::string::npos) << e.what();
  }
}

// Decode attention only streams K and V: the default target is one wave of the kernel's blocks
// on a 132-multiprocessor GPU (4 per multiprocessor), and uniform batches of 1024 positions are
// planned into at most one wave that is mostly full, unless min_chunk stops it first. A batch
// whose one long request would need chunks of more than twice the ideal share to fit one wave
// is cut at the ideal share instead.
TEST(SplitKvPlan, DefaultTargetFillsOneWave) {
  const int h_k = 8, min_chunk = 64, target = split_kv_target_blocks(132);
  const int per_head = target / h_k;
  EXPECT_GE(target, 4 * 132) << "fewer than 4 blocks per multiprocessor";
  for (int batch : {1, 4, 16, 64}) {
    const std::vector<int> lens(static_cast<size_t>(batch), 1024);
    const SplitKvPlan p = plan_split_kv(lens, h_k, target, min_chunk);
    const long long total = 1024LL * batch;
    const long long want = std::min<long long>(3 * target / 4, h_k * (total / min_chunk));
    EXPECT_GE(static_cast<long long>(p.n_chunks()) * h_k, want)
        << batch << " requests of 1024 positions: " << p.describe();
    EXPECT_LE(p.n_chunks(), per_head)
        << batch << " requests of 1024 positions need a second wave: " << p.describe();
  }
  std::vector<int> skewed(64, 1);
  skewed[0] = 65536;
  const long long total = 65536 + 63;
  const SplitKvPlan p = plan_split_kv(skewed, h_k, target, min_chunk);
  EXPECT_LE(p.max_chunk_tokens(), (total + per_head - 1) / per_head)
      << "one request of 65536 and 63 of 1: " << p.describe();
}

// Lengths 1 and 4000 mixed: unsplit, one block per request reads 4000 keys while the mean is
// ~1000. At the ideal share T / blocks_per_head (rounded up) the chunks would not fit one wave of
// blocks, so the plan takes the shortest limit that fits one wave, no more than twice the ideal
// share; the long requests' chunks are equal to a position, and the attention is the one-pass
// kernel's.
TEST(SplitKvPlan, BalancesLengthsOneAndFourThousand) {
  const std::vector<int> lens = {1, 4000, 1, 1, 4000, 1, 1, 1};
  const int h_k = 2, group = 2, target_blocks = 64;
  const SplitKvPlan p = plan_split_kv(lens, h_k, target_blocks, 64);
  const long long total = std::accumulate(lens.begin(), lens.end(), 0LL);
  const int per_head = target_blocks / h_k;
  const long long ideal = (total + per_head - 1) / per_head;
  std::printf("lengths 1 and 4000 (T = %lld, %d blocks per KV head): unsplit longest %d, mean %.1f; "
              "planned %s, ideal share %lld\n",
              total, per_head, 4000, static_cast<double>(total) / static_cast<double>(lens.size()),
              p.describe().c_str(), ideal);
  EXPECT_LE(p.n_chunks(), per_head) << "more chunks than one wave: " << p.describe();
  EXPECT_LE(p.max_chunk_tokens(), 2 * ideal) << p.describe();
  long long one_shorter = 0;  // chunks at a limit one position shorter: more than one wave
  for (int len : lens) one_shorter += (len + p.chunk_limit - 2) / (p.chunk_limit - 1);
  EXPECT_GT(one_shorter, per_head) << "the limit is not the shortest that fits: " << p.describe();
  // The long requests' chunks are within one position of each other: balanced, not just capped.
  int min_long = 1 << 30;
  for (int c = 0; c < p.n_chunks(); ++c) {
    if (lens[static_cast<size_t>(p.chunk_request[static_cast<size_t>(c)])] == 4000)
      min_long = std::min(min_long, p.chunk_end[static_cast<size_t>(c)] - p.chunk_begin[static_cast<size_t>(c)]);
  }
  EXPECT_LE(p.max_chunk_tokens() - min_long, 1) << p.describe();
  EXPECT_LE(p.n_chunks(), per_head + static_cast<int>(lens.size())) << p.describe();

  // The split kernel and the merge against the one-pass kernel and the reference.
  const int h_d = 16, n_heads = h_k * group;
  Batch bt(lens, h_k, h_d, 16);
  std::vector<float> hk, hv;
  bt.fill(4500, lens, hk, hv);
  const size_t qw = static_cast<size_t>(n_heads) * h_d;
  const std::vector<float> q = random_normal(lens.size() * qw, 4501, 2.f);
  DeviceBuffer<float> dq("q", {bt.batch(), static_cast<int64_t>(qw)});
  DeviceBuffer<float> one("one-pass out", {bt.batch(), static_cast<int64_t>(qw)});
  DeviceBuffer<float> split("split out", {bt.batch(), static_cast<int64_t>(qw)});
  DeviceBuffer<float> po("partial O", {p.n_chunks(), static_cast<int64_t>(qw)});
  DeviceBuffer<float> pl("partial LSE", {p.n_chunks(), n_heads});
  DeviceBuffer<int32_t> cr("chunk_request", {p.n_chunks()}), cb("chunk_begin", {p.n_chunks()}),
      ce("chunk_end", {p.n_chunks()}), fc("first_chunk", {bt.batch() + 1});
  dq.upload(q);
  cr.upload(p.chunk_request);
  cb.upload(p.chunk_begin);
  ce.upload(p.chunk_end);
  fc.upload(p.first_chunk);
  kernels::batched_decode_attention(dq.data(), bt.view(), one.data(), n_heads);
  kernels::batched_decode_attention_split(dq.data(), bt.view(),
                                          {cr.data(), cb.data(), ce.data(), fc.data(), p.n_chunks()},
                                          split.data(), n_heads, po.data(), pl.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> a = one.download(), s = split.download();
  // Split against one pass: the same fp32 sums regrouped plus one merge (an exp and a division
  // per chunk), so they agree to a few ulp of the O(1) outputs: 1e-5 absolute.
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - s[i])));
  EXPECT_LE(worst, 1e-5) << "split and one-pass batched attention differ by up to " << worst
                         << " (a merge that averages the chunks, or reads chunks outside the "
                            "request's range first_chunk[b] .. first_chunk[b+1] − 1, is off by far "
                            "more)";
  for (int b = 0; b < bt.batch(); ++b) {
    const std::vector<double> want = reference_one(bt, hk, hv, q.data() + static_cast<size_t>(b) * qw,
                                                   b, lens[static_cast<size_t>(b)], n_heads);
    EXPECT_TRUE(close_to(s.data() + static_cast<size_t>(b) * qw, want))
        << "request " << b << " (length " << lens[static_cast<size_t>(b)]
        << "): split attention differs from the reference";
  }
}

}  // namespace
}  // namespace clockwork
