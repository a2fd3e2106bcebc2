// Tests of the vocab-parallel softmax + cross-entropy (ops/vocab_parallel_cross_entropy.h):
//   per shard: row_max, then sum_exp / target_logit given the global max, then losses and the
//   shard's dlogits given the global statistics; the all-reduces over TP happen in the test.
// CPU: logits [rows, padded_vocab] with padding (NaN there, so any read of it shows) and ignored
// rows, split into 1, 2 and 4 column shards (one shard all padding), combined here, against the
// single-rank ops::cpu::softmax_cross_entropy: tight in f64, rounding-level in f32/bf16.
// Losses only and dlogits aliasing logits; argument checks.
// GPU: each CUDA twin against its CPU twin on the same inputs with poisoned outputs (aliasing and
// losses only included), and the whole GPU pipeline against the single-rank CPU op.
#include "ops/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cross_entropy.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

// rows x padded logits: uniform in [lo, hi) on the real columns, `pad_value` on the padding.
std::vector<double> make_logits(int64_t rows, int64_t vocab, int64_t padded, uint64_t seed,
                                float lo, float hi, double pad_value) {
  const std::vector<float> real = testing::random_uniform(rows * vocab, seed, lo, hi);
  std::vector<double> x(rows * padded, pad_value);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < vocab; ++c) x[r * padded + c] = real[r * vocab + c];
  }
  return x;
}

// Random targets in [0, vocab), every `ignore_every`-th row (if > 0) ignored (-1); row 0 aims
// at the last real column and row 2 at column 0 (the shard edges).
std::vector<int32_t> make_targets(int64_t rows, int64_t vocab, uint64_t seed, int ignore_every) {
  std::vector<int32_t> t = testing::random_ints(rows, seed, 0, static_cast<int32_t>(vocab));
  t[0] = static_cast<int32_t>(vocab - 1);
  if (rows > 2) t[2] = 0;
  if (ignore_every > 0) {
    for (int64_t r = 1; r < rows; r += ignore_every) t[r] = -1;
  }
  return t;
}

// Columns [start, start + cols) of a row-major [rows, padded] matrix.
std::vector<double> columns(const std::vector<double>& x, int64_t rows, int64_t padded,
                            int64_t start, int64_t cols) {
  std::vector<double> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[r * padded + start + c];
  }
  return out;
}

// A tensor of `dtype` holding v (f64 exactly, others rounded from f32).
TensorView upload(TensorPool& pool, const std::vector<double>& v, DType dtype,
                  std::vector<int64_t> shape) {
  if (dtype == DType::kF64) return pool.from_f64(v, shape);
  return pool.from(std::vector<float>(v.begin(), v.end()), dtype, shape);
}

struct ShardedResult {
  std::vector<std::vector<double>> losses;  // [shard][rows]: every shard's losses
  std::vector<double> dlogits;              // [rows, padded]: the shards' dlogits side by side
  std::vector<std::vector<double>> local_max, local_sum, local_target;  // [shard][rows]
};

// Runs the three steps on `tp` column shards of x on pool's device, with the all-reduces (max,
// sum) done here on the host in double and rounded back to `stat`; `weights` (if not empty): the
// row weights of step 3.
ShardedResult run_sharded(TensorPool& pool, engine::Stream& stream, DType act, DType stat,
                          const std::vector<double>& x, const std::vector<int32_t>& targets,
                          int64_t rows, int64_t vocab, int64_t padded, int tp, float grad_scale,
                          const std::vector<float>& weights = {}) {
  const int64_t cols = padded / tp;
  const TensorView t = pool.from_i32(targets, {rows});
  std::vector<TensorView> logits(tp);
  ShardedResult res;
  std::vector<double> m(rows, -INFINITY), s(rows, 0.0), xt(rows, 0.0);
  for (int k = 0; k < tp; ++k) {
    const VocabShardArgs args{rows, vocab, k * cols, cols, grad_scale};
    logits[k] = upload(pool, columns(x, rows, padded, k * cols, cols), act, {rows, cols});
    TensorView row_max = pool.empty(stat, {rows});
    vocab_shard_max(args, row_max, logits[k], stream);
    res.local_max.push_back(testing::to_host_f64(row_max));
    for (int64_t r = 0; r < rows; ++r) m[r] = std::max(m[r], res.local_max[k][r]);
  }
  const TensorView global_max = upload(pool, m, stat, {rows});
  for (int k = 0; k < tp; ++k) {
    const VocabShardArgs args{rows, vocab, k * cols, cols, grad_scale};
    TensorView sum_exp = pool.empty(stat, {rows}), target_logit = pool.empty(stat, {rows});
    vocab_shard_sum_exp(args, sum_exp, target_logit, logits[k], global_max, t, stream);
    res.local_sum.push_back(testing::to_host_f64(sum_exp));
    res.local_target.push_back(testing::to_host_f64(target_logit));
    for (int64_t r = 0; r < rows; ++r) {
      s[r] += res.local_sum[k][r];
      xt[r] += res.local_target[k][r];
    }
  }
  const TensorView global_sum = upload(pool, s, stat, {rows});
  const TensorView global_target = upload(pool, xt, stat, {rows});
  res.dlogits.assign(rows * padded, NAN);
  for (int k = 0; k < tp; ++k) {
    VocabShardArgs args{rows, vocab, k * cols, cols, grad_scale};
    if (!weights.empty()) args.row_weights = pool.from(weights, DType::kF32, {rows});
    TensorView losses = pool.empty(stat, {rows});
    TensorView dlogits = pool.empty(act, {rows, cols});
    vocab_shard_cross_entropy(args, losses, dlogits, logits[k], global_max, global_sum,
                              global_target, t, stream);
    res.losses.push_back(testing::to_host_f64(losses));
    const std::vector<double> d = testing::to_host_f64(dlogits);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) res.dlogits[r * padded + k * cols + c] = d[r * cols + c];
    }
  }
  return res;
}

// The single-rank CPU op on the same logits (same storage dtype), with the row weights if any:
// {losses, dlogits}.
std::vector<std::vector<double>> reference(DType act, DType stat, const std::vector<double>& x,
                                           const std::vector<int32_t>& targets, int64_t rows,
                                           int64_t vocab, int64_t padded, float grad_scale,
                                           const std::vector<float>& weights = {}) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  TensorView losses = pool.empty(stat, {rows});
  TensorView dlogits = pool.empty(act, {rows, padded});
  CrossEntropyArgs args{rows, vocab, padded, grad_scale};
  if (!weights.empty()) args.row_weights = pool.from(weights, DType::kF32, {rows});
  cpu::softmax_cross_entropy(args, losses, dlogits, upload(pool, x, act, {rows, padded}),
                             pool.from_i32(targets, {rows}), stream);
  return {testing::to_host_f64(losses), testing::to_host_f64(dlogits)};
}

// ---------------------------------------------------------------------------------------------
// CPU: shards combined vs the single-rank op.

struct CpuCase {
  DType act;
  int tp;
};

class VocabParallelCrossEntropyCpu : public ::testing::TestWithParam<CpuCase> {};

TEST_P(VocabParallelCrossEntropyCpu, ShardsMatchSingleRankOp) {
  const CpuCase& p = GetParam();
  // padded 16 over 4 shards of 4: shard 2 holds 8, 9, 10 and a padding column, shard 3 only
  // padding. Padding logits are NaN: any read of them would show in the results.
  const int64_t rows = 10, vocab = 11, padded = 16;
  const float grad_scale = 0.37f;
  const DType stat = p.act == DType::kF64 ? DType::kF64 : DType::kF32;
  const std::vector<double> x = make_logits(rows, vocab, padded, 7, -4.0f, 4.0f, NAN);
  std::vector<int32_t> targets = make_targets(rows, vocab, 8, 3);  // rows 1, 4, 7 ignored
  // First and last columns of the shards (4 | 8 and 3, 7 | 8 at the cuts for tp = 4 | 2).
  targets[3] = 8;
  targets[5] = 4;
  targets[6] = 3;
  targets[8] = 7;

  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const ShardedResult got =
      run_sharded(pool, stream, p.act, stat, x, targets, rows, vocab, padded, p.tp, grad_scale);
  const std::vector<std::vector<double>> want =
      reference(p.act, stat, x, targets, rows, vocab, padded, grad_scale);

  // f64: only the order of the exp sum differs (a few ulp). f32 stats: sum_exp rounded to f32
  // (2^-24 relative) moves losses by ~1e-7; bf16 dlogits may then round one ulp (2^-8) apart.
  const Tol loss_tol = p.act == DType::kF64 ? Tol{1e-14, 1e-14, 1e-26} : Tol{1e-6, 1e-6, 1e-12};
  const Tol grad_tol = p.act == DType::kF64   ? Tol{1e-15, 1e-13, 1e-26}
                       : p.act == DType::kF32 ? Tol{1e-7, 1e-5, 1e-10}
                                              : Tol{1e-7, 8e-3, 1e-4};
  for (int k = 0; k < p.tp; ++k) {
    EXPECT_TRUE(testing::tensors_near(got.losses[k], want[0], loss_tol)) << "shard " << k;
  }
  EXPECT_TRUE(testing::tensors_near(got.dlogits, want[1], grad_tol));
  // Row weights (one of them 0) on step 3 against the weighted single-rank op.
  std::vector<float> w = testing::random_uniform(rows, 9, 0.1f, 2.0f);
  w[2] = 0.0f;
  const ShardedResult wgot =
      run_sharded(pool, stream, p.act, stat, x, targets, rows, vocab, padded, p.tp, grad_scale, w);
  const std::vector<std::vector<double>> wwant =
      reference(p.act, stat, x, targets, rows, vocab, padded, grad_scale, w);
  for (int k = 0; k < p.tp; ++k) {
    EXPECT_TRUE(testing::tensors_near(wgot.losses[k], wwant[0], loss_tol, true)) << "shard " << k;
  }
  EXPECT_TRUE(testing::tensors_near(wgot.dlogits, wwant[1], grad_tol, true));
  EXPECT_EQ(wgot.losses[0][2], 0.0);
  EXPECT_NE(wgot.losses[0][0], got.losses[0][0]);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < padded; ++c) {
      if (c >= vocab || targets[r] < 0) {
        EXPECT_EQ(got.dlogits[r * padded + c], 0.0) << r << "," << c;
      }
    }
    if (targets[r] < 0) {
      EXPECT_EQ(got.losses[0][r], 0.0) << r;
    }
  }
  // A shard of padding only: max -inf, sum 0, no target.
  if (p.tp == 4) {
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got.local_max[3][r], -INFINITY) << r;
      EXPECT_EQ(got.local_sum[3][r], 0.0) << r;
      EXPECT_EQ(got.local_target[3][r], 0.0) << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, VocabParallelCrossEntropyCpu,
                         ::testing::Values(CpuCase{DType::kF64, 1}, CpuCase{DType::kF64, 2},
                                           CpuCase{DType::kF64, 4}, CpuCase{DType::kF32, 2},
                                           CpuCase{DType::kF32, 4}, CpuCase{DType::kBF16, 4}));

TEST(VocabParallelCrossEntropyCpu, LossesOnlyAndAliasedDlogits) {
  const int64_t rows = 6, vocab = 13, cols = 8;  // shard 1 of 2: global columns [8, 16)
  const VocabShardArgs args{rows, vocab, /*shard_start=*/8, cols, /*grad_scale=*/0.5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = testing::random_uniform(rows * cols, 3, -3.0f, 3.0f);
  const TensorView logits = pool.from(x, DType::kF32, {rows, cols});
  const TensorView targets = pool.from_i32({9, -1, 2, 12, 8, 0}, {rows});
  // Statistics as if all-reduced from the other shard.
  const TensorView row_max = pool.from({3.5f, 2.0f, 3.1f, 2.9f, 3.3f, 4.0f}, DType::kF32, {rows});
  const TensorView sum_exp = pool.from({5.0f, 4.0f, 6.5f, 7.0f, 3.5f, 9.0f}, DType::kF32, {rows});
  const TensorView target_logit =
      pool.from({0.5f, 0.0f, -1.0f, 1.5f, 2.5f, 0.25f}, DType::kF32, {rows});
  TensorView losses = pool.empty(DType::kF32, {rows});
  TensorView dlogits = pool.empty(DType::kF32, {rows, cols});
  vocab_shard_cross_entropy(args, losses, dlogits, logits, row_max, sum_exp, target_logit, targets,
                            stream);
  const std::vector<float> l = testing::to_host(losses), d = testing::to_host(dlogits);
  // Closed form, row 0 (target 9 = local column 1).
  const double lse0 = 3.5 + std::log(5.0);
  EXPECT_NEAR(l[0], lse0 - 0.5, 1e-6);
  for (int64_t c = 0; c < cols; ++c) {
    const double want = c < vocab - 8 ? 0.5 * (std::exp(x[c] - lse0) - (c == 1 ? 1.0 : 0.0)) : 0.0;
    EXPECT_NEAR(d[c], want, 1e-7) << c;
  }
  EXPECT_EQ(l[1], 0.0f);
  // Row 2's target lives on the other shard: no -1 here, softmax only.
  for (int64_t c = 0; c < vocab - 8; ++c) EXPECT_GT(d[2 * cols + c], 0.0f) << c;

  TensorView losses_only = pool.empty(DType::kF32, {rows});
  vocab_shard_cross_entropy(args, losses_only, TensorView{}, logits, row_max, sum_exp, target_logit,
                            targets, stream);
  EXPECT_EQ(testing::to_host(losses_only), l);

  TensorView inplace = pool.from(x, DType::kF32, {rows, cols});
  TensorView losses_inplace = pool.empty(DType::kF32, {rows});
  vocab_shard_cross_entropy(args, losses_inplace, inplace, inplace, row_max, sum_exp, target_logit,
                            targets, stream);
  EXPECT_EQ(testing::to_host(losses_inplace), l);
  EXPECT_EQ(testing::to_host(inplace), d);
}

TEST(VocabParallelCrossEntropyCpuDeathTest, RejectsBadArguments) {
  const VocabShardArgs args{/*rows=*/2, /*vocab=*/5, /*shard_start=*/4, /*shard_cols=*/4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView logits = pool.from(testing::random_uniform(8, 1), DType::kF32, {2, 4});
  const TensorView stat = pool.from({1.0f, 2.0f}, DType::kF32, {2});
  TensorView out = pool.empty(DType::kF32, {2});
  TensorView out2 = pool.empty(DType::kF32, {2});
  const TensorView bad_target = pool.from_i32({1, 5}, {2});
  EXPECT_DEATH(vocab_shard_sum_exp(args, out, out2, logits, stat, bad_target, stream),
               "targets\\[1\\] = 5 is not below vocab = 5");
  EXPECT_DEATH(vocab_shard_cross_entropy(args, out, TensorView{}, logits, stat, stat, stat,
                                         bad_target, stream),
               "targets\\[1\\] = 5");
  EXPECT_DEATH(vocab_shard_max(args, pool.empty(DType::kF64, {2}), logits, stream),
               "must be f32 \\(or f64 with f64 logits\\)");
  EXPECT_DEATH(vocab_shard_max(args, out, pool.empty(DType::kF32, {2, 5}), stream),
               "logits must be");
  EXPECT_DEATH(vocab_shard_max(VocabShardArgs{2, 5, -1, 4}, out, logits, stream), "shard_start=-1");
  EXPECT_DEATH(vocab_shard_cross_entropy(args, out, pool.empty(DType::kBF16, {2, 4}), logits, stat,
                                         stat, stat, pool.from_i32({1, -1}, {2}), stream),
               "dlogits must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twins.

struct GpuCase {
  DType dtype;
  int64_t rows, vocab, padded;
  int tp, shard;
  float lo, hi;  // logit range
};

// Tolerances (as in cross_entropy_test). sum_exp: __expf and an f32 tree sum against double,
// ~1e-6 relative. Losses: ~1e-6 relative to the log-sum-exp. dlogits: ~1e-5 relative on p plus
// an absolute term scaled by grad_scale for p - 1 near the target; bf16: one rounding.
Tol loss_tol(DType dtype) { return dtype == DType::kBF16 ? Tol{1e-4, 1e-4} : Tol{2e-5, 2e-5}; }
Tol grad_tol(DType dtype, float grad_scale) {
  const double a = 2e-6 * grad_scale;
  return dtype == DType::kBF16 ? Tol{a, 8e-3, 1e-4} : Tol{a, 5e-5, 1e-8};
}

class VocabParallelCrossEntropyGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(VocabParallelCrossEntropyGpu, TwinsMatchCpu) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const int64_t rows = p.rows, cols = p.padded / p.tp, start = p.shard * cols;
  const int64_t real = std::clamp<int64_t>(p.vocab - start, 0, cols);
  const float grad_scale = 1.0f / static_cast<float>(rows);
  const VocabShardArgs args{rows, p.vocab, start, cols, grad_scale};
  // Padding holds huge values: they must not reach the statistics or the loss.
  std::vector<double> x = make_logits(rows, p.vocab, p.padded, 100 + p.vocab, p.lo, p.hi, 1e30);
  if (p.dtype == DType::kBF16) {
    for (double& v : x) v = testing::round_bf16({static_cast<float>(v)})[0];
  }
  std::vector<int32_t> t = make_targets(rows, p.vocab, 200 + rows, rows > 2 ? 3 : 0);
  if (real > 0) t[0] = static_cast<int32_t>(start + real - 1);  // a target in this shard
  // Global statistics from the whole row, in double, rounded to f32 (what the all-reduces give).
  std::vector<double> m(rows, -INFINITY), s(rows, 0.0), xt(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < p.vocab; ++c) m[r] = std::max(m[r], x[r * p.padded + c]);
    for (int64_t c = 0; c < p.vocab; ++c) s[r] += std::exp(x[r * p.padded + c] - m[r]);
    xt[r] = t[r] >= 0 ? x[r * p.padded + t[r]] : 0.0;
  }
  const std::vector<double> shard_x = columns(x, rows, p.padded, start, cols);

  const std::vector<float> w = testing::random_uniform(rows, 300 + rows, 0.1f, 2.0f);
  // Runs every twin on one device; returns {row_max, sum_exp, target_logit, losses, dlogits,
  // losses (losses only), losses (in place), dlogits (in place), and with row weights w: losses,
  // dlogits, losses (losses only)}.
  auto run = [&](Device device) {
    TestStream stream(device);
    TensorPool pool(device);
    const TensorView logits = upload(pool, shard_x, p.dtype, {rows, cols});
    const TensorView targets = pool.from_i32(t, {rows});
    const TensorView gm = upload(pool, m, DType::kF32, {rows});
    const TensorView gs = upload(pool, s, DType::kF32, {rows});
    const TensorView gxt = upload(pool, xt, DType::kF32, {rows});
    TensorView row_max = pool.empty(DType::kF32, {rows});
    TensorView sum_exp = pool.empty(DType::kF32, {rows});
    TensorView target_logit = pool.empty(DType::kF32, {rows});
    TensorView losses = pool.empty(DType::kF32, {rows});
    TensorView dlogits = pool.empty(p.dtype, {rows, cols});
    TensorView eval_losses = pool.empty(DType::kF32, {rows});
    TensorView inplace_losses = pool.empty(DType::kF32, {rows});
    TensorView inplace = upload(pool, shard_x, p.dtype, {rows, cols});
    vocab_shard_max(args, row_max, logits, stream);
    vocab_shard_sum_exp(args, sum_exp, target_logit, logits, gm, targets, stream);
    vocab_shard_cross_entropy(args, losses, dlogits, logits, gm, gs, gxt, targets, stream);
    vocab_shard_cross_entropy(args, eval_losses, TensorView{}, logits, gm, gs, gxt, targets,
                              stream);
    vocab_shard_cross_entropy(args, inplace_losses, inplace, inplace, gm, gs, gxt, targets, stream);
    VocabShardArgs wargs = args;
    wargs.row_weights = pool.from(w, DType::kF32, {rows});
    TensorView wlosses = pool.empty(DType::kF32, {rows});
    TensorView wdlogits = pool.empty(p.dtype, {rows, cols});
    TensorView weval = pool.empty(DType::kF32, {rows});
    vocab_shard_cross_entropy(wargs, wlosses, wdlogits, logits, gm, gs, gxt, targets, stream);
    vocab_shard_cross_entropy(wargs, weval, TensorView{}, logits, gm, gs, gxt, targets, stream);
    std::vector<std::vector<double>> out;
    for (const TensorView& v : {row_max, sum_exp, target_logit, losses, dlogits, eval_losses,
                                inplace_losses, inplace, wlosses, wdlogits, weval}) {
      out.push_back(testing::to_host_f64(v));
    }
    return out;
  };
  const std::vector<std::vector<double>> c = run(Device::kCpu), g = run(Device::kCuda);
  if (real == 0) {  // padding only: max -inf, nothing summed, no target
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(g[0][r], -INFINITY) << r;
      EXPECT_EQ(g[1][r], 0.0) << r;
      EXPECT_EQ(g[2][r], 0.0) << r;
    }
  } else {
    EXPECT_TRUE(testing::tensors_near(g[0], c[0], Tol{0.0, 0.0, 0.0}));  // max is exact
    EXPECT_TRUE(testing::tensors_near(g[1], c[1], Tol{0.0, 2e-5, 1e-9}));
    EXPECT_TRUE(testing::tensors_near(g[2], c[2], Tol{0.0, 0.0, 0.0}));  // a copy
  }
  const Tol lt = loss_tol(p.dtype), gt = grad_tol(p.dtype, grad_scale);
  EXPECT_TRUE(testing::tensors_near(g[3], c[3], lt));
  EXPECT_TRUE(testing::tensors_near(g[4], c[4], gt, /*allow_zero_ref=*/real == 0));
  EXPECT_TRUE(testing::tensors_near(g[5], c[3], lt));
  EXPECT_TRUE(testing::tensors_near(g[6], c[3], lt));
  EXPECT_TRUE(testing::tensors_near(g[7], c[4], gt, /*allow_zero_ref=*/real == 0));
  EXPECT_TRUE(testing::tensors_near(g[8], c[8], lt));
  EXPECT_TRUE(testing::tensors_near(g[9], c[9], grad_tol(p.dtype, 2.0f * grad_scale),
                                    /*allow_zero_ref=*/real == 0));
  EXPECT_TRUE(testing::tensors_near(g[10], c[8], lt));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, VocabParallelCrossEntropyGpu,
    ::testing::Values(
        // GPT-2 (50257 padded to 50304): the shard holding the vocabulary's end (tail of one
        // real column after whole 16-byte packs), a shard of real columns only.
        GpuCase{DType::kBF16, 16, 50257, 50304, 4, 3, -5.0f, 5.0f},
        GpuCase{DType::kF32, 4, 50257, 50304, 8, 7, -5.0f, 5.0f},
        GpuCase{DType::kBF16, 8, 50257, 50304, 2, 0, -30.0f, 30.0f},
        GpuCase{DType::kF32, 3, 50257, 50304, 1, 0, -5.0f, 5.0f},
        // Small and odd: scalar path (cols not a multiple of the pack), a shard of padding only,
        // vector path with a real tail inside a pack.
        GpuCase{DType::kBF16, 3, 5, 8, 4, 2, -3.0f, 3.0f},
        GpuCase{DType::kBF16, 3, 5, 8, 4, 3, -3.0f, 3.0f},
        GpuCase{DType::kF32, 7, 130, 132, 2, 1, -4.0f, 4.0f},
        GpuCase{DType::kBF16, 5, 4097, 4112, 2, 1, -4.0f, 4.0f},
        GpuCase{DType::kF32, 5, 4097, 4112, 2, 0, -4.0f, 4.0f}));

// The whole GPU pipeline over 4 shards (all-reduces on the host) against the single-rank CPU op.
TEST(VocabParallelCrossEntropyGpuPipeline, MatchesSingleRankCpuOp) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    const int64_t rows = 12, vocab = 50257, padded = 50304;
    const float grad_scale = 1.0f / rows;
    std::vector<double> x = make_logits(rows, vocab, padded, 41, -6.0f, 6.0f, 1e30);
    if (dtype == DType::kBF16) {
      for (double& v : x) v = testing::round_bf16({static_cast<float>(v)})[0];
    }
    const std::vector<int32_t> t = make_targets(rows, vocab, 42, 4);
    TestStream stream(Device::kCuda);
    TensorPool pool(Device::kCuda);
    const ShardedResult got =
        run_sharded(pool, stream, dtype, DType::kF32, x, t, rows, vocab, padded, 4, grad_scale);
    // Reference in f32 storage on the same (rounded) values: the bf16 result rounds once more.
    const std::vector<std::vector<double>> want =
        reference(DType::kF32, DType::kF32, x, t, rows, vocab, padded, grad_scale);
    for (int k = 0; k < 4; ++k) {
      EXPECT_TRUE(testing::tensors_near(got.losses[k], want[0], loss_tol(dtype))) << k;
    }
    EXPECT_TRUE(testing::tensors_near(got.dlogits, want[1], grad_tol(dtype, grad_scale)));
    // With row weights.
    const std::vector<float> w = testing::random_uniform(rows, 43, 0.1f, 2.0f);
    const ShardedResult wgot =
        run_sharded(pool, stream, dtype, DType::kF32, x, t, rows, vocab, padded, 4, grad_scale, w);
    const std::vector<std::vector<double>> wwant =
        reference(DType::kF32, DType::kF32, x, t, rows, vocab, padded, grad_scale, w);
    for (int k = 0; k < 4; ++k) {
      EXPECT_TRUE(testing::tensors_near(wgot.losses[k], wwant[0], loss_tol(dtype))) << k;
    }
    EXPECT_TRUE(testing::tensors_near(wgot.dlogits, wwant[1], grad_tol(dtype, 2.0f * grad_scale)));
  }
}

}  // namespace
}  // namespace anvil::ops
