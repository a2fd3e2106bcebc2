// Tiny BERT (type bert) on the CPU in double: the analytic gradient of Megatron's BERT loss
// (masked-LM mean over the masked tokens + binary-head mean over the samples,
// model/stack/mlm_head.cc) against central finite differences, for every coordinate of every
// parameter (token types, the MLM head's dense / LayerNorm / output bias, pooler, binary head,
// post-LN layers, the embedding LayerNorm), for the HF layout (post-LN, GELU-erf, embedding
// LayerNorm), Megatron's (pre-LN with ln_f, tanh GELU), without the binary head, and with dropout
// (fixed masks). Also, independently of the implementation: the binary term equals the closed-form
// cross-entropy of a binary head with zero weights and bias (0, c), weighted as Megatron's
// mean; padding tokens change nothing (the key-padding mask); attention is bidirectional (a
// later token changes an earlier position's loss); backward twice doubles the gradients; the
// plan equals the arenas; the parameter count and names.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "tests/parallel/tiny_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;

constexpr GptRunShape kShape{3, 6};

GptConfig tiny_bert() {
  GptConfig c;
  testing_parallel::use_hf_bert(c);
  c.vocab_size = 37;
  c.max_seq_len = 8;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 2;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, positions, targets, types, lengths, labels;
  int64_t counted = 0;
  GptBatch view() const {
    GptBatch b{tokens.data(), positions.data(), targets.data(), nullptr};
    b.token_types = types.data();
    b.lengths = lengths.data();
    b.binary_labels = labels.data();
    return b;
  }
};

// Samples of lengths 6, 4, 5 (the rest padding, token 0 type 0), types 0 then 1, a few masked
// targets on real tokens only.
Batch make_batch(const GptConfig& cfg, uint64_t seed) {
  const int64_t B = kShape.micro_batch, T = kShape.seq_len;
  Batch b;
  b.lengths = {6, 4, 5};
  b.labels = {1, 0, 1};
  b.tokens = testing::random_ints(B * T, seed, 1, static_cast<int32_t>(cfg.vocab_size));
  const std::vector<int32_t> t = testing::random_ints(B * T, seed + 1, 0, 37);
  for (int64_t s = 0; s < B; ++s) {
    for (int64_t i = 0; i < T; ++i) {
      const int64_t r = s * T + i;
      const bool real = i < b.lengths[s];
      if (!real) b.tokens[r] = 0;
      b.types.push_back(real && i >= b.lengths[s] / 2 ? 1 : 0);
      b.positions.push_back(static_cast<int32_t>(i));
      const bool masked = real && i > 0 && (t[r] % 3 == 0 || i == 1);
      b.targets.push_back(masked ? t[r] : -1);
      b.counted += masked;
    }
  }
  return b;
}

bool is_gamma(const std::string& n) {
  return (n.find("ln_") != std::string::npos || n.find("layernorm") != std::string::npos ||
          n == "wte_ln.weight") &&
         n.find(".weight") != std::string::npos;
}

std::unique_ptr<GptModel> make_model(const GptConfig& cfg) {
  Precision prec{engine::Device::kCpu, DType::kF64, DType::kF64};
  auto m = GptModel::create(cfg, kShape, prec, /*seed=*/1234);
  EXPECT_TRUE(m.ok()) << m.status();
  // O(1) random values so every path carries a sizable, nonlinear signal; gammas near 1.
  uint64_t seed = 77;
  for (Param& p : (*m)->params().all()) {
    std::vector<float> r = testing::random_uniform(p.numel(), seed++, -0.5f, 0.5f);
    double* v = p.value.as<double>();
    for (int64_t i = 0; i < p.numel(); ++i) v[i] = is_gamma(p.name) ? 1.0 + 0.5 * r[i] : r[i];
  }
  return std::move(m).value();
}

// Megatron's BERT loss of the micro-batch: loss_sum / masked tokens (mlm_head.cc).
double bert_loss(GptModel& m, const Batch& b, engine::Stream& s, uint64_t offset = 3) {
  m.forward(b.view(), /*train=*/true, offset, s);
  return m.loss_sum(s) / static_cast<double>(b.counted);
}

void check_gradients(const GptConfig& cfg, int64_t max_coords) {
  std::unique_ptr<GptModel> m = make_model(cfg);
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(cfg, 7);
  ASSERT_GT(b.counted, 2);
  m->zero_grads(s);
  bert_loss(*m, b, s);
  m->backward(1.0f / static_cast<float>(b.counted), s);
  constexpr double kH = 1e-5;
  double grad_sq = 0.0;
  for (Param& p : m->params().all()) {
    const int64_t n = p.numel();
    std::vector<int64_t> coords;
    if (n <= max_coords) {
      for (int64_t i = 0; i < n; ++i) coords.push_back(i);
    } else {
      for (int32_t i : testing::random_ints(max_coords, p.offset, 0, static_cast<int32_t>(n))) {
        coords.push_back(i);
      }
    }
    double* v = p.value.as<double>();
    const double* g = p.grad.as<double>();
    std::vector<double> got, ref;
    double param_sq = 0.0;
    for (int64_t i : coords) {
      const double x0 = v[i];
      v[i] = x0 + kH;
      const double lp = bert_loss(*m, b, s);
      v[i] = x0 - kH;
      const double lm = bert_loss(*m, b, s);
      v[i] = x0;
      ref.push_back((lp - lm) / (2 * kH));
      got.push_back(g[i]);
      param_sq += g[i] * g[i];
    }
    grad_sq += param_sq;
    // Padded vocabulary rows (wte, lm_head.bias) never get a gradient.
    EXPECT_TRUE(testing::tensors_near(got, ref, {1e-8, 1e-5, 1e-9}, p.vocab_rows)) << p.name;
    // Every parameter takes part (token type 1 is used, [CLS] feeds the pooler).
    EXPECT_GT(param_sq, 0.0) << p.name;
  }
  EXPECT_GT(grad_sq, 1e-6);
}

TEST(BertGrad, HfLayoutMatchesFiniteDifferences) { check_gradients(tiny_bert(), 1 << 30); }

TEST(BertGrad, MegatronLayoutMatchesFiniteDifferences) {
  GptConfig c = tiny_bert();
  c.norm_placement = NormPlacement::kPre;
  c.activation = Activation::kGelu;
  c.embed_layernorm = false;
  check_gradients(c, 1 << 30);
}

TEST(BertGrad, NoBinaryHeadMatchesFiniteDifferences) {
  GptConfig c = tiny_bert();
  c.binary_head = false;
  check_gradients(c, 1 << 30);
}

TEST(BertGrad, WithDropoutFixedMasks) {
  GptConfig c = tiny_bert();
  c.hidden_dropout = 0.2f;
  c.attention_dropout = 0.25f;
  check_gradients(c, 6);
}

// With binary_head.weight = 0 and bias (0, c) every sample's binary loss is the cross-entropy
// of logits (0, c): log(1 + e^c) for label 0, log(1 + e^-c) for label 1; the BERT loss moves by
// the mean of that over the samples.
TEST(BertGrad, BinaryTermIsMegatronsMeanCrossEntropy) {
  std::unique_ptr<GptModel> m = make_model(tiny_bert());
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(tiny_bert(), 5);
  Param* w = m->params().find("binary_head.weight");
  Param* bias = m->params().find("binary_head.bias");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(bias, nullptr);
  for (int64_t i = 0; i < w->numel(); ++i) w->value.as<double>()[i] = 0.0;
  bias->value.as<double>()[0] = 0.0;
  bias->value.as<double>()[1] = 0.0;
  const double base = bert_loss(*m, b, s);
  const double c = 1.3;
  bias->value.as<double>()[1] = c;
  double want = 0.0;
  for (int32_t label : b.labels) {
    want += (label == 0 ? std::log1p(std::exp(c)) : std::log1p(std::exp(-c))) - std::log(2.0);
  }
  want /= static_cast<double>(b.labels.size());
  EXPECT_NEAR(bert_loss(*m, b, s) - base, want, 1e-12);
}

TEST(BertGrad, PaddingIsMaskedAndAttentionBidirectional) {
  std::unique_ptr<GptModel> m = make_model(tiny_bert());
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(tiny_bert(), 9);
  const double base = bert_loss(*m, b, s);
  Batch padded = b;  // sample 1 has 4 real tokens: change its padding
  padded.tokens[1 * 6 + 4] = 17;
  padded.tokens[1 * 6 + 5] = 23;
  padded.types[1 * 6 + 5] = 1;
  EXPECT_EQ(bert_loss(*m, padded, s), base);
  Batch later = b;  // the last real token of sample 0 is seen by its position 1 (masked)
  ASSERT_GE(later.targets[1], 0);
  later.tokens[5] = later.tokens[5] == 3 ? 4 : 3;
  EXPECT_NE(bert_loss(*m, later, s), base);
}

TEST(BertGrad, BackwardTwiceDoubles) {
  std::unique_ptr<GptModel> m = make_model(tiny_bert());
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(tiny_bert(), 11);
  m->zero_grads(s);
  bert_loss(*m, b, s, 0);
  m->backward(0.1f, s);
  std::vector<std::vector<double>> once;
  for (const Param& p : m->params().all()) once.push_back(testing::to_host_f64(p.grad));
  m->backward(0.1f, s);
  size_t k = 0;
  for (const Param& p : m->params().all()) {
    std::vector<double> twice = testing::to_host_f64(p.grad), want = once[k++];
    for (double& x : want) x *= 2.0;
    EXPECT_TRUE(testing::tensors_near(twice, want, {1e-15, 1e-12, 1e-20}, true)) << p.name;
  }
}

TEST(BertGrad, PlanParamsAndNames) {
  const GptConfig cfg = tiny_bert();
  Precision prec{engine::Device::kCpu, DType::kF32, DType::kF32};
  auto plan = GptModel::plan(cfg, kShape, prec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto m = GptModel::create(cfg, kShape, prec, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(plan->total_bytes(), (*m)->arena_bytes());
  ParamTable& t = (*m)->params();
  EXPECT_EQ(t.numel(), cfg.total_params());
  EXPECT_EQ(t.find("ln_f.weight"), nullptr);  // post-LN: no final LayerNorm
  EXPECT_EQ(t.find("tokentype_embeddings.weight")->shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(t.find("lm_head.bias")->shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(t.find("binary_head.weight")->shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(t.find("lm_head.layernorm.weight")->value.as<float>()[2], 1.0f);
  EXPECT_EQ(t.find("pooler.dense.bias")->value.as<float>()[2], 0.0f);
  // Megatron's BERT-large: 24 x 1024, 16 heads, vocab 30522 padded to 30592, 512 positions.
  GptConfig large = cfg;
  large.vocab_size = 30522;
  large.max_seq_len = 512;
  large.d_model = 1024;
  large.n_heads = 16;
  large.n_layers = 24;
  // HF BertForPreTraining(bert-large-uncased) has 336,226,108 parameters with vocab 30522;
  // the padding adds 70 rows of the embedding (tied) and 70 output-bias entries.
  EXPECT_EQ(large.total_params(), 336226108 + 70 * 1024 + 70);
}

}  // namespace
}  // namespace anvil::model
