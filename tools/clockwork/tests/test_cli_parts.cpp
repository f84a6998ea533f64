// Tests of the pieces behind the `clockwork` commands that are easiest to check on their own:
// option parsing, the one-line error text, token display and the sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tools/clockwork/cli.h"
#include "tools/clockwork/sampling.h"

namespace clockwork::cli {
namespace {

const CommandSpec kSpec{"test",
                        "[options]",
                        "A command for the tests.",
                        {{"model", "DIR", "a value"},
                         {"steps", "N", "an integer"},
                         {"scale", "X", "a number"},
                         {"chat", "", "a flag"}},
                        "ID",
                        ""};

// The message of the UsageError that parse_args throws, or "" when it accepts the arguments.
std::string usage_error(const std::vector<std::string>& argv) {
  try {
    parse_args(kSpec, argv);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CliArgs, AcceptsValuesFlagsAndPositionals) {
  const Args a = parse_args(kSpec, {"--model", "m", "--chat", "--steps=3", "7", "-2"});
  EXPECT_EQ(a.require("model"), "m");
  EXPECT_TRUE(a.has("chat"));
  EXPECT_EQ(a.get_int("steps", 0, 0, 10), 3);
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"7", "-2"}));  // negative numbers too
  EXPECT_EQ(a.get_int("missing", 42, 0, 100), 42);
  EXPECT_DOUBLE_EQ(parse_args(kSpec, {"--scale", "-0.5"}).get_double("scale", 0, -1, 1), -0.5);
  EXPECT_TRUE(parse_args(kSpec, {"-h"}).help);
}

TEST(CliArgs, RejectsWhatTheSpecDoesNotAllow) {
  EXPECT_NE(usage_error({"--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(usage_error({"-x"}).find("unknown option '-x'"), std::string::npos);
  EXPECT_NE(usage_error({"--model"}).find("--model needs a value"), std::string::npos);
  EXPECT_NE(usage_error({"--model", "--chat"}).find("--model needs a value"), std::string::npos);
  EXPECT_NE(usage_error({"--chat=yes"}).find("takes no value"), std::string::npos);
  EXPECT_NE(usage_error({"--chat", "--chat"}).find("given twice"), std::string::npos);
  const Args a = parse_args(kSpec, {"--steps", "1.5", "--scale", "big"});
  EXPECT_THROW(a.get_int("steps", 0, 0, 10), UsageError);
  EXPECT_THROW(a.get_double("scale", 0, 0, 10), UsageError);
  EXPECT_THROW(parse_args(kSpec, {"--steps", "11"}).get_int("steps", 0, 0, 10), UsageError);
  EXPECT_THROW(Args().require("model"), UsageError);
}

TEST(CliText, ErrorsFitOnOneLine) {
  EXPECT_EQ(
      one_line("f: tensor 'w' has the wrong shape\n  Expected: BF16 [2]\n  Actual:   BF16 [3]"),
      "f: tensor 'w' has the wrong shape; Expected: BF16 [2]; Actual:   BF16 [3]");
  EXPECT_EQ(one_line("trailing newline\n"), "trailing newline");
  EXPECT_EQ(one_line("plain"), "plain");
}

TEST(CliText, TokensAreShownReadably) {
  EXPECT_EQ(quote_bytes(" the"), "\" the\"");
  EXPECT_EQ(quote_bytes("a\nb\t\"c\\"), "\"a\\nb\\t\\\"c\\\\\"");
  EXPECT_EQ(quote_bytes("\xc3\xa9"), "\"\xc3\xa9\"");  // a whole character stays as it is
  EXPECT_EQ(quote_bytes("\xc3"), "\"\\xc3\"");         // half of one is shown in hex
  EXPECT_EQ(group_digits(8030261248), "8,030,261,248");
  EXPECT_EQ(group_digits(999), "999");
  EXPECT_EQ(human_bytes(16060522496), "16.1 GB");
  EXPECT_EQ(human_bytes(512), "512 B");
}

TEST(Sampler, GreedyTakesTheFirstLargestLogit) {
  Sampler greedy(SamplingOptions{});
  EXPECT_EQ(greedy.pick({0.f, 3.f, 1.f, 3.f}, 4), 1);
  // Ids at or past the limit (rows the tokenizer does not have) are never picked.
  EXPECT_EQ(greedy.pick({0.f, 1.f, 9.f}, 2), 1);
}

TEST(Sampler, TopKAndTopPNarrowTheChoice) {
  const std::vector<float> logits{1.f, 4.f, 2.f, 3.9f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Sampler top1(SamplingOptions{1.0, 1, 1.0, seed});
    EXPECT_EQ(top1.pick(logits, 4), 1);
    // p(1) ≈ 0.47, p(3) ≈ 0.43: a nucleus of 0.4 holds only the top token, one of 0.8 both.
    Sampler nucleus_small(SamplingOptions{1.0, 0, 0.4, seed});
    EXPECT_EQ(nucleus_small.pick(logits, 4), 1);
    Sampler nucleus(SamplingOptions{1.0, 0, 0.8, seed});
    const int32_t id = nucleus.pick(logits, 4);
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  // logits 0 and log 3 at temperature 1: the second token three times as often.
  Sampler s(SamplingOptions{1.0, 0, 1.0, 12345});
  const std::vector<float> logits{0.f, static_cast<float>(std::log(3.0))};
  int second = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) second += s.pick(logits, 2) == 1;
  EXPECT_NEAR(static_cast<double>(second) / n, 0.75, 0.015);
  // A high temperature flattens the distribution towards one half.
  Sampler hot(SamplingOptions{100.0, 0, 1.0, 1});
  second = 0;
  for (int i = 0; i < n; ++i) second += hot.pick(logits, 2) == 1;
  EXPECT_NEAR(static_cast<double>(second) / n, 0.5, 0.02);
}

TEST(Sampler, ASeedReproducesTheDraws) {
  const std::vector<float> logits{0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  Sampler a(SamplingOptions{1.0, 0, 1.0, 9}), b(SamplingOptions{1.0, 0, 1.0, 9});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.pick(logits, 5), b.pick(logits, 5));
}

}  // namespace
}  // namespace clockwork::cli
