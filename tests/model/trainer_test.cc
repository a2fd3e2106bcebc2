// The training loop on the CPU: a tiny GPT trained for 30 steps on a repeating token pattern
// learns it (the loss falls well below its start); gradient accumulation over micro-batches
// gives the same step as one big micro-batch; evaluation and run() report what they did; eod
// loss masking and position resets.
#include "model/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "model/stack_train/gpt_train_model.h"

namespace anvil::model {
namespace {

constexpr int32_t kPattern[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7};
constexpr int64_t kPeriod = sizeof(kPattern) / sizeof(kPattern[0]);

TrainConfig tiny_config() {
  TrainConfig c;
  c.model.vocab_size = 12;
  c.model.max_seq_len = 16;
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.n_layers = 2;
  c.data.seq_len = 16;
  c.train.micro_batch = 4;
  c.train.global_batch = 8;
  c.train.steps = 30;
  c.train.seed = 7;
  c.train.device = "cpu";
  c.train.eval_interval = 10;
  c.train.eval_iters = 2;
  c.train.log_interval = 5;
  c.optim.schedule.lr = 1e-2;
  c.optim.schedule.min_lr = 1e-3;
  c.optim.schedule.warmup_steps = 3;
  c.optim.schedule.decay_steps = 30;
  c.optim.schedule.style = DecayStyle::kCosine;
  c.optim.weight_decay = 0.0;
  c.optim.beta2 = 0.99;
  return c;
}

// Sample i: T + 1 tokens of the endless pattern, starting at a position that depends on i.
SampleFn pattern_samples(int64_t seq_len, int64_t salt) {
  return [seq_len, salt](int64_t index, int32_t* out) {
    const int64_t start = (index * 5 + salt) % kPeriod;
    for (int64_t t = 0; t <= seq_len; ++t) out[t] = kPattern[(start + t) % kPeriod];
  };
}

Precision cpu_f32() {
  return Precision{engine::Device::kCpu, engine::DType::kF32, engine::DType::kF32};
}

TEST(TrainerTest, LearnsARepeatingPattern) {
  const TrainConfig cfg = tiny_config();
  auto trainer = Trainer::create(cfg, cpu_f32(), pattern_samples(16, 0), pattern_samples(16, 3));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const TrainSummary s = (*trainer)->run();
  EXPECT_EQ(s.steps, 30);
  EXPECT_EQ(s.skipped_steps, 0);
  EXPECT_EQ((*trainer)->steps_done(), 30);
  ASSERT_EQ(s.losses.size(), 30u);
  EXPECT_NEAR(s.first_loss, std::log(12.0), 0.5);
  for (double l : s.losses) EXPECT_TRUE(std::isfinite(l));
  // The pattern is deterministic given two tokens of context: the loss must collapse.
  EXPECT_LT(s.losses.back(), 0.3 * s.first_loss) << "first " << s.first_loss;
  // Evaluations before the first step, at steps 10, 20, 30 and after the loop (Megatron's two
  // at a last step that is a multiple of eval_interval), falling like the training loss.
  ASSERT_EQ(s.val_losses.size(), 5u);
  const double val_before = s.val_losses[0].second;
  EXPECT_EQ(s.val_losses[0].first, 0);
  EXPECT_NEAR(val_before, std::log(12.0), 0.5);  // about uniform over the vocabulary at init
  EXPECT_EQ(s.val_losses[1].first, 10);
  EXPECT_EQ(s.val_losses[3].first, 30);
  EXPECT_EQ(s.val_losses[4].first, 30);
  EXPECT_LT(s.val_losses[4].second, 0.3 * val_before);
  EXPECT_TRUE(std::isnan(s.test_loss));  // no test samples
  EXPECT_GT(s.tokens_per_second, 0.0);
}

TEST(TrainerTest, StepReportsScheduleAndNorm) {
  const TrainConfig cfg = tiny_config();
  auto trainer = Trainer::create(cfg, cpu_f32(), pattern_samples(16, 0), nullptr);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int64_t i = 1; i <= 4; ++i) {
    const StepStats st = (*trainer)->step();
    EXPECT_EQ(st.step, i);
    EXPECT_DOUBLE_EQ(st.lr, cfg.optim.schedule.at(i - 1));  // Megatron: the first step at lr(0)
    EXPECT_GT(st.grad_norm, 0.0);
    EXPECT_TRUE(std::isfinite(st.grad_norm));
    EXPECT_FALSE(st.skipped);
  }
  EXPECT_TRUE(std::isnan((*trainer)->evaluate()));  // no validation data
}

// One step with 2 micro-batches of 4 equals one step with a micro-batch of 8: the gradient is
// that of the mean loss over the global batch either way.
TEST(TrainerTest, GradientAccumulationMatchesOneBigMicroBatch) {
  TrainConfig a = tiny_config();
  TrainConfig b = tiny_config();
  b.train.micro_batch = 8;
  auto ta = Trainer::create(a, cpu_f32(), pattern_samples(16, 1), nullptr);
  auto tb = Trainer::create(b, cpu_f32(), pattern_samples(16, 1), nullptr);
  ASSERT_TRUE(ta.ok() && tb.ok());
  for (int i = 0; i < 3; ++i) {
    const StepStats sa = (*ta)->step(), sb = (*tb)->step();
    EXPECT_NEAR(sa.loss, sb.loss, 1e-5 * std::abs(sb.loss)) << "step " << i;
    EXPECT_NEAR(sa.grad_norm, sb.grad_norm, 1e-4 * sb.grad_norm) << "step " << i;
  }
}

// Absurd init weights overflow f32 in the forward: the grad norm is not finite, so the step is
// skipped (a warning, no update: the parameters keep their values) and the run goes on.
TEST(TrainerTest, NonFiniteGradNormSkipsTheUpdate) {
  TrainConfig cfg = tiny_config();
  cfg.model.init_std = 1e30f;
  auto trainer = Trainer::create(cfg, cpu_f32(), pattern_samples(16, 0), nullptr);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const Param* wte = (*trainer)->model().params().find("wte.weight");
  ASSERT_NE(wte, nullptr);
  const float* w = static_cast<const float*>(wte->master.data);
  const std::vector<float> before(w, w + 64);
  const StepStats st = (*trainer)->step();
  EXPECT_FALSE(std::isfinite(st.grad_norm));
  EXPECT_TRUE(st.skipped);
  EXPECT_EQ((*trainer)->steps_done(), 1);
  EXPECT_EQ(std::vector<float>(w, w + 64), before);
}

// [data] eod_mask_loss and reset_position_ids, Megatron's get_ltor_masks_and_position_ids: the
// loss skips positions whose input token is eod and is the mean over the rest; positions
// restart at 0 after each eod. evaluate() equals a forward with targets and positions built
// here by hand, and the masked step's gradient is finite and nonzero.
TEST(TrainerTest, EodMaskLossAndResetPositionIds) {
  TrainConfig cfg = tiny_config();
  cfg.train.eval_iters = 1;
  cfg.train.global_batch = cfg.train.micro_batch;  // one evaluation = one micro-batch
  cfg.data.eod_token = 5;                          // appears 3 times per pattern period
  const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len;
  const SampleFn samples = pattern_samples(T, 2);
  for (const bool mask : {false, true}) {
    for (const bool reset : {false, true}) {
      SCOPED_TRACE(testing::Message() << "mask " << mask << " reset " << reset);
      cfg.data.eod_mask_loss = mask;
      cfg.data.reset_position_ids = reset;
      auto trainer = Trainer::create(cfg, cpu_f32(), samples, samples);
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      std::vector<int32_t> tokens(B * T), targets(B * T), positions(B * T), buf(T + 1);
      int64_t counted = 0;
      for (int64_t b = 0; b < B; ++b) {
        samples(b, buf.data());
        int32_t p = 0;
        for (int64_t t = 0; t < T; ++t) {
          tokens[b * T + t] = buf[t];
          const bool eod = buf[t] == cfg.data.eod_token;
          targets[b * T + t] = mask && eod ? -1 : buf[t + 1];
          counted += targets[b * T + t] >= 0;
          positions[b * T + t] = reset ? p : static_cast<int32_t>(t);
          p = eod ? 0 : p + 1;
        }
      }
      ASSERT_LT(counted, mask ? B * T : B * T + 1);
      const double got = (*trainer)->evaluate();
      GptModel& m = gpt_model((*trainer)->model());
      m.forward(tokens.data(), positions.data(), targets.data(), /*train=*/false, 0,
                (*trainer)->stream());
      const double want = m.loss_sum((*trainer)->stream()) / static_cast<double>(counted);
      EXPECT_NEAR(got, want, 1e-6 * want);
      const StepStats st = (*trainer)->step();
      EXPECT_TRUE(std::isfinite(st.loss) && std::isfinite(st.grad_norm));
      EXPECT_GT(st.grad_norm, 0.0);
    }
  }
  // Every input token is eod: nothing counts; loss and gradient are 0, not NaN.
  cfg.data.eod_mask_loss = true;
  const SampleFn all_eod = [T](int64_t, int32_t* out) { std::fill(out, out + T + 1, 5); };
  auto trainer = Trainer::create(cfg, cpu_f32(), all_eod, all_eod);
  ASSERT_TRUE(trainer.ok());
  EXPECT_EQ((*trainer)->evaluate(), 0.0);
  const StepStats st = (*trainer)->step();
  EXPECT_EQ(st.loss, 0.0);
  EXPECT_EQ(st.grad_norm, 0.0);
}

TEST(TrainerTest, FlopsPerTokenClosedForm) {
  const TrainConfig cfg = tiny_config();
  EXPECT_DOUBLE_EQ(flops_per_token(cfg.model, 16),
                   6.0 * static_cast<double>(cfg.model.matmul_params()) + 12.0 * 2 * 32 * 16);
}

TEST(TrainerTest, PlanFitsOnTheCpu) {
  const TrainConfig cfg = tiny_config();
  absl::StatusOr<engine::MemoryPlan> plan = Trainer::plan(cfg, cpu_f32());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->total_bytes(), 0u);
  // The host micro-batches: 4 i32 arrays of 2 accumulation steps x 4 x 16 tokens.
  EXPECT_EQ(plan->category_bytes("batch"), 4u * 4u * 2u * 4u * 16u);
  EXPECT_TRUE(Trainer::check_fits(*plan, cpu_f32()).ok());
}

TEST(TrainerTest, PlanLargerThanMemoryIsRefusedWithTheNumbers) {
  engine::MemoryPlan plan;
  plan.add("params", "w", 3000);
  plan.add("activations", "x", 5000);
  EXPECT_TRUE(check_plan_fits(plan, engine::Device::kCpu, 8000).ok());
  const absl::Status s = check_plan_fits(plan, engine::Device::kCpu, 7999);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(s.message());
  EXPECT_NE(msg.find("(8000 bytes) on the host"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(7999 bytes) are available (MemAvailable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("largest: activations"), std::string::npos) << msg;
  EXPECT_NE(msg.find("check_memory"), std::string::npos) << msg;
  const std::string gpu(check_plan_fits(plan, engine::Device::kCuda, 10).message());
  EXPECT_NE(gpu.find("on the GPU"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("attention_dropout_mask"), std::string::npos) << gpu;
  // Saved dropout masks in the plan: the message names the option that frees them.
  plan.add("activations", "layer0.attn.keep", 1024);
  plan.add("activations", "layer1.attn.keep", 1024);
  const std::string keep(check_plan_fits(plan, engine::Device::kCuda, 10).message());
  EXPECT_NE(keep.find("attention_dropout_mask = regenerate (the saved dropout masks take 2 KiB)"),
            std::string::npos)
      << keep;
}

TEST(TrainerTest, HostPlansOfSeveralRanksMustFitTogether) {
  EXPECT_TRUE(check_host_plans_fit(8000, 2, 8000).ok());
  const absl::Status s = check_host_plans_fit(8000, 2, 7999);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(s.message());
  EXPECT_NE(msg.find("plans of the 2 ranks on this host need"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(8000 bytes) together"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(7999 bytes) are available"), std::string::npos) << msg;
}

// A 13 T-parameter model (about 200 TB of parameters, gradients and AdamW state) is refused
// against this machine's MemAvailable before anything is allocated.
TEST(TrainerTest, HugeModelDoesNotFitTheHost) {
  TrainConfig cfg = tiny_config();
  cfg.model.d_model = 16384;
  cfg.model.n_heads = 128;
  cfg.model.n_layers = 4096;
  absl::StatusOr<engine::MemoryPlan> plan = Trainer::plan(cfg, cpu_f32());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->total_bytes(), size_t{100} << 40);
  const absl::Status s = Trainer::check_fits(*plan, cpu_f32());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  auto trainer = Trainer::create(cfg, cpu_f32(), pattern_samples(16, 0), nullptr);
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kResourceExhausted);
}

// A run whose loss is NaN (init_std 1e30 overflows the attention scores) skips every step and
// stops after max_skipped_steps consecutive ones with an error; 0 never stops.
TEST(TrainerTest, DivergedRunStopsAfterMaxSkippedSteps) {
  TrainConfig cfg = tiny_config();
  cfg.model.init_std = 1e30f;
  cfg.train.steps = 8;
  cfg.train.max_skipped_steps = 3;
  auto trainer = Trainer::create(cfg, cpu_f32(), pattern_samples(16, 0), pattern_samples(16, 3));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const TrainSummary s = (*trainer)->run();
  EXPECT_EQ(s.status.code(), absl::StatusCode::kAborted);
  EXPECT_NE(std::string(s.status.message()).find("3 consecutive steps up to step 3"),
            std::string::npos)
      << s.status;
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.skipped_steps, 3);
  EXPECT_EQ(s.val_losses.size(), 1u);  // the one before the first step, none after

  cfg.train.max_skipped_steps = 0;
  auto again = Trainer::create(cfg, cpu_f32(), pattern_samples(16, 0), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  const TrainSummary all = (*again)->run();
  EXPECT_TRUE(all.status.ok()) << all.status;
  EXPECT_EQ(all.steps, 8);
  EXPECT_EQ(all.skipped_steps, 8);
}

}  // namespace
}  // namespace anvil::model
