// T5 through the shared trainer (model/train/trainer.h) with what GPT has there, on the CPU:
//  - fp16 (f16 activations and compute weights, f32 master weights and gradients) with
//    Megatron's dynamic loss scaling: an overflowing step is skipped (no parameter changes,
//    the lr schedule and AdamW's count stand still), the scale follows an independent
//    LossScaler fed the overflow flags (hysteresis 2, then halving), training then resumes;
//  - fp16 from a scale that never overflows follows the f32 run to f16 rounding;
//  - rampup_batch_size and skip_iterations: each step trains Megatron's batch of its position,
//    a skipped step only consumes its batch;
//  - the seq2seq [eval] windows (model/tasks/seq2seq_eval.h) count every target once.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tasks/seq2seq_eval.h"
#include "model/train/loss_scaler.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

// encoder 8 / decoder 4 tokens, micro-batches of 2; no dropout (the f16/f32 comparison).
constexpr char kT5[] = R"([model]
type = t5
vocab_size = 40
max_seq_len = 16
d_model = 32
n_heads = 2
d_kv = 16
ffn_hidden = 64
n_layers = 2
decoder_layers = 2
hidden_dropout = 0
[data]
path = data/demo/kjv_t5_text_sentence
seq_len = 8
decoder_seq_len = 4
[tokenizer]
type = BertWordPieceLowerCase
vocab_file = data/bert/vocab.txt
vocab_extra_ids = 100
[train]
micro_batch = 2
global_batch = 4
steps = 20
device = cpu
eval_iters = 0
log_interval = 100
[optim]
lr = 1e-2
min_lr = 1e-3
warmup_steps = 2
)";

TrainConfig config(const std::vector<std::string>& overrides) {
  absl::StatusOr<TrainConfig> c = load_train_config_string(kT5, "t5.ini", overrides, nullptr, 1);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : TrainConfig{};
}

// A learnable T5 record: the encoder holds 8 tokens of a pattern from the sample's index, the
// decoder predicts its first 4 (decoder input: [1] + labels[0, 3)); encoder lengths 5..8.
SampleFn samples() {
  return [](int64_t index, int32_t* out) {
    constexpr int64_t kTe = 8, kTd = 4;
    int32_t* dec = out + kTe;
    int32_t* labels = dec + kTd;
    for (int64_t t = 0; t < kTe; ++t) out[t] = static_cast<int32_t>(2 + (index * 3 + t * 5) % 30);
    for (int64_t t = 0; t < kTd; ++t) {
      labels[t] = out[t];
      dec[t] = t == 0 ? 1 : out[t - 1];
    }
    out[kTe + 2 * kTd] = static_cast<int32_t>(5 + index % 4);
  };
}

std::unique_ptr<Trainer> make(const TrainConfig& cfg, DType act) {
  auto t = Trainer::create(cfg, {Device::kCpu, act, DType::kF32}, samples(), {});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// Every parameter's compute copy, concatenated.
std::vector<float> weights(Trainer& t) {
  std::vector<float> out;
  for (const Param& p : t.model().params().all()) {
    const std::vector<float> v = testing::to_host(p.value);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(T5TrainerTest, Fp16OverflowSkipsTheStepAndTheScaleBacksOff) {
  // 2^24 / (2 micro-batches * 4 labels) times d(loss)/d(logit) is far beyond f16's 65504.
  TrainConfig cfg = config({"train.precision=fp16", "train.initial_loss_scale=16777216"});
  std::unique_ptr<Trainer> t = make(cfg, DType::kF16);
  ASSERT_NE(t, nullptr);
  LossScalerConfig sc = cfg.train.precision.dynamic;
  sc.mode = LossScaling::kDynamic;
  LossScaler ref(sc);
  int64_t applied = 0, skips = 0;
  for (int64_t i = 0; i < 24; ++i) {
    const std::vector<float> before = weights(*t);
    const StepStats st = t->step();
    const std::vector<float> after = weights(*t);
    EXPECT_TRUE(std::isfinite(st.loss)) << "step " << st.step;  // the forward is not scaled
    EXPECT_EQ(st.skipped, !std::isfinite(st.grad_norm)) << "step " << st.step;
    ref.update(st.skipped);
    EXPECT_EQ(st.loss_scale, ref.scale()) << "step " << st.step;
    if (st.skipped) {
      EXPECT_EQ(before, after) << "skipped step " << st.step << " changed the weights";
    } else if (st.lr > 0.0) {  // (the first applied step is warmup's lr(0) = 0)
      EXPECT_NE(before, after) << "applied step " << st.step << " left the weights";
    }
    applied += !st.skipped;
    skips += st.skipped;
    if (i == 0) {
      EXPECT_TRUE(st.skipped) << "2^24 did not overflow";
    }
    // Hysteresis 2: the first overflow keeps the scale, the second halves it.
    if (i < 2) {
      EXPECT_EQ(st.loss_scale, i == 0 ? 16777216.0 : 8388608.0);
    }
  }
  EXPECT_GE(skips, 2);
  EXPECT_GE(applied, 5);
  EXPECT_EQ(t->state().optimizer_steps, applied);
  EXPECT_EQ(t->state().lr.samples, applied * cfg.train.global_batch);
}

TEST(T5TrainerTest, Fp16FollowsTheF32Run) {
  // 2^10: no overflow anywhere.
  TrainConfig cfg = config({"train.precision=fp16", "train.initial_loss_scale=1024"});
  std::unique_ptr<Trainer> f16 = make(cfg, DType::kF16);
  std::unique_ptr<Trainer> f32 = make(cfg, DType::kF32);
  ASSERT_NE(f16, nullptr);
  ASSERT_NE(f32, nullptr);
  std::vector<double> a, b;
  for (int i = 0; i < 12; ++i) {
    const StepStats x = f16->step(), y = f32->step();
    ASSERT_FALSE(x.skipped) << "step " << x.step;
    EXPECT_EQ(x.loss_scale, 1024.0);
    EXPECT_EQ(y.loss_scale, 1.0);
    EXPECT_NEAR(x.loss, y.loss, 0.02 + 0.02 * y.loss) << "step " << x.step;
    a.push_back(x.loss);
    b.push_back(y.loss);
  }
  EXPECT_GT(a.front(), 2.5);             // about ln 40 = 3.7 untrained
  EXPECT_LT(a.back(), a.front() - 0.5);  // it learns
}

TEST(T5TrainerTest, RampupAndSkipIterations) {
  // Megatron: batch = start + floor(consumed / (samples / increments)) * increment, capped:
  // 2 increments of 2 over 8 samples (one per 4): consumed 0, 2 -> 2; 4 -> 4; 8 -> 6; 14 on -> 6.
  TrainConfig cfg = config(
      {"train.global_batch=6", "train.rampup_batch_size=2 2 8", "train.skip_iterations=3-3"});
  std::unique_ptr<Trainer> t = make(cfg, DType::kF32);
  ASSERT_NE(t, nullptr);
  const std::vector<int64_t> batches = {2, 2, 4, 6, 6, 6};
  int64_t consumed = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    const StepStats st = t->step();
    EXPECT_EQ(st.global_batch, batches[i]) << "step " << st.step;
    EXPECT_EQ(st.data_only, st.step == 3) << "step " << st.step;
    EXPECT_EQ(std::isfinite(st.loss), st.step != 3) << "step " << st.step;
    consumed += batches[i];
    EXPECT_EQ(t->state().consumed_samples, consumed) << "step " << st.step;
  }
  EXPECT_EQ(t->state().optimizer_steps, 5);
  EXPECT_EQ(t->state().lr.samples, consumed - 4);  // the data-only step's batch is not trained
}

TEST(T5TrainerTest, ConfigAcceptsFp16RampupAndEval) {
  for (const std::vector<std::string>& o : {std::vector<std::string>{"train.precision=fp16"},
                                            {"train.loss_scale=128"},
                                            {"train.rampup_batch_size=2 2 8"},
                                            {"eval.text=t.txt", "eval.text_stride=4"}}) {
    absl::StatusOr<TrainConfig> c = load_train_config_string(kT5, "t5.ini", o, nullptr, 1);
    EXPECT_TRUE(c.ok()) << o[0] << ": " << c.status();
  }
  // The decoder predicts a window's new tokens: the stride must fit it.
  absl::StatusOr<TrainConfig> c = load_train_config_string(
      kT5, "t5.ini", {"eval.text=t.txt", "eval.text_stride=5"}, nullptr, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), ::testing::HasSubstr("text_stride")) << c.status();
  EXPECT_THAT(c.status().message(), ::testing::HasSubstr("decoder_seq_len 4")) << c.status();
}

TEST(Seq2SeqLmWindowsTest, EveryTargetOnceWithItsContextOnTheEncoder) {
  // 10 tokens 100..109, encoder 3, decoder 4, stride 4: windows predict 1-4, 5-8 and 9.
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 10; ++i) tokens.push_back(100 + i);
  absl::StatusOr<Seq2SeqLmWindows> w = Seq2SeqLmWindows::create(10, 3, 4, 4);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->count(), 3);
  constexpr int32_t S = 7, P = 0;  // decoder start, pad
  // enc[3] | dec[4] | labels[4] | length
  const std::vector<std::vector<int32_t>> want = {
      {100, P, P, S, 101, 102, 103, 101, 102, 103, 104, 1},
      {102, 103, 104, S, 105, 106, 107, 105, 106, 107, 108, 3},
      {106, 107, 108, S, P, P, P, 109, -1, -1, -1, 3},
  };
  for (int64_t k = 0; k < 3; ++k) {
    std::vector<int32_t> got(12, -5);
    w->fill(k, tokens, S, P, got.data());
    EXPECT_EQ(got, want[static_cast<size_t>(k)]) << "window " << k;
  }
  EXPECT_FALSE(Seq2SeqLmWindows::create(10, 3, 4, 5).ok());  // stride > decoder
  EXPECT_FALSE(Seq2SeqLmWindows::create(1, 3, 4, 4).ok());   // no target
  absl::StatusOr<Seq2SeqLmWindows> one = Seq2SeqLmWindows::create(2, 3, 4, 4);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->count(), 1);
}

}  // namespace
}  // namespace anvil::model
