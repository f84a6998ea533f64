// Milestone 5: the decode step as a CUDA graph (CachedModelOptions::cuda_graphs), after a prefill
// with the fused attention. On tiny random checkpoints, greedy generation with the graph must give
// the same tokens, and the same logits to the bit (the same kernels run with the same arguments in
// the same order), as launching each kernel, and the reference's logits at every step; and the
// steps must really have run from a graph: one graph launch per step, and an executable graph
// instantiated once per topology, then updated in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/random.h"
#include "harness/check/torch_bridge.h"
#include "harness/pipeline/cached_model.h"
#include "milestones/milestone3/tests/end_to_end.h"
#include "milestones/milestone3/tests/tiny_checkpoint.h"
#include "milestones/milestone3/tests/tiny_config.h"
#include "reference/model.h"

namespace clockwork {
namespace {

struct Generation {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // of every decode step
};

Generation generate(CachedModel& model, const std::vector<int32_t>& ids, int steps) {
  Generation g;
  std::vector<float> l = model.prefill(ids);
  for (int t = 0; t < steps; ++t) {
    const auto next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    g.tokens.push_back(next);
    l = model.decode(next);
    g.logits.push_back(l);
  }
  return g;
}

struct Case {
  const char* name;
  KvCacheKind cache;
  int page_size;
  int split_size;
  uint64_t instantiations;  // executable graphs the steps need: one per topology met
};

TEST(DecodeGraph, SameTokensAndLogitsAsLaunchingEachKernelAndReplayedEveryStep) {
  // A 60-token prompt and 10 steps: the cache grows from 61 to 70 positions, across the 64 above
  // which the automatic policy starts splitting the attention (a second topology: the merge adds
  // one launch per layer). A paged cache with 4-position pages gains a page every fourth step.
  const Case cases[] = {
      {"contiguous, one pass", KvCacheKind::Contiguous, 16, -1, 1},
      {"contiguous, automatic split (one pass, then split at 65 positions)",
       KvCacheKind::Contiguous, 16, 0, 2},
      {"paged (4 per page), split into chunks of 8", KvCacheKind::Paged, 4, 8, 1},
  };
  const TinyCheckpoint tiny(tiny_test_config(2, 2, 256), test_seed(7100));
  const std::vector<int32_t> ids = random_ids(60, tiny.config.vocab_size, test_seed(91));
  const int steps = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CachedModelOptions o;
    o.cache = c.cache;
    o.page_size = c.page_size;
    o.split_size = c.split_size;
    o.fused_attention = true;  // the prefill of milestone 5
    CachedModel model = CachedModel::load(tiny.dir.path(), o);
    if (c.split_size == 0) {
      ASSERT_EQ(model.split_size_for(61), 0) << "the case needs a one-pass step first";
      ASSERT_GT(model.split_size_for(70), 0) << "the case needs a split step last";
    }
    const Generation launched = generate(model, ids, steps);
    EXPECT_EQ(model.decode_graph_stats().launches, 0u) << "graphs are off by default";

    o.cuda_graphs = true;
    model.set_options(o);
    const Generation graphed = generate(model, ids, steps);
    EXPECT_EQ(graphed.tokens, launched.tokens);
    for (int t = 0; t < steps; ++t) {
      ASSERT_TRUE(graphed.logits[t] == launched.logits[t])
          << "step " << t << ": the graph's logits differ from those of the launched kernels";
    }
    // And right: every step's logits against the reference's forward pass over the sequence so
    // far (the prompt and the tokens fed in), with milestone 3's tolerance for a whole model.
    const Tolerance tol = logits_tolerance(tiny.config, static_cast<int64_t>(ids.size()) + steps);
    std::vector<int64_t> seq(ids.begin(), ids.end());
    for (int t = 0; t < steps; ++t) {
      seq.push_back(graphed.tokens[t]);
      const ref::ForwardResult want = tiny.reference.forward(seq);
      ASSERT_TRUE(matches_reference("logits of decode step " + std::to_string(t) + " (CUDA graph)",
                                    graphed.logits[t], to_vector(want.logits),
                                    {tiny.config.vocab_size}, tol));
    }
    const DecodeGraphStats& st = model.decode_graph_stats();
    EXPECT_EQ(st.launches, static_cast<uint64_t>(steps)) << "every step runs from a graph";
    EXPECT_EQ(st.captures, static_cast<uint64_t>(steps));
    EXPECT_EQ(st.instantiations, c.instantiations) << "one executable graph per topology";
    EXPECT_EQ(st.updates, static_cast<uint64_t>(steps) - c.instantiations)
        << "the other steps update it in place";
  }
}

}  // namespace
}  // namespace clockwork
