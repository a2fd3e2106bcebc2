// [model] vocab_padding_in_loss (Megatron's softmax over the whole padded vocabulary) on the CPU:
// the mean loss of a tiny GPT (vocab 37 padded to 128, tied and untied head) and of a tiny T5
// (v1.0 tied, v1.1 untied) equals an independent f64 log-softmax over all 128 columns of the
// model's own logits (and differs from the real-vocabulary loss); the gradient of a padded
// embedding row is non-zero and equals central finite differences; the init draws the padded
// rows only with the option; a save at step 5 and a resume continue bitwise with the padded rows
// stored ([128, d]); the model record carries the option and padded_vocab only when on, and a
// resume with the other setting is refused naming [model] vocab_padding_in_loss.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "model/stack/gpt.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/t5/t5.h"
#include "model/t5/t5_train_config.h"
#include "model/train/arch_record.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "tests/io/io_test_util.h"
#include "tests/parallel/tiny_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;

constexpr GptRunShape kShape{2, 5};

GptConfig tiny_gpt(bool tied) {
  GptConfig c;
  c.vocab_size = 37;  // padded to 128
  c.max_seq_len = 7;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 2;
  c.tie_embeddings = tied;
  c.vocab_padding_in_loss = true;
  return c;
}

struct Tokens {
  std::vector<int32_t> tokens, positions, targets;
  int64_t counted = 0;
};

Tokens gpt_batch(const GptConfig& cfg) {
  Tokens b;
  const int64_t n = kShape.micro_batch * kShape.seq_len;
  b.tokens = testing::random_ints(n, 7, 0, static_cast<int32_t>(cfg.vocab_size));
  b.targets = testing::random_ints(n, 8, 0, static_cast<int32_t>(cfg.vocab_size));
  b.targets[3] = -1;  // one ignored token
  for (int64_t i = 0; i < n; ++i) {
    b.positions.push_back(static_cast<int32_t>(i % kShape.seq_len));
    b.counted += b.targets[i] >= 0;
  }
  return b;
}

// f64 model with O(1) random values in every row, the padded ones included.
std::unique_ptr<GptModel> gpt_model(const GptConfig& cfg) {
  auto m = GptModel::create(cfg, kShape, {engine::Device::kCpu, DType::kF64, DType::kF64}, 1234);
  EXPECT_TRUE(m.ok()) << m.status();
  uint64_t seed = 99;
  for (Param& p : (*m)->params().all()) {
    const std::vector<float> r = testing::random_uniform(p.numel(), seed++, -0.5f, 0.5f);
    const bool gamma =
        p.name.find("ln_") != std::string::npos && p.name.find(".weight") != std::string::npos;
    double* v = p.value.as<double>();
    for (int64_t i = 0; i < p.numel(); ++i) v[i] = gamma ? 1.0 + 0.5 * r[i] : r[i];
  }
  return std::move(m).value();
}

// Mean over counted rows of logsumexp(row[0, cols)) - row[target], in f64.
double reference_loss(const double* logits, int64_t ld, int64_t cols,
                      const std::vector<int32_t>& targets) {
  double sum = 0.0;
  int64_t counted = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] < 0) continue;
    const double* row = logits + static_cast<int64_t>(r) * ld;
    double mx = row[0];
    for (int64_t c = 1; c < cols; ++c) mx = std::max(mx, row[c]);
    double z = 0.0;
    for (int64_t c = 0; c < cols; ++c) z += std::exp(row[c] - mx);
    sum += mx + std::log(z) - row[targets[r]];
    ++counted;
  }
  return sum / static_cast<double>(counted);
}

double gpt_mean_loss(GptModel& m, const Tokens& b, bool train, engine::Stream& s) {
  m.forward(b.tokens.data(), b.positions.data(), b.targets.data(), train, 0, s);
  return m.loss_sum(s) / static_cast<double>(b.counted);
}

TEST(VocabPaddingLoss, GptLossIsSoftmaxOverPaddedColumns) {
  for (bool tied : {true, false}) {
    const GptConfig cfg = tiny_gpt(tied);
    ASSERT_EQ(cfg.loss_vocab(), 128);
    std::unique_ptr<GptModel> m = gpt_model(cfg);
    engine::Stream s = engine::Stream::cpu();
    const Tokens b = gpt_batch(cfg);
    const double got = gpt_mean_loss(*m, b, /*train=*/false, s);
    const engine::ConstTensorView logits = m->last_logits();
    ASSERT_EQ(logits.shape[1], 128);
    const double* l = static_cast<const double*>(logits.data);
    EXPECT_NEAR(got, reference_loss(l, 128, 128, b.targets), 1e-12) << "tied " << tied;
    // The padded columns matter: the real-vocabulary loss is another number.
    EXPECT_GT(std::abs(got - reference_loss(l, 128, 37, b.targets)), 1e-3) << "tied " << tied;
  }
}

TEST(VocabPaddingLoss, GptPaddedRowGradientMatchesFiniteDifferences) {
  for (bool tied : {true, false}) {
    const GptConfig cfg = tiny_gpt(tied);
    std::unique_ptr<GptModel> m = gpt_model(cfg);
    engine::Stream s = engine::Stream::cpu();
    const Tokens b = gpt_batch(cfg);
    m->zero_grads(s);
    gpt_mean_loss(*m, b, /*train=*/true, s);
    m->backward(1.0f / static_cast<float>(b.counted), s);
    Param* head = m->params().find(tied ? "wte.weight" : "lm_head.weight");
    ASSERT_NE(head, nullptr);
    double* v = head->value.as<double>();
    const double* g = head->grad.as<double>();
    double padded_sq = 0.0;
    for (int64_t i = cfg.vocab_size * cfg.d_model; i < head->numel(); ++i) padded_sq += g[i] * g[i];
    EXPECT_GT(padded_sq, 1e-8) << "tied " << tied;
    // Rows 37 (the first padding row), 90 and 127 (the last), two columns each.
    for (int64_t i : {37 * 8 + 0, 37 * 8 + 5, 90 * 8 + 3, 127 * 8 + 7}) {
      constexpr double kH = 1e-5;
      const double x0 = v[i];
      v[i] = x0 + kH;
      const double lp = gpt_mean_loss(*m, b, true, s);
      v[i] = x0 - kH;
      const double lm = gpt_mean_loss(*m, b, true, s);
      v[i] = x0;
      EXPECT_NEAR(g[i], (lp - lm) / (2 * kH), 1e-8 + 1e-5 * std::abs(g[i]))
          << "tied " << tied << " element " << i;
    }
  }
}

TEST(VocabPaddingLoss, InitDrawsPaddedRowsOnlyWithTheOption) {
  for (bool on : {false, true}) {
    GptConfig cfg = tiny_gpt(true);
    cfg.vocab_padding_in_loss = on;
    auto m = GptModel::create(cfg, kShape, {engine::Device::kCpu, DType::kF32, DType::kF32}, 3);
    ASSERT_TRUE(m.ok()) << m.status();
    const Param* wte = (*m)->params().find("wte.weight");
    const float* v = wte->value.as<float>();
    double padded_sq = 0.0, real_sq = 0.0;
    for (int64_t i = 0; i < wte->numel(); ++i) {
      (i < cfg.vocab_size * cfg.d_model ? real_sq : padded_sq) += double{v[i]} * v[i];
    }
    EXPECT_GT(real_sq, 0.0);
    if (on) {
      // The same N(0, init_std) as the real rows: mean squares within a factor of 2.
      const double real_ms = real_sq / (37.0 * 8), padded_ms = padded_sq / (91.0 * 8);
      EXPECT_GT(padded_ms, 0.5 * real_ms);
      EXPECT_LT(padded_ms, 2.0 * real_ms);
    } else {
      EXPECT_EQ(padded_sq, 0.0);
    }
  }
}

T5Config tiny_t5(T5Version version) {
  T5Config c;
  c.vocab_size = 37;
  c.d_model = 8;
  c.d_kv = 4;
  c.n_heads = 2;
  c.d_ff = 12;
  c.n_encoder_layers = 1;
  c.n_decoder_layers = 1;
  c.num_buckets = 8;
  c.max_distance = 6;
  c.dropout = 0.0f;
  c.version = version;
  c.vocab_padding_in_loss = true;
  return c;
}

TEST(VocabPaddingLoss, T5LossIsSoftmaxOverPaddedColumns) {
  constexpr T5RunShape kT5Shape{2, 7, 5};
  for (T5Version version : {T5Version::kV1_0, T5Version::kV1_1}) {
    const T5Config cfg = tiny_t5(version);
    auto made =
        T5Model::create(cfg, kT5Shape, {engine::Device::kCpu, DType::kF64, DType::kF64}, 1234);
    ASSERT_TRUE(made.ok()) << made.status();
    T5Model& m = **made;
    uint64_t seed = 99;
    for (Param& p : m.params().all()) {
      const std::vector<float> r = testing::random_uniform(p.numel(), seed++, -0.5f, 0.5f);
      const bool norm = p.name.find("layer_norm") != std::string::npos;
      double* v = p.value.as<double>();
      for (int64_t i = 0; i < p.numel(); ++i) v[i] = norm ? 1.0 + 0.5 * r[i] : r[i];
    }
    const int32_t V = 37;
    const std::vector<int32_t> enc = testing::random_ints(2 * 7, 1, 0, V);
    const std::vector<int32_t> dec = testing::random_ints(2 * 5, 2, 0, V);
    std::vector<int32_t> labels = testing::random_ints(2 * 5, 3, 0, V);
    labels[3] = -1;
    const std::vector<int32_t> lengths = {7, 4};
    engine::Stream s = engine::Stream::cpu();
    m.forward({enc.data(), dec.data(), labels.data(), lengths.data()}, /*train=*/false, 0, s);
    const double got = m.loss_sum(s) / 9.0;
    const engine::ConstTensorView logits = m.last_logits();
    ASSERT_EQ(logits.shape[1], 128);
    const double* l = static_cast<const double*>(logits.data);
    EXPECT_NEAR(got, reference_loss(l, 128, 128, labels), 1e-12);
    EXPECT_GT(std::abs(got - reference_loss(l, 128, 37, labels)), 1e-3);
  }
}

// Save at step 5 and resume: bitwise the same losses, the padded rows stored.
TrainConfig tiny_train(bool on) {
  TrainConfig c = testing_parallel::tiny_train_config();
  c.model.vocab_padding_in_loss = on;
  c.train.global_batch = 4;
  c.train.steps = 10;
  c.optim.schedule.warmup_steps = 2;
  c.optim.schedule.decay_steps = 10;
  return c;
}

std::unique_ptr<Trainer> make_trainer(const TrainConfig& cfg) {
  SampleFn samples = [](int64_t index, int32_t* out) {
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 1);
    for (int64_t t = 0; t <= 16; ++t) {
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      out[t] = static_cast<int32_t>(x % 50);
    }
  };
  auto t = Trainer::create(cfg, Precision{}, samples, {});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(VocabPaddingLoss, SaveAndResumeContinueBitwise) {
  io::testing::ScratchDir dir;
  const TrainConfig cfg = tiny_train(true);
  std::unique_ptr<Trainer> whole = make_trainer(cfg);
  ASSERT_NE(whole, nullptr);
  const std::vector<double> want = whole->run().losses;
  ASSERT_EQ(want.size(), 10u);
  // The option changes the losses (the padded rows join the normalizer).
  std::unique_ptr<Trainer> off = make_trainer(tiny_train(false));
  ASSERT_NE(off, nullptr);
  EXPECT_NE(off->run().losses[0], want[0]);

  std::unique_ptr<Trainer> first = make_trainer(cfg);
  ASSERT_NE(first, nullptr);
  absl::Status saved;
  first->set_step_hook([&](const StepStats& st) {
    if (st.step != 5) return false;
    io::CheckpointInfo info;
    info.step = first->steps_done();
    info.state = checkpoint_counters(first->state(), cfg);
    info.model = checkpoint_model_record(cfg);
    saved = io::save_checkpoint(
        dir.path(), info, gpt_checkpoint_slices(gpt_model(first->model()), 0, first->stream()), 2);
    return true;
  });
  first->run();
  ASSERT_TRUE(saved.ok()) << saved;

  absl::StatusOr<io::Checkpoint> c = io::open_newest_complete(dir.path(), -1, [](const auto&) {});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<engine::HostSlice> wte = c->read("master/wte.weight");
  ASSERT_TRUE(wte.ok()) << wte.status();
  EXPECT_EQ(wte->shape, (std::vector<int64_t>{128, 32}));
  double padded_sq = 0.0;
  for (size_t i = 50 * 32; i < wte->data.size(); ++i)
    padded_sq += double{wte->data[i]} * wte->data[i];
  EXPECT_GT(padded_sq, 0.0);
  EXPECT_EQ(c->info().model.at("vocab_padding_in_loss"), "true");
  EXPECT_EQ(c->info().model.at("padded_vocab"), "128");

  // A run without the option is refused by the record, naming the key.
  const absl::Status refused = check_checkpoint_model(c->info().model, tiny_train(false), "CK");
  EXPECT_NE(std::string(refused.message())
                .find("[model] vocab_padding_in_loss: checkpoint true, config false"),
            std::string::npos)
      << refused;

  std::unique_ptr<Trainer> second = make_trainer(cfg);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(check_checkpoint_model(c->info().model, cfg, "CK").ok());
  ASSERT_TRUE(gpt_load_checkpoint(
                  gpt_model(second->model()),
                  [&](const std::string& name) { return c->read(name); }, false, second->stream())
                  .ok());
  absl::StatusOr<TrainerState> st = trainer_state_from(c->info().state, cfg);
  ASSERT_TRUE(st.ok()) << st.status();
  second->restore(*st);
  const std::vector<double> got = second->run().losses;
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(got[i], want[5 + i]) << "step " << 6 + i;
}

TEST(VocabPaddingLoss, RecordOnlyWhenOnAndRefusedWhenChanged) {
  const TrainConfig off = tiny_train(false), on = tiny_train(true);
  const std::map<std::string, std::string> plain = checkpoint_model_record(off);
  EXPECT_EQ(plain.count("vocab_padding_in_loss"), 0u);
  EXPECT_EQ(plain.count("padded_vocab"), 0u);
  const absl::Status s = check_checkpoint_model(plain, on, "CK");
  EXPECT_NE(
      std::string(s.message()).find("[model] vocab_padding_in_loss: checkpoint false, config true"),
      std::string::npos)
      << s;
  // Another padding (another TP's 128 x tp) with the option on: refused by padded_vocab.
  TrainConfig wider = on;
  wider.model.padded_vocab = 256;
  const absl::Status w = check_checkpoint_model(checkpoint_model_record(on), wider, "CK");
  EXPECT_NE(std::string(w.message()).find("[model] padded_vocab: checkpoint 128, config 256"),
            std::string::npos)
      << w;
  // Readers take the option and the padded size from the record.
  GptConfig reader = off.model;
  reader.vocab_multiple = 256;
  ASSERT_TRUE(adopt_vocab_padding(checkpoint_model_record(on), 2, "CK", reader).ok());
  EXPECT_TRUE(reader.vocab_padding_in_loss);
  EXPECT_EQ(reader.loss_vocab(), 128);
  EXPECT_FALSE(adopt_vocab_padding(checkpoint_model_record(on), 3, "CK", reader).ok());
  T5Config t5 = tiny_t5(T5Version::kV1_0);
  TrainConfig t5cfg;
  t5cfg.family = "t5";
  t5_config(t5cfg) = t5;
  EXPECT_EQ(checkpoint_model_record(t5cfg).at("vocab_padding_in_loss"), "true");
}

}  // namespace
}  // namespace anvil::model
