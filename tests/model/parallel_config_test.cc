// [parallel]: dp inferred from the launched ranks, the checks against the world size and the
// batch shape, and "not implemented yet" errors for TP, PP and ZeRO-2/3 (never silently ignored).
#include "model/parallel_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/train_config.h"

namespace anvil::model {
namespace {

using testing::HasSubstr;

constexpr char kIni[] =
    "[train]\n"
    "micro_batch = 2\n"
    "global_batch = 16\n"
    "[parallel]\n"
    "zero_stage = 1\n";

absl::StatusOr<TrainConfig> load(int world, std::vector<std::string> overrides = {}) {
  return load_train_config_string(kIni, "x.ini", overrides, nullptr, world);
}

std::string error(int world, std::vector<std::string> overrides) {
  auto c = load(world, std::move(overrides));
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(ParallelConfigTest, DefaultsAndInferredDp) {
  auto one = load(1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->parallel.dp, 1);
  EXPECT_EQ(one->parallel.tp, 1);
  EXPECT_EQ(one->parallel.pp, 1);
  EXPECT_EQ(one->parallel.zero_stage, 1);
  EXPECT_EQ(one->parallel.bucket_elems(), 25 * (1 << 20));
  EXPECT_EQ(one->parallel.timeout_s, 600.0);
  EXPECT_FALSE(one->parallel.reduce_single_rank);
  auto four = load(4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->parallel.dp, 4);
  EXPECT_EQ(four->train.accumulation_steps(four->parallel.dp), 2);
  auto explicit_dp = load(8, {"parallel.dp=8", "parallel.bucket_mb=0", "parallel.timeout_s=30"});
  ASSERT_TRUE(explicit_dp.ok()) << explicit_dp.status();
  EXPECT_EQ(explicit_dp->parallel.dp, 8);
  EXPECT_EQ(explicit_dp->parallel.bucket_elems(), 0);
  EXPECT_EQ(explicit_dp->parallel.timeout_s, 30.0);
}

TEST(ParallelConfigTest, ErrorsNameTheNumbers) {
  EXPECT_THAT(error(2, {"parallel.dp=4"}),
              HasSubstr("[parallel] dp: tp 1 * dp 4 * pp 1 = 4 does not match the 2 launched "
                        "ranks"));
  EXPECT_THAT(error(16, {}), HasSubstr("[train] global_batch: 16 is not a multiple of [train] "
                                       "micro_batch 2 * [parallel] dp 16 = 32"));
  EXPECT_THAT(error(1, {"parallel.tp=0"}), HasSubstr("[parallel] tp: must be >= 1, got 0"));
  EXPECT_THAT(error(1, {"parallel.zero_stage=4"}), HasSubstr("must be 0, 1, 2 or 3, got 4"));
  EXPECT_THAT(error(1, {"parallel.bucket_mb=-1"}), HasSubstr("[parallel] bucket_mb"));
  EXPECT_THAT(error(1, {"parallel.timeout_s=0"}), HasSubstr("[parallel] timeout_s"));
}

TEST(ParallelConfigTest, UnimplementedLayoutsAreErrors) {
  EXPECT_THAT(error(2, {"parallel.tp=2"}),
              HasSubstr("tensor parallelism (tp = 2) is not implemented yet"));
  EXPECT_THAT(error(4, {"parallel.pp=4"}),
              HasSubstr("pipeline parallelism (pp = 4) is not implemented yet"));
  EXPECT_THAT(error(1, {"parallel.zero_stage=2"}),
              HasSubstr("ZeRO stage 2 is not implemented yet"));
  EXPECT_THAT(error(1, {"parallel.zero_stage=3"}),
              HasSubstr("ZeRO stage 3 is not implemented yet"));
}

}  // namespace
}  // namespace anvil::model
