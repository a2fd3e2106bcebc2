// A tiny BERT (post-LN, GELU-erf, MLM + binary head) in f32 on the CPU, trained through the
// Trainer on one global batch of 4 BERT sample records repeated: the loss (Megatron's masked-LM
// mean + binary mean, model/stack/mlm_head.cc) starts near ln(vocab) + ln 2 (tiny init weights:
// near-uniform predictions) and falls below 0.05 -- the record decoding, the heads, their
// gradients and AdamW fit together. The evaluation loss of the same samples agrees with the
// last training loss (no dropout).
#include <cmath>
#include <cstdint>
#include <memory>

#include "gtest/gtest.h"
#include "model/train/trainer.h"
#include "tests/parallel/tiny_training.h"

namespace anvil::model {
namespace {

TEST(BertOverfit, MemorizesOneBatchThroughTheTrainer) {
  TrainConfig c = testing_parallel::tiny_train_config();
  c.model.vocab_size = 37;
  testing_parallel::use_hf_bert(c);
  c.model.hidden_dropout = c.model.attention_dropout = 0.0f;
  c.model.ln_eps = 1e-12f;
  c.train.micro_batch = 2;
  c.train.global_batch = 4;
  c.train.steps = 200;
  c.train.eval_iters = 1;
  c.optim.schedule.lr = 3e-3;
  c.optim.schedule.min_lr = 3e-3;
  c.optim.schedule.decay_steps = 200;
  c.optim.weight_decay = 0.0;
  const SampleFn records = testing_parallel::hashed_bert_samples(c.data.seq_len, 37);
  const SampleFn same_batch = [records](int64_t i, int32_t* out) { records(i % 4, out); };
  auto t = Trainer::create(c, Precision{}, same_batch, same_batch);
  ASSERT_TRUE(t.ok()) << t.status();
  double first = 0.0, loss = 0.0;
  int steps = 0;
  for (; steps < c.train.steps; ++steps) {
    const StepStats st = (*t)->step();
    ASSERT_TRUE(std::isfinite(st.loss) && !st.skipped) << "step " << steps;
    loss = st.loss;
    if (steps == 0) first = loss;
    if (loss < 0.05) break;
  }
  EXPECT_NEAR(first, std::log(37.0) + std::log(2.0), 0.15);
  EXPECT_LT(loss, 0.05) << "after " << steps << " steps";
  // The evaluation reads samples 0..3 (one global batch): the trained batch, no dropout, and
  // the parameters after one more update than the last training loss saw.
  EXPECT_LT((*t)->evaluate(), 0.05);
}

}  // namespace
}  // namespace anvil::model
