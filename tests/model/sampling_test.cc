// Sampler (model/infer/sampling.h) against closed forms: the repetition penalty divides positive
// and multiplies negative logits of context ids once each; greedy is the argmax (lowest id on
// ties); draws follow softmax(logits / T) restricted by top-k and top-p (frequencies over 40000
// draws within 0.01 of the renormalized probabilities computed here); a seed replays its tokens;
// bad parameters are named. stable_prefix (model/infer/generation.h) holds back a possible stop
// string start and an incomplete UTF-8 sequence.
#include "model/infer/sampling.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/infer/generation.h"

namespace anvil::model {
namespace {

std::vector<double> frequencies(const SamplingParams& p, const std::vector<float>& logits,
                                int draws) {
  Sampler s(p);
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    f[static_cast<size_t>(s.next(l, {}))] += 1.0 / draws;
  }
  return f;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "id " << i;
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;
  p.greedy = true;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l = {3.0f, 2.0f, -1.0f, 1.0f};
  // ids 0 (twice: penalized once) and 2 in the context: 3 -> 1.5, -1 -> -2.
  EXPECT_EQ(s.next(l, {0, 2, 0}), 1);
  EXPECT_EQ(l, (std::vector<float>{1.5f, 2.0f, -2.0f, 1.0f}));
}

TEST(Sampler, GreedyTakesTheLowestIdAmongMaxima) {
  SamplingParams p;
  p.temperature = 0.0f;  // greedy too
  Sampler s(p);
  std::vector<float> l = {0.5f, 2.0f, 2.0f};
  EXPECT_EQ(s.next(l, {}), 1);
}

TEST(Sampler, DrawsFollowTemperatureTopKTopP) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.4f), std::log(0.2f),
                                     std::log(0.3f)};
  SamplingParams p;
  p.seed = 3;
  expect_near(frequencies(p, logits, 40000), {0.1, 0.4, 0.2, 0.3}, 0.01);
  // T = 0.5 squares the probabilities: 0.01, 0.16, 0.04, 0.09 over 0.30.
  p.temperature = 0.5f;
  expect_near(frequencies(p, logits, 40000), {0.01 / 0.3, 0.16 / 0.3, 0.04 / 0.3, 0.09 / 0.3},
              0.01);
  // top-k 2: ids 1 and 3, 0.4 and 0.3 renormalized.
  p.temperature = 1.0f;
  p.top_k = 2;
  expect_near(frequencies(p, logits, 40000), {0.0, 0.4 / 0.7, 0.0, 0.3 / 0.7}, 0.01);
  // top-p 0.75: 0.4 (mass before 0 < 0.75), 0.3 (0.4 < 0.75), 0.2 (0.7 < 0.75), not 0.1 (0.9).
  p.top_k = 0;
  p.top_p = 0.75f;
  expect_near(frequencies(p, logits, 40000), {0.0, 0.4 / 0.9, 0.2 / 0.9, 0.3 / 0.9}, 0.01);
  // top-p below the largest probability keeps the argmax only.
  p.top_p = 0.1f;
  expect_near(frequencies(p, logits, 1000), {0.0, 1.0, 0.0, 0.0}, 1e-9);
}

TEST(Sampler, TinyTemperatureIsGreedy) {
  SamplingParams p;
  p.temperature = 1e-40f;  // a denormal: logit / T overflows, (logit - max) / T does not
  expect_near(frequencies(p, {0.5f, 2.0f, 1.0f}, 100), {0.0, 1.0, 0.0}, 1e-9);
}

TEST(Sampler, SeedReplays) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  SamplingParams p;
  p.seed = 77;
  Sampler a(p), b(p);
  p.seed = 78;
  Sampler c(p);
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> la = logits, lb = logits, lc = logits;
    const int32_t ta = a.next(la, {}), tb = b.next(lb, {});
    EXPECT_EQ(ta, tb);
    differ += ta != c.next(lc, {});
  }
  EXPECT_GT(differ, 0);
}

TEST(Sampler, BadParametersAreNamed) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_NE(std::string(p.validate().message()).find("top_p must lie in (0, 1]"),
            std::string::npos);
  p = {};
  p.temperature = -1.0f;
  EXPECT_NE(std::string(p.validate().message()).find("temperature"), std::string::npos);
  p = {};
  p.top_k = -2;
  EXPECT_NE(std::string(p.validate().message()).find("top_k"), std::string::npos);
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_NE(std::string(p.validate().message()).find("repetition_penalty"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.validate().ok());
}

TEST(StablePrefix, HoldsBackStopStartsAndPartialUtf8) {
  EXPECT_EQ(stable_prefix("hello wor", {"world"}), 6u);  // "wor" may become "world"
  EXPECT_EQ(stable_prefix("hello", {"xyz"}), 5u);
  EXPECT_EQ(stable_prefix("ab\n", {"\n\n"}), 2u);
  EXPECT_EQ(stable_prefix("caf\xC3", {}), 3u);      // a 2-byte sequence missing its tail
  EXPECT_EQ(stable_prefix("caf\xC3\xA9", {}), 5u);  // complete
  EXPECT_EQ(stable_prefix("x\xE2\x82", {}), 1u);    // a 3-byte sequence, 2 bytes present
}

}  // namespace
}  // namespace anvil::model
