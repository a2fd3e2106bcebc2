// BERT's loss parts as Megatron's pretrain_bert.py logs them ("lm loss", "sop loss"; the loss is
// their sum), reported by the Trainer for a training step and for an evaluation. The reference
// recomputes both parts here from the model's outputs: the masked-LM cross-entropy from the MLM
// logits (GptModel::last_logits) over the masked targets of each micro-batch, and the binary
// head from the encoder output (final_hidden) through the pooler and binary-head weights read
// from the parameter table, each micro-batch's mean over its samples; then the mean over the
// micro-batches. The learning rate is 0, so the step's model is the one the reference runs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/sample_record.h"
#include "model/train/trainer.h"
#include "tests/parallel/tiny_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

constexpr int64_t kVocab = 37;

TrainConfig tiny_bert_config(bool binary_head) {
  TrainConfig c = testing_parallel::tiny_train_config();
  c.model.vocab_size = kVocab;
  testing_parallel::use_hf_bert(c);
  c.model.binary_head = binary_head;
  c.model.hidden_dropout = c.model.attention_dropout = 0.0f;
  c.model.init_std = 0.5f;  // sizable logits: parts far from ln(vocab) and ln 2
  c.train.micro_batch = 2;
  c.train.global_batch = 6;  // 3 micro-batches
  c.train.eval_iters = 1;
  c.optim.schedule.lr = c.optim.schedule.min_lr = 0.0;
  c.optim.weight_decay = 0.0;
  return c;
}

struct Parts {
  double lm = 0.0, sop = 0.0;
};

// The mean over `rows` of cross-entropy(logits row, label) over the first `cols` columns
// of rows of width `stride`; rows with label < 0 are skipped.
double mean_cross_entropy(const std::vector<double>& logits, int64_t stride, int64_t cols,
                          const std::vector<int32_t>& labels) {
  double sum = 0.0;
  int64_t n = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] < 0) continue;
    const double* z = logits.data() + static_cast<int64_t>(r) * stride;
    const double top = *std::max_element(z, z + cols);
    double e = 0.0;
    for (int64_t j = 0; j < cols; ++j) e += std::exp(z[j] - top);
    sum += top + std::log(e) - z[labels[r]];
    ++n;
  }
  return sum / static_cast<double>(n);
}

std::vector<double> param(GptModel& m, const char* name) {
  const Param* p = m.params().find(name);
  EXPECT_NE(p, nullptr) << name;
  return testing::to_host_f64(p->value);
}

// The parts of one micro-batch of samples first..first+B-1 by the reference above.
Parts reference_parts(GptModel& m, const TrainConfig& c, const SampleFn& fn, int64_t first) {
  const int64_t B = c.train.micro_batch, T = c.data.seq_len, d = c.model.d_model;
  std::vector<int32_t> record(static_cast<size_t>(bert_record_width(T)));
  std::vector<int32_t> tokens(B * T), types(B * T), targets(B * T), positions(B * T);
  std::vector<int32_t> lengths(B), labels(B);
  for (int64_t b = 0; b < B; ++b) {
    fn(first + b, record.data());
    decode_bert_record(c.model, first + b, T, record.data(), tokens.data() + b * T,
                       types.data() + b * T, targets.data() + b * T, lengths.data(), labels.data(),
                       b);
    for (int64_t t = 0; t < T; ++t) positions[b * T + t] = static_cast<int32_t>(t);
  }
  GptBatch batch{tokens.data(), positions.data(), targets.data(), nullptr};
  batch.token_types = types.data();
  batch.lengths = lengths.data();
  batch.binary_labels = labels.data();
  engine::Stream s = engine::Stream::cpu();
  m.forward(batch, /*train=*/false, 0, s);
  Parts p;
  p.lm =
      mean_cross_entropy(testing::to_host_f64(m.last_logits()), c.model.padded(), kVocab, targets);
  if (!c.model.binary_head) return p;
  // Binary head: z = tanh(h[cls] Wp^T + bp) Wb^T + bb, h[cls] the sample's first row.
  const std::vector<double> h = testing::to_host_f64(m.final_hidden());
  const std::vector<double> wp = param(m, "pooler.dense.weight"),
                            bp = param(m, "pooler.dense.bias");
  const std::vector<double> wb = param(m, "binary_head.weight"), bb = param(m, "binary_head.bias");
  std::vector<double> z(static_cast<size_t>(2 * B));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> pooled(static_cast<size_t>(d));
    for (int64_t o = 0; o < d; ++o) {
      double acc = bp[o];
      for (int64_t i = 0; i < d; ++i) acc += h[b * T * d + i] * wp[o * d + i];
      pooled[o] = std::tanh(acc);
    }
    for (int64_t k = 0; k < 2; ++k) {
      double acc = bb[k];
      for (int64_t i = 0; i < d; ++i) acc += pooled[i] * wb[k * d + i];
      z[b * 2 + k] = acc;
    }
  }
  p.sop = mean_cross_entropy(z, 2, 2, labels);
  return p;
}

// Megatron's parts of `micro_batches` micro-batches from sample `first` on: means of theirs.
Parts reference_mean(GptModel& m, const TrainConfig& c, const SampleFn& fn, int64_t first,
                     int64_t micro_batches) {
  Parts mean;
  for (int64_t k = 0; k < micro_batches; ++k) {
    const Parts p = reference_parts(m, c, fn, first + k * c.train.micro_batch);
    mean.lm += p.lm / static_cast<double>(micro_batches);
    mean.sop += p.sop / static_cast<double>(micro_batches);
  }
  return mean;
}

TEST(BertLossParts, StepAndEvaluationReportMegatronsLmAndSopLoss) {
  const TrainConfig c = tiny_bert_config(/*binary_head=*/true);
  const SampleFn train = testing_parallel::hashed_bert_samples(c.data.seq_len, kVocab);
  const SampleFn valid = [train](int64_t i, int32_t* out) { train(i + 1000, out); };
  auto t = Trainer::create(c, Precision{}, train, valid);
  ASSERT_TRUE(t.ok()) << t.status();
  const StepStats st = (*t)->step();
  const Parts want = reference_mean(gpt_model((*t)->model()), c, train, 0, 3);
  // Far from the untrained values, so a swapped or missing part cannot pass.
  EXPECT_GT(std::fabs(want.lm - std::log(37.0)), 0.3);
  EXPECT_GT(std::fabs(want.sop - std::log(2.0)), 0.02);
  EXPECT_NEAR(st.parts.lm, want.lm, 1e-4 * want.lm);
  EXPECT_NEAR(st.parts.sop, want.sop, 1e-4);
  EXPECT_NEAR(st.parts.lm + st.parts.sop, st.loss, 1e-6 * st.loss);

  // run(): the steps left, then the evaluation of the first validation samples.
  const TrainSummary sum = (*t)->run();
  ASSERT_EQ(sum.evals.size(), 1u);
  const Parts eval = reference_mean(gpt_model((*t)->model()), c, valid, 0, 3);
  const EvalResult& first = sum.evals.front();
  EXPECT_NEAR(first.parts.lm, eval.lm, 1e-4 * eval.lm);
  EXPECT_NEAR(first.parts.sop, eval.sop, 1e-4);
  EXPECT_NEAR(first.parts.lm + first.parts.sop, first.loss, 1e-6 * first.loss);
}

TEST(BertLossParts, WithoutBinaryHeadTheLmLossIsTheLoss) {
  const TrainConfig c = tiny_bert_config(/*binary_head=*/false);
  const SampleFn train = testing_parallel::hashed_bert_samples(c.data.seq_len, kVocab);
  auto t = Trainer::create(c, Precision{}, train, nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  const StepStats st = (*t)->step();
  const Parts want = reference_mean(gpt_model((*t)->model()), c, train, 0, 3);
  EXPECT_NEAR(st.loss, want.lm, 1e-4 * want.lm);
  EXPECT_EQ(st.parts.lm, st.loss);
  EXPECT_TRUE(std::isnan(st.parts.sop));
}

TEST(BertLossParts, GptHasNoParts) {
  TrainConfig c = testing_parallel::tiny_train_config();
  auto t = Trainer::create(c, Precision{}, testing_parallel::hashed_samples(16, 50), nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  const StepStats st = (*t)->step();
  EXPECT_FALSE(st.parts.present());
}

}  // namespace
}  // namespace anvil::model
