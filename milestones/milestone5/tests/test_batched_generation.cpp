// Milestone 5: batched generation over one shared page pool, on a tiny random checkpoint.
//
// Eight prompts of mixed lengths, batched four at a time (so requests join as others finish:
// continuous batching), must give each prompt's greedy tokens exactly as milestone 4's
// CachedModel gives them for the prompt alone, with the one-pass and with the split batched
// attention; the pool must hold all its pages again at the end. A pool too small for a request
// is an error naming the pool and the request, and a pool that holds only two requests at once
// must still serve more requests than that, which only works when finished requests give their
// pages back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "harness/check/random.h"
#include "harness/check/temp_dir.h"
#include "harness/check/torch_bridge.h"
#include "harness/model/safetensors.h"
#include "harness/pipeline/batched_generator.h"
#include "harness/pipeline/cached_model.h"
#include "milestones/milestone3/tests/tiny_config.h"
#include "reference/model.h"

namespace clockwork {
namespace {

// Two layers of the tiny shape (d 64, h 4, h_d 16, V 97) with h_k = 2 and a context of 64.
struct Tiny {
  ModelConfig config;
  TempDir dir;

  explicit Tiny(uint64_t seed) : config(tiny_test_config(2, 2, 64)) {
    const std::map<std::string, torch::Tensor> weights = ref::random_weights(config, seed);
    std::ofstream(dir.path() / "config.json") << config.to_json();
    std::vector<TensorData> tensors;
    for (const ref::WeightSpec& spec : ref::weight_specs(config))
      tensors.push_back(ref::to_tensor_data(spec.name, weights.at(spec.name)));
    write_safetensors(dir.path() / "model.safetensors", tensors);
  }
};

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The prompt alone with milestone 4's cached model: the tokens generation would print.
std::vector<int32_t> solo(CachedModel& m, const std::vector<int32_t>& prompt, int max_new,
                          const std::vector<int32_t>& stops) {
  std::vector<int32_t> out;
  std::vector<float> logits = m.prefill(prompt);
  const int context = static_cast<int>(m.config().max_position_embeddings);
  for (;;) {
    const int32_t t = argmax(logits);
    out.push_back(t);
    if (std::find(stops.begin(), stops.end(), t) != stops.end() ||
        static_cast<int>(out.size()) >= max_new ||
        static_cast<int>(prompt.size() + out.size()) >= context)
      return out;
    logits = m.decode(t);
  }
}

struct Case {
  std::vector<int32_t> prompt;
  int max_new;
};

std::vector<Case> eight_prompts(int vocab) {
  const int lengths[] = {1, 13, 4, 30, 7, 22, 2, 17};
  const int max_new[] = {12, 6, 20, 9, 15, 3, 18, 10};
  std::vector<Case> cases;
  for (int i = 0; i < 8; ++i) {
    cases.push_back({random_ids(static_cast<size_t>(lengths[i]), vocab, 4600 + static_cast<uint64_t>(i)),
                     max_new[i]});
  }
  return cases;
}

// Runs every case through the generator; returns each request's tokens and checks the stream:
// tokens of one request arrive in order, exactly one of them marked last, and the batch never
// holds more than max_batch requests.
std::vector<std::vector<int32_t>> run_batched(BatchedGenerator& g, const std::vector<Case>& cases,
                                              int* widest = nullptr, int* split_steps = nullptr) {
  for (const Case& c : cases) g.submit(c.prompt, c.max_new);
  std::vector<std::vector<int32_t>> streamed(cases.size());
  std::vector<int> lasts(cases.size(), 0);
  int steps = 0;
  while (!g.idle()) {
    for (const BatchToken& t : g.step()) {
      EXPECT_EQ(lasts[static_cast<size_t>(t.request)], 0) << "request " << t.request
                                                          << " got a token after its last";
      streamed[static_cast<size_t>(t.request)].push_back(t.token);
      if (t.last) ++lasts[static_cast<size_t>(t.request)];
    }
    EXPECT_LE(g.last_step().decoded, g.options().max_batch);
    if (widest) *widest = std::max(*widest, g.last_step().decoded);
    if (split_steps && g.last_step().chunks > g.last_step().decoded) ++*split_steps;
    if (++steps > 1000) {
      ADD_FAILURE() << "the generator did not finish after 1000 steps";
      break;
    }
  }
  for (size_t r = 0; r < cases.size(); ++r) {
    EXPECT_EQ(lasts[r], 1) << "request " << r << " was never marked finished";
    EXPECT_EQ(streamed[r], g.generated(static_cast<int>(r))) << "request " << r;
  }
  return streamed;
}

// Every case's tokens from milestone 4's cached model (paged, pages of 4), the prompt alone.
std::vector<std::vector<int32_t>> solo_all(const Tiny& tiny, const std::vector<Case>& cases,
                                           const std::vector<int32_t>& stops) {
  CachedModelOptions o;
  o.cache = KvCacheKind::Paged;
  o.page_size = 4;
  CachedModel solo_model = CachedModel::load(tiny.dir.path(), o);
  std::vector<std::vector<int32_t>> out;
  for (const Case& c : cases) out.push_back(solo(solo_model, c.prompt, c.max_new, stops));
  return out;
}

void expect_solo_tokens(const std::vector<Case>& cases, const std::vector<std::vector<int32_t>>& got,
                        const std::vector<std::vector<int32_t>>& want, const std::string& mode) {
  for (size_t r = 0; r < cases.size(); ++r) {
    size_t first = 0;
    while (first < std::min(want[r].size(), got[r].size()) && want[r][first] == got[r][first]) ++first;
    EXPECT_EQ(got[r], want[r]) << mode << ": request " << r << " (prompt of "
                               << cases[r].prompt.size() << " tokens) differs from the prompt "
                               << "generated alone from token " << first << " on; a request that "
                               << "attends through another request's page table or length, or "
                               << "rotates at another position, diverges like this";
  }
}

TEST(BatchedGeneration, EightPromptsEqualEachPromptAlone) {
  const Tiny tiny(4700);
  const std::vector<Case> cases = eight_prompts(static_cast<int>(tiny.config.vocab_size));
  const std::vector<std::vector<int32_t>> want = solo_all(tiny, cases, {});
  for (int split_blocks : {-1, 8}) {
    const std::string mode = split_blocks < 0 ? "one-pass attention" : "split attention";
    SCOPED_TRACE(mode);
    BatchedGeneratorOptions o;
    o.max_batch = 4;
    o.page_size = 4;
    o.split_blocks = split_blocks;
    o.min_chunk = 4;  // short chunks, so that these short requests are really split
    BatchedGenerator g = BatchedGenerator::load(tiny.dir.path(), o);
    int widest = 0, split_steps = 0;
    const std::vector<std::vector<int32_t>> got = run_batched(g, cases, &widest, &split_steps);
    EXPECT_EQ(widest, 4) << "the batch never filled up";
    if (split_blocks > 0) EXPECT_GT(split_steps, 0) << "no decode step was split";
    expect_solo_tokens(cases, got, want, mode);
    EXPECT_EQ(g.pool().free_pages(), g.pool().num_pages())
        << "after every request finished, " << g.pool().num_pages() - g.pool().free_pages()
        << " of the " << g.pool().num_pages() << " pages are still held";
  }
}

TEST(BatchedGeneration, StopTokensEndRequestsEarly) {
  // With every token below 40 a stop, most requests end after a few tokens, at different steps.
  const Tiny tiny(4800);
  const std::vector<Case> cases = eight_prompts(static_cast<int>(tiny.config.vocab_size));
  std::vector<int32_t> stops;
  for (int32_t t = 0; t < 40; ++t) stops.push_back(t);
  BatchedGeneratorOptions o;
  o.max_batch = 3;
  o.page_size = 4;
  o.stop_ids = stops;
  BatchedGenerator g = BatchedGenerator::load(tiny.dir.path(), o);
  const std::vector<std::vector<int32_t>> got = run_batched(g, cases);
  expect_solo_tokens(cases, got, solo_all(tiny, cases, stops), "with stop tokens");
  EXPECT_EQ(g.pool().free_pages(), g.pool().num_pages());
}

TEST(BatchedGeneration, PoolTooSmallForARequestIsNamed) {
  const Tiny tiny(4900);
  BatchedGeneratorOptions o;
  o.page_size = 4;
  o.num_pages = 5;  // 20 positions
  BatchedGenerator g = BatchedGenerator::load(tiny.dir.path(), o);
  g.submit(random_ids(3, 97, 1), 4);
  try {
    g.submit(random_ids(18, 97, 2), 8);  // 25 positions: 7 pages
    FAIL() << "a request that can never fit the pool was accepted";
  } catch (const PagePoolExhausted& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("request 1"), std::string::npos) << m;
    EXPECT_NE(m.find("pool holds 5"), std::string::npos) << m;
  }
}

// The pool holds two requests at a time; eight requests pass through it only if each finished
// request's pages return to the pool.
TEST(BatchedGeneration, FinishedRequestsGiveTheirPagesBack) {
  const Tiny tiny(5000);
  const std::vector<Case> cases = eight_prompts(static_cast<int>(tiny.config.vocab_size));
  int most = 0;
  for (const Case& c : cases) most = std::max(most, static_cast<int>(c.prompt.size()) + c.max_new - 1);
  BatchedGeneratorOptions o;
  o.max_batch = 8;
  o.page_size = 4;
  o.num_pages = 2 * ((most + 3) / 4);
  BatchedGenerator g = BatchedGenerator::load(tiny.dir.path(), o);
  try {
    const std::vector<std::vector<int32_t>> got = run_batched(g, cases);
    expect_solo_tokens(cases, got, solo_all(tiny, cases, {}), "small pool");
  } catch (const PagePoolExhausted& e) {
    FAIL() << "with a pool of " << o.num_pages << " pages (room for two requests at once), "
           << "generation stopped after " << g.finished() << " of " << cases.size()
           << " requests: " << e.what()
           << ". This is the mistake of not freeing a finished request's pages.";
  }
  EXPECT_EQ(g.pool().free_pages(), g.pool().num_pages());
}

}  // namespace
}  // namespace clockwork
