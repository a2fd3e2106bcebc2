// anvil's training-loop arithmetic against Megatron-DeepSpeed's, exactly: the fixture
// tests/model/fixtures/megatron_schedule.txt is written by a transcription of Megatron's code
// (scripts/make_megatron_schedule_fixture.py: AnnealingLR, RampupBatchsizeNumMicroBatches,
// update_train_iters, the train/evaluate loops, MegatronPretrainingSampler). Compared: the lr
// each update uses (bitwise), the global batch and data position of every step, the run's
// steps, and the validation samples of every evaluation — for LrScheduler / batch_schedule
// alone and for a Trainer run on the CPU (train and validation sample indices recorded). Also
// the trainer's skip_iterations, skipped (non-finite) steps, the test split at the end, and the
// checkpoint counters of the new state.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/train/batch_schedule.h"
#include "model/train/checkpoint.h"
#include "model/train/lr_schedule.h"
#include "model/train/trainer.h"

namespace anvil::model {
namespace {

using ::testing::HasSubstr;

struct StepRec {
  int64_t step = 0, global_batch = 0, consumed = 0;
  double lr = 0.0;
  bool skipped = false;
};
struct EvalRec {
  int64_t after_step = 0;  // -1: after the loop
  int rank = 0;
  std::vector<int64_t> firsts;  // first sample of each micro-batch of this DP rank
};
struct Case {
  std::string name;
  std::map<std::string, std::string> params;
  int64_t steps = 0;
  std::vector<StepRec> step_recs;
  std::vector<EvalRec> evals;

  int64_t num(const std::string& key, int64_t fallback = 0) const {
    auto it = params.find(key);
    return it == params.end() ? fallback : std::stoll(it->second);
  }
  double real(const std::string& key) const { return std::strtod(params.at(key).c_str(), nullptr); }
};

std::string fixture_path() {
  const std::string here = __FILE__;
  const std::string beside = here.substr(0, here.rfind('/')) + "/fixtures/megatron_schedule.txt";
  if (std::ifstream(beside).good()) return beside;
  return "tests/model/fixtures/megatron_schedule.txt";  // from the source root (ctest)
}

std::vector<Case> load_cases() {
  std::ifstream in(fixture_path());
  EXPECT_TRUE(in.good()) << fixture_path();
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "case") {
      cases.emplace_back();
      ls >> cases.back().name;
    } else if (kind == "param") {
      std::string k, v;
      ls >> k >> v;
      cases.back().params[k] = v;
    } else if (kind == "steps") {
      ls >> cases.back().steps;
    } else if (kind == "step") {
      StepRec r;
      std::string lr;
      int skipped = 0;
      ls >> r.step >> r.global_batch >> r.consumed >> lr >> skipped;
      r.lr = std::strtod(lr.c_str(), nullptr);  // Python's repr: the exact double
      r.skipped = skipped != 0;
      cases.back().step_recs.push_back(r);
    } else if (kind == "eval") {
      EvalRec e;
      ls >> e.after_step >> e.rank;
      for (int64_t v; ls >> v;) e.firsts.push_back(v);
      cases.back().evals.push_back(e);
    }
  }
  EXPECT_GE(cases.size(), 5u);
  return cases;
}

BatchRampup rampup_of(const Case& c) {
  BatchRampup r;
  const std::string v = c.params.at("rampup");
  if (v == "-") return r;
  std::istringstream in(v);
  char comma = 0;
  in >> r.start >> comma >> r.increment >> comma >> r.samples;
  return r;
}

std::vector<int64_t> skipped_of(const Case& c) {
  std::vector<int64_t> out;
  std::istringstream in(c.params.at("skipped"));
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item != "-") out.push_back(std::stoll(item));
  }
  return out;
}

// The case's config as anvil's (parse_train_config's resolution done by hand: the fixture's
// keys are Megatron's flags).
TrainConfig config_of(const Case& c) {
  TrainConfig t;
  t.model.vocab_size = 12;
  t.model.max_seq_len = 16;
  t.model.d_model = 16;
  t.model.n_heads = 2;
  t.model.n_layers = 1;
  t.train.device = "cpu";
  t.train.micro_batch = c.num("micro_batch");
  t.train.global_batch = c.num("global_batch");
  t.train.rampup = rampup_of(c);
  t.train.train_samples = c.num("train_samples");
  t.train.steps = c.num("train_iters") > 0 ? c.num("train_iters")
                                           : steps_for_samples(t.train.rampup, t.train.global_batch,
                                                               t.train.train_samples);
  t.train.eval_interval = c.num("eval_interval");
  t.train.eval_iters = c.num("eval_iters");
  t.train.log_interval = 1000;
  t.data.seq_len = c.num("seq_len");
  LrSchedule& s = t.optim.schedule;
  s.lr = c.real("lr");
  s.min_lr = c.real("min_lr");
  s.style = *parse_decay_style(c.params.at("decay_style"));
  s.warmup_steps = c.num("warmup_iters");
  s.warmup_samples = c.num("warmup_samples");
  s.decay_tokens = c.num("decay_tokens");
  if (c.num("train_iters") > 0) {
    s.decay_steps = c.num("decay_iters", c.num("train_iters"));
  } else {
    s.decay_samples = c.num("decay_samples", c.num("train_samples"));
  }
  return t;
}

TEST(MegatronScheduleTest, SchedulerAndBatchesMatchMegatron) {
  for (const Case& c : load_cases()) {
    SCOPED_TRACE(c.name);
    const TrainConfig cfg = config_of(c);
    const LoopConfig& l = cfg.train;
    ASSERT_TRUE(cfg.optim.schedule.validate(l.global_batch).ok());
    EXPECT_EQ(l.steps, c.steps);  // update_train_iters
    ASSERT_EQ(static_cast<int64_t>(c.step_recs.size()), c.steps);
    const std::vector<int64_t> skipped = skipped_of(c);
    LrScheduler sched(cfg.optim.schedule, l.global_batch);
    int64_t consumed = 0;
    for (const StepRec& r : c.step_recs) {
      SCOPED_TRACE(testing::Message() << "step " << r.step);
      const int64_t G = global_batch_at(l.rampup, l.global_batch, consumed);
      EXPECT_EQ(G, r.global_batch);
      EXPECT_EQ(consumed, r.consumed);
      EXPECT_EQ(samples_after_steps(l.rampup, l.global_batch, r.step - 1), r.consumed);
      EXPECT_EQ(sched.lr(), r.lr);  // bitwise
      const bool skip = std::count(skipped.begin(), skipped.end(), r.step) > 0;
      EXPECT_EQ(skip, r.skipped);
      if (!skip) sched.step(G, consumed * cfg.data.seq_len);
      consumed += G;
    }
  }
}

// The validation stream continues over the evaluations: the first sample of every micro-batch
// of every DP rank, from Megatron's sampler.
TEST(MegatronScheduleTest, ValidationSamplesMatchMegatron) {
  for (const Case& c : load_cases()) {
    SCOPED_TRACE(c.name);
    const TrainConfig cfg = config_of(c);
    const int dp = static_cast<int>(c.num("dp"));
    const int64_t B = cfg.train.micro_batch;
    int64_t consumed_valid = 0;
    for (size_t i = 0; i < c.evals.size(); i += static_cast<size_t>(dp)) {
      const int64_t after = c.evals[i].after_step;
      const int64_t last = after < 0 ? c.steps : after;
      const int64_t G =
          global_batch_at(cfg.train.rampup, cfg.train.global_batch,
                          samples_after_steps(cfg.train.rampup, cfg.train.global_batch, last - 1));
      const int64_t micro = G / (B * dp);
      for (int r = 0; r < dp; ++r) {
        const EvalRec& e = c.evals[i + static_cast<size_t>(r)];
        ASSERT_EQ(e.rank, r);
        std::vector<int64_t> got;
        for (int64_t it = 0; it < cfg.train.eval_iters; ++it) {
          for (int64_t m = 0; m < micro; ++m) {
            got.push_back(sampler_index(consumed_valid + it * G, B, dp, r, m));
          }
        }
        EXPECT_EQ(got, e.firsts) << "evaluation after step " << after << ", rank " << r;
      }
      consumed_valid += cfg.train.eval_iters * G;
    }
  }
}

// Sample i of a stream: tokens from i, recorded.
SampleFn recording(std::vector<int64_t>* log, int64_t seq_len) {
  return [log, seq_len](int64_t index, int32_t* out) {
    log->push_back(index);
    for (int64_t t = 0; t <= seq_len; ++t) out[t] = static_cast<int32_t>((index * 7 + t) % 12);
  };
}

Precision cpu_f32() {
  return Precision{engine::Device::kCpu, engine::DType::kF32, engine::DType::kF32};
}

// The trainer's run of each single-rank case without skipped updates: the lr and global batch
// of every step, the training samples of every step, the validation samples of every evaluation
// (the one before the first step reads the first periodic evaluation's) and the test split's.
TEST(MegatronScheduleTest, TrainerRunMatchesMegatron) {
  int compared = 0;
  for (const Case& c : load_cases()) {
    if (c.num("dp") != 1 || !skipped_of(c).empty()) continue;
    SCOPED_TRACE(c.name);
    ++compared;
    const TrainConfig cfg = config_of(c);
    const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len;
    std::vector<int64_t> train_log, valid_log, test_log;
    auto trainer =
        Trainer::create(cfg, cpu_f32(), recording(&train_log, T), recording(&valid_log, T));
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    (*trainer)->set_held_out_sets({{"val", recording(&valid_log, T)}},
                                  {{"test", recording(&test_log, T)}});
    std::vector<StepStats> stats;
    std::vector<size_t> train_marks;  // train_log size after each step
    (*trainer)->set_step_hook([&](const StepStats& st) {
      stats.push_back(st);
      train_marks.push_back(train_log.size());
      return false;
    });
    const TrainSummary sum = (*trainer)->run();
    ASSERT_EQ(static_cast<int64_t>(stats.size()), c.steps);
    size_t begin = 0;
    for (size_t k = 0; k < stats.size(); ++k) {
      const StepRec& r = c.step_recs[k];
      EXPECT_EQ(stats[k].lr, r.lr) << "step " << r.step;
      EXPECT_EQ(stats[k].global_batch, r.global_batch) << "step " << r.step;
      std::vector<int64_t> want(static_cast<size_t>(r.global_batch));
      for (int64_t i = 0; i < r.global_batch; ++i) want[static_cast<size_t>(i)] = r.consumed + i;
      EXPECT_EQ(std::vector<int64_t>(train_log.begin() + static_cast<int64_t>(begin),
                                     train_log.begin() + static_cast<int64_t>(train_marks[k])),
                want)
          << "step " << r.step;
      begin = train_marks[k];
    }
    std::vector<std::vector<int64_t>> evals;
    for (const EvalRec& e : c.evals) {
      std::vector<int64_t> rows;
      for (int64_t first : e.firsts) {
        for (int64_t b = 0; b < B; ++b) rows.push_back(first + b);
      }
      evals.push_back(rows);
    }
    std::vector<int64_t> want_valid = evals.front();  // the start evaluation reads, not consumes
    for (const auto& e : evals) want_valid.insert(want_valid.end(), e.begin(), e.end());
    EXPECT_EQ(valid_log, want_valid);
    EXPECT_EQ(sum.val_losses.size(), evals.size() + 1);
    // Megatron's test iterator: eval_iters batches of the last step's global batch from 0.
    const int64_t last_g = c.step_recs.back().global_batch;
    std::vector<int64_t> want_test(static_cast<size_t>(cfg.train.eval_iters * last_g));
    for (size_t i = 0; i < want_test.size(); ++i) want_test[i] = static_cast<int64_t>(i);
    EXPECT_EQ(test_log, want_test);
    EXPECT_TRUE(std::isfinite(sum.test_loss));
    // The checkpoint counters hold the stream and schedule positions and resume to them.
    const TrainerState st = (*trainer)->state();
    EXPECT_EQ(st.consumed_samples, c.step_recs.back().consumed + last_g);
    auto back = trainer_state_from(checkpoint_counters(st, cfg), cfg);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->consumed_samples, st.consumed_samples);
    EXPECT_EQ(back->consumed_valid_samples, st.consumed_valid_samples);
    EXPECT_EQ(back->lr.samples, st.lr.samples);
    EXPECT_EQ(back->lr.tokens, st.lr.tokens);
    EXPECT_EQ(back->lr.warmup_tokens, st.lr.warmup_tokens);
  }
  EXPECT_EQ(compared, 3);
}

TrainConfig small_config() {
  TrainConfig t;
  t.model.vocab_size = 12;
  t.model.max_seq_len = 8;
  t.model.d_model = 16;
  t.model.n_heads = 2;
  t.model.n_layers = 1;
  t.data.seq_len = 8;
  t.train.device = "cpu";
  t.train.micro_batch = 2;
  t.train.global_batch = 4;
  t.train.steps = 6;
  t.train.eval_iters = 0;
  t.train.log_interval = 100;
  t.optim.schedule.lr = 1e-2;
  t.optim.schedule.warmup_steps = 2;
  t.optim.schedule.decay_steps = 6;
  return t;
}

// skip_iterations 2-3: those steps consume their global batch without fetching or training;
// the step counter moves on, the lr schedule and AdamW's count do not.
TEST(MegatronScheduleTest, SkipIterationsConsumeDataWithoutTraining) {
  TrainConfig cfg = small_config();
  cfg.train.skip_ranges = *parse_step_ranges("2-3");
  std::vector<int64_t> log;
  auto trainer = Trainer::create(cfg, cpu_f32(), recording(&log, 8), nullptr);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  std::vector<StepStats> stats;
  (*trainer)->set_step_hook([&](const StepStats& st) {
    stats.push_back(st);
    return false;
  });
  const TrainSummary sum = (*trainer)->run();
  ASSERT_EQ(stats.size(), 6u);
  EXPECT_EQ(sum.skipped_steps, 0);
  EXPECT_TRUE(sum.status.ok());
  const std::vector<int64_t> want = {0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
  EXPECT_EQ(log, want);
  EXPECT_FALSE(stats[0].data_only);
  EXPECT_TRUE(stats[1].data_only && stats[2].data_only);
  EXPECT_TRUE(std::isnan(stats[1].loss));
  // Step 4 is the second applied update: the lr after one update (position G = 4 samples).
  EXPECT_EQ(stats[3].lr, cfg.optim.schedule.at_samples(4, 4));
  EXPECT_EQ(stats[5].lr, cfg.optim.schedule.at_samples(12, 4));
  const TrainerState st = (*trainer)->state();
  EXPECT_EQ(st.step, 6);
  EXPECT_EQ(st.optimizer_steps, 4);
  EXPECT_EQ(st.consumed_samples, 24);
  EXPECT_EQ(st.lr.samples, 16);
}

// A non-finite gradient norm skips the update: the data position and the step counter advance,
// the lr (Megatron: the scheduler steps only after a successful update) and AdamW's step count
// stay.
TEST(MegatronScheduleTest, SkippedUpdatesKeepTheSchedule) {
  TrainConfig cfg = small_config();
  cfg.model.init_std = 1e30f;  // overflows the forward: every gradient norm is NaN
  cfg.optim.schedule.warmup_steps = 0;
  std::vector<int64_t> log;
  auto trainer = Trainer::create(cfg, cpu_f32(), recording(&log, 8), nullptr);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int64_t k = 1; k <= 3; ++k) {
    const StepStats st = (*trainer)->step();
    EXPECT_TRUE(st.skipped);
    EXPECT_EQ(st.lr, cfg.optim.schedule.at(0));
  }
  const TrainerState st = (*trainer)->state();
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(st.optimizer_steps, 0);
  EXPECT_EQ(st.consumed_samples, 12);
  EXPECT_EQ(st.lr.samples, 0);
  EXPECT_EQ(log.back(), 11);
}

// Named validation sets (valid_weighted_split_paths) are each evaluated from the same stream
// position, which advances once per evaluation; each test set starts at 0; the results are
// reported per set.
TEST(MegatronScheduleTest, NamedHeldOutSetsShareTheStreamPosition) {
  TrainConfig cfg = small_config();
  cfg.train.steps = 4;
  cfg.train.eval_interval = 2;
  cfg.train.eval_iters = 1;
  std::vector<int64_t> train_log, a_log, b_log, t_log;
  auto trainer = Trainer::create(cfg, cpu_f32(), recording(&train_log, 8), nullptr);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  (*trainer)->set_held_out_sets({{"A", recording(&a_log, 8)}, {"B", recording(&b_log, 8)}},
                                {{"T", recording(&t_log, 8)}});
  const TrainSummary sum = (*trainer)->run();
  // Evaluations: the start (peek at 0..3), steps 2 and 4, after the loop: 4 samples each.
  const std::vector<int64_t> want = {0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  EXPECT_EQ(a_log, want);
  EXPECT_EQ(b_log, want);
  EXPECT_EQ(t_log, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(sum.evals.size(), 4u * 2 + 1);
  EXPECT_EQ(sum.evals[0].set, "A");
  EXPECT_EQ(sum.evals[1].set, "B");
  EXPECT_EQ(sum.evals[2].step, 2);
  EXPECT_EQ(sum.evals.back().set, "T");
  EXPECT_EQ(sum.test_loss, sum.evals.back().loss);
  EXPECT_EQ(sum.val_losses.size(), 4u);  // the first set's
  EXPECT_EQ(sum.val_losses[1].second, sum.evals[2].loss);
  EXPECT_EQ((*trainer)->state().consumed_valid_samples, 12);
}

// A resume with other batch sizes continues from the consumed samples, as Megatron-DeepSpeed,
// with a note naming both counts; a shrunken batch reads more samples than steps x
// global_batch; counters of older checkpoints take Megatron's fallbacks.
TEST(MegatronScheduleTest, CheckpointCountersCheckTheRampup) {
  TrainConfig cfg = small_config();
  cfg.train.global_batch = 8;
  cfg.train.rampup = *parse_batch_rampup("2 2 12", 8, 2);
  cfg.train.eval_interval = 2;
  cfg.train.eval_iters = 3;
  TrainerState s;
  s.step = 5;
  s.optimizer_steps = 5;
  s.consumed_samples = samples_after_steps(cfg.train.rampup, 8, 5);
  // 3 increments of 12 / 3 = 4 samples: G = 2 at 0 and 2, 4 at 4, 6 at 8, 8 at 14 (> 12).
  EXPECT_EQ(s.consumed_samples, 2 + 2 + 4 + 6 + 8);
  std::map<std::string, int64_t> counters = checkpoint_counters(s, cfg);
  ASSERT_TRUE(trainer_state_from(counters, cfg).ok());
  EXPECT_EQ(batch_change_note(*trainer_state_from(counters, cfg), cfg), "");
  TrainConfig other = cfg;
  other.train.rampup = BatchRampup{};
  absl::StatusOr<TrainerState> changed = trainer_state_from(counters, other);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->consumed_samples, 22);
  EXPECT_THAT(batch_change_note(*changed, other),
              HasSubstr("consumed 22 samples in 5 steps, where [train] global_batch 8 and "
                        "rampup_batch_size give 40"));
  other.train.steps = 10;
  EXPECT_EQ(resumed_run_samples(*changed, other), 22 + 5 * 8);
  TrainConfig smaller = other;
  smaller.train.global_batch = 2;  // 5 steps of 2 would be 10 samples: 22 read already
  EXPECT_EQ(resumed_run_samples(*changed, smaller), 22 + 5 * 2);
  EXPECT_GT(resumed_run_samples(*changed, smaller), smaller.train.run_samples());
  counters.erase("consumed_valid_samples");
  counters.erase("lr_samples");
  auto old = trainer_state_from(counters, cfg);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->consumed_valid_samples, 2 * 3 * 8);  // (5 // 2) evaluations x 3 x G
  EXPECT_EQ(old->lr.samples, 5 * 8);
}

TEST(BatchScheduleTest, RampupParsesAndChecks) {
  const BatchRampup r = *parse_batch_rampup("16 8 300000", 1024, 8);
  EXPECT_EQ(r.start, 16);
  EXPECT_EQ(r.increment, 8);
  EXPECT_EQ(r.samples, 300000);
  EXPECT_FALSE(parse_batch_rampup("", 1024, 8)->enabled());
  EXPECT_THAT(std::string(parse_batch_rampup("16 8", 1024, 8).status().message()),
              HasSubstr("three integers"));
  EXPECT_THAT(std::string(parse_batch_rampup("16 10 100", 1024, 1).status().message()),
              HasSubstr("not a multiple of INCREMENT 10"));
  EXPECT_THAT(std::string(parse_batch_rampup("1024 8 100", 1024, 8).status().message()),
              HasSubstr("smaller than [train] global_batch"));
  EXPECT_THAT(std::string(parse_batch_rampup("4 4 100", 16, 8).status().message()),
              HasSubstr("multiples of 8 = micro_batch * dp"));
  EXPECT_THAT(std::string(parse_batch_rampup("4 4 0", 16, 2).status().message()),
              HasSubstr("must be > 0"));
  // Megatron's help text: 16 -> 1024 by 8 in 126 increments of 300000 / 126 samples each.
  EXPECT_EQ(global_batch_at(r, 1024, 0), 16);
  EXPECT_EQ(global_batch_at(r, 1024, 2380), 16);
  EXPECT_EQ(global_batch_at(r, 1024, 2381), 24);
  EXPECT_EQ(global_batch_at(r, 1024, 300000), 1024);
  EXPECT_EQ(global_batch_at(r, 1024, 300001), 1024);
}

TEST(BatchScheduleTest, StepRangesAreSortedAndMerged) {
  const StepRanges r = *parse_step_ranges("5-6 1-2, 2-3 9-9");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], std::make_pair(int64_t{1}, int64_t{3}));
  EXPECT_EQ(r[1], std::make_pair(int64_t{5}, int64_t{6}));
  EXPECT_EQ(r[2], std::make_pair(int64_t{9}, int64_t{9}));
  EXPECT_TRUE(in_step_ranges(r, 3));
  EXPECT_FALSE(in_step_ranges(r, 4));
  EXPECT_TRUE(parse_step_ranges("")->empty());
  for (const char* bad : {"3", "4-2", "0-1", "a-b", "1-2-3"}) {
    EXPECT_THAT(std::string(parse_step_ranges(bad).status().message()),
                HasSubstr("skip_iterations"))
        << bad;
  }
}

// Token budgets: the step that reaches the tokens is the last one.
TEST(BatchScheduleTest, StepsForTokens) {
  const BatchRampup none;
  EXPECT_EQ(steps_for_tokens(none, 8, 16, 8 * 16 * 10), 10);
  EXPECT_EQ(steps_for_tokens(none, 8, 16, 8 * 16 * 10 + 1), 11);
  EXPECT_EQ(steps_for_samples(none, 8, 87), 10);
  const BatchRampup r{2, 2, 30};
  // Batches 2 x5 (positions 0..8), then 4 from 10, 6 from 20, 8 from 30: 10 + 4*3 + 6*2 ... .
  int64_t consumed = 0, steps = 0;
  while (consumed * 16 < 700) {
    consumed += global_batch_at(r, 8, consumed);
    ++steps;
  }
  EXPECT_EQ(steps_for_tokens(r, 8, 16, 700), steps);
}

}  // namespace
}  // namespace anvil::model
