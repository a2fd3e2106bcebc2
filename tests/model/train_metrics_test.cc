// model/train_metrics: the tags, values and x axes a recording sink receives, against the names
// of Megatron-DeepSpeed's megatron/training.py (BigScience fork) typed out here, the x axes
// step, step * global_batch and step * global_batch * seq_len, the ppl cap exp(20), and one
// flush per log interval and per evaluation (none per step).
#include "model/train/train_metrics.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "model/train/trainer.h"

namespace anvil::model {
namespace {

struct Recorder {
  std::vector<std::tuple<std::string, double, int64_t>> scalars;
  int flushes = 0;
  MetricsSink sink() {
    MetricsSink s;
    s.scalar = [this](std::string_view tag, double v, int64_t x) {
      scalars.emplace_back(std::string(tag), v, x);
    };
    s.flush = [this] { ++flushes; };
    return s;
  }
};

using Scalars = std::vector<std::tuple<std::string, double, int64_t>>;

TEST(TrainMetrics, Axes) {
  const MetricsAxes a = metrics_axes(7, 512, 2048);
  EXPECT_EQ(a.step, 7);
  EXPECT_EQ(a.samples, 7 * 512);
  EXPECT_EQ(a.tokens, int64_t{7} * 512 * 2048);
}

TEST(TrainMetrics, StepScalarsHaveMegatronNamesAndAxes) {
  Recorder r;
  StepStats st;
  st.step = 3;
  st.loss = 7.25;
  st.lr = 2.5e-4;
  st.grad_norm = 0.75;
  const MetricsAxes at{3, 12, 1536};
  write_step_metrics(r.sink(), st, 4, at);
  const Scalars want = {
      {"steps-vs-samples/y=steps,x=samples", 3, 12},
      {"steps-vs-samples/y=samples,x=steps", 12, 3},
      {"steps-vs-tokens/y=steps,x=tokens", 3, 1536},
      {"steps-vs-tokens/y=tokens,x=steps", 1536, 3},
      {"learning-rate/learning-rate", 2.5e-4, 3},
      {"learning-rate/learning-rate vs samples", 2.5e-4, 12},
      {"learning-rate/learning-rate vs tokens", 2.5e-4, 1536},
      {"batch-size/batch-size", 4, 3},
      {"batch-size/batch-size vs samples", 4, 12},
      {"lm-loss-training/lm loss", 7.25, 3},
      {"lm-loss-training/lm loss vs samples", 7.25, 12},
      {"lm-loss-training/lm loss vs tokens", 7.25, 1536},
      {"loss-scale/loss-scale", 1, 3},
      {"loss-scale/loss-scale vs samples", 1, 12},
      {"loss-scale/loss-scale vs tokens", 1, 1536},
      {"grad-norm/grad-norm", 0.75, 3},
      {"grad-norm/grad-norm vs samples", 0.75, 12},
      {"grad-norm/grad-norm vs tokens", 0.75, 1536},
  };
  EXPECT_EQ(r.scalars, want);
  EXPECT_EQ(r.flushes, 0);  // flushed with the interval's scalars only
}

TEST(TrainMetrics, IntervalScalarsFlushOnce) {
  Recorder r;
  IntervalMetrics m;
  m.seconds_per_step = 0.5;
  m.samples_per_second = 64;
  m.tokens_per_second = 64 * 128;
  m.dp = 4;
  m.tflops_per_gpu = 123.5;
  m.allocated_bytes = 1e9;
  const MetricsAxes at{10, 80, 10240};
  write_interval_metrics(r.sink(), m, at);
  const Scalars want = {
      {"iteration-time/iteration-time", 0.5, 10},
      {"iteration-time/iteration-time vs samples", 0.5, 80},
      {"iteration-time/iteration-time vs tokens", 0.5, 10240},
      {"iteration-time/samples per second", 64, 10},
      {"iteration-time/samples per second per replica", 16, 10},
      {"iteration-time/tokens per second", 8192, 10},
      {"iteration-time/tokens per second per replica", 2048, 10},
      {"iteration-time/TFLOPs per gpu (estimated)", 123.5, 10},
      {"mem-allocated-bytes", 1e9, 10},
  };
  EXPECT_EQ(r.scalars, want);  // no mem-reserved-bytes without a GPU figure
  EXPECT_EQ(r.flushes, 1);

  Recorder g;
  m.reserved_bytes = 5e10;
  write_interval_metrics(g.sink(), m, at);
  ASSERT_EQ(g.scalars.size(), want.size() + 1);
  EXPECT_EQ(g.scalars.back(), std::make_tuple(std::string("mem-reserved-bytes"), 5e10, 10));
}

TEST(TrainMetrics, ValidationLossAndCappedPerplexity) {
  Recorder r;
  write_validation_metrics(r.sink(), "valid", 2.0, MetricsAxes{5, 20, 40});
  const Scalars want = {
      {"lm-loss-validation/valid/lm loss validation", 2.0, 5},
      {"lm-loss-validation/valid/lm loss validation vs samples", 2.0, 20},
      {"lm-loss-validation/valid/lm loss validation vs tokens", 2.0, 40},
      {"lm-loss-validation/valid/lm loss validation ppl", std::exp(2.0), 5},
      {"lm-loss-validation/valid/lm loss validation ppl vs samples", std::exp(2.0), 20},
      {"lm-loss-validation/valid/lm loss validation ppl vs tokens", std::exp(2.0), 40},
  };
  EXPECT_EQ(r.scalars, want);
  EXPECT_EQ(r.flushes, 1);
  // A named group (Megatron-DeepSpeed's --valid-weighted-split-names) under its own prefix.
  Recorder named;
  write_validation_metrics(named.sink(), "wiki", 2.0, MetricsAxes{5, 20, 40});
  ASSERT_EQ(named.scalars.size(), want.size());
  EXPECT_EQ(
      named.scalars[0],
      std::make_tuple(std::string("lm-loss-validation/wiki/lm loss validation"), 2.0, int64_t{5}));
  // Megatron: ppl = exp(min(20, loss)).
  Recorder big;
  write_validation_metrics(big.sink(), "valid", 25.0, MetricsAxes{1, 1, 1});
  EXPECT_EQ(std::get<1>(big.scalars[3]), std::exp(20.0));
}

// BERT: Megatron's pretrain_bert.py loss_dict keys "lm loss" (the masked-LM part) and
// "sop loss", then anvil's total, in training and (with ppl) validation.
TEST(TrainMetrics, BertPartsUnderMegatronsKeys) {
  Recorder r;
  StepStats st;
  st.loss = 7.5;
  st.parts = {7.0, 0.5};
  write_step_metrics(r.sink(), st, 4, MetricsAxes{3, 12, 1536});
  Scalars loss;
  for (const auto& e : r.scalars) {
    if (std::get<0>(e).rfind("lm-loss-training/", 0) == 0 && std::get<2>(e) == 3) loss.push_back(e);
  }
  const Scalars want = {
      {"lm-loss-training/lm loss", 7.0, 3},
      {"lm-loss-training/sop loss", 0.5, 3},
      {"lm-loss-training/total loss", 7.5, 3},
  };
  EXPECT_EQ(loss, want);
  Recorder v;
  write_validation_metrics(v.sink(), "valid", 2.5, MetricsAxes{5, 20, 40}, LossParts{2.0, 0.5});
  ASSERT_EQ(v.scalars.size(), 18u);
  EXPECT_EQ(
      v.scalars[0],
      std::make_tuple(std::string("lm-loss-validation/valid/lm loss validation"), 2.0, int64_t{5}));
  EXPECT_EQ(v.scalars[9],
            std::make_tuple(std::string("lm-loss-validation/valid/sop loss validation ppl"),
                            std::exp(0.5), int64_t{5}));
  EXPECT_EQ(v.scalars[12],
            std::make_tuple(std::string("lm-loss-validation/valid/total loss validation"), 2.5,
                            int64_t{5}));
  // Not BERT (no parts): "lm loss" is the loss; BERT without a binary head: lm loss and total.
  Recorder n;
  write_validation_metrics(n.sink(), "valid", 2.0, MetricsAxes{5, 20, 40}, LossParts{});
  EXPECT_EQ(n.scalars.size(), 6u);
  Recorder m;
  LossParts lm_only;
  lm_only.lm = 2.0;
  write_validation_metrics(m.sink(), "valid", 2.0, MetricsAxes{5, 20, 40}, lm_only);
  EXPECT_EQ(m.scalars.size(), 12u);
}

TEST(TrainMetrics, NoFlushFunctionIsFine) {
  std::vector<std::string> tags;
  MetricsSink s;
  s.scalar = [&](std::string_view tag, double, int64_t) { tags.emplace_back(tag); };
  EXPECT_TRUE(static_cast<bool>(s));
  write_validation_metrics(s, "valid", 1.0, MetricsAxes{});
  EXPECT_EQ(tags.size(), 6u);
  EXPECT_FALSE(static_cast<bool>(MetricsSink{}));
}

}  // namespace
}  // namespace anvil::model
