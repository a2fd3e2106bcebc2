// T5 model checks on the CPU in double:
//  - HF's relative-position buckets at known distances (values from an independent Python
//    transcription of T5Attention._relative_position_bucket with f32 rounding);
//  - the analytic gradient of the mean token loss against central finite differences for every
//    coordinate of every parameter of a tiny T5 (both relative tables, self- and
//    cross-attention, FFN, norms, shared embedding / lm_head), v1.0 (ReLU, tied and scaled head)
//    and v1.1 (gated tanh GELU, untied), with encoder padding, and with dropout (fixed masks);
//  - backward twice doubles the gradients; the plan equals the arenas; config validation.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/t5/t5.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;

TEST(T5RelativeBucket, MatchesHuggingFace) {
  const std::vector<int64_t> n = {-200, -128, -100, -64, -20, -9, -8,  -7,  -1,  0,
                                  1,    7,    8,    9,   20,  64, 100, 127, 128, 200};
  const std::vector<int32_t> bi = {15, 15, 15, 14, 10, 8,  8,  7,  1,  0,
                                   17, 23, 24, 24, 26, 30, 31, 31, 31, 31};
  const std::vector<int32_t> uni = {31, 31, 30, 26, 17, 9, 8, 7, 1, 0,
                                    0,  0,  0,  0,  0,  0, 0, 0, 0, 0};
  for (size_t i = 0; i < n.size(); ++i) {
    EXPECT_EQ(t5_relative_bucket(n[i], true, 32, 128), bi[i]) << n[i];
    EXPECT_EQ(t5_relative_bucket(n[i], false, 32, 128), uni[i]) << n[i];
  }
  // The tiny model's tables (8 buckets, max distance 6), distances -7 .. 7.
  const std::vector<int32_t> bi8 = {3, 3, 3, 3, 2, 2, 1, 0, 5, 6, 6, 7, 7, 7, 7};
  const std::vector<int32_t> uni8 = {7, 7, 6, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = -7; k <= 7; ++k) {
    EXPECT_EQ(t5_relative_bucket(k, true, 8, 6), bi8[static_cast<size_t>(k + 7)]) << k;
    EXPECT_EQ(t5_relative_bucket(k, false, 8, 6), uni8[static_cast<size_t>(k + 7)]) << k;
  }
}

T5Config tiny_config(T5Version v) {
  T5Config c;
  c.vocab_size = 37;
  c.d_model = 8;
  c.d_kv = 4;
  c.n_heads = 2;
  c.d_ff = 12;
  c.n_encoder_layers = 2;
  c.n_decoder_layers = 2;
  c.num_buckets = 8;
  c.max_distance = 6;
  c.dropout = 0.0f;
  c.version = v;
  return c;
}

constexpr T5RunShape kShape{2, 7, 5};

struct Batch {
  std::vector<int32_t> enc, dec, labels, lengths;
  int64_t counted = 0;
  T5Batch view(bool with_lengths = true) const {
    return {enc.data(), dec.data(), labels.data(), with_lengths ? lengths.data() : nullptr};
  }
};

Batch make_batch(const T5Config& cfg, uint64_t seed) {
  Batch b;
  const int32_t v = static_cast<int32_t>(cfg.vocab_size);
  b.enc = testing::random_ints(kShape.micro_batch * kShape.enc_len, seed, 0, v);
  b.dec = testing::random_ints(kShape.micro_batch * kShape.dec_len, seed + 1, 0, v);
  b.labels = testing::random_ints(kShape.micro_batch * kShape.dec_len, seed + 2, 0, v);
  b.labels[3] = -1;    // one ignored token
  b.lengths = {7, 4};  // the second sample's last 3 encoder tokens are padding
  for (int32_t t : b.labels) b.counted += t >= 0;
  return b;
}

bool is_norm(const std::string& name) { return name.find("layer_norm") != std::string::npos; }
bool is_rel(const std::string& name) {
  return name.find("relative_attention") != std::string::npos;
}

// Relative-table entries are multiples of 2^-10: the attention op reads the tables in f32, so
// their finite differences use steps that f32 represents exactly.
constexpr double kRelStep = 1.0 / 4096;

std::unique_ptr<T5Model> make_model(const T5Config& cfg, bool save_dropout_mask = true) {
  Precision prec{engine::Device::kCpu, DType::kF64, DType::kF64};
  prec.save_dropout_mask = save_dropout_mask;
  auto m = T5Model::create(cfg, kShape, prec, /*seed=*/1234);
  EXPECT_TRUE(m.ok()) << m.status();
  // O(1) random values instead of the HF init, so every path carries a sizable signal; norm
  // gammas near 1.
  uint64_t seed = 99;
  for (Param& p : (*m)->params().all()) {
    std::vector<float> r = testing::random_uniform(p.numel(), seed++, -0.5f, 0.5f);
    double* v = p.value.as<double>();
    for (int64_t i = 0; i < p.numel(); ++i) {
      v[i] = is_norm(p.name)  ? 1.0 + 0.5 * r[i]
             : is_rel(p.name) ? std::round(r[i] * 2048.0) / 1024.0
                              : r[i];
    }
    if (p.vocab_rows) {  // padded rows stay 0 (no token, no logit)
      for (int64_t i = cfg.vocab_size * cfg.d_model; i < p.numel(); ++i) v[i] = 0.0;
    }
  }
  return std::move(m).value();
}

double mean_loss(T5Model& m, const Batch& b, engine::Stream& s, uint64_t offset) {
  m.forward(b.view(), /*train=*/true, offset, s);
  return m.loss_sum(s) / static_cast<double>(b.counted);
}

void check_gradients(const T5Config& cfg, int64_t max_coords) {
  std::unique_ptr<T5Model> m = make_model(cfg);
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(cfg, 7);
  constexpr uint64_t kOffset = 3;
  m->zero_grads(s);
  mean_loss(*m, b, s, kOffset);
  m->backward(1.0f / static_cast<float>(b.counted), s);
  double grad_sq = 0.0;
  int checked = 0;
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
    const double h = is_rel(p.name) ? kRelStep : 1e-5;
    double* v = p.value.as<double>();
    const double* g = p.grad.as<double>();
    std::vector<double> got, ref;
    double param_sq = 0.0;
    for (int64_t i : coords) {
      const double x0 = v[i];
      v[i] = x0 + h;
      const double lp = mean_loss(*m, b, s, kOffset);
      v[i] = x0 - h;
      const double lm = mean_loss(*m, b, s, kOffset);
      v[i] = x0;
      ref.push_back((lp - lm) / (2 * h));
      got.push_back(g[i]);
      param_sq += g[i] * g[i];
    }
    grad_sq += param_sq;
    // The relative tables' larger step leaves an O(h^2) truncation error.
    const testing::Tol tol =
        is_rel(p.name) ? testing::Tol{1e-6, 1e-4, 1e-8} : testing::Tol{1e-8, 1e-5, 1e-9};
    EXPECT_TRUE(testing::tensors_near(got, ref, tol, p.vocab_rows)) << p.name;
    // Every parameter but the padded vocabulary rows gets a gradient.
    if (!p.vocab_rows) {
      EXPECT_GT(param_sq, 0.0) << p.name;
    }
    ++checked;
  }
  EXPECT_GT(grad_sq, 1e-6);
  EXPECT_GT(checked, 20);
}

TEST(T5Grad, V10AllParametersMatchFiniteDifferences) {
  check_gradients(tiny_config(T5Version::kV1_0), 1 << 30);
}

TEST(T5Grad, V11AllParametersMatchFiniteDifferences) {
  check_gradients(tiny_config(T5Version::kV1_1), 1 << 30);
}

TEST(T5Grad, WithDropoutFixedMasks) {
  T5Config cfg = tiny_config(T5Version::kV1_1);
  cfg.dropout = 0.2f;
  check_gradients(cfg, 6);
}

// [train] attention_dropout_mask: the backward reading the saved keep bits (self and cross
// attention) and the one drawing them again give the same loss and gradients, bit for bit; only
// the saving plan holds attn.keep / cross.keep.
TEST(T5Grad, SavedAndRegeneratedDropoutMasksAgree) {
  T5Config cfg = tiny_config(T5Version::kV1_1);
  cfg.dropout = 0.3f;
  const Batch b = make_batch(cfg, 17);
  engine::Stream s = engine::Stream::cpu();
  std::vector<double> loss;
  std::vector<std::vector<double>> grads;
  for (bool save : {true, false}) {
    std::unique_ptr<T5Model> m = make_model(cfg, save);
    m->zero_grads(s);
    loss.push_back(mean_loss(*m, b, s, /*offset=*/5));
    m->backward(1.0f / static_cast<float>(b.counted), s);
    std::vector<double> g;
    for (const Param& p : m->params().all()) {
      const std::vector<double> x = testing::to_host_f64(p.grad);
      g.insert(g.end(), x.begin(), x.end());
    }
    grads.push_back(g);
    Precision prec{engine::Device::kCpu, DType::kF64, DType::kF64};
    prec.save_dropout_mask = save;
    auto plan = T5Model::plan(cfg, kShape, prec);
    ASSERT_TRUE(plan.ok()) << plan.status();
    int keeps = 0;
    for (const auto& e : plan->entries()) {
      keeps += e.name.find("attn.keep") != std::string::npos ||
               e.name.find("cross.keep") != std::string::npos;
    }
    EXPECT_EQ(keeps > 0, save);
  }
  EXPECT_EQ(loss[0], loss[1]);
  EXPECT_EQ(grads[0], grads[1]);
  double sq = 0;
  for (double x : grads[0]) sq += x * x;
  EXPECT_GT(sq, 0.0);
}

TEST(T5Grad, PaddingIsIgnoredByTheLoss) {
  // Changing padded encoder tokens (past enc_lengths) leaves the loss unchanged.
  const T5Config cfg = tiny_config(T5Version::kV1_0);
  std::unique_ptr<T5Model> m = make_model(cfg);
  engine::Stream s = engine::Stream::cpu();
  Batch b = make_batch(cfg, 21);
  const double before = mean_loss(*m, b, s, 0);
  for (int64_t t = 4; t < kShape.enc_len; ++t) {
    b.enc[static_cast<size_t>(kShape.enc_len + t)] = (b.enc[kShape.enc_len + t] + 5) % 37;
  }
  EXPECT_EQ(mean_loss(*m, b, s, 0), before);
  b.enc[static_cast<size_t>(kShape.enc_len + 1)] = (b.enc[kShape.enc_len + 1] + 5) % 37;
  EXPECT_NE(mean_loss(*m, b, s, 0), before);  // a real token does change it
}

TEST(T5Grad, BackwardTwiceDoubles) {
  const T5Config cfg = tiny_config(T5Version::kV1_1);
  std::unique_ptr<T5Model> m = make_model(cfg);
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(cfg, 11);
  m->zero_grads(s);
  mean_loss(*m, b, s, 0);
  m->backward(0.1f, s);
  std::vector<std::vector<double>> once;
  for (const Param& p : m->params().all()) once.push_back(testing::to_host_f64(p.grad));
  m->backward(0.1f, s);
  size_t k = 0;
  for (const Param& p : m->params().all()) {
    std::vector<double> twice = testing::to_host_f64(p.grad), want = once[k++];
    for (double& x : want) x *= 2.0;
    EXPECT_TRUE(testing::tensors_near(twice, want, {1e-15, 1e-7, 1e-14}, true)) << p.name;
  }
}

TEST(T5Grad, PlanEqualsArenasAndTableLayout) {
  const T5Config cfg = tiny_config(T5Version::kV1_1);
  const Precision prec{engine::Device::kCpu, DType::kF32, DType::kF32};
  auto plan = T5Model::plan(cfg, kShape, prec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto m = T5Model::create(cfg, kShape, prec, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const std::string& cat : plan->categories()) {
    EXPECT_EQ(plan->category_bytes(cat), (*m)->arena_bytes(cat)) << cat;
  }
  ParamTable& t = (*m)->params();
  const Param* qkv = t.find("encoder.block.1.layer.0.SelfAttention.qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{24, 8}));
  EXPECT_EQ(t.find("decoder.block.0.layer.2.DenseReluDense.wi.weight")->shape,
            (std::vector<int64_t>{24, 8}));
  EXPECT_EQ(t.find("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")->shape,
            (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(t.find("encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"),
            nullptr);                            // layer 0's table is shared
  EXPECT_NE(t.find("lm_head.weight"), nullptr);  // v1.1: untied
  // HF init: norms 1; shared N(0, 1); wo N(0, d_ff^-1/2).
  EXPECT_EQ(t.find("encoder.final_layer_norm.weight")->value.as<float>()[2], 1.0f);
  auto rms = [](const Param& p, int64_t n) {
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += p.value.as<float>()[i] * p.value.as<float>()[i];
    return std::sqrt(sq / static_cast<double>(n));
  };
  EXPECT_NEAR(rms(*t.find("shared.weight"), 37 * 8), 1.0, 0.15);
  EXPECT_EQ(t.find("shared.weight")->value.as<float>()[37 * 8 + 3], 0.0f);  // padding row
  const Param& q = *t.find("encoder.block.0.layer.0.SelfAttention.qkv.weight");
  EXPECT_NEAR(rms(q, 8 * 8), 1.0 / std::sqrt(32.0), 0.07);  // q rows: (d d_kv)^-1/2
}

TEST(T5Grad, ConfigValidation) {
  T5Config c = tiny_config(T5Version::kV1_0);
  EXPECT_TRUE(c.validate().ok());
  c.num_buckets = 7;
  EXPECT_FALSE(c.validate().ok());
  c = tiny_config(T5Version::kV1_0);
  c.d_kv = 0;
  const absl::Status st = c.validate();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("d_kv"), std::string::npos) << st;
  c = tiny_config(T5Version::kV1_0);
  c.dropout = 1.0f;
  EXPECT_FALSE(c.validate().ok());
  // On CUDA the attention is flash attention only: d_kv must be 64 or 128.
  const Precision gpu{engine::Device::kCuda, DType::kBF16, DType::kF32};
  EXPECT_FALSE(T5Model::plan(tiny_config(T5Version::kV1_0), kShape, gpu).ok());
}

}  // namespace
}  // namespace anvil::model
