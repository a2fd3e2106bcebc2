// Tests of classification through the last token (model/tasks/finetune_cls.h).
// Evaluation against a direct computation: for a random model, each example's prediction is the
// argmax of the label tokens' logits at its last position and its loss -log softmax of the label
// token there, both computed by the test from a forward per example (micro-batch 1) and the
// logits it reads itself, including an example longer than seq_len (its last T tokens count).
// Training: a tiny model learns "does the text contain token 7" (balanced, random texts) from
// scratch to a dev accuracy above 0.9 (chance 0.5), with gradient accumulation over micro-batches.
// Argument errors name the example.
#include "model/tasks/finetune_cls.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

GptConfig tiny() {
  GptConfig cfg;
  cfg.vocab_size = 29;
  cfg.max_seq_len = 12;
  cfg.d_model = 32;
  cfg.n_heads = 4;
  cfg.n_layers = 2;
  return cfg;
}

// Texts of 3-12 tokens from 3..28 without 7; label 1: one 7 inserted at a random place.
std::vector<ClsExample> contains7(int n, uint64_t seed) {
  std::vector<ClsExample> out;
  const std::vector<int32_t> r = testing::random_ints(n * 16, seed, 0, 1 << 20);
  size_t k = 0;
  for (int i = 0; i < n; ++i) {
    ClsExample e;
    const int len = 3 + r[k++] % 10;
    for (int j = 0; j < len; ++j) {
      int32_t t = 3 + r[k++] % 26;
      e.tokens.push_back(t == 7 ? 8 : t);
    }
    e.label = i % 2;
    if (e.label == 1) e.tokens[static_cast<size_t>(r[k++] % len)] = 7;
    out.push_back(e);
  }
  return out;
}

TEST(ClsTask, EvaluateEqualsDirectForwardPerExample) {
  const GptConfig cfg = tiny();
  engine::Stream s = engine::Stream::cpu();
  auto task = ClsTask::create({1, 2, 0}, cfg.vocab_size, 0);  // three classes
  ASSERT_TRUE(task.ok()) << task.status();
  std::vector<ClsExample> ex = contains7(9, 3);
  for (size_t i = 0; i < ex.size(); ++i) ex[i].label = static_cast<int32_t>(i % 3);
  ex[4].tokens = testing::random_ints(20, 8, 3, 29);  // longer than seq_len 12

  auto m = GptModel::create(cfg, {4, 12}, {}, 11);
  auto one = GptModel::create(cfg, {1, 12}, {}, 11);
  ASSERT_TRUE(m.ok() && one.ok());
  const ClsResult r = task->evaluate(**m, {4, 12}, ex, s);

  const int32_t labels[3] = {1, 2, 0};
  int64_t correct = 0;
  double loss = 0.0;
  std::vector<int32_t> pos(12);
  for (int j = 0; j < 12; ++j) pos[j] = j;
  for (const ClsExample& e : ex) {
    const size_t n = std::min<size_t>(e.tokens.size(), 12);
    std::vector<int32_t> in(12, 0), tg(12, -1);
    std::copy(e.tokens.end() - static_cast<std::ptrdiff_t>(n), e.tokens.end(), in.begin());
    (*one)->forward(in.data(), pos.data(), tg.data(), false, 0, s);
    const float* row = (*one)->last_logits().as<float>() + (n - 1) * tiny().padded();
    int best = 0;
    for (int c = 1; c < 3; ++c) best = row[labels[c]] > row[labels[best]] ? c : best;
    correct += best == e.label;
    double z = 0.0;
    for (int v = 0; v < cfg.vocab_size; ++v) z += std::exp(static_cast<double>(row[v]));
    loss += std::log(z) - row[labels[e.label]];
  }
  EXPECT_EQ(r.total, 9);
  EXPECT_EQ(r.correct, correct);
  EXPECT_NEAR(r.loss_sum, loss, 1e-4 * loss);
}

TEST(ClsTask, LearnsContainsSevenAboveChance) {
  engine::Stream s = engine::Stream::cpu();
  auto task = ClsTask::create({1, 2}, 29, 0);
  ASSERT_TRUE(task.ok());
  const std::vector<ClsExample> train = contains7(512, 1), dev = contains7(200, 2);
  auto m = GptModel::create(tiny(), {8, 12}, {}, 5);
  ASSERT_TRUE(m.ok());
  const double before = task->evaluate(**m, {8, 12}, dev, s).accuracy();
  double first = 0.0, last = 0.0;
  for (int step = 1; step <= 200; ++step) {
    // 16 examples per step: two micro-batches of 8, accumulated.
    const size_t at = static_cast<size_t>((step - 1) * 16) % train.size();
    double norm = 0.0;
    last = task->train_step(**m, {8, 12}, absl::MakeConstSpan(train).subspan(at, 16),
                            {3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step}, 1.0, s, &norm);
    ASSERT_TRUE(std::isfinite(norm) && norm > 0.0);
    if (step == 1) first = last;
  }
  const ClsResult after = task->evaluate(**m, {8, 12}, dev, s);
  EXPECT_LT(last, first);
  EXPECT_GT(after.accuracy(), 0.9) << "before training " << before;
}

TEST(ClsTask, Errors) {
  EXPECT_FALSE(ClsTask::create({1}, 29, 0).ok());
  EXPECT_FALSE(ClsTask::create({1, 1}, 29, 0).ok());
  EXPECT_FALSE(ClsTask::create({1, 29}, 29, 0).ok());
  auto task = ClsTask::create({1, 2}, 29, 0);
  ASSERT_TRUE(task.ok());
  std::vector<ClsExample> ex = contains7(4, 3);
  EXPECT_TRUE(task->check(ex).ok());
  ex[2].label = 2;
  auto st = task->check(ex, 10);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("example 12: label 2 outside 0 .. 1"),
            std::string::npos);
  ex[2].label = 0;
  ex[3].tokens.clear();
  EXPECT_FALSE(task->check(ex).ok());
  ex[3].tokens = {30};
  EXPECT_FALSE(task->check(ex).ok());
}

}  // namespace
}  // namespace anvil::model
