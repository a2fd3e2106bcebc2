// LrSchedule against its closed forms: warmup endpoints, cosine midpoint = (lr + min_lr) / 2,
// linear decay, constant, the floor after the decay, and validation of bad combinations.
#include "model/train/lr_schedule.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::model {
namespace {

using ::testing::HasSubstr;

LrSchedule make(DecayStyle style, double lr = 1e-3, double min_lr = 1e-4, int64_t warmup = 10,
                int64_t decay = 110) {
  LrSchedule s;
  s.lr = lr;
  s.min_lr = min_lr;
  s.warmup_steps = warmup;
  s.decay_steps = decay;
  s.style = style;
  return s;
}

TEST(LrScheduleTest, WarmupIsLinearFromZeroToPeak) {
  for (DecayStyle style : {DecayStyle::kCosine, DecayStyle::kLinear, DecayStyle::kConstant}) {
    const LrSchedule s = make(style);
    EXPECT_DOUBLE_EQ(s.at(0), 0.0);
    EXPECT_DOUBLE_EQ(s.at(1), 1e-4);
    EXPECT_DOUBLE_EQ(s.at(5), 5e-4);
    EXPECT_DOUBLE_EQ(s.at(10), 1e-3);  // peak exactly at the end of warmup
  }
}

TEST(LrScheduleTest, CosineMidpointIsMeanOfLrAndMinLr) {
  const LrSchedule s = make(DecayStyle::kCosine);
  EXPECT_DOUBLE_EQ(s.at(60), (1e-3 + 1e-4) / 2);  // halfway between warmup end 10 and 110
  // A quarter of the way: min + (1 + cos(pi/4)) / 2 * (lr - min).
  EXPECT_NEAR(s.at(35), 1e-4 + 0.5 * (1.0 + std::cos(M_PI / 4)) * 9e-4, 1e-15);
  EXPECT_NEAR(s.at(110), 1e-4, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(111), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(100000), 1e-4);
  // Monotonically non-increasing after warmup.
  for (int64_t i = 11; i <= 120; ++i) EXPECT_LE(s.at(i), s.at(i - 1)) << "step " << i;
}

TEST(LrScheduleTest, LinearDecay) {
  const LrSchedule s = make(DecayStyle::kLinear);
  EXPECT_DOUBLE_EQ(s.at(60), (1e-3 + 1e-4) / 2);
  EXPECT_NEAR(s.at(35), 1e-4 + 0.75 * 9e-4, 1e-15);
  EXPECT_NEAR(s.at(85), 1e-4 + 0.25 * 9e-4, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(200), 1e-4);
}

TEST(LrScheduleTest, ConstantAfterWarmup) {
  const LrSchedule s = make(DecayStyle::kConstant);
  EXPECT_DOUBLE_EQ(s.at(11), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(500), 1e-3);
}

TEST(LrScheduleTest, NoWarmupStartsAtPeak) {
  const LrSchedule s = make(DecayStyle::kCosine, 2e-3, 0.0, 0, 100);
  EXPECT_DOUBLE_EQ(s.at(0), 2e-3);
  EXPECT_NEAR(s.at(50), 1e-3, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(100), 0.0);
}

TEST(LrScheduleTest, ValidateNamesTheNumbers) {
  EXPECT_TRUE(make(DecayStyle::kCosine).validate().ok());
  EXPECT_THAT(make(DecayStyle::kCosine, 1e-4, 1e-3).validate().message(), HasSubstr("min_lr"));
  EXPECT_THAT(make(DecayStyle::kLinear, 1e-3, 0, 50, 50).validate().message(),
              HasSubstr("warmup (50 samples) must end before the decay does (50 samples"));
  EXPECT_TRUE(make(DecayStyle::kConstant, 1e-3, 0, 50, 50).validate().ok());
  EXPECT_THAT(make(DecayStyle::kCosine, 0.0, 0.0).validate().message(), HasSubstr("lr 0"));
}

// Megatron counts in samples: at a constant global batch G, position k * G with W * G and D * G
// is the step-based lr(k): exactly after the warmup (the decay ratio is one rounded quotient of
// the same real), to rounding during it (lr * n / W rounds lr * n first).
TEST(LrScheduleTest, SampleUnitsEqualStepUnitsAtAConstantBatch) {
  for (DecayStyle style : {DecayStyle::kCosine, DecayStyle::kLinear, DecayStyle::kConstant}) {
    const LrSchedule s = make(style);
    for (int64_t k = 0; k <= 130; ++k) {
      if (k > 10) {
        EXPECT_EQ(s.at_samples(k * 24, 24), s.at(k)) << k;
      } else {
        EXPECT_DOUBLE_EQ(s.at_samples(k * 24, 24), s.at(k)) << k;
      }
    }
  }
}

// The scheduler: the first update's lr is lr(0); step() advances by the applied samples; a
// restore recomputes the lr (Megatron's load_state_dict) and, with token-based decay, records
// the tokens of the warmup's end when the position is exactly W.
TEST(LrScheduleTest, SchedulerFollowsAppliedSamples) {
  LrSchedule s = make(DecayStyle::kLinear);
  LrScheduler sched(s, 8);
  EXPECT_EQ(sched.lr(), 0.0);
  sched.step(8, 0);
  EXPECT_EQ(sched.lr(), s.at(1));
  sched.step(8, 128);
  EXPECT_EQ(sched.lr(), s.at(2));
  EXPECT_EQ(sched.state().samples, 16);
  EXPECT_EQ(sched.state().tokens, 128);

  s.decay_tokens = 10000;
  LrScheduler tok(s, 8);
  tok.restore(LrSchedulerState{80, 1200, 0});  // W = 10 * 8 = 80: the warmup's end
  EXPECT_EQ(tok.state().warmup_tokens, 1200);
  EXPECT_EQ(tok.lr(), 1e-3);
  tok.step(8, 1200 + 4400);  // half of the 8800 tokens of the decay
  EXPECT_DOUBLE_EQ(tok.lr(), 1e-4 + 0.5 * 9e-4);
  tok.step(8, 10001);
  EXPECT_EQ(tok.lr(), 1e-4);
}

TEST(LrScheduleTest, ParsesStyleNames) {
  EXPECT_EQ(*parse_decay_style("cosine"), DecayStyle::kCosine);
  EXPECT_EQ(*parse_decay_style("linear"), DecayStyle::kLinear);
  EXPECT_EQ(*parse_decay_style("constant"), DecayStyle::kConstant);
  EXPECT_THAT(parse_decay_style("exp").status().message(), HasSubstr("'exp'"));
}

}  // namespace
}  // namespace anvil::model
