// Milestone 5: the whole model with the fused attention. On tiny random checkpoints written in
// the real format, Model::use_fused_attention(true) must give the reference's logits and next
// token, the same as milestone 3's attention does, and the device memory of a forward pass must
// grow linearly in s: no [s, s] buffer. The memory is read from the sizes the pipeline passes to
// cudaMalloc (Model::activation_bytes()), not from a timer.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness/check/compare.h"
#include "harness/check/random.h"
#include "harness/check/temp_dir.h"
#include "harness/check/torch_bridge.h"
#include "harness/pipeline/cached_model.h"
#include "harness/pipeline/model.h"
#include "milestones/milestone3/tests/end_to_end.h"
#include "milestones/milestone3/tests/tiny_checkpoint.h"
#include "milestones/milestone3/tests/tiny_config.h"
#include "reference/model.h"

namespace clockwork {
namespace {

// Two layers of the tiny shape (d 64, h 4, h_d 16, d_ff 96, V 97) with a context of 256, its
// checkpoint directory and the reference model on the same weights.
struct Tiny : TinyCheckpoint {
  Tiny(int64_t n_kv_heads, uint64_t seed)
      : TinyCheckpoint(tiny_test_config(n_kv_heads, 2, 256), seed) {}
};

// The fused pipeline against the reference and against the pipeline with milestone 3's
// attention, for GQA ratios 1, 2 and 4 and a prompt spanning several tiles.
TEST(FusedModel, MatchesTheReferenceAndMilestoneThree) {
  for (int64_t h_k : {4, 2, 1}) {
    SCOPED_TRACE("h_k = " + std::to_string(h_k));
    const Tiny tiny(h_k, 5300 + static_cast<uint64_t>(h_k));
    const int s = 2 * kernels::kFlashAttentionTile + 5;
    const std::vector<int32_t> ids = random_ids(static_cast<size_t>(s), tiny.config.vocab_size, test_seed(77));
    const ref::ForwardResult want = tiny.reference.forward({ids.begin(), ids.end()});
    // The tolerance milestone 3 derives for a whole model: every layer's ops, attention included
    // (the fused kernel's few extra rescale roundings are far inside it at this length).
    const Tolerance t = logits_tolerance(tiny.config, s);

    Model fused = Model::load(tiny.dir.path());
    fused.use_fused_attention(true);
    ASSERT_TRUE(fused.fused_attention());
    const std::vector<float> got = fused.forward(ids);
    EXPECT_TRUE(matches_reference("logits (fused attention)", got, to_vector(want.logits),
                                  {tiny.config.vocab_size}, t));
    expect_same_choice(fused.next_token(ids), want.next_token, want.logits, t,
                       "next token (fused attention)");

    Model plain = Model::load(tiny.dir.path());
    const std::vector<float> m3 = plain.forward(ids);
    Tolerance both = t;
    both.rtol *= 2;
    both.rms_atol *= 2;
    both.why = "each pipeline is within the logits tolerance of the reference: twice that";
    EXPECT_TRUE(matches_reference("logits, fused vs milestone 3's attention", got, m3,
                                  {tiny.config.vocab_size}, both));
  }
}

// Device memory of a forward pass against s: with the fused attention the bytes grow by the same
// amount for each doubling step's extra tokens (linear), while milestone 3's [s, s] workspace adds
// a quadratic term. Each length runs on a fresh model, so the activations are sized for exactly s.
TEST(FusedModel, DeviceMemoryGrowsLinearlyInS) {
  const Tiny tiny(2, 5310);
  const int lengths[] = {32, 64, 128, 256};
  std::vector<int64_t> fused_bytes, plain_bytes;
  for (int s : lengths) {
    const std::vector<int32_t> ids = random_ids(static_cast<size_t>(s), tiny.config.vocab_size, test_seed(78));
    Model fused = Model::load(tiny.dir.path());
    fused.use_fused_attention(true);
    (void)fused.forward(ids);
    fused_bytes.push_back(static_cast<int64_t>(fused.activation_bytes()));
    Model plain = Model::load(tiny.dir.path());
    (void)plain.forward(ids);
    plain_bytes.push_back(static_cast<int64_t>(plain.activation_bytes()));
    // The only difference is the [s, s] fp32 workspace.
    EXPECT_EQ(plain_bytes.back() - fused_bytes.back(), int64_t{4} * s * s)
        << "at s = " << s << ": the fused pipeline should hold everything but the scores";
  }
  // Per added token, the bytes a forward pass needs: constant for the fused attention.
  for (size_t i = 1; i + 1 < fused_bytes.size(); ++i) {
    const int64_t step = lengths[i] - lengths[i - 1], next_step = lengths[i + 1] - lengths[i];
    const int64_t per_token = (fused_bytes[i] - fused_bytes[i - 1]) / step;
    const int64_t next_per_token = (fused_bytes[i + 1] - fused_bytes[i]) / next_step;
    EXPECT_EQ(per_token, next_per_token)
        << "with the fused attention the device memory must grow linearly in s (O(s)): "
        << fused_bytes[i - 1] << ", " << fused_bytes[i] << ", " << fused_bytes[i + 1]
        << " bytes at s = " << lengths[i - 1] << ", " << lengths[i] << ", " << lengths[i + 1];
    // Milestone 3's workspace makes the same measure grow: the check can tell the two apart.
    const int64_t plain_per_token = (plain_bytes[i] - plain_bytes[i - 1]) / step;
    const int64_t plain_next = (plain_bytes[i + 1] - plain_bytes[i]) / next_step;
    EXPECT_GT(plain_next, plain_per_token);
  }
  // And nothing of size s² hides in the constant part: at the longest length the fused pipeline
  // holds less than one [s, s] fp32 matrix more than its per-token bytes times s.
  const int64_t s = lengths[3];
  const int64_t per_token = (fused_bytes[3] - fused_bytes[2]) / (lengths[3] - lengths[2]);
  EXPECT_LT(fused_bytes[3] - per_token * s, int64_t{4} * s * s);
}

TEST(FusedModel, SwitchingBackAndForthKeepsTheResult) {
  const Tiny tiny(2, 5320);
  const std::vector<int32_t> ids = random_ids(21, tiny.config.vocab_size, test_seed(79));
  Model model = Model::load(tiny.dir.path());
  const std::vector<float> a = model.forward(ids);
  model.use_fused_attention(true);
  const std::vector<float> b = model.forward(ids);
  model.use_fused_attention(false);
  const std::vector<float> c = model.forward(ids);
  EXPECT_EQ(a, c) << "milestone 3's attention must give the same logits before and after";
  const Tolerance t = logits_tolerance(tiny.config, 21);
  Tolerance both = t;
  both.rtol *= 2;
  both.rms_atol *= 2;
  both.why = "each attention is within the logits tolerance of the reference: twice that";
  EXPECT_TRUE(matches_reference("logits after switching to the fused attention", b, a,
                                {tiny.config.vocab_size}, both));
}

// Generation with a KV cache whose prefill runs the fused attention (the decode steps are
// milestone 4's): the same greedy tokens as with milestone 3's prefill, logits within twice the
// logits tolerance, for 6 steps after a prompt of several tiles.
TEST(FusedModel, CachedGenerationWithAFusedPrefill) {
  const Tiny tiny(2, 5330);
  const int s = 2 * kernels::kFlashAttentionTile + 3, steps = 6;
  const std::vector<int32_t> prompt_ids =
      random_ids(static_cast<size_t>(s), tiny.config.vocab_size, test_seed(80));
  auto argmax = [](const std::vector<float>& v) {
    size_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] > v[best]) best = i;
    return static_cast<int32_t>(best);
  };
  CachedModelOptions plain_options;
  CachedModel plain = CachedModel::load(tiny.dir.path(), plain_options);
  CachedModelOptions fused_options;
  fused_options.fused_attention = true;
  CachedModel fused = CachedModel::load(tiny.dir.path(), fused_options);
  ASSERT_TRUE(fused.options().fused_attention);

  const Tolerance t = logits_tolerance(tiny.config, s + steps);
  Tolerance both = t;
  both.rtol *= 2;
  both.rms_atol *= 2;
  both.why = "each prefill is within the logits tolerance of the reference: twice that";
  std::vector<float> want = plain.prefill(prompt_ids);
  std::vector<float> got = fused.prefill(prompt_ids);
  for (int step = 0; step <= steps; ++step) {
    ASSERT_TRUE(matches_reference("logits of step " + std::to_string(step) +
                                      " after a fused prefill",
                                  got, want, {tiny.config.vocab_size}, both));
    const int32_t next = argmax(want);
    expect_same_choice(argmax(got), next, to_tensor(want, {tiny.config.vocab_size}), both,
                       "greedy token of step " + std::to_string(step) + " after a fused prefill");
    if (step < steps) {
      want = plain.decode(next);
      got = fused.decode(next);
    }
  }
}

}  // namespace
}  // namespace clockwork
