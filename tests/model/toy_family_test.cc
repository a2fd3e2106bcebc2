// The toy model family of tests/model/toy_family.h (issue 22 item 7: a family registered from
// tests/, built from model/blocks/): looked up in the process's family registry by its [model]
// type "toy" and trained on the CPU through the shared trainer (model/train/trainer.h) with the
// registry's create and plan: its loss falls on a learnable task (is the sample's majority of
// tokens in the lower half of the vocabulary?), and the gradient the trainer's step applies
// matches a central difference of the toy's loss. tests/parallel/toy_family_parallel_test.cc
// trains it under mpirun with TP and DP.
#include "tests/model/toy_family.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "model/model.h"
#include "model/train/family.h"
#include "model/train/trainer.h"

namespace anvil::model {
namespace {

using toy::toy_config;
using toy::toy_samples;
using toy::ToyModel;

TEST(ToyFamilyTest, TrainsThroughTheSharedTrainer) {
  const TrainConfig cfg = toy_config(150);
  ASSERT_EQ(family_of(cfg).type, "toy");
  absl::StatusOr<Precision> prec = resolve_precision("cpu");
  ASSERT_TRUE(prec.ok()) << prec.status();
  absl::StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::create(cfg, *prec, toy_samples(cfg.data.seq_len), nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  double first = 0.0, last = 0.0;
  for (int64_t s = 0; s < cfg.train.steps; ++s) {
    const StepStats st = (*t)->step();
    ASSERT_TRUE(std::isfinite(st.loss)) << "step " << st.step;
    ASSERT_GT(st.grad_norm, 0.0) << "step " << st.step;
    if (s < 10) first += st.loss / 10;
    if (s >= cfg.train.steps - 10) last += st.loss / 10;
  }
  EXPECT_NEAR(first, std::log(2.0), 0.2);
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

TEST(ToyFamilyTest, StepGradientMatchesCentralDifferences) {
  // One step's gradient (the trainer's mean over the global batch, zero learning rate) against
  // central differences of the same mean loss, in a few coordinates of every parameter.
  TrainConfig cfg = toy_config(1);
  cfg.optim.schedule.lr = cfg.optim.schedule.min_lr = 0.0;
  absl::StatusOr<Precision> prec = resolve_precision("cpu");
  ASSERT_TRUE(prec.ok());
  absl::StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::create(cfg, *prec, toy_samples(cfg.data.seq_len), nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  auto& toy = dynamic_cast<ToyModel<float>&>((*t)->model());
  const std::vector<float> before = toy.values();
  (*t)->step();
  const std::vector<float> grad = toy.grads();
  ASSERT_EQ(toy.values(), before);  // lr 0: the step changed nothing
  engine::Stream s = engine::Stream::cpu();
  const int64_t G = cfg.train.global_batch, B = cfg.train.micro_batch;
  auto mean_loss = [&] {
    double sum = 0.0;
    for (int64_t m = 0; m < G / B; ++m) {
      toy.load_micro_batch(toy_samples(cfg.data.seq_len), m * B, m);
      toy.forward(0, 0, m, false, 0, s);
      sum += toy.loss_sum(0, s) / static_cast<double>(G);
    }
    return sum;
  };
  int checked = 0;
  for (const Param& p : toy.params().all()) {
    for (int64_t i = 0; i < p.numel(); i += std::max<int64_t>(p.numel() / 5, 1)) {
      const size_t k = static_cast<size_t>(p.offset + i);
      const float w = toy.values()[k], eps = 1e-2f;
      toy.values()[k] = w + eps;
      const double up = mean_loss();
      toy.values()[k] = w - eps;
      const double down = mean_loss();
      toy.values()[k] = w;
      const double fd = (up - down) / (2.0 * eps);
      EXPECT_NEAR(grad[k], fd, 2e-3 + 2e-2 * std::fabs(fd)) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace anvil::model
