// Megatron's grad scalers (model/train/loss_scaler.h) against sequences derived by hand from
// DynamicGradScaler.update: hysteresis before the first backoff, every further overflow halving
// until a growth restores it, growth after `window` clean steps, the min_scale clamp; static and
// no scaling; the [train] keys' mapping per precision and their errors; the checkpoint map.
#include "model/train/loss_scaler.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/train/precision_config.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

using ::testing::HasSubstr;

struct Expect {
  bool found_inf;
  double scale;
  int64_t growth, hysteresis;
};

TEST(LossScaler, DynamicFollowsMegatronsUpdate) {
  LossScalerConfig c;
  c.mode = LossScaling::kDynamic;
  c.initial_scale = 8;
  c.min_scale = 1;
  c.window = 3;
  c.hysteresis = 2;
  ASSERT_TRUE(c.validate().ok());
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 8);
  EXPECT_EQ(s.state().hysteresis_tracker, 2);
  // Worked by hand from the update rule (header comment), state after each step.
  const std::vector<Expect> seq = {
      {true, 8, 0, 1},    // first overflow: hysteresis absorbs it
      {true, 4, 0, 0},    // second: backoff
      {true, 2, 0, -1},   // the tracker is not restored: every overflow halves now
      {false, 2, 1, -1},  // a clean step does not restore it either
      {true, 1, 0, -2},   // halves to the floor
      {true, 1, 0, -3},   // max(0.5, min_scale 1): clamped
      {false, 1, 1, -3},  //
      {false, 1, 2, -3},  //
      {false, 2, 0, 2},   // window (3) clean steps: growth, trackers reset
      {true, 2, 0, 1},    // hysteresis restored: no backoff
      {false, 2, 1, 1},   //
      {false, 2, 2, 1},   //
      {true, 1, 0, 0},    // growth tracker reset by the overflow; backoff
      {false, 1, 1, 0},   //
      {false, 1, 2, 0},   //
      {false, 2, 0, 2},   //
      {false, 2, 1, 2},   //
      {false, 2, 2, 2},   //
      {false, 4, 0, 2},   // and growth again after the next window
  };
  for (size_t i = 0; i < seq.size(); ++i) {
    s.update(seq[i].found_inf);
    EXPECT_EQ(s.scale(), seq[i].scale) << "after update " << i;
    EXPECT_EQ(s.state().growth_tracker, seq[i].growth) << "after update " << i;
    EXPECT_EQ(s.state().hysteresis_tracker, seq[i].hysteresis) << "after update " << i;
  }
}

TEST(LossScaler, DefaultsAreMegatrons) {
  const LossScalerConfig c;
  EXPECT_EQ(c.initial_scale, 4294967296.0);  // 2^32
  EXPECT_EQ(c.min_scale, 1.0);
  EXPECT_EQ(c.window, 1000);
  EXPECT_EQ(c.hysteresis, 2);
  EXPECT_EQ(c.growth, 2.0);
  EXPECT_EQ(c.backoff, 0.5);
}

TEST(LossScaler, FromTwoToTheThirtyTwoOverflowsHalveAfterHysteresis) {
  LossScalerConfig c;
  c.mode = LossScaling::kDynamic;
  LossScaler s(c);
  for (int i = 0; i < 17; ++i) s.update(true);
  // 17 overflows: the first is absorbed, 16 halve: 2^32 / 2^16.
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_FALSE(s.at_floor());
  for (int i = 0; i < 999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0);
}

TEST(LossScaler, StaticAndNoneNeverChange) {
  LossScalerConfig c;
  c.mode = LossScaling::kStatic;
  c.static_scale = 1024;
  LossScaler st(c);
  LossScaler none;
  for (bool inf : {true, true, true, false, true}) {
    st.update(inf);
    none.update(inf);
  }
  EXPECT_EQ(st.scale(), 1024);
  EXPECT_TRUE(st.enabled());
  EXPECT_FALSE(st.dynamic());
  EXPECT_TRUE(st.at_floor());
  EXPECT_EQ(none.scale(), 1);
  EXPECT_FALSE(none.enabled());
}

TEST(LossScaler, ValidateNamesTheValues) {
  LossScalerConfig c;
  c.mode = LossScaling::kDynamic;
  c.min_scale = 2;
  c.initial_scale = 1;
  EXPECT_THAT(std::string(c.validate().message()), HasSubstr("min_loss_scale"));
  c = LossScalerConfig{};
  c.mode = LossScaling::kDynamic;
  c.hysteresis = 0;
  EXPECT_THAT(std::string(c.validate().message()), HasSubstr("hysteresis >= 1"));
  c = LossScalerConfig{};
  c.mode = LossScaling::kStatic;
  EXPECT_THAT(std::string(c.validate().message()), HasSubstr("loss_scale must be > 0"));
}

TEST(LossScaler, CheckpointMapRoundTrips) {
  EXPECT_TRUE(loss_scaler_map(std::nullopt).empty());
  absl::StatusOr<std::optional<LossScalerState>> none = loss_scaler_from_map({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  const LossScalerState s{0.375 * 4294967296.0, 17, -3};
  absl::StatusOr<std::optional<LossScalerState>> back = loss_scaler_from_map(loss_scaler_map(s));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->scale, s.scale);
  EXPECT_EQ((*back)->growth_tracker, 17);
  EXPECT_EQ((*back)->hysteresis_tracker, -3);
  absl::StatusOr<std::optional<LossScalerState>> bad =
      loss_scaler_from_map({{"scale", 2.0}, {"growth_tracker", 1.5}, {"hysteresis_tracker", 1}});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("grad_scaler.growth_tracker"));
  bad = loss_scaler_from_map({{"scale", 2.0}});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("missing"));
}

TEST(PrecisionConfig, ScalerPerPrecisionAsMegatron) {
  PrecisionConfig p;
  EXPECT_EQ(loss_scaler_config(p, engine::DType::kF16).mode, LossScaling::kDynamic);
  EXPECT_EQ(loss_scaler_config(p, engine::DType::kBF16).mode, LossScaling::kNone);
  EXPECT_EQ(loss_scaler_config(p, engine::DType::kF32).mode, LossScaling::kNone);
  p.loss_scale = 128;
  EXPECT_EQ(loss_scaler_config(p, engine::DType::kF16).mode, LossScaling::kStatic);
  EXPECT_EQ(loss_scaler_config(p, engine::DType::kF16).static_scale, 128);
  EXPECT_EQ(loss_scaler_config(p, engine::DType::kBF16).mode, LossScaling::kStatic);
  EXPECT_EQ(loss_scaler_config(p, engine::DType::kF32).mode, LossScaling::kNone);
}

TEST(PrecisionConfig, DescribeNamesDtypesAndScaling) {
  PrecisionConfig p;
  EXPECT_EQ(describe_precision(engine::DType::kF32, loss_scaler_config(p, engine::DType::kF32)),
            "f32");
  EXPECT_EQ(describe_precision(engine::DType::kF16, loss_scaler_config(p, engine::DType::kF16)),
            "f16 parameters/activations, f32 master weights, gradients and AdamW state; dynamic "
            "loss scaling from 4294967296");
  p.loss_scale = 512;
  EXPECT_EQ(describe_precision(engine::DType::kBF16, loss_scaler_config(p, engine::DType::kBF16)),
            "bf16 parameters/activations, f32 master weights, gradients and AdamW state; static "
            "loss scale 512");
}

TEST(PrecisionConfig, ActDtypePerPrecisionAndDevice) {
  using engine::Device;
  using engine::DType;
  EXPECT_EQ(*precision_act_dtype("auto", Device::kCuda), DType::kBF16);
  EXPECT_EQ(*precision_act_dtype("auto", Device::kCpu), DType::kF32);
  EXPECT_EQ(*precision_act_dtype("fp16", Device::kCpu), DType::kF16);
  EXPECT_EQ(*precision_act_dtype("fp32", Device::kCuda), DType::kF32);
  EXPECT_EQ(*precision_act_dtype("bf16", Device::kCuda), DType::kBF16);
  EXPECT_THAT(std::string(precision_act_dtype("fp8", Device::kCpu).status().message()),
              HasSubstr("expected auto, bf16, fp16 or fp32"));
  absl::StatusOr<Precision> cpu16 = resolve_precision("cpu", "fp16");
  ASSERT_TRUE(cpu16.ok());
  EXPECT_EQ(cpu16->act, DType::kF16);
  EXPECT_EQ(cpu16->grad, DType::kF32);
}

constexpr char kConfig[] = R"([model]
vocab_size = 257
max_seq_len = 64
d_model = 32
n_heads = 2
n_layers = 1
[data]
path = x
seq_len = 16
[train]
micro_batch = 2
steps = 2
)";

TEST(PrecisionConfig, KeysParseAndBadValuesNameTheKey) {
  absl::StatusOr<TrainConfig> ok = load_train_config_string(
      kConfig, "t.ini",
      {"train.precision=fp16", "train.initial_loss_scale=65536", "train.min_loss_scale=2",
       "train.loss_scale_window=50", "train.hysteresis=3"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  const PrecisionConfig& p = ok->train.precision;
  EXPECT_EQ(p.mode, "fp16");
  EXPECT_EQ(p.dynamic.initial_scale, 65536);
  EXPECT_EQ(p.dynamic.min_scale, 2);
  EXPECT_EQ(p.dynamic.window, 50);
  EXPECT_EQ(p.dynamic.hysteresis, 3);
  EXPECT_EQ(p.loss_scale, 0);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"train.precision=fp8", "[train] precision"},
      {"train.loss_scale=-1", "[train] loss_scale"},
      {"train.initial_loss_scale=0", "[train] initial_loss_scale"},
      {"train.min_loss_scale=1e12", "[train] min_loss_scale"},
      {"train.loss_scale_window=0", "[train] loss_scale_window"},
      {"train.hysteresis=0", "[train] hysteresis"},
  };
  for (const auto& [override_, key] : bad) {
    absl::StatusOr<TrainConfig> t = load_train_config_string(kConfig, "t.ini", {override_});
    ASSERT_FALSE(t.ok()) << override_;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(key)) << override_;
  }
}

}  // namespace
}  // namespace anvil::model
