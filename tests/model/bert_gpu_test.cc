// BERT (type bert: post-LN, GELU-erf, token types, key-padding mask, MLM + binary heads) on the
// GPU in bf16 (flash attention: 2 heads of 64) against the CPU f32 twin from the same seed:
// the initial loss (masked LM + binary, model/stack/mlm_head.cc) within 1% relative, the gradient
// norm within 5%, every parameter's gradient within 10% relative L2 of the CPU's (bf16
// activations), 20 AdamW steps on a fixed batch lower the loss on both by a similar amount;
// f32 activations on CUDA (the unfused, causal-only attention) are refused with a clear error.
// The GPU gradients are NaN-poisoned before the step (zero_grads must overwrite them) and NaN
// never passes the comparisons. Skips without a GPU.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/memory.h"
#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "tests/parallel/tiny_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

GptConfig bert_config() {
  GptConfig c;
  testing_parallel::use_hf_bert(c);
  c.vocab_size = 100;  // padded to 128
  c.max_seq_len = 64;
  c.d_model = 128;
  c.n_heads = 2;
  c.n_layers = 2;
  c.ln_eps = 1e-12f;
  return c;
}

constexpr GptRunShape kShape{4, 32};

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

Batch make_batch() {
  const int64_t B = kShape.micro_batch, T = kShape.seq_len;
  Batch b;
  b.lengths = {32, 20, 27, 9};
  b.labels = {0, 1, 1, 0};
  b.tokens = testing::random_ints(B * T, 17, 1, 100);
  const std::vector<int32_t> t = testing::random_ints(B * T, 18, 0, 100);
  for (int64_t s = 0; s < B; ++s) {
    for (int64_t i = 0; i < T; ++i) {
      const int64_t r = s * T + i;
      const bool real = i < b.lengths[s];
      if (!real) b.tokens[r] = 0;
      b.types.push_back(real && i >= b.lengths[s] / 2 ? 1 : 0);
      b.positions.push_back(static_cast<int32_t>(i));
      const bool masked = real && i > 0 && t[r] % 4 == 0;
      b.targets.push_back(masked ? t[r] : -1);
      b.counted += masked;
    }
  }
  return b;
}

struct DeviceRun {
  std::unique_ptr<engine::Stream> stream;
  std::unique_ptr<GptModel> model;
};

DeviceRun make_run(Device dev, DType act) {
  DeviceRun r;
  if (dev == Device::kCuda) {
    auto s = engine::Stream::cuda(0);
    EXPECT_TRUE(s.ok()) << s.status();
    r.stream = std::make_unique<engine::Stream>(std::move(s).value());
  } else {
    r.stream = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  auto m = GptModel::create(bert_config(), kShape, {dev, act, DType::kF32}, /*seed=*/7);
  EXPECT_TRUE(m.ok()) << m.status();
  r.model = std::move(m).value();
  return r;
}

// Forward (train) + backward of Megatron's BERT loss; returns the loss.
double step_grads(DeviceRun& r, const Batch& b) {
  r.model->zero_grads(*r.stream);
  r.model->forward(b.view(), true, 0, *r.stream);
  const double loss = r.model->loss_sum(*r.stream) / static_cast<double>(b.counted);
  r.model->backward(1.0f / static_cast<float>(b.counted), *r.stream);
  return loss;
}

TEST(BertGpu, Bf16MatchesCpuAndTrains) {
  ANVIL_SKIP_WITHOUT_GPU();
  const Batch b = make_batch();
  DeviceRun cpu = make_run(Device::kCpu, DType::kF32);
  DeviceRun gpu = make_run(Device::kCuda, DType::kBF16);
  engine::poison(gpu.model->flat_buffers().grad, *gpu.stream);
  const double loss_cpu = step_grads(cpu, b);
  const double loss_gpu = step_grads(gpu, b);
  ASSERT_TRUE(std::isfinite(loss_gpu));
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-2 * loss_cpu);
  const double norm_cpu = cpu.model->grad_norm(*cpu.stream);
  const double norm_gpu = gpu.model->grad_norm(*gpu.stream);
  EXPECT_GT(norm_cpu, 0.0);
  EXPECT_NEAR(norm_gpu, norm_cpu, 0.05 * norm_cpu);
  const std::vector<Param>& pc = cpu.model->params().all();
  const std::vector<Param>& pg = gpu.model->params().all();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    const std::vector<double> c = testing::to_host_f64(pc[i].grad);
    const std::vector<double> g = testing::to_host_f64(pg[i].grad);
    double diff = 0.0, ref = 0.0;
    for (size_t k = 0; k < c.size(); ++k) {
      diff += (g[k] - c[k]) * (g[k] - c[k]);  // NaN makes diff NaN: the check fails
      ref += c[k] * c[k];
    }
    EXPECT_GT(ref, 0.0) << pc[i].name;
    EXPECT_LE(std::sqrt(diff), 0.1 * std::sqrt(ref)) << pc[i].name;
  }
  std::vector<double> lc, lg;
  for (int step = 1; step <= 20; ++step) {
    lc.push_back(step_grads(cpu, b));
    lg.push_back(step_grads(gpu, b));
    cpu.model->optimizer_step({3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step}, *cpu.stream);
    gpu.model->optimizer_step({3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step}, *gpu.stream);
  }
  EXPECT_LT(lc.back(), lc.front() - 0.5);
  EXPECT_LT(lg.back(), lg.front() - 0.5);
  EXPECT_NEAR(lg.back(), lc.back(), 0.1 * lc.back());
}

TEST(BertGpu, F32ActivationsAreRefused) {
  ANVIL_SKIP_WITHOUT_GPU();
  auto plan = GptModel::plan(bert_config(), kShape, {Device::kCuda, DType::kF32, DType::kF32});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(std::string(plan.status().message()).find("needs flash attention"), std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace anvil::model
