// GPT-2 on the GPU against the CPU reference, from the same seed (identical initial weights):
//   bf16: initial loss within 1% relative, gradient norm within 5%, 20 AdamW steps on a fixed
//         batch lower the loss on both devices by a similar amount;
//   f16:  against the CPU model on f16 storage (loss 0.5%, gradient norm 2%), and trains;
//   f32:  loss, gradient norm and every parameter gradient match the CPU closely.
// The architecture variants (docs/models.md) the same way: BLOOM-style (ALiBi, embedding
// LayerNorm) and LLaMA-style (RMSNorm, SwiGLU, rotary, no biases, untied LM head) in bf16 with
// head_dim 64 (flash attention, which ALiBi and rotary need); in f32 (the unfused attention)
// the options that do not touch attention.
// Prefix-LM and packed T0/MTF pairs (prefix_end, with segments for the pairs) on the GPU against
// the CPU, in bf16 with rotary and with ALiBi (the flash attention with prefix_end); on the CPU
// alone, that the prefix changes what the model learns (so that the GPU check can fail).
// Skips without a GPU.
#include <cmath>
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

constexpr GptRunShape kShape{4, 32};
constexpr int64_t kRows = kShape.micro_batch * kShape.seq_len;

struct Batch {
  std::vector<int32_t> tokens, positions, targets;
};

Batch make_batch() {
  Batch b;
  std::vector<int32_t> seq = testing::random_ints(kRows + 1, 17, 0, 100);
  b.tokens.assign(seq.begin(), seq.end() - 1);
  b.targets.assign(seq.begin() + 1, seq.end());
  b.targets[5] = -1;
  for (int64_t i = 0; i < kRows; ++i)
    b.positions.push_back(static_cast<int32_t>(i % kShape.seq_len));
  return b;
}

struct DeviceRun {
  std::unique_ptr<engine::Stream> stream;
  std::unique_ptr<GptModel> model;
};

DeviceRun make_run(Device dev, DType act, const GptConfig& cfg = small_config(),
                   ops::AttentionKernel kernel = ops::AttentionKernel::kMmaSync) {
  DeviceRun r;
  if (dev == Device::kCuda) {
    auto s = engine::Stream::cuda(0);
    EXPECT_TRUE(s.ok()) << s.status();
    r.stream = std::make_unique<engine::Stream>(std::move(s).value());
  } else {
    r.stream = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  auto m = GptModel::create(cfg, kShape, {dev, act, DType::kF32, kernel}, /*seed=*/7);
  EXPECT_TRUE(m.ok()) << m.status();
  r.model = std::move(m).value();
  return r;
}

// Forward (train) + backward of the mean loss; returns the mean loss.
double step_grads(DeviceRun& r, const Batch& b, int64_t counted) {
  r.model->zero_grads(*r.stream);
  r.model->forward(b.tokens.data(), b.positions.data(), b.targets.data(), true, 0, *r.stream);
  const double loss = r.model->loss_sum(*r.stream) / counted;
  r.model->backward(1.0f / counted, *r.stream);
  return loss;
}

// 20 AdamW steps; returns the losses before each step.
std::vector<double> train(DeviceRun& r, const Batch& b, int64_t counted) {
  std::vector<double> losses;
  for (int step = 1; step <= 20; ++step) {
    losses.push_back(step_grads(r, b, counted));
    r.model->optimizer_step({3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step}, *r.stream);
  }
  return losses;
}

TEST(GptGpu, Bf16MatchesCpuAndTrains) {
  ANVIL_SKIP_WITHOUT_GPU();
  const Batch b = make_batch();
  const int64_t counted = kRows - 1;
  DeviceRun cpu = make_run(Device::kCpu, DType::kF32);
  DeviceRun gpu = make_run(Device::kCuda, DType::kBF16);

  const double loss_cpu = step_grads(cpu, b, counted);
  const double loss_gpu = step_grads(gpu, b, counted);
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-2 * loss_cpu);
  const double norm_cpu = cpu.model->grad_norm(*cpu.stream);
  const double norm_gpu = gpu.model->grad_norm(*gpu.stream);
  EXPECT_GT(norm_cpu, 0.0);
  EXPECT_NEAR(norm_gpu, norm_cpu, 0.05 * norm_cpu);

  const std::vector<double> lc = train(cpu, b, counted);
  const std::vector<double> lg = train(gpu, b, counted);
  EXPECT_LT(lc.back(), lc.front() - 0.5);
  EXPECT_LT(lg.back(), lg.front() - 0.5);
  EXPECT_NEAR(lg.back(), lc.back(), 0.1 * lc.back());
}

// fp16 ([train] precision = fp16): the CUDA model (f16 activations, the unfused attention)
// against the CPU model on the same f16 storage, with the loss scaled by 2^10 in the backward
// as the trainer does; both train on the fixed batch.
TEST(GptGpu, F16MatchesCpuF16AndTrains) {
  ANVIL_SKIP_WITHOUT_GPU();
  const Batch b = make_batch();
  const int64_t counted = kRows - 1;
  DeviceRun cpu = make_run(Device::kCpu, DType::kF16);
  DeviceRun gpu = make_run(Device::kCuda, DType::kF16);
  const float scale = 1024.0f;
  for (DeviceRun* r : {&cpu, &gpu}) {
    r->model->zero_grads(*r->stream);
    r->model->forward(b.tokens.data(), b.positions.data(), b.targets.data(), true, 0, *r->stream);
    r->model->backward(scale / counted, *r->stream);
  }
  const double loss_cpu = cpu.model->loss_sum(*cpu.stream) / counted;
  const double loss_gpu = gpu.model->loss_sum(*gpu.stream) / counted;
  EXPECT_NEAR(loss_gpu, loss_cpu, 5e-3 * loss_cpu);
  const double norm_cpu = cpu.model->grad_norm(*cpu.stream) / scale;
  const double norm_gpu = gpu.model->grad_norm(*gpu.stream) / scale;
  EXPECT_GT(norm_cpu, 0.0);
  EXPECT_TRUE(std::isfinite(norm_gpu));
  EXPECT_NEAR(norm_gpu, norm_cpu, 0.02 * norm_cpu);
  // The f32 run of the same weights: f16 stays within 1% of its loss.
  DeviceRun ref = make_run(Device::kCpu, DType::kF32);
  EXPECT_NEAR(loss_gpu, step_grads(ref, b, counted), 1e-2 * loss_cpu);

  const std::vector<double> lc = train(cpu, b, counted);
  const std::vector<double> lg = train(gpu, b, counted);
  EXPECT_LT(lg.back(), lg.front() - 0.5);
  EXPECT_NEAR(lg.back(), lc.back(), 0.1 * lc.back());
}

TEST(GptGpu, F32MatchesCpuClosely) {
  ANVIL_SKIP_WITHOUT_GPU();
  const Batch b = make_batch();
  const int64_t counted = kRows - 1;
  DeviceRun cpu = make_run(Device::kCpu, DType::kF32);
  DeviceRun gpu = make_run(Device::kCuda, DType::kF32);
  const double loss_cpu = step_grads(cpu, b, counted);
  const double loss_gpu = step_grads(gpu, b, counted);
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * loss_cpu);
  EXPECT_NEAR(gpu.model->grad_norm(*gpu.stream), cpu.model->grad_norm(*cpu.stream),
              1e-4 * cpu.model->grad_norm(*cpu.stream));
  const std::vector<Param>& pc = cpu.model->params().all();
  const std::vector<Param>& pg = gpu.model->params().all();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    // f32 everywhere; differences come from summation order (cuBLASLt, atomics in the
    // embedding backward), so a small atol relative to gradients of ~1e-3.
    EXPECT_TRUE(testing::tensors_near(testing::to_host(pg[i].grad), testing::to_host(pc[i].grad),
                                      {1e-6, 1e-3, 1e-6}, pc[i].vocab_rows))
        << pc[i].name;
  }
  // One optimizer step keeps them together (master weights and the f32 compute copy).
  cpu.model->optimizer_step({1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1}, *cpu.stream);
  gpu.model->optimizer_step({1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1}, *gpu.stream);
  EXPECT_NEAR(step_grads(gpu, b, counted), step_grads(cpu, b, counted), 1e-4 * loss_cpu);
}

TEST(GptGpu, PlanEqualsArenasBf16) {
  ANVIL_SKIP_WITHOUT_GPU();
  const Precision prec{Device::kCuda, DType::kBF16, DType::kF32};
  auto plan = GptModel::plan(small_config(), kShape, prec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto m = GptModel::create(small_config(), kShape, prec, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const std::string& cat : plan->categories()) {
    EXPECT_EQ(plan->category_bytes(cat), (*m)->arena_bytes(cat)) << cat;
  }
  EXPECT_GT(plan->category_bytes("master"), 0u);
  // The bf16 compute copy is the rounded master.
  const Param* p = (*m)->params().find("h.1.mlp.c_fc.weight");
  std::vector<float> master = testing::to_host(p->master);
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host(p->value), testing::round_bf16(master), {0, 0, 0}));
}

// d_model 128 with 2 heads: head_dim 64, so bf16 runs flash attention.
GptConfig bloom_config() {
  GptConfig c = small_config();
  c.d_model = 128;
  c.n_heads = 2;
  c.position_embedding = PositionEmbedding::kAlibi;
  c.embed_layernorm = true;
  return c;
}

GptConfig llama_config() {
  GptConfig c = small_config();
  c.d_model = 128;
  c.n_heads = 2;
  c.ffn_hidden = 344;
  c.norm = Norm::kRmsNorm;
  c.activation = Activation::kSwiglu;
  c.position_embedding = PositionEmbedding::kRotary;
  c.bias = false;
  c.tie_embeddings = false;
  return c;
}

class GptGpuVariant : public ::testing::TestWithParam<GptConfig (*)()> {};

TEST_P(GptGpuVariant, Bf16MatchesCpuAndTrains) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GptConfig cfg = GetParam()();
  const Batch b = make_batch();
  const int64_t counted = kRows - 1;
  DeviceRun cpu = make_run(Device::kCpu, DType::kF32, cfg);
  DeviceRun gpu = make_run(Device::kCuda, DType::kBF16, cfg);
  const double loss_cpu = step_grads(cpu, b, counted);
  const double loss_gpu = step_grads(gpu, b, counted);
  ASSERT_TRUE(std::isfinite(loss_gpu));
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-2 * loss_cpu);
  const double norm_cpu = cpu.model->grad_norm(*cpu.stream);
  const double norm_gpu = gpu.model->grad_norm(*gpu.stream);
  EXPECT_GT(norm_cpu, 0.0);
  EXPECT_NEAR(norm_gpu, norm_cpu, 0.05 * norm_cpu);
  const std::vector<double> lc = train(cpu, b, counted);
  const std::vector<double> lg = train(gpu, b, counted);
  EXPECT_LT(lc.back(), lc.front() - 0.5);
  EXPECT_LT(lg.back(), lg.front() - 0.5);
  EXPECT_NEAR(lg.back(), lc.back(), 0.1 * lc.back());
}

// [train] attention_kernel = auto: the Hopper flash forward (no bias: learned and rotary
// positions, heads of 128; the backward stays mma.sync on the forward's out and lse) trains
// like the CPU. On a GPU that is not compute capability 9.0 this runs mma.sync and checks
// nothing new.
GptConfig gpt2_head128_config() {
  GptConfig c = small_config();
  c.d_model = 256;
  c.n_heads = 2;
  return c;
}
GptConfig llama_head128_config() {
  GptConfig c = llama_config();
  c.d_model = 256;
  return c;
}
TEST(GptGpu, WgmmaForwardMatchesCpuAndTrains) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (GptConfig (*make)() : {gpt2_head128_config, llama_head128_config}) {
    const GptConfig cfg = make();
    const Batch b = make_batch();
    const int64_t counted = kRows - 1;
    DeviceRun cpu = make_run(Device::kCpu, DType::kF32, cfg);
    DeviceRun gpu = make_run(Device::kCuda, DType::kBF16, cfg, ops::AttentionKernel::kWgmma);
    const double loss_cpu = step_grads(cpu, b, counted);
    const double loss_gpu = step_grads(gpu, b, counted);
    ASSERT_TRUE(std::isfinite(loss_gpu));
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-2 * loss_cpu);
    const double norm_cpu = cpu.model->grad_norm(*cpu.stream);
    const double norm_gpu = gpu.model->grad_norm(*gpu.stream);
    EXPECT_GT(norm_cpu, 0.0);
    EXPECT_NEAR(norm_gpu, norm_cpu, 0.05 * norm_cpu);
    const std::vector<double> lc = train(cpu, b, counted);
    const std::vector<double> lg = train(gpu, b, counted);
    EXPECT_LT(lg.back(), lg.front() - 0.5);
    EXPECT_NEAR(lg.back(), lc.back(), 0.1 * lc.back());
  }
}

// Two packed pairs per sample (segments 0 and 1), each with a bidirectional input of 10 tokens:
// prefix_end = pair start + 10 for every query of the pair, as model/train/mtf_batch.cc sets
// it (prefix-LM is the one-segment case). Every target is counted, so a prefix that sees the
// future lets the model copy: the trained loss with the prefix must be far below the causal
// one on the CPU, and the GPU must train to the CPU's loss with the prefix.
struct PrefixInputs {
  std::vector<int32_t> segments, prefix_end;
};

PrefixInputs packed_prefix_inputs() {
  PrefixInputs p;
  constexpr int32_t kPair = kShape.seq_len / 2, kInput = 10;
  for (int64_t i = 0; i < kRows; ++i) {
    const int32_t t = static_cast<int32_t>(i % kShape.seq_len), pair = t / kPair;
    p.segments.push_back(pair);
    p.prefix_end.push_back(pair * kPair + kInput);
  }
  return p;
}

std::vector<double> train_batch(DeviceRun& r, const GptBatch& gb, int64_t counted) {
  std::vector<double> losses;
  for (int step = 1; step <= 20; ++step) {
    r.model->zero_grads(*r.stream);
    r.model->forward(gb, true, 0, *r.stream);
    losses.push_back(r.model->loss_sum(*r.stream) / counted);
    r.model->backward(1.0f / counted, *r.stream);
    r.model->optimizer_step({3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step}, *r.stream);
  }
  return losses;
}

GptBatch batch_of(const Batch& b, const PrefixInputs& p, bool with_prefix) {
  GptBatch gb;
  gb.tokens = b.tokens.data();
  gb.positions = b.positions.data();
  gb.targets = b.targets.data();
  gb.segments = p.segments.data();
  if (with_prefix) gb.prefix_end = p.prefix_end.data();
  return gb;
}

// Mean |a[i] - b[i]| over two loss trajectories.
double mean_gap(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(a[i] - b[i]);
  return sum / static_cast<double>(a.size());
}

// On the CPU alone (runs without a GPU): the prefix changes the trajectory (by 0.04 and 0.09 on
// average over the 20 steps, ALiBi and rotary), so the GPU check below can fail.
TEST_P(GptGpuVariant, PackedPrefixChangesTrainingOnCpu) {
  const GptConfig cfg = GetParam()();
  const Batch b = make_batch();
  const int64_t counted = kRows - 1;
  const PrefixInputs p = packed_prefix_inputs();
  DeviceRun causal = make_run(Device::kCpu, DType::kF32, cfg);
  DeviceRun prefix = make_run(Device::kCpu, DType::kF32, cfg);
  const std::vector<double> lc = train_batch(causal, batch_of(b, p, false), counted);
  const std::vector<double> lp = train_batch(prefix, batch_of(b, p, true), counted);
  EXPECT_GT(mean_gap(lp, lc), 0.02);
}

// The GPU (bf16) trains on the CPU's trajectory with the prefix: closer to it than half the
// prefix's own effect on the CPU.
TEST_P(GptGpuVariant, PackedPrefixPairsMatchCpu) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GptConfig cfg = GetParam()();
  const Batch b = make_batch();
  const int64_t counted = kRows - 1;
  const PrefixInputs p = packed_prefix_inputs();
  DeviceRun cpu_causal = make_run(Device::kCpu, DType::kF32, cfg);
  DeviceRun cpu = make_run(Device::kCpu, DType::kF32, cfg);
  DeviceRun gpu = make_run(Device::kCuda, DType::kBF16, cfg);
  const std::vector<double> lcc = train_batch(cpu_causal, batch_of(b, p, false), counted);
  const std::vector<double> lc = train_batch(cpu, batch_of(b, p, true), counted);
  const std::vector<double> lg = train_batch(gpu, batch_of(b, p, true), counted);
  ASSERT_TRUE(std::isfinite(lg.back()));
  EXPECT_NEAR(lg.front(), lc.front(), 1e-2 * lc.front());
  EXPECT_LT(mean_gap(lg, lc), 0.5 * mean_gap(lc, lcc))
      << "GPU vs CPU " << mean_gap(lg, lc) << ", CPU prefix vs causal " << mean_gap(lc, lcc)
      << "; last losses " << lg.back() << " " << lc.back() << " " << lcc.back();
}

INSTANTIATE_TEST_SUITE_P(Models, GptGpuVariant, ::testing::Values(&bloom_config, &llama_config));

// f32 on the GPU runs the unfused attention: ALiBi and rotary are refused there; without them
// the other options match the CPU closely, every gradient included.
TEST(GptGpu, F32VariantsMatchCpuClosely) {
  ANVIL_SKIP_WITHOUT_GPU();
  const Batch b = make_batch();
  const int64_t counted = kRows - 1;
  for (GptConfig (*make)() : {&bloom_config, &llama_config}) {
    GptConfig cfg = make();
    SCOPED_TRACE(cfg.tie_embeddings ? "bloom-style" : "llama-style");
    EXPECT_FALSE(GptModel::plan(cfg, kShape, {Device::kCuda, DType::kF32, DType::kF32}).ok());
    cfg.position_embedding = PositionEmbedding::kNone;
    DeviceRun cpu = make_run(Device::kCpu, DType::kF32, cfg);
    DeviceRun gpu = make_run(Device::kCuda, DType::kF32, cfg);
    const double loss_cpu = step_grads(cpu, b, counted);
    EXPECT_NEAR(step_grads(gpu, b, counted), loss_cpu, 1e-5 * loss_cpu);
    const std::vector<Param>& pc = cpu.model->params().all();
    const std::vector<Param>& pg = gpu.model->params().all();
    ASSERT_EQ(pc.size(), pg.size());
    for (size_t i = 0; i < pc.size(); ++i) {
      EXPECT_TRUE(testing::tensors_near(testing::to_host(pg[i].grad), testing::to_host(pc[i].grad),
                                        {1e-6, 1e-3, 1e-6}, pc[i].vocab_rows))
          << pc[i].name;
    }
  }
}

}  // namespace
}  // namespace anvil::model
