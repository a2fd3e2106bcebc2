// Tests of the fused softmax + cross-entropy (ops/cross_entropy.h):
//   loss[r] = logsumexp(x[r, :vocab]) - x[r, target]   dlogits = grad_scale (softmax - onehot)
// CPU twin: central finite differences of sum_r grad_scale * loss[r] in double, the closed form
// for uniform logits, padding and ignored rows, losses-only and aliased dlogits, row weights as a
// per-row factor. GPU vs the CPU twin on the same (bf16-rounded) logits, GPT-2 vocabulary
// included, with and without row weights.
#include "ops/cross_entropy.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

// rows x padded logits: uniform in [lo, hi) on the real columns, `pad_value` on the padding.
std::vector<float> make_logits(int64_t rows, int64_t vocab, int64_t padded, uint64_t seed, float lo,
                               float hi, float pad_value) {
  std::vector<float> real = testing::random_uniform(rows * vocab, seed, lo, hi);
  std::vector<float> x(rows * padded, pad_value);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < vocab; ++c) x[r * padded + c] = real[r * vocab + c];
  }
  return x;
}

// Random targets in [0, vocab), every `ignore_every`-th row (if > 0) ignored (-1).
std::vector<int32_t> make_targets(int64_t rows, int64_t vocab, uint64_t seed, int ignore_every) {
  std::vector<int32_t> t = testing::random_ints(rows, seed, 0, static_cast<int32_t>(vocab));
  if (ignore_every > 0) {
    for (int64_t r = 1; r < rows; r += ignore_every) t[r] = -1;
  }
  return t;
}

TEST(CrossEntropyCpu, MatchesFiniteDifferencesInDouble) {
  const CrossEntropyArgs args{/*rows=*/5, /*vocab=*/7, /*padded_vocab=*/9, /*grad_scale=*/0.37f};
  const std::vector<int32_t> targets_host = {3, -1, 0, 6, 2};
  std::vector<double> x0(args.rows * args.padded_vocab);
  const std::vector<float> init =
      make_logits(args.rows, args.vocab, args.padded_vocab, 11, -3.0f, 3.0f, /*pad_value=*/0.5f);
  for (size_t i = 0; i < x0.size(); ++i) x0[i] = init[i];

  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView targets = pool.from_i32(targets_host, {args.rows});
  const double scale = static_cast<double>(args.grad_scale);
  auto total_loss = [&](const std::vector<double>& x) {
    TensorPool local(Device::kCpu);
    TensorView logits = local.from_f64(x, {args.rows, args.padded_vocab});
    TensorView losses = local.empty(DType::kF64, {args.rows});
    cpu::softmax_cross_entropy(args, losses, TensorView{}, logits, targets, stream);
    double sum = 0.0;
    for (double l : testing::to_host_f64(losses)) sum += scale * l;
    return sum;
  };
  const std::vector<double> numeric = testing::numeric_gradient(total_loss, x0, 1e-5);

  TensorView logits = pool.from_f64(x0, {args.rows, args.padded_vocab});
  TensorView losses = pool.empty(DType::kF64, {args.rows});
  TensorView dlogits = pool.empty(DType::kF64, {args.rows, args.padded_vocab});
  softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
  // Central differences with h = 1e-5 on O(1) smooth functions: error ~ h^2 = 1e-10.
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host_f64(dlogits), numeric, Tol{1e-8, 1e-6, 1e-12}));
  // The ignored row's loss is 0, and every loss of a counted row is positive.
  const std::vector<double> l = testing::to_host_f64(losses);
  EXPECT_EQ(l[1], 0.0);
  for (int r : {0, 2, 3, 4}) EXPECT_GT(l[r], 0.0) << r;
}

TEST(CrossEntropyCpu, UniformLogitsGiveLogVocab) {
  const CrossEntropyArgs args{/*rows=*/3, /*vocab=*/11, /*padded_vocab=*/16, /*grad_scale=*/0.5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView logits = pool.from(std::vector<float>(args.rows * args.padded_vocab, 2.5f),
                                      DType::kF32, {args.rows, args.padded_vocab});
  const TensorView targets = pool.from_i32({0, 10, 4}, {args.rows});
  TensorView losses = pool.empty(DType::kF32, {args.rows});
  TensorView dlogits = pool.empty(DType::kF32, {args.rows, args.padded_vocab});
  softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
  for (float l : testing::to_host(losses)) EXPECT_NEAR(l, std::log(11.0), 1e-6);
  const std::vector<float> d = testing::to_host(dlogits);
  const int targets_host[] = {0, 10, 4};
  for (int64_t r = 0; r < args.rows; ++r) {
    for (int64_t c = 0; c < args.padded_vocab; ++c) {
      const double want =
          c < args.vocab ? 0.5 * (1.0 / 11.0 - (c == targets_host[r] ? 1.0 : 0.0)) : 0.0;
      EXPECT_NEAR(d[r * args.padded_vocab + c], want, 1e-7) << r << "," << c;
    }
  }
}

TEST(CrossEntropyCpu, PaddingColumnsDoNotMatter) {
  const CrossEntropyArgs args{/*rows=*/4, /*vocab=*/13, /*padded_vocab=*/24, /*grad_scale=*/1.0f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView targets = pool.from_i32(make_targets(args.rows, args.vocab, 3, 0), {args.rows});
  std::vector<std::vector<float>> losses_by_pad, dlogits_by_pad;
  for (float pad : {-5.0f, 1e30f, NAN}) {
    const TensorView logits =
        pool.from(make_logits(args.rows, args.vocab, args.padded_vocab, 21, -2.0f, 2.0f, pad),
                  DType::kF32, {args.rows, args.padded_vocab});
    TensorView losses = pool.empty(DType::kF32, {args.rows});
    TensorView dlogits = pool.empty(DType::kF32, {args.rows, args.padded_vocab});
    softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
    losses_by_pad.push_back(testing::to_host(losses));
    dlogits_by_pad.push_back(testing::to_host(dlogits));
  }
  for (size_t k = 1; k < losses_by_pad.size(); ++k) {
    EXPECT_EQ(losses_by_pad[k], losses_by_pad[0]) << k;
    EXPECT_EQ(dlogits_by_pad[k], dlogits_by_pad[0]) << k;
  }
  for (int64_t r = 0; r < args.rows; ++r) {
    for (int64_t c = args.vocab; c < args.padded_vocab; ++c) {
      EXPECT_EQ(dlogits_by_pad[0][r * args.padded_vocab + c], 0.0f) << r << "," << c;
    }
  }
}

TEST(CrossEntropyCpu, IgnoredRowsLossesOnlyAndAlias) {
  const CrossEntropyArgs args{/*rows=*/6, /*vocab=*/9, /*padded_vocab=*/12, /*grad_scale=*/0.25f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x =
      make_logits(args.rows, args.vocab, args.padded_vocab, 5, -4.0f, 4.0f, 3.0f);
  const TensorView targets = pool.from_i32(make_targets(args.rows, args.vocab, 8, 2), {args.rows});
  const TensorView logits = pool.from(x, DType::kF32, {args.rows, args.padded_vocab});
  TensorView losses = pool.empty(DType::kF32, {args.rows});
  TensorView dlogits = pool.empty(DType::kF32, {args.rows, args.padded_vocab});
  softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
  const std::vector<float> l = testing::to_host(losses);
  const std::vector<float> d = testing::to_host(dlogits);
  for (int64_t r = 1; r < args.rows; r += 2) {  // ignored rows
    EXPECT_EQ(l[r], 0.0f);
    for (int64_t c = 0; c < args.padded_vocab; ++c) EXPECT_EQ(d[r * args.padded_vocab + c], 0.0f);
  }
  // Each counted gradient row sums to 0 over the vocabulary (softmax minus one-hot).
  for (int64_t r = 0; r < args.rows; r += 2) {
    double sum = 0.0;
    for (int64_t c = 0; c < args.vocab; ++c) sum += d[r * args.padded_vocab + c];
    EXPECT_NEAR(sum, 0.0, 1e-7);
  }

  // Losses only (evaluation): the same losses.
  TensorView losses_only = pool.empty(DType::kF32, {args.rows});
  softmax_cross_entropy(args, losses_only, TensorView{}, logits, targets, stream);
  EXPECT_EQ(testing::to_host(losses_only), l);

  // dlogits aliasing logits: the same losses and gradient.
  TensorView inplace = pool.from(x, DType::kF32, {args.rows, args.padded_vocab});
  TensorView losses_inplace = pool.empty(DType::kF32, {args.rows});
  softmax_cross_entropy(args, losses_inplace, inplace, inplace, targets, stream);
  EXPECT_EQ(testing::to_host(losses_inplace), l);
  EXPECT_EQ(testing::to_host(inplace), d);
}

// Row weights multiply each row's loss and gradient row and nothing else: the weighted op equals
// w[r] times the unweighted one (in double: to rounding), a zero weight gives a zero row.
TEST(CrossEntropyCpu, RowWeightsScaleEachRow) {
  const int64_t rows = 6, vocab = 9, padded = 12;
  const std::vector<float> wf = {0.5f, 2.0f, 0.0f, 1.3f, 0.7f, 1.0f};
  const std::vector<double> w(wf.begin(), wf.end());  // the f32 values the op reads
  const std::vector<int32_t> targets_host = {3, 8, 0, -1, 5, 1};
  std::vector<double> x0(rows * padded);
  const std::vector<float> init = make_logits(rows, vocab, padded, 23, -3.0f, 3.0f, 0.25f);
  for (size_t i = 0; i < x0.size(); ++i) x0[i] = init[i];
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView targets = pool.from_i32(targets_host, {rows});
  const TensorView logits = pool.from_f64(x0, {rows, padded});
  CrossEntropyArgs args{rows, vocab, padded, 0.37f};
  TensorView losses = pool.empty(DType::kF64, {rows});
  TensorView dlogits = pool.empty(DType::kF64, {rows, padded});
  softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
  args.row_weights = pool.from(wf, DType::kF32, {rows});
  TensorView wlosses = pool.empty(DType::kF64, {rows});
  TensorView wdlogits = pool.empty(DType::kF64, {rows, padded});
  softmax_cross_entropy(args, wlosses, wdlogits, logits, targets, stream);
  const std::vector<double> l = testing::to_host_f64(losses), wl = testing::to_host_f64(wlosses);
  const std::vector<double> d = testing::to_host_f64(dlogits), wd = testing::to_host_f64(wdlogits);
  double norm = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_NEAR(wl[r], w[r] * l[r], 1e-14) << r;
    for (int64_t c = 0; c < padded; ++c) {
      EXPECT_NEAR(wd[r * padded + c], w[r] * d[r * padded + c], 1e-15) << r << "," << c;
      norm += wd[r * padded + c] * wd[r * padded + c];
    }
  }
  EXPECT_GT(norm, 0.0);
  EXPECT_GT(wl[1], l[1]);  // weight 2
  EXPECT_EQ(wl[2], 0.0);   // weight 0
  EXPECT_EQ(wl[3], 0.0);   // ignored
  EXPECT_GT(l[2], 0.0);    // ... though its unweighted loss is not 0
}

TEST(CrossEntropyCpuDeathTest, TargetBeyondVocabIsChecked) {
  const CrossEntropyArgs args{/*rows=*/2, /*vocab=*/5, /*padded_vocab=*/8};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView logits =
      pool.from(testing::random_uniform(16, 1), DType::kF32, {args.rows, args.padded_vocab});
  const TensorView targets = pool.from_i32({1, 5}, {args.rows});
  TensorView losses = pool.empty(DType::kF32, {args.rows});
  EXPECT_DEATH(softmax_cross_entropy(args, losses, TensorView{}, logits, targets, stream), "vocab");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin.

struct GpuCase {
  DType dtype;
  int64_t rows, vocab, padded;
  float lo, hi;  // logit range
};

// Tolerances. Losses: the GPU sums exp in f32 (per thread, then a block tree) with __expf, the
// CPU in double on the same rounded logits; the error is ~1e-6 relative to the log-sum-exp, so
// 1e-4 absolute + 1e-4 relative (1e-3 relative would still be a fine bound for training).
// dlogits: f32 -> __expf and the f32 lse give ~1e-5 relative on p, and p - 1 near the target can
// cancel, hence an absolute term scaled by grad_scale; bf16 -> one rounding (2^-8 relative).
Tol loss_tol(DType dtype) { return dtype == DType::kBF16 ? Tol{1e-4, 1e-4} : Tol{2e-5, 2e-5}; }
Tol grad_tol(DType dtype, float grad_scale) {
  const double a = 2e-6 * grad_scale;
  return dtype == DType::kBF16 ? Tol{a, 8e-3, 1e-4} : Tol{a, 5e-5, 1e-8};
}

class CrossEntropyGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(CrossEntropyGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const float grad_scale = 1.0f / static_cast<float>(p.rows);
  const bool zero_ok = p.vocab == 1;  // a single class: loss and gradient are exactly 0
  const CrossEntropyArgs args{p.rows, p.vocab, p.padded, grad_scale};
  // Padding holds huge values: they must not reach the loss.
  std::vector<float> x = make_logits(p.rows, p.vocab, p.padded, 100 + p.vocab, p.lo, p.hi, 1e30f);
  if (p.dtype == DType::kBF16) x = testing::round_bf16(x);
  const std::vector<int32_t> t = make_targets(p.rows, p.vocab, 200 + p.rows, p.rows > 2 ? 3 : 0);

  TestStream cpu_stream(Device::kCpu);
  TensorPool cpu(Device::kCpu);
  TensorView cpu_losses = cpu.empty(DType::kF32, {p.rows});
  TensorView cpu_dlogits = cpu.empty(DType::kF32, {p.rows, p.padded});
  softmax_cross_entropy(args, cpu_losses, cpu_dlogits, cpu.from(x, DType::kF32, {p.rows, p.padded}),
                        cpu.from_i32(t, {p.rows}), cpu_stream);
  const std::vector<float> ref_losses = testing::to_host(cpu_losses);
  const std::vector<float> ref_dlogits = testing::to_host(cpu_dlogits);

  TestStream gpu_stream(Device::kCuda);
  TensorPool gpu(Device::kCuda);
  const TensorView targets = gpu.from_i32(t, {p.rows});
  const TensorView logits = gpu.from(x, p.dtype, {p.rows, p.padded});
  TensorView losses = gpu.empty(DType::kF32, {p.rows});
  TensorView dlogits = gpu.empty(p.dtype, {p.rows, p.padded});
  softmax_cross_entropy(args, losses, dlogits, logits, targets, gpu_stream);
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host(losses), ref_losses, loss_tol(p.dtype), zero_ok));
  EXPECT_TRUE(testing::tensors_near(testing::to_host(dlogits), ref_dlogits,
                                    grad_tol(p.dtype, grad_scale), zero_ok));

  // Losses only (evaluation).
  TensorView eval_losses = gpu.empty(DType::kF32, {p.rows});
  softmax_cross_entropy(args, eval_losses, TensorView{}, logits, targets, gpu_stream);
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host(eval_losses), ref_losses, loss_tol(p.dtype), zero_ok));

  // In place: dlogits written over logits.
  TensorView inplace = gpu.from(x, p.dtype, {p.rows, p.padded});
  TensorView inplace_losses = gpu.empty(DType::kF32, {p.rows});
  softmax_cross_entropy(args, inplace_losses, inplace, inplace, targets, gpu_stream);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(inplace_losses), ref_losses, loss_tol(p.dtype),
                                    zero_ok));
  EXPECT_TRUE(testing::tensors_near(testing::to_host(inplace), ref_dlogits,
                                    grad_tol(p.dtype, grad_scale), zero_ok));

  // Row weights in [0.1, 2): the weighted twins, with and without dlogits.
  const std::vector<float> w = testing::random_uniform(p.rows, 300 + p.rows, 0.1f, 2.0f);
  CrossEntropyArgs cpu_args = args, gpu_args = args;
  cpu_args.row_weights = cpu.from(w, DType::kF32, {p.rows});
  gpu_args.row_weights = gpu.from(w, DType::kF32, {p.rows});
  softmax_cross_entropy(cpu_args, cpu_losses, cpu_dlogits,
                        cpu.from(x, DType::kF32, {p.rows, p.padded}), cpu.from_i32(t, {p.rows}),
                        cpu_stream);
  TensorView wlosses = gpu.empty(DType::kF32, {p.rows});
  TensorView wdlogits = gpu.empty(p.dtype, {p.rows, p.padded});
  softmax_cross_entropy(gpu_args, wlosses, wdlogits, logits, targets, gpu_stream);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(wlosses), testing::to_host(cpu_losses),
                                    loss_tol(p.dtype), zero_ok));
  EXPECT_TRUE(testing::tensors_near(testing::to_host(wdlogits), testing::to_host(cpu_dlogits),
                                    grad_tol(p.dtype, 2.0f * grad_scale), zero_ok));
  TensorView weval = gpu.empty(DType::kF32, {p.rows});
  softmax_cross_entropy(gpu_args, weval, TensorView{}, logits, targets, gpu_stream);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(weval), testing::to_host(cpu_losses),
                                    loss_tol(p.dtype), zero_ok));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CrossEntropyGpu,
    ::testing::Values(
        // GPT-2: vocab 50257 padded to 50304 (16-byte packs, tail of 1 real column).
        GpuCase{DType::kBF16, 16, 50257, 50304, -5.0f, 5.0f},
        GpuCase{DType::kF32, 4, 50257, 50304, -5.0f, 5.0f},
        // Peaked rows: a wide logit range makes the target probability close to 0 or 1.
        GpuCase{DType::kBF16, 8, 50257, 50304, -30.0f, 30.0f},
        // Small and odd: padded not a multiple of the pack (scalar path), a single column,
        // a single row, a real-vocab tail inside the last pack.
        GpuCase{DType::kBF16, 3, 5, 7, -3.0f, 3.0f}, GpuCase{DType::kF32, 3, 5, 7, -3.0f, 3.0f},
        GpuCase{DType::kBF16, 2, 1, 1, -3.0f, 3.0f},
        GpuCase{DType::kBF16, 1, 1000, 1024, -4.0f, 4.0f},
        GpuCase{DType::kBF16, 7, 130, 136, -4.0f, 4.0f},
        GpuCase{DType::kF32, 7, 130, 132, -4.0f, 4.0f},
        GpuCase{DType::kF32, 5, 4097, 4101, -4.0f, 4.0f},
        // Row held in registers: LLaMA-2's vocabulary, a full last pack slot (57344 = 7 x 8192
        // bf16), f32 rows; LLaMA-3's 128256 exceeds the registers (the two-read kernel).
        GpuCase{DType::kBF16, 6, 32000, 32000, -5.0f, 5.0f},
        GpuCase{DType::kBF16, 5, 57300, 57344, -5.0f, 5.0f},
        GpuCase{DType::kF32, 5, 8000, 8000, -5.0f, 5.0f},
        GpuCase{DType::kBF16, 3, 128256, 128256, -5.0f, 5.0f}));

TEST(CrossEntropyGpuEdge, TargetBeyondVocabGivesNaN) {
  ANVIL_SKIP_WITHOUT_GPU();
  const CrossEntropyArgs args{/*rows=*/2, /*vocab=*/100, /*padded_vocab=*/128};
  TestStream stream(Device::kCuda);
  TensorPool gpu(Device::kCuda);
  const TensorView logits = gpu.from(testing::random_uniform(args.rows * args.padded_vocab, 4),
                                     DType::kBF16, {args.rows, args.padded_vocab});
  const TensorView targets = gpu.from_i32({7, 100}, {args.rows});
  TensorView losses = gpu.empty(DType::kF32, {args.rows});
  TensorView dlogits = gpu.empty(DType::kBF16, {args.rows, args.padded_vocab});
  softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
  const std::vector<float> l = testing::to_host(losses);
  const std::vector<float> d = testing::to_host(dlogits);
  EXPECT_TRUE(std::isfinite(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
  for (int64_t c = 0; c < args.vocab; ++c) EXPECT_TRUE(std::isnan(d[args.padded_vocab + c])) << c;
  for (int64_t c = args.vocab; c < args.padded_vocab; ++c)
    EXPECT_EQ(d[args.padded_vocab + c], 0.0f);
}

}  // namespace
}  // namespace anvil::ops
