// fp16 training on the CPU (f16 activations and compute parameters emulated by the CPU twins,
// f32 gradients, master weights and optimizer state) with Megatron's loss scaling:
//  - with a scale that never overflows, the losses follow the f32 run's to f16 rounding;
//  - a huge initial scale overflows: those steps are skipped (no update, the lr schedule does
//    not move, max_skipped_steps does not count them), the scale follows Megatron's backoff
//    sequence (hysteresis 2: the first overflow keeps it, each further one halves it), then
//    training recovers and the loss falls;
//  - a checkpoint keeps the scaler's state: resuming gives bitwise the uninterrupted run.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/checkpoint.h"
#include "model/train/loss_scaler.h"
#include "model/train/trainer.h"
#include "tests/io/io_test_util.h"
#include "tests/parallel/tiny_training.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

constexpr int32_t kPattern[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7};
constexpr int64_t kPeriod = sizeof(kPattern) / sizeof(kPattern[0]);

// A tiny GPT learning a repeating pattern (trainer_test's), 8 x 16 tokens per step.
TrainConfig pattern_config(int64_t steps) {
  TrainConfig c;
  c.model.vocab_size = 12;
  c.model.max_seq_len = 16;
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.n_layers = 2;
  c.data.seq_len = 16;
  c.train.micro_batch = 4;
  c.train.global_batch = 8;
  c.train.steps = steps;
  c.train.seed = 7;
  c.train.device = "cpu";
  c.train.eval_iters = 0;
  c.train.log_interval = 5;
  c.train.precision.mode = "fp16";
  c.optim.schedule.lr = 1e-2;
  c.optim.schedule.min_lr = 1e-3;
  c.optim.schedule.warmup_steps = 3;
  c.optim.schedule.decay_steps = steps;
  c.optim.weight_decay = 0.0;
  c.optim.beta2 = 0.99;
  return c;
}

SampleFn pattern_samples(int64_t seq_len) {
  return [seq_len](int64_t index, int32_t* out) {
    const int64_t start = (index * 5) % kPeriod;
    for (int64_t t = 0; t <= seq_len; ++t) out[t] = kPattern[(start + t) % kPeriod];
  };
}

const Precision kCpuF16{Device::kCpu, DType::kF16, DType::kF32};
const Precision kCpuF32{Device::kCpu, DType::kF32, DType::kF32};

std::unique_ptr<Trainer> make(const TrainConfig& cfg, const Precision& prec, SampleFn fn) {
  auto t = Trainer::create(cfg, prec, std::move(fn), {});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// Runs every step by hand and keeps the stats.
std::vector<StepStats> run_steps(Trainer& t, int64_t n) {
  std::vector<StepStats> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(t.step());
  return out;
}

TEST(TrainerFp16Test, LossesFollowTheF32Run) {
  TrainConfig cfg = pattern_config(20);
  // 2^10: d(loss)/d(logit) * S stays far below f16's 65504, so nothing overflows.
  cfg.train.precision.dynamic.initial_scale = 1024.0;
  std::unique_ptr<Trainer> f16 = make(cfg, kCpuF16, pattern_samples(16));
  std::unique_ptr<Trainer> f32 = make(cfg, kCpuF32, pattern_samples(16));
  ASSERT_NE(f16, nullptr);
  ASSERT_NE(f32, nullptr);
  const std::vector<StepStats> a = run_steps(*f16, 20), b = run_steps(*f32, 20);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(a[i].skipped) << "step " << i + 1;
    EXPECT_EQ(a[i].loss_scale, 1024.0);  // the window (1000) is not reached
    EXPECT_EQ(b[i].loss_scale, 1.0);     // f32: no loss scaling
    // f16 activations (11-bit mantissa): the trajectories drift apart slowly.
    EXPECT_NEAR(a[i].loss, b[i].loss, 0.02 + 0.02 * b[i].loss) << "step " << i + 1;
    EXPECT_NEAR(a[i].grad_norm, b[i].grad_norm, 0.05 + 0.1 * b[i].grad_norm) << "step " << i + 1;
  }
  EXPECT_NEAR(a.front().loss, std::log(12.0), 0.5);
  EXPECT_LT(a.back().loss, 0.5 * a.front().loss);  // it learns
  // The first step's loss sees the same initial weights, rounded to f16: very close.
  EXPECT_NEAR(a.front().loss, b.front().loss, 5e-3);
}

TEST(TrainerFp16Test, OverflowsAreSkippedAndTheScaleBacksOffThenTrainingRecovers) {
  TrainConfig cfg = pattern_config(40);
  // 2^40 / (G*T = 128) = 2^33 times d(loss)/d(logit): inf in the f16 logit gradients.
  const double s0 = std::ldexp(1.0, 40);
  cfg.train.precision.dynamic.initial_scale = s0;
  cfg.train.max_skipped_steps = 3;  // backoff skips are not divergence: must not stop the run
  std::unique_ptr<Trainer> t = make(cfg, kCpuF16, pattern_samples(16));
  ASSERT_NE(t, nullptr);
  std::vector<StepStats> stats;
  t->set_step_hook([&](const StepStats& st) {
    stats.push_back(st);
    return false;
  });
  const TrainSummary sum = t->run();
  EXPECT_TRUE(sum.status.ok()) << sum.status;
  ASSERT_EQ(sum.steps, 40);
  ASSERT_EQ(stats.size(), 40u);
  // The run starts with a streak of overflows: S * 2^-7 * d(loss)/d(logit) and what the
  // backward makes of it must fit f16 (max 65504), so at least 2^40 -> 2^31 (10 steps).
  size_t streak = 0;
  while (streak < stats.size() && stats[streak].skipped) ++streak;
  EXPECT_GE(streak, 10u);
  EXPECT_LT(streak, 30u);
  // Hysteresis 2: the first overflow keeps S, each of the others halves it.
  for (size_t i = 0; i < streak; ++i) {
    EXPECT_EQ(stats[i].loss_scale, std::ldexp(s0, -static_cast<int>(i))) << "step " << i + 1;
    EXPECT_TRUE(std::isnan(stats[i].grad_norm) || std::isinf(stats[i].grad_norm));
    EXPECT_TRUE(std::isfinite(stats[i].loss));  // the forward is not scaled
  }
  EXPECT_FALSE(stats[streak].skipped);
  EXPECT_EQ(stats[streak].loss_scale, stats[streak - 1].loss_scale);
  // The lr schedule and AdamW's step count moved only for the applied steps.
  const int64_t applied = 40 - sum.skipped_steps;
  EXPECT_EQ(t->state().lr.samples, applied * cfg.train.global_batch);
  EXPECT_EQ(t->state().optimizer_steps, applied);
  EXPECT_EQ(stats[streak].lr, 0.0);  // the first applied step is warmup's first: lr(0) = 0
  // Recovered: the applied steps learn the pattern.
  EXPECT_LT(sum.final_loss, 0.5 * std::log(12.0));
}

TEST(TrainerFp16Test, StepStatsFollowTheScalerStepByStep) {
  TrainConfig cfg = pattern_config(30);
  cfg.train.precision.dynamic.initial_scale = std::ldexp(1.0, 24);
  cfg.train.precision.dynamic.window = 4;  // growth after 4 clean steps, overflow again later
  std::unique_ptr<Trainer> t = make(cfg, kCpuF16, pattern_samples(16));
  ASSERT_NE(t, nullptr);
  // An independent scaler fed the trainer's skip flags must report the same scale after
  // each step; a skip happens exactly when the step's gradient is not finite.
  LossScalerConfig sc = cfg.train.precision.dynamic;
  sc.mode = LossScaling::kDynamic;
  LossScaler ref(sc);
  int64_t applied = 0, skips = 0;
  for (const StepStats& st : run_steps(*t, 30)) {
    EXPECT_EQ(st.skipped, !std::isfinite(st.grad_norm)) << "step " << st.step;
    EXPECT_TRUE(std::isfinite(st.loss)) << "step " << st.step;  // the forward is unscaled
    ref.update(st.skipped);
    EXPECT_EQ(st.loss_scale, ref.scale()) << "step " << st.step;
    applied += !st.skipped;
    skips += st.skipped;
  }
  EXPECT_GT(skips, 2);
  EXPECT_GT(applied, 8);
  EXPECT_EQ(t->state().lr.samples, applied * cfg.train.global_batch);
}

// Checkpoint save/load as bin/train does it, grad_scaler included.
absl::Status save(Trainer& t, const TrainConfig& cfg, const std::string& dir) {
  io::CheckpointInfo info;
  info.step = t.steps_done();
  info.state = checkpoint_counters(t.state(), cfg);
  info.layout = checkpoint_layout(cfg);
  info.lr_schedule = checkpoint_lr_schedule(cfg, t.state());
  info.grad_scaler = loss_scaler_map(t.state().loss_scaler);
  return io::save_checkpoint(dir, info, gpt_checkpoint_slices(gpt_model(t.model()), 0, t.stream()),
                             2);
}

absl::Status load(Trainer& t, const TrainConfig& cfg, const std::string& dir) {
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c, io::open_newest_complete(dir, -1, [](const auto&) {}));
  ANVIL_RETURN_IF_ERROR(gpt_load_checkpoint(
      gpt_model(t.model()), [&](const std::string& name) { return c.read(name); }, false,
      t.stream()));
  ANVIL_ASSIGN_OR_RETURN(TrainerState s, trainer_state_from(c.info().state, cfg));
  ANVIL_ASSIGN_OR_RETURN(s.loss_scaler, loss_scaler_from_map(c.info().grad_scaler));
  t.restore(s);
  return absl::OkStatus();
}

TEST(TrainerFp16Test, ResumeWithTheScalerStateEqualsTheUninterruptedRun) {
  io::testing::ScratchDir dir;
  TrainConfig cfg = testing_parallel::tiny_train_config();  // dropout on
  cfg.train.global_batch = 4;
  cfg.train.steps = 14;
  cfg.optim.schedule.warmup_steps = 2;
  cfg.optim.schedule.decay_steps = 14;
  cfg.train.precision.mode = "fp16";
  cfg.train.precision.dynamic.initial_scale = std::ldexp(1.0, 22);  // overflows at first
  cfg.train.precision.dynamic.window = 3;                           // and grows again
  const SampleFn samples = testing_parallel::hashed_samples(16, cfg.model.vocab_size);
  std::unique_ptr<Trainer> whole = make(cfg, kCpuF16, samples);
  ASSERT_NE(whole, nullptr);
  const std::vector<StepStats> want = run_steps(*whole, 14);

  std::unique_ptr<Trainer> first = make(cfg, kCpuF16, samples);
  ASSERT_NE(first, nullptr);
  run_steps(*first, 7);
  // The state must differ from a fresh scaler's for the test to mean anything.
  ASSERT_TRUE(first->state().loss_scaler.has_value());
  const LossScalerState at7 = *first->state().loss_scaler;
  EXPECT_NE(at7.scale, cfg.train.precision.dynamic.initial_scale);
  ASSERT_TRUE(save(*first, cfg, dir.path()).ok());

  std::unique_ptr<Trainer> second = make(cfg, kCpuF16, samples);
  ASSERT_NE(second, nullptr);
  const absl::Status loaded = load(*second, cfg, dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded;
  ASSERT_TRUE(second->state().loss_scaler.has_value());
  EXPECT_EQ(second->state().loss_scaler->scale, at7.scale);
  EXPECT_EQ(second->state().loss_scaler->growth_tracker, at7.growth_tracker);
  EXPECT_EQ(second->state().loss_scaler->hysteresis_tracker, at7.hysteresis_tracker);
  const std::vector<StepStats> got = run_steps(*second, 7);
  int64_t applied = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const StepStats& w = want[7 + i];
    EXPECT_EQ(got[i].step, w.step);
    EXPECT_EQ(got[i].skipped, w.skipped) << "step " << w.step;
    EXPECT_EQ(got[i].loss_scale, w.loss_scale) << "step " << w.step;
    EXPECT_EQ(got[i].loss, w.loss) << "step " << w.step;  // bitwise
    applied += !w.skipped;
  }
  EXPECT_GE(applied, 2);  // the resumed steps train
}

}  // namespace
}  // namespace anvil::model
