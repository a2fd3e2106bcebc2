// T5 on the GPU (bf16 or f16 activations, f32 master weights and gradients, flash attention with
// relative-position buckets) against the CPU reference in f32, from the same seed (identical
// initial weights), v1.0 and v1.1, with encoder padding: the initial loss within 1% relative,
// the gradient norm within 5%, every parameter's gradient in the same direction (cosine > 0.99;
// norms > 0, all finite), and 20 AdamW steps on a fixed batch lower the loss on both devices by
// a similar amount; with dropout, v1.0's one-pass FFN dropout equals the two ops bitwise. f16 runs
// its backward on the loss times a static scale of 1024 (as fp16 training's loss scaler does; the
// gradients and their norm are divided by it), so small activation gradients do not flush to zero.
// The plan equals the arenas. Skips without a GPU.
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

using engine::Device;
using engine::DType;

T5Config small_config(T5Version v) {
  T5Config c;
  c.vocab_size = 100;  // padded to 128
  c.d_model = 128;
  c.d_kv = 64;  // flash attention's head_dim
  c.n_heads = 2;
  c.d_ff = 256;
  c.n_encoder_layers = 2;
  c.n_decoder_layers = 2;
  c.dropout = 0.0f;
  c.version = v;
  return c;
}

constexpr T5RunShape kShape{4, 32, 16};

struct Batch {
  std::vector<int32_t> enc, dec, labels, lengths;
  double counted = 0;
  T5Batch view() const { return {enc.data(), dec.data(), labels.data(), lengths.data()}; }
};

Batch make_batch() {
  Batch b;
  b.enc = testing::random_ints(kShape.micro_batch * kShape.enc_len, 17, 0, 100);
  b.dec = testing::random_ints(kShape.micro_batch * kShape.dec_len, 18, 0, 100);
  b.labels = testing::random_ints(kShape.micro_batch * kShape.dec_len, 19, 0, 100);
  b.labels[5] = b.labels[40] = -1;
  b.lengths = {32, 20, 7, 31};
  for (int32_t t : b.labels) b.counted += t >= 0;
  return b;
}

struct DeviceRun {
  std::unique_ptr<engine::Stream> stream;
  std::unique_ptr<T5Model> model;
};

DeviceRun make_run(Device dev, DType act, const T5Config& cfg, bool one_pass_dropout = false) {
  DeviceRun r;
  if (dev == Device::kCuda) {
    auto s = engine::Stream::cuda(0);
    EXPECT_TRUE(s.ok()) << s.status();
    r.stream = std::make_unique<engine::Stream>(std::move(s).value());
  } else {
    r.stream = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  Precision prec{dev, act, DType::kF32};
  prec.fused_activation_dropout = one_pass_dropout;
  auto m = T5Model::create(cfg, kShape, prec, /*seed=*/7);
  EXPECT_TRUE(m.ok()) << m.status();
  r.model = std::move(m).value();
  return r;
}

// The backward runs on the loss times `scale` (the gradients are scale times the loss's).
double step_grads(DeviceRun& r, const Batch& b, double scale = 1.0) {
  r.model->zero_grads(*r.stream);
  r.model->forward(b.view(), true, 0, *r.stream);
  const double loss = r.model->loss_sum(*r.stream) / b.counted;
  r.model->backward(static_cast<float>(scale / b.counted), *r.stream);
  return loss;
}

std::vector<double> train(DeviceRun& r, const Batch& b, double scale = 1.0) {
  std::vector<double> losses;
  const float unscale = static_cast<float>(1.0 / scale);
  for (int step = 1; step <= 20; ++step) {
    losses.push_back(step_grads(r, b, scale));
    r.model->optimizer_step({1e-3f, 0.9f, 0.98f, 1e-8f, 0.0f, unscale, step}, *r.stream);
  }
  return losses;
}

class T5Gpu : public ::testing::TestWithParam<T5Version> {};

// The GPU run in `act`, its backward on the loss times `scale`, against the CPU's f32 run.
void matches_cpu_and_trains(T5Version version, DType act, double scale) {
  const T5Config cfg = small_config(version);
  const Batch b = make_batch();
  DeviceRun cpu = make_run(Device::kCpu, DType::kF32, cfg);
  DeviceRun gpu = make_run(Device::kCuda, act, cfg);
  const double loss_cpu = step_grads(cpu, b);
  const double loss_gpu = step_grads(gpu, b, scale);
  ASSERT_TRUE(std::isfinite(loss_gpu));
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-2 * loss_cpu);
  const double norm_cpu = cpu.model->grad_norm(*cpu.stream);
  const double norm_gpu = gpu.model->grad_norm(*gpu.stream) / scale;
  EXPECT_GT(norm_cpu, 0.0);
  EXPECT_NEAR(norm_gpu, norm_cpu, 0.05 * norm_cpu);
  const std::vector<Param>& pc = cpu.model->params().all();
  const std::vector<Param>& pg = gpu.model->params().all();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    const std::vector<float> c = testing::to_host(pc[i].grad), g = testing::to_host(pg[i].grad);
    double dot = 0, cc = 0, gg = 0;
    for (size_t k = 0; k < c.size(); ++k) {
      ASSERT_TRUE(std::isfinite(g[k])) << pc[i].name << "[" << k << "]";
      dot += static_cast<double>(c[k]) * g[k];
      cc += static_cast<double>(c[k]) * c[k];
      gg += static_cast<double>(g[k]) * g[k];
    }
    ASSERT_GT(cc, 0.0) << pc[i].name;
    EXPECT_GT(dot / std::sqrt(cc * gg), 0.99) << pc[i].name;
  }
  const std::vector<double> lc = train(cpu, b);
  const std::vector<double> lg = train(gpu, b, scale);
  EXPECT_LT(lc.back(), lc.front() - 0.5);
  EXPECT_LT(lg.back(), lg.front() - 0.5);
  // Both memorize the batch (v1.1 reaches ~1e-3 nats in 20 steps): 10% of the CPU's final loss,
  // or 0.01 nats where that is near zero and 16-bit rounding dominates.
  EXPECT_NEAR(lg.back(), lc.back(), 0.1 * lc.back() + 0.01);
}

TEST_P(T5Gpu, Bf16MatchesCpuAndTrains) {
  ANVIL_SKIP_WITHOUT_GPU();
  matches_cpu_and_trains(GetParam(), DType::kBF16, 1.0);
}

TEST_P(T5Gpu, Fp16MatchesCpuAndTrains) {
  ANVIL_SKIP_WITHOUT_GPU();
  matches_cpu_and_trains(GetParam(), DType::kF16, 1024.0);
}

TEST_P(T5Gpu, PlanEqualsArenas) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (DType act : {DType::kBF16, DType::kF16}) {
    const Precision prec{Device::kCuda, act, DType::kF32};
    auto plan = T5Model::plan(small_config(GetParam()), kShape, prec);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto m = T5Model::create(small_config(GetParam()), kShape, prec, 1);
    ASSERT_TRUE(m.ok()) << m.status();
    for (const std::string& cat : plan->categories()) {
      EXPECT_EQ(plan->category_bytes(cat), (*m)->arena_bytes(cat)) << cat;
    }
  }
}

// v1.0's FFN relu and its dropout in one kernel each way (Precision::fused_activation_dropout)
// against the two ops: the same bits, so the loss and every gradient are bitwise equal. A second
// two-pass run first shows the step itself is bitwise reproducible.
TEST(T5GpuDropout, OnePassActivationDropoutEqualsTwoPasses) {
  ANVIL_SKIP_WITHOUT_GPU();
  T5Config cfg = small_config(T5Version::kV1_0);
  cfg.dropout = 0.1f;
  const Batch b = make_batch();
  DeviceRun two = make_run(Device::kCuda, DType::kBF16, cfg);
  DeviceRun again = make_run(Device::kCuda, DType::kBF16, cfg);
  DeviceRun one = make_run(Device::kCuda, DType::kBF16, cfg, /*one_pass_dropout=*/true);
  const double loss_two = step_grads(two, b), loss_again = step_grads(again, b);
  const double loss_one = step_grads(one, b);
  ASSERT_TRUE(std::isfinite(loss_two));
  ASSERT_EQ(loss_again, loss_two) << "the two-pass step is not reproducible";
  EXPECT_EQ(loss_one, loss_two);
  const std::vector<Param>& pt = two.model->params().all();
  const std::vector<Param>& pa = again.model->params().all();
  const std::vector<Param>& po = one.model->params().all();
  double norm = 0;
  for (size_t i = 0; i < pt.size(); ++i) {
    const std::vector<float> t = testing::to_host(pt[i].grad);
    ASSERT_EQ(testing::to_host(pa[i].grad), t) << pt[i].name << ": not reproducible";
    EXPECT_EQ(testing::to_host(po[i].grad), t) << pt[i].name;
    for (float x : t) norm += static_cast<double>(x) * x;
  }
  EXPECT_GT(norm, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Versions, T5Gpu, ::testing::Values(T5Version::kV1_0, T5Version::kV1_1));

}  // namespace
}  // namespace anvil::model
