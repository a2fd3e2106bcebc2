// A small T5 (v1.0 and v1.1, f32 on the CPU) memorizes one batch: 60 AdamW steps on a fixed
// batch with padding take the mean token loss from above 3 (v1.0: about ln(vocab)) to below 0.5
// (a model that does not learn, or learns only the label frequencies, stays far above).
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/t5/t5.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;

class T5Overfit : public ::testing::TestWithParam<T5Version> {};

TEST_P(T5Overfit, MemorizesOneBatch) {
  T5Config cfg;
  cfg.vocab_size = 50;
  cfg.d_model = 32;
  cfg.d_kv = 8;
  cfg.n_heads = 4;
  cfg.d_ff = 64;
  cfg.n_encoder_layers = 2;
  cfg.n_decoder_layers = 2;
  cfg.dropout = 0.0f;
  cfg.version = GetParam();
  const T5RunShape shape{4, 12, 8};
  auto m = T5Model::create(cfg, shape, {engine::Device::kCpu, DType::kF32, DType::kF32}, 5);
  ASSERT_TRUE(m.ok()) << m.status();
  engine::Stream s = engine::Stream::cpu();
  const std::vector<int32_t> enc = testing::random_ints(4 * 12, 1, 0, 50);
  const std::vector<int32_t> dec = testing::random_ints(4 * 8, 2, 0, 50);
  std::vector<int32_t> labels = testing::random_ints(4 * 8, 3, 0, 50);
  labels[7] = labels[15] = -1;
  const std::vector<int32_t> lengths = {12, 9, 5, 12};
  const double counted = 4 * 8 - 2;
  std::vector<double> losses;
  for (int step = 1; step <= 60; ++step) {
    (*m)->zero_grads(s);
    (*m)->forward({enc.data(), dec.data(), labels.data(), lengths.data()}, true, step, s);
    losses.push_back((*m)->loss_sum(s) / counted);
    (*m)->backward(static_cast<float>(1.0 / counted), s);
    (*m)->optimizer_step({3e-3f, 0.9f, 0.98f, 1e-8f, 0.0f, 1.0f, step}, s);
  }
  // v1.0 scales the tied head's input by d^-1/2: logits of unit scale, a loss near ln(vocab).
  // v1.1's untied head starts N(0, 1) (HF's init), so its first logits are large.
  if (cfg.tied()) {
    EXPECT_NEAR(losses.front(), std::log(50.0), 1.5);
  }
  EXPECT_GT(losses.front(), 3.0);
  EXPECT_LT(losses.back(), 0.5) << "first " << losses.front();
}

INSTANTIATE_TEST_SUITE_P(Versions, T5Overfit,
                         ::testing::Values(T5Version::kV1_0, T5Version::kV1_1));

}  // namespace
}  // namespace anvil::model
