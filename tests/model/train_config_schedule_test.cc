// bin/train's config for Megatron's run-length, lr and batch options: train_samples and
// train_tokens resolve [train] steps as Megatron's update_train_iters (and the Microsoft fork's
// token condition) do; the warmup and decay in steps, samples, tokens or a fraction; the
// ramp-up and skip ranges; [data] last_epoch_cutoff. Bad combinations are one-line errors
// naming the key.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kBase[] = R"([model]
vocab_size = 257
max_seq_len = 64
d_model = 32
n_heads = 2
n_layers = 1
[data]
path = data/demo/kjv_text_document
seq_len = 16
[train]
micro_batch = 2
global_batch = 8
[optim]
lr = 1e-3
)";

absl::StatusOr<TrainConfig> load(const std::vector<std::string>& overrides) {
  return load_train_config_string(kBase, "t.ini", overrides);
}

std::string error_of(const std::vector<std::string>& overrides) {
  absl::StatusOr<TrainConfig> c = load(overrides);
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(TrainConfigScheduleTest, TrainSamplesResolveTheSteps) {
  auto c = load({"train.train_samples=100"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.steps, 12);  // 100 // 8: the partial batch is dropped
  EXPECT_EQ(c->train.run_samples(), 100);
  // The decay ends with the run's samples; the warmup is sample-based.
  EXPECT_EQ(c->optim.schedule.decay_in_samples(8), 100);
  // With a ramp-up 2 -> 8 by 2 over 24 samples: batches 2,2,2,2,4,4,6,6,8 up to position 28,
  // then (100 - 36) // 8 = 8 more.
  auto r = load({"train.train_samples=100", "train.rampup_batch_size=2 2 24"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->train.steps, steps_for_samples(r->train.rampup, 8, 100));
  EXPECT_THAT(error_of({"train.train_samples=100", "train.steps=5"}),
              AllOf(HasSubstr("[train] train_samples"), HasSubstr("both set")));
  EXPECT_THAT(error_of({"train.train_samples=7"}), HasSubstr("make 0 steps"));
}

TEST(TrainConfigScheduleTest, TrainTokensEndTheRun) {
  auto c = load({"train.train_tokens=1000"});  // 128 tokens per step: the 8th reaches 1024
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.steps, 8);
  auto both = load({"train.train_tokens=1000", "train.steps=5"});  // the earlier end wins
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->train.steps, 5);
}

TEST(TrainConfigScheduleTest, WarmupAndDecayUnits) {
  auto s = load({"train.steps=20", "optim.warmup_samples=24", "optim.decay_samples=120"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->optim.schedule.warmup_in_samples(8), 24.0);
  EXPECT_EQ(s->optim.schedule.decay_in_samples(8), 120);
  auto t = load({"train.steps=20", "optim.warmup_tokens=100"});  // ceil(100 / 16) samples
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->optim.schedule.warmup_samples, 7);
  auto f = load({"train.steps=20", "optim.warmup_fraction=0.25"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->optim.schedule.warmup_in_samples(8), 0.25 * 160);
  auto k = load({"train.steps=20", "optim.decay_tokens=2000"});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->optim.schedule.decay_tokens, 2000);
  EXPECT_THAT(error_of({"optim.warmup_steps=2", "optim.warmup_samples=16"}),
              HasSubstr("at most one of warmup_steps"));
  EXPECT_THAT(error_of({"optim.decay_steps=20", "optim.decay_samples=16"}),
              HasSubstr("at most one of decay_steps and decay_samples"));
  EXPECT_THAT(error_of({"train.steps=10", "optim.warmup_samples=80"}),
              AllOf(HasSubstr("[optim] warmup_steps"), HasSubstr("warmup (80 samples)")));
  EXPECT_THAT(error_of({"optim.warmup_fraction=1.5"}), HasSubstr("in [0, 1]"));
}

TEST(TrainConfigScheduleTest, RampupAndSkipRanges) {
  auto c = load({"train.rampup_batch_size=2 2 64", "train.skip_iterations=7-9 3-3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.rampup.start, 2);
  ASSERT_EQ(c->train.skip_ranges.size(), 2u);
  EXPECT_EQ(c->train.skip_ranges[0].first, 3);
  EXPECT_THAT(error_of({"train.rampup_batch_size=2 4 64"}),
              AllOf(HasSubstr("[train] rampup_batch_size"), HasSubstr("not a multiple")));
  EXPECT_THAT(error_of({"train.rampup_batch_size=3 5 64"}),
              HasSubstr("multiples of 2 = micro_batch * dp"));
  EXPECT_THAT(error_of({"train.skip_iterations=9-7"}), HasSubstr("[train] skip_iterations"));
  // The interleaved schedule needs every batch's micro-batches to be a multiple of pp.
  const std::vector<std::string> interleaved = {"model.n_layers=4", "parallel.pp=2",
                                                "parallel.virtual_stages=2"};
  ASSERT_TRUE(load_train_config_string(kBase, "t.ini", interleaved, nullptr, 2).ok());
  std::vector<std::string> ramp = interleaved;
  ramp.push_back("train.rampup_batch_size=2 2 64");
  auto bad = load_train_config_string(kBase, "t.ini", ramp, nullptr, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("multiples of 4 = micro_batch * dp (* pp"));
}

TEST(TrainConfigScheduleTest, LastEpochCutoff) {
  auto c = load({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->data.last_epoch_cutoff, 0.95);  // the BigScience fork's
  auto n = load({"data.last_epoch_cutoff=0.8"});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->data.last_epoch_cutoff, 0.8);
  EXPECT_THAT(error_of({"data.last_epoch_cutoff=0"}), HasSubstr("[data] last_epoch_cutoff"));
}

// Megatron's data loading mode 2: a training group excludes paths and split; validation groups
// exclude valid_paths.
TEST(TrainConfigScheduleTest, WeightedSplitPathGroups) {
  auto c = load({"data.valid_weighted_split_paths=A: 1 0:0.5 x; B: 1 0.5:1 y",
                 "data.test_weighted_split_paths=T: 1 0.9:1 x"});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->data.valid_groups.size(), 2u);
  EXPECT_EQ(c->data.valid_groups[1].name, "B");
  EXPECT_EQ(c->data.test_groups[0].prefixes[0], "x");
  EXPECT_THAT(error_of({"data.train_weighted_split_paths=TR: 1 0:0.9 x"}),
              AllOf(HasSubstr("[data] train_weighted_split_paths"), HasSubstr("excludes")));
  auto mode2 = load_train_config_string(
      "[model]\nvocab_size = 257\nmax_seq_len = 64\nd_model = 32\nn_heads = 2\n"
      "n_layers = 1\n[data]\nseq_len = 16\ntrain_weighted_split_paths = TR: 1 0:0.9 x\n",
      "t.ini", {});
  ASSERT_TRUE(mode2.ok()) << mode2.status();
  EXPECT_EQ(mode2->data.train_groups[0].name, "TR");
  EXPECT_THAT(error_of({"data.train_weighted_split_paths=TR: 1 0:0.9 x; S: 1 0:1 y"}),
              HasSubstr("more than one group"));
  EXPECT_THAT(error_of({"data.valid_paths=z", "data.valid_weighted_split_paths=A: 1 0:1 x"}),
              HasSubstr("excludes [data] valid_paths"));
  EXPECT_THAT(error_of({"data.valid_weighted_split_paths=A: 1 1:0 x"}),
              AllOf(HasSubstr("[data] valid_weighted_split_paths"), HasSubstr("range '1:0'")));
}

}  // namespace
}  // namespace anvil::model
