// Milestone 4: the model with a KV cache, on tiny random checkpoints written in the real format.
// Prefill must fill exactly positions 0 .. s−1 of every layer with the reference's K (after
// RoPE) and V, a decode step exactly its own slot; cached generation must choose the same tokens
// as uncached generation, with logits within tolerance, over 20 steps (8 under the checker) for
// GQA ratios 1, 2 and 4; a paged cache (pages of 1, 3, 16) must give exactly the contiguous
// cache's logits; and a full cache must be a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/checked_run.h"
#include "harness/check/compare.h"
#include "harness/check/random.h"
#include "harness/check/temp_dir.h"
#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "harness/profiling/nvtx_recorder.h"
#include "milestones/milestone3/tests/candidates.h"
#include "milestones/milestone3/tests/end_to_end.h"
#include "milestones/milestone3/tests/tiny_checkpoint.h"
#include "milestones/milestone3/tests/tiny_config.h"
#include "harness/pipeline/cached_model.h"
#include "harness/pipeline/decode_bench.h"
#include "milestones/milestone4/tests/cache_check.h"
#include "milestones/milestone4/tests/cached_reference.h"
#include "reference/model.h"
#include "reference/ops.h"

namespace clockwork {
namespace {

namespace fs = std::filesystem;

// ---- tiny checkpoints ------------------------------------------------------------------------

// Two layers of the tiny shape (milestone 3's tiny_config.h), a context of 64 positions.
ModelConfig tiny_config(int64_t n_kv_heads) { return tiny_test_config(n_kv_heads, 2, 64); }

// A checkpoint directory with random weights, and the reference model on the same weights.
struct Tiny : TinyCheckpoint {
  Tiny(int64_t n_kv_heads, uint64_t seed) : TinyCheckpoint(tiny_config(n_kv_heads), seed) {}

  CachedModel load(KvCacheKind kind, int page_size = 16, int split_size = 0,
                   int max_positions = 0, bool verify_writes = true) const {
    CachedModelOptions o;
    o.cache = kind;
    o.page_size = page_size;
    o.split_size = split_size;
    o.max_positions = max_positions;
    o.verify_cache_writes = verify_writes;
    return CachedModel::load(dir.path(), o);
  }
};

std::string mode_name(KvCacheKind kind, int page_size) {
  return kind == KvCacheKind::Paged ? "paged cache, pages of " + std::to_string(page_size)
                                    : std::string(kv_cache_kind_name(kind)) + " cache";
}

std::vector<int64_t> widen(const std::vector<int32_t>& ids) {
  return {ids.begin(), ids.end()};
}

// ---- tolerances (milestone 3's whole-model allowance, end_to_end.h) -----------------------------

// K or V of layer `layer`: the layers before it, then RMSNorm, a projection over d and RoPE.
Tolerance kv_tolerance(const ModelConfig& c, int64_t s, int64_t layer) {
  Tolerance t = after_layers(c, s, layer);
  for (const Tolerance& p : {tol::rms_norm(c.hidden_size), tol::matmul(c.hidden_size), tol::rope(s)}) {
    t.rtol += p.rtol;
    t.rms_atol += p.rms_atol;
  }
  t.why =
      "the layers before this one, then RMSNorm, the K or V projection over d and RoPE, each "
      "with its rounding";
  return t;
}

// The logits: milestone 3's allowance for a whole model (end_to_end.h).
Tolerance cached_logits_tolerance(const ModelConfig& c, int64_t s) {
  Tolerance t = logits_tolerance(c, s);
  t.why =
      "cached and uncached runs differ only in how attention adds up (one query against the "
      "cache vs the whole score matrix), but that difference goes through every later op: "
      "every layer's allowance, then the final RMSNorm and lm_head";
  return t;
}

// Two correct implementations may choose different tokens only at a near-tie of the expected
// logits (closer than the logits tolerance).
bool near_tie(const std::vector<float>& l, int32_t a, int32_t b, const Tolerance& t) {
  double rms = 0;
  for (float v : l) rms += static_cast<double>(v) * v;
  rms = std::sqrt(rms / static_cast<double>(l.size()));
  return std::fabs(l[static_cast<size_t>(a)] - l[static_cast<size_t>(b)]) <=
         2 * (t.rms_atol * rms + t.rtol * std::fabs(l[static_cast<size_t>(a)]));
}

int32_t argmax(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// ---- which slots prefill and decode write ------------------------------------------------------

// The cache's storage of every layer, K and V: [layer][0 = K, 1 = V].
std::vector<std::vector<std::vector<float>>> snapshot(KvCache& cache) {
  std::vector<std::vector<std::vector<float>>> s;
  for (int l = 0; l < cache.shape().num_layers; ++l)
    s.push_back({cache.download(l, false), cache.download(l, true)});
  return s;
}

// Checks every layer's K and V: `positions` hold the rows of reference capture `r` (rows
// `positions` of its k and v), everything else is what `before` held (empty: poison).
void expect_cache(KvCache& cache, const Tiny& t, const ref::ForwardResult& r,
                  const std::vector<int>& positions, const std::string& step,
                  const std::vector<std::vector<std::vector<float>>>& before, bool decode_step) {
  const ModelConfig& c = t.config;
  const int width = static_cast<int>(c.num_kv_heads * c.head_dim);
  std::vector<int32_t> table;
  if (auto* paged = dynamic_cast<PagedKvCache*>(&cache)) table = paged->page_table();
  const torch::Tensor idx = torch::tensor(std::vector<int64_t>(positions.begin(), positions.end()));
  for (int l = 0; l < static_cast<int>(c.num_layers); ++l) {
    const ref::LayerCapture& layer = r.layers.at(static_cast<size_t>(l));
    for (int which = 0; which < 2; ++which) {
      CacheCheck chk;
      chk.what = std::string(which ? "V" : "K") + " of layer " + std::to_string(l) + " after " + step;
      chk.got = cache.download(l, which == 1);
      if (!before.empty()) chk.before = before[static_cast<size_t>(l)][static_cast<size_t>(which)];
      chk.width = width;
      chk.page_size = table.empty() ? 0 : cache.page_size();
      chk.head_dim = static_cast<int>(c.head_dim);
      chk.positions = positions;
      chk.slot_of = [&cache](int p) {
        const KvSlot s = cache.slot_of(p);
        return static_cast<long>(s.page) * cache.page_size() + s.offset;
      };
      chk.rows = to_vector((which ? layer.v : layer.k).index_select(0, idx));
      chk.tol = kv_tolerance(c, static_cast<int64_t>(r.embeddings.size(0)), l);
      chk.wrong_slots = slot_pitfalls(table, cache.page_size());
      if (which == 0) {
        chk.wrong_values.push_back(
            {"k_before_rope",
             decode_step
                 ? "the new key was stored without its rotation at position pos: in a decode "
                   "step, rotate q and k with row pos of the RoPE tables (not row 0), then append"
                 : "the cache holds K before RoPE: append after rope_apply has rotated K (a "
                   "decode step never rotates the old keys again)",
             to_vector(layer.k_proj.index_select(0, idx))});
        chk.wrong_values.push_back({"v_in_k", "K and V were exchanged in the cache",
                                    to_vector(layer.v.index_select(0, idx))});
      }
      EXPECT_TRUE(cache_matches(chk));
    }
    if (::testing::Test::HasFailure()) {
      if (l > 0) {
        ADD_FAILURE() << "Layers 0.." << l - 1 << " stored the right K and V, layer " << l
                      << " did not: its input is already wrong, so look after the append of layer "
                      << l - 1 << " (attention over the cache, o_proj, the FFN).";
      }
      if (l + 1 < c.num_layers) {
        ADD_FAILURE() << "Later layers not checked: they start from layer " << l
                      << "'s output, so fix this layer first.";
      }
      return;
    }
  }
}

void check_prefill_and_decode(KvCacheKind kind, int page_size) {
  SCOPED_TRACE(mode_name(kind, page_size));
  const Tiny t(2, test_seed(4900 + page_size));
  // verify_writes off: this test inspects the cache itself, whatever the steps wrote.
  CachedModel model = t.load(kind, page_size, 0, 24, /*verify_writes=*/false);
  std::vector<int32_t> ids = random_ids(9, t.config.vocab_size, test_seed(4901));
  const int s = static_cast<int>(ids.size());
  ref::ForwardOptions capture;
  capture.capture = true;

  model.prefill(ids);
  KvCache& cache = *model.cache();
  ASSERT_EQ(cache.length(), s);
  std::vector<int> prompt;
  for (int p = 0; p < s; ++p) prompt.push_back(p);
  expect_cache(cache, t, t.reference.forward(widen(ids), capture), prompt,
               "prefill of positions 0.." + std::to_string(s - 1), {}, false);
  if (::testing::Test::HasFailure()) return;  // decode steps build on the prefill

  // Two decode steps: positions 9 and 10 (with pages of 3, position 9 opens a new page).
  for (int32_t token : {5, 11}) {
    const int pos = static_cast<int>(ids.size());
    const auto before = snapshot(cache);
    model.decode(token);
    ids.push_back(token);
    ASSERT_EQ(cache.length(), pos + 1);
    expect_cache(cache, t, t.reference.forward(widen(ids), capture), {pos},
                 "the decode step at position " + std::to_string(pos), before, true);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(CachedModelSlots, ContiguousPrefillAndDecodeWriteExactlyTheirSlots) {
  check_prefill_and_decode(KvCacheKind::Contiguous, 16);
}

TEST(CachedModelSlots, PagedPrefillAndDecodeWriteExactlyTheirSlots) {
  check_prefill_and_decode(KvCacheKind::Paged, 3);
}

// ---- cached generation against uncached generation ---------------------------------------------

struct GenerationCase {
  int64_t n_kv_heads;
  KvCacheKind kind;
  int page_size;
  int split_size;  // 0: chosen per step; > 0: forced
  const char* why;
};

constexpr int kPromptLength = 9;
constexpr int kSteps = 20;
// Under the checker, 8 steps: positions up to 17 still cross every page size tested (1, 3, 16)
// and every split chunk (5, 6, 7), which is where a cache kernel's bounds and races can go
// wrong; the plain runs take all 20.
int steps() { return checked_run() ? 8 : kSteps; }

// Greedy generation along the uncached model's choices: at every step the cached model decodes
// the token the uncached one chose, so both always see the same sequence. The chosen tokens must
// agree (except at a near-tie) and the logits be within tolerance; a difference is compared with
// the reference's cached pipeline with one known mistake switched on.
void check_generation(const GenerationCase& g) {
  SCOPED_TRACE("h_k=" + std::to_string(g.n_kv_heads) + " (h/h_k = " +
               std::to_string(4 / g.n_kv_heads) + "), " + mode_name(g.kind, g.page_size) +
               (g.split_size ? ", decode attention split every " + std::to_string(g.split_size)
                             : std::string(", split chosen per step")) +
               " (" + g.why + ")");
  const Tiny t(g.n_kv_heads, test_seed(5000 + static_cast<uint64_t>(g.n_kv_heads)));
  CachedModel model = t.load(g.kind, g.page_size, g.split_size);
  std::vector<int32_t> ids = random_ids(kPromptLength, t.config.vocab_size, test_seed(5001));

  struct Mistake {
    CacheMistakes m;
    const char* name;
    const char* message;
  };
  const Mistake mistakes[] = {
      {{true, true, false, false}, "k_before_rope",
       "the cache holds keys before RoPE: append K after it has been rotated, in prefill and in "
       "every decode step"},
      {{true, false, false, false}, "prefill_k_before_rope",
       "prefill stored the prompt's keys before RoPE: append the layer's K after rope_apply "
       "(decoder_layer leaves the rotated K in b.k)"},
      {{false, true, false, false}, "decode_k_before_rope",
       "the decode step appended its k before rotating it: rope_apply first (row pos of the "
       "tables), then kv_cache_append"},
      {{false, false, true, false}, "rope_position_zero",
       "decode steps rotate q and k as if at position 0: use row pos of the RoPE tables"},
      {{false, false, false, true}, "excludes_current",
       "decode attention skips the new token's own position: attend to positions 0 .. pos"},
  };
  std::vector<ReferenceCachedModel> wrong;
  for (const Mistake& m : mistakes) wrong.emplace_back(t.reference, m.m);
  for (ReferenceCachedModel& w : wrong) w.prefill(widen(ids));

  std::vector<float> cached = model.prefill(ids);
  for (int step = 0; step < steps(); ++step) {
    const std::vector<float> uncached = model.forward_uncached(ids);
    const Tolerance tol = cached_logits_tolerance(t.config, static_cast<int64_t>(ids.size()));
    std::vector<PitfallCandidate> candidates;
    for (size_t i = 0; i < wrong.size() && step > 0; ++i) {
      candidates.push_back(
          {mistakes[i].name, mistakes[i].message, to_vector(wrong[i].decode(ids.back()))});
    }
    EXPECT_TRUE(matches_reference(
        step == 0 ? std::string("logits of the prefill")
                  : "logits of decode step " + std::to_string(step) + " (position " +
                        std::to_string(ids.size() - 1) + ")",
        cached, uncached, {t.config.vocab_size}, tol, explaining(candidates, cached)));
    const int32_t want = argmax(uncached), got = argmax(cached);
    EXPECT_TRUE(got == want || near_tie(uncached, want, got, tol))
        << "step " << step << ": the cached model chose token " << got
        << ", the uncached one token " << want << ", and the logits are not a near-tie";
    if (::testing::Test::HasFailure()) return;  // one clear report, not twenty
    ids.push_back(want);
    cached = model.decode(want);
  }
}

TEST(CachedGeneration, GqaRatioOneMatchesUncached) {
  check_generation({4, KvCacheKind::Contiguous, 16, 0, "every query head has its own KV head"});
}

TEST(CachedGeneration, GqaRatioTwoMatchesUncached) {
  check_generation({2, KvCacheKind::Paged, 3, 0, "pages of 3"});
  check_generation({2, KvCacheKind::Contiguous, 16, 5, "split-KV in chunks of 5"});
}

TEST(CachedGeneration, GqaRatioFourMatchesUncached) {
  check_generation({1, KvCacheKind::Paged, 16, 7, "one KV head, paged, split in chunks of 7"});
}

// The paged cache computes the same arithmetic in the same order as the contiguous one, only
// from other addresses: the logits must agree bit for bit.
TEST(CachedGeneration, PagedEqualsContiguous) {
  const Tiny t(2, test_seed(5100));
  const std::vector<int32_t> prompt = random_ids(kPromptLength, t.config.vocab_size, test_seed(5101));
  for (int split : {0, 6}) {
    CachedModel contiguous = t.load(KvCacheKind::Contiguous, 16, split);
    std::vector<std::vector<float>> want;
    std::vector<int32_t> ids = prompt;
    want.push_back(contiguous.prefill(ids));
    for (int step = 0; step < steps(); ++step) {
      ids.push_back(argmax(want.back()));
      want.push_back(contiguous.decode(ids.back()));
    }
    for (int page_size : {1, 3, 16}) {
      SCOPED_TRACE("pages of " + std::to_string(page_size) +
                   (split ? ", split every 6 positions" : ", split chosen per step"));
      CachedModel paged = t.load(KvCacheKind::Paged, page_size, split);
      std::vector<float> got = paged.prefill(prompt);
      for (int step = 0; step <= steps(); ++step) {
        if (step > 0) got = paged.decode(ids[static_cast<size_t>(kPromptLength + step - 1)]);
        ASSERT_TRUE(matches_reference(
            "logits of step " + std::to_string(step) + " with a paged cache", got,
            want[static_cast<size_t>(step)], {t.config.vocab_size},
            tol::exact("the paged cache must give the contiguous cache's logits bit for bit: the "
                       "kernels do the same arithmetic in the same order, only the addresses of "
                       "K and V differ")));
      }
    }
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST(CachedModelErrors, FullCacheIsAClearError) {
  const Tiny t(2, test_seed(5200));
  for (KvCacheKind kind : {KvCacheKind::Contiguous, KvCacheKind::Paged}) {
    SCOPED_TRACE(mode_name(kind, 4));
    CachedModel model = t.load(kind, 4, 0, 12);
    const std::vector<int32_t> ids = random_ids(9, t.config.vocab_size, test_seed(5201));
    model.prefill(ids);
    for (int i = 0; i < 3; ++i) model.decode(7);  // positions 9, 10, 11: the cache is full
    EXPECT_EQ(model.cache()->length(), 12);
    try {
      model.decode(7);
      ADD_FAILURE() << "a 13th position went into a cache of 12";
    } catch (const KvCacheFullError& e) {
      EXPECT_NE(std::string(e.what()).find("capacity 12"), std::string::npos) << e.what();
    }
    EXPECT_EQ(model.cache()->length(), 12) << "the refused step changed the cache";
    EXPECT_EQ(model.cached_ids().size(), 12u);
    const std::vector<int32_t> long_prompt = random_ids(13, t.config.vocab_size, test_seed(5202));
    EXPECT_THROW(model.prefill(long_prompt), KvCacheFullError);
  }
}

TEST(CachedModelErrors, BadCallsAreNamed) {
  const Tiny t(2, test_seed(5300));
  CachedModel model = t.load(KvCacheKind::Contiguous);
  EXPECT_THROW(model.decode(3), std::logic_error) << "decode before any prefill";
  EXPECT_THROW(model.prefill({}), std::invalid_argument);
  try {
    model.prefill({4, 5, 97});
    ADD_FAILURE() << "id 97 of a 97-token vocabulary was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
  }
  model.prefill({4, 5, 6});
  EXPECT_THROW(model.decode(-1), std::invalid_argument);
  CachedModelOptions o;
  o.max_positions = 65;  // more than the context of 64
  EXPECT_THROW(model.set_options(o), std::invalid_argument);
  CachedModel uncached = t.load(KvCacheKind::None);
  EXPECT_EQ(uncached.cache(), nullptr);
  EXPECT_THROW(uncached.prefill({4, 5}), std::logic_error);
}

// logits() is the one call a generation loop makes: it decodes when the sequence grew by one
// token and prefills otherwise.
TEST(CachedModelErrors, LogitsDecodesOnlyWhenTheSequenceGrewByOne) {
  const Tiny t(2, test_seed(5400));
  CachedModel model = t.load(KvCacheKind::Paged, 3);
  std::vector<int32_t> ids = {4, 5, 6, 7};
  model.logits(ids);
  EXPECT_EQ(model.cached_ids(), ids);
  ids.push_back(8);
  const std::vector<float> stepped = model.logits(ids);
  EXPECT_EQ(model.cache()->length(), 5);
  ids[1] = 9;  // not an extension: prefill again
  model.logits(ids);
  EXPECT_EQ(model.cached_ids(), ids);
  EXPECT_EQ(model.cache()->length(), 5);
  EXPECT_TRUE(matches_reference("logits after one decode step", stepped,
                                model.forward_uncached({4, 5, 6, 7, 8}), {t.config.vocab_size},
                                logits_tolerance(t.config, 5)));
}

// The timing behind `clockwork bench --op decode`: one row per prompt length and mode, the
// model's options restored afterwards.
TEST(DecodeBench, OneRowPerPromptLengthAndMode) {
  const Tiny t(2, test_seed(5500));
  CachedModel model = t.load(KvCacheKind::Paged, 5);
  const std::vector<KvCacheKind> modes{KvCacheKind::None, KvCacheKind::Contiguous,
                                       KvCacheKind::Paged};
  const std::vector<DecodeTiming> rows = time_decode(model, {4, 12}, 3, modes);
  ASSERT_EQ(rows.size(), 6u);
  for (const DecodeTiming& r : rows) {
    EXPECT_EQ(r.tokens, 3);
    EXPECT_GT(r.ms_per_token, 0);
    EXPECT_DOUBLE_EQ(r.tokens_per_s, 1000.0 / r.ms_per_token);  // the same division
    // K and V of every position up to the step's own, for 2 layers, plus q and the output.
    const double first = decode_attention_bytes(r.prompt_length + 1, 4, 2, 16);
    if (r.mode == KvCacheKind::None) {
      EXPECT_EQ(r.cache_bytes_per_token, 0);
    } else {
      EXPECT_GT(r.cache_bytes_per_token, 2 * first);
    }
  }
  EXPECT_EQ(rows[0].prompt_length, 4);
  EXPECT_EQ(rows[5].prompt_length, 12);
  EXPECT_EQ(model.options().cache, KvCacheKind::Paged);
  EXPECT_EQ(model.options().page_size, 5);
  EXPECT_THROW(time_decode(model, {62}, 3, modes), std::invalid_argument)
      << "62 + 3 positions exceed the context of 64";
}

// Prefill and decode name their pieces for profilers (harness/profiling/nvtx.h). The ranges sit
// outside the parts students write, so a timeline reads by name whatever the submission.
TEST(NvtxRanges, PrefillAndDecodeNameEveryLayerAndStep) {
  const Tiny t(2, test_seed(5600));
  // Cache writes are not checked here: only the names of the ranges matter.
  CachedModel model = t.load(KvCacheKind::Paged, 4, 0, 0, /*verify_writes=*/false);
  model.prefill({5, 6, 7});  // the first prefill sizes the activations
  if (!nvtx_recorder::recorder_installed()) {
    GTEST_SKIP() << "a profiler's NVTX tool is attached; the test's recorder sees no ranges";
  }
  nvtx_recorder::clear();
  model.prefill({5, 6, 7, 8});
  model.decode(9);

  std::vector<std::string> want;
  const std::string prefill = "prefill s=4", decode = "decode pos=4";
  want.push_back(prefill);
  want.push_back(prefill + " > embedding");
  for (int l = 0; l < t.config.num_layers; ++l) {
    const std::string layer = prefill + " > layer " + std::to_string(l);
    for (const char* step : {"", " > qkv", " > attention", " > kv append"}) want.push_back(layer + step);
  }
  for (const char* step : {" > final_norm", " > lm_head"}) want.push_back(prefill + step);
  want.push_back(decode);
  want.push_back(decode + " > embedding");
  for (int l = 0; l < t.config.num_layers; ++l) {
    const std::string layer = decode + " > layer " + std::to_string(l);
    for (const char* step : {"", " > qkv", " > rope", " > kv append", " > decode attention",
                             " > o_proj", " > residual", " > ffn_norm", " > gate_proj",
                             " > up_proj", " > swiglu", " > down_proj", " > residual"}) {
      want.push_back(layer + step);
    }
  }
  for (const char* step : {" > final_norm", " > lm_head"}) want.push_back(decode + step);

  std::vector<std::string> got;
  for (const nvtx_recorder::RecordedRange& r : nvtx_recorder::ranges()) {
    got.push_back(r.path);
    EXPECT_EQ(r.domain, "clockwork") << "range '" << r.path << "'";
  }
  // Every wanted range, in this order (other ranges, such as the steps inside qkv, may sit
  // between them).
  size_t at = 0;
  for (const std::string& w : want) {
    while (at < got.size() && got[at] != w) ++at;
    if (at == got.size()) {
      std::string seen;
      for (const std::string& g : got) seen += "\n  " + g;
      FAIL() << "no range '" << w << "' where expected; the ranges opened were:" << seen;
    }
    ++at;
  }
  EXPECT_EQ(nvtx_recorder::open_ranges(), 0) << "a range was left open";
}

}  // namespace
}  // namespace clockwork
