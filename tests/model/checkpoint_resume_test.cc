// Checkpoint and resume on the CPU, in-process: a tiny GPT (dropout on) trained 10 steps, and
// the same run saved at step 5, stopped, and continued by a fresh trainer from the checkpoint,
// give bitwise the same losses for steps 6-10. finetune (weights only) restarts at step 0
// from the saved weights with a fresh optimizer. A checkpoint from another model shape is
// refused naming the tensor.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "tests/io/io_test_util.h"
#include "tests/parallel/tiny_training.h"

namespace anvil::model {
namespace {

// The parallel tests' tiny GPT (dropout on), over 10 steps of 4 sequences.
TrainConfig tiny_config() {
  TrainConfig c = testing_parallel::tiny_train_config();
  c.train.global_batch = 4;
  c.train.steps = 10;
  c.optim.schedule.warmup_steps = 2;
  c.optim.schedule.decay_steps = 10;
  return c;
}

SampleFn hashed_samples(int64_t seq_len, int64_t vocab) {
  return [seq_len, vocab](int64_t index, int32_t* out) {
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 1);
    for (int64_t t = 0; t <= seq_len; ++t) {
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      out[t] = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
    }
  };
}

std::unique_ptr<Trainer> make_trainer(const TrainConfig& cfg) {
  auto t = Trainer::create(cfg, Precision{}, hashed_samples(16, cfg.model.vocab_size), {});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

absl::Status save(Trainer& t, const TrainConfig& cfg, const std::string& dir) {
  io::CheckpointInfo info;
  info.step = t.steps_done();
  info.state = checkpoint_counters(t.state(), cfg);
  info.layout = checkpoint_layout(cfg);
  info.lr_schedule = checkpoint_lr_schedule(cfg, t.state());
  return io::save_checkpoint(dir, info, gpt_checkpoint_slices(gpt_model(t.model()), 0, t.stream()),
                             2);
}

absl::Status load(Trainer& t, const TrainConfig& cfg, const std::string& dir, bool finetune) {
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c, io::open_newest_complete(dir, -1, [](const auto&) {}));
  ANVIL_RETURN_IF_ERROR(gpt_load_checkpoint(
      gpt_model(t.model()), [&](const std::string& name) { return c.read(name); }, finetune,
      t.stream()));
  if (finetune) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(TrainerState s, trainer_state_from(c.info().state, cfg));
  t.restore(s);
  return absl::OkStatus();
}

TEST(CheckpointResumeTest, ContinuesBitwise) {
  io::testing::ScratchDir dir;
  const TrainConfig cfg = tiny_config();
  std::unique_ptr<Trainer> whole = make_trainer(cfg);
  ASSERT_NE(whole, nullptr);
  const std::vector<double> want = whole->run().losses;
  ASSERT_EQ(want.size(), 10u);

  std::unique_ptr<Trainer> first = make_trainer(cfg);
  ASSERT_NE(first, nullptr);
  absl::Status saved;
  first->set_step_hook([&](const StepStats& st) {
    if (st.step != 5) return false;
    saved = save(*first, cfg, dir.path());
    return true;
  });
  EXPECT_EQ(first->run().losses.size(), 5u);
  ASSERT_TRUE(saved.ok()) << saved;

  std::unique_ptr<Trainer> second = make_trainer(cfg);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(load(*second, cfg, dir.path(), false).ok());
  EXPECT_EQ(second->steps_done(), 5);
  const std::vector<double> got = second->run().losses;
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(got[i], want[5 + i]) << "step " << 6 + i;
}

// The same through a global-batch ramp-up, a skipped range and token-based decay: the data
// position, the ramp-up's batch and the lr scheduler's position resume from the counters.
TEST(CheckpointResumeTest, ContinuesBitwiseThroughRampupAndSkips) {
  io::testing::ScratchDir dir;
  TrainConfig cfg = tiny_config();
  cfg.train.rampup = BatchRampup{2, 2, 12};  // batches of 2 up to 12 samples, then 4
  cfg.train.skip_ranges = {{4, 4}};
  cfg.optim.schedule.warmup_steps = 0;
  cfg.optim.schedule.warmup_samples = 4;
  cfg.optim.schedule.decay_tokens = 20 * 16;
  std::unique_ptr<Trainer> whole = make_trainer(cfg);
  ASSERT_NE(whole, nullptr);
  const std::vector<double> want = whole->run().losses;
  ASSERT_EQ(want.size(), 10u);

  std::unique_ptr<Trainer> first = make_trainer(cfg);
  ASSERT_NE(first, nullptr);
  absl::Status saved;
  first->set_step_hook([&](const StepStats& st) {
    if (st.step != 5) return false;
    saved = save(*first, cfg, dir.path());
    return true;
  });
  first->run();
  ASSERT_TRUE(saved.ok()) << saved;
  std::unique_ptr<Trainer> second = make_trainer(cfg);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(load(*second, cfg, dir.path(), false).ok());
  EXPECT_EQ(second->state().consumed_samples, 5 * 2);
  EXPECT_EQ(second->state().lr.samples, 4 * 2);  // step 4 consumed only
  const std::vector<double> got = second->run().losses;
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(got[i], want[5 + i]) << "step " << 6 + i;
}

TEST(CheckpointResumeTest, FinetuneLoadsWeightsOnly) {
  io::testing::ScratchDir dir;
  TrainConfig cfg = tiny_config();
  cfg.train.steps = 3;
  std::unique_ptr<Trainer> first = make_trainer(cfg);
  ASSERT_NE(first, nullptr);
  first->run();
  ASSERT_TRUE(save(*first, cfg, dir.path()).ok());

  cfg.train.global_batch = 2;  // a new run: another batch, the saved weights
  cfg.train.seed = 11;
  std::unique_ptr<Trainer> tuned = make_trainer(cfg);
  ASSERT_NE(tuned, nullptr);
  auto c = io::Checkpoint::open(io::checkpoint_step_dir(dir.path(), 3));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(trainer_state_from(c->info().state, cfg).ok());  // not a resume
  ASSERT_TRUE(load(*tuned, cfg, dir.path(), true).ok());
  EXPECT_EQ(tuned->steps_done(), 0);
  const Param* w = tuned->model().params().find("h.1.mlp.c_fc.weight");
  auto saved = c->read("master/h.1.mlp.c_fc.weight");
  ASSERT_TRUE(saved.ok()) << saved.status();
  const float* m = static_cast<const float*>(w->master.data);
  const float* mom = static_cast<const float*>(w->m.data);
  for (int64_t i = 0; i < w->numel(); ++i) {
    ASSERT_EQ(m[i], saved->data[static_cast<size_t>(i)]) << i;
    ASSERT_EQ(mom[i], 0.0f) << i;
  }
}

TEST(CheckpointResumeTest, RefusesAnotherModelShape) {
  io::testing::ScratchDir dir;
  TrainConfig cfg = tiny_config();
  std::unique_ptr<Trainer> first = make_trainer(cfg);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(save(*first, cfg, dir.path()).ok());
  cfg.model.d_model = 64;
  std::unique_ptr<Trainer> other = make_trainer(cfg);
  ASSERT_NE(other, nullptr);
  const absl::Status s = load(*other, cfg, dir.path(), false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("master/wte.weight has shape [50, 32], the model needs [50, 64]"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace anvil::model
