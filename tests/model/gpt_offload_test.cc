// GptModel with optimizer offload (GptShard::offload_optimizer, parallel/offload_optimizer.h)
// against the same model without it, from the same seed, over 3 AdamW steps on a fixed batch:
//   CPU (f32): the losses, compute copy, master weights and AdamW moments are bitwise equal (the
//     host AdamW is bitwise the CPU twin's);
//   CUDA (bf16 compute copy, host master): the losses and the master weights equal the device
//     AdamW's to f32 rounding (the host step vs the device kernel), the compute copies to bf16
//     rounding. Skips without a GPU.
// Both check that the offloaded model holds master / m / v in host memory and plans no "master"
// or "optimizer" device category, and that ZeRO-3 with offload is refused.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

GptConfig small_config() {
  GptConfig c;
  c.vocab_size = 100;  // padded to 128
  c.max_seq_len = 64;
  c.d_model = 64;
  c.n_heads = 4;
  c.n_layers = 2;
  return c;
}

constexpr GptRunShape kShape{2, 32};
constexpr int64_t kRows = kShape.micro_batch * kShape.seq_len;

struct ModelRun {
  std::unique_ptr<engine::Stream> stream;
  std::unique_ptr<GptModel> model;
  std::vector<double> losses;
};

ModelRun make_run(Device dev, DType act, bool offload) {
  ModelRun r;
  if (dev == Device::kCuda) {
    auto s = engine::Stream::cuda(0);
    EXPECT_TRUE(s.ok()) << s.status();
    r.stream = std::make_unique<engine::Stream>(std::move(s).value());
  } else {
    r.stream = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  GptShard shard;
  shard.offload_optimizer = offload;
  shard.offload_threads = 2;
  auto m = GptModel::create(small_config(), kShape, {dev, act, DType::kF32}, /*seed=*/7, shard);
  EXPECT_TRUE(m.ok()) << m.status();
  r.model = std::move(m).value();
  return r;
}

// Steps first .. last (AdamW step numbers) on the fixed batch.
void train(ModelRun& r, int first, int last) {
  std::vector<int32_t> seq = testing::random_ints(kRows + 1, 17, 0, 100);
  std::vector<int32_t> tokens(seq.begin(), seq.end() - 1), targets(seq.begin() + 1, seq.end());
  std::vector<int32_t> positions;
  for (int64_t i = 0; i < kRows; ++i) positions.push_back(static_cast<int32_t>(i % kShape.seq_len));
  for (int s = first; s <= last; ++s) {
    r.model->zero_grads(*r.stream);
    r.model->forward(tokens.data(), positions.data(), targets.data(), true, 0, *r.stream);
    r.losses.push_back(r.model->loss_sum(*r.stream) / kRows);
    r.model->backward(1.0f / kRows, *r.stream);
    r.model->optimizer_step({3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, s}, *r.stream);
  }
  r.stream->synchronize();
}

void expect_offloaded(ModelRun& r, Device dev, DType act) {
  const FlatBuffers f = r.model->flat_buffers();
  EXPECT_EQ(f.master.device, Device::kCpu);
  EXPECT_EQ(f.m.device, Device::kCpu);
  EXPECT_EQ(f.v.device, Device::kCpu);
  EXPECT_EQ(f.value.device, dev);
  EXPECT_NE(f.master.data, f.value.data);
  GptShard shard;
  shard.offload_optimizer = true;
  auto plan = GptModel::plan(small_config(), kShape, {dev, act, DType::kF32}, shard);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->category_bytes("master"), 0u);
  EXPECT_EQ(plan->category_bytes("optimizer"), 0u);
  auto host = GptModel::offload_host_bytes(small_config(), kShape, {dev, act, DType::kF32}, shard);
  ASSERT_TRUE(host.ok()) << host.status();
  // f32 master, m, v, gradient staging and the compute-copy staging of every parameter.
  const int64_t n = r.model->params().flat_numel();
  EXPECT_GE(*host, static_cast<size_t>(n) * (16 + engine::dtype_size(act)));
}

TEST(GptOffload, CpuBitwiseEqualsDeviceOptimizer) {
  ModelRun plain = make_run(Device::kCpu, DType::kF32, false);
  ModelRun off = make_run(Device::kCpu, DType::kF32, true);
  train(plain, 1, 3);
  train(off, 1, 3);
  expect_offloaded(off, Device::kCpu, DType::kF32);
  EXPECT_EQ(plain.losses, off.losses);
  EXPECT_LT(off.losses.back(), off.losses.front());  // it trains
  const FlatBuffers a = plain.model->flat_buffers(), b = off.model->flat_buffers();
  EXPECT_EQ(testing::to_host(a.value), testing::to_host(b.value));
  EXPECT_EQ(testing::to_host(a.master), testing::to_host(b.master));
  EXPECT_EQ(testing::to_host(a.m), testing::to_host(b.m));
  EXPECT_EQ(testing::to_host(a.v), testing::to_host(b.v));
}

// On the GPU the host AdamW (f32 on the CPU) and the device kernel round differently, and a
// one-ulp difference of a master weight can flip the bf16 rounding of its compute copy, after
// which the two runs' gradients differ and AdamW's normalized update amplifies that on
// near-zero gradients (up to 2 lr per step). So: after one step (the same gradients in both)
// the state agrees to f32 rounding; over three steps the losses agree to 1e-3.
TEST(GptOffload, GpuMatchesDeviceOptimizer) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  ModelRun plain = make_run(Device::kCuda, DType::kBF16, false);
  ModelRun off = make_run(Device::kCuda, DType::kBF16, true);
  train(plain, 1, 1);
  train(off, 1, 1);
  expect_offloaded(off, Device::kCuda, DType::kBF16);
  const FlatBuffers a = plain.model->flat_buffers(), b = off.model->flat_buffers();
  EXPECT_TRUE(testing::tensors_near(testing::to_host(b.master), testing::to_host(a.master),
                                    {1e-7, 1e-6, 1e-12}));
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host(b.m), testing::to_host(a.m), {1e-9, 1e-6, 1e-12}));
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host(b.v), testing::to_host(a.v), {1e-12, 1e-6, 1e-12}));
  EXPECT_TRUE(testing::tensors_near(testing::to_host(b.value), testing::to_host(a.value),
                                    {1e-6, 1e-2, 1e-8}));
  train(plain, 2, 3);
  train(off, 2, 3);
  ASSERT_EQ(plain.losses.size(), off.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i) {
    EXPECT_NEAR(off.losses[i], plain.losses[i], 1e-3 * plain.losses[i]) << "step " << i + 1;
  }
  EXPECT_LT(off.losses.back(), off.losses.front());
}

TEST(GptOffload, RefusesZeroStage3) {
  GptShard shard;
  shard.offload_optimizer = true;
  shard.zero_stage = 3;
  auto plan =
      GptModel::plan(small_config(), kShape, {Device::kCpu, DType::kF32, DType::kF32}, shard);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("ZeRO stage 3"), std::string::npos) << plan.status();
}

}  // namespace
}  // namespace anvil::model
