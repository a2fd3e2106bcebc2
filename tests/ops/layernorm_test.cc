// Tests of LayerNorm and residual LayerNorm (ops/layernorm.h):
//   y = (x - mean) rstd gamma + beta (=); residual: sum = a + b (=), y = layernorm(sum)
//   backward: dx (= or +=), dgamma += , dbeta +=
// CPU twin: forward statistics, central finite differences in double for dx, dgamma, dbeta and
// the residual variant (d/da = d/db = dx), both Accumulate modes, += (2x).
// GPU: against the CPU twin, bf16 and f32, awkward shapes, misaligned views, determinism, 2x.
#include "ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

std::vector<double> as_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

void set(TensorView v, const std::vector<double>& values) {
  std::memcpy(v.data, values.data(), values.size() * sizeof(double));
}

std::vector<double> add(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

TEST(LayerNormCpu, ForwardStatistics) {
  const LayerNormArgs args{3, 10, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> x = as_f64(testing::random_uniform(30, 1, -2.0f, 3.0f));
  TensorView y = pool.empty(DType::kF64, {3, 10});
  TensorView mean = pool.empty(DType::kF64, {3});
  TensorView rstd = pool.empty(DType::kF64, {3});
  layernorm_forward(args, y, mean, rstd, pool.from_f64(x, {3, 10}),
                    pool.from_f64(std::vector<double>(10, 1.0), {10}),
                    pool.from_f64(std::vector<double>(10, 0.0), {10}), stream);
  const std::vector<double> yv = testing::to_host_f64(y), m = testing::to_host_f64(mean),
                            r = testing::to_host_f64(rstd);
  for (int row = 0; row < 3; ++row) {
    double s = 0.0, ss = 0.0;
    for (int c = 0; c < 10; ++c) s += x[row * 10 + c];
    for (int c = 0; c < 10; ++c) ss += std::pow(x[row * 10 + c] - s / 10, 2);
    const double var = ss / 10;
    EXPECT_NEAR(m[row], s / 10, 1e-12);
    EXPECT_NEAR(r[row], 1.0 / std::sqrt(var + 1e-5), 1e-12);
    // gamma = 1, beta = 0: each output row has mean 0 and variance var / (var + eps).
    double ys = 0.0, yss = 0.0;
    for (int c = 0; c < 10; ++c) ys += yv[row * 10 + c];
    for (int c = 0; c < 10; ++c) yss += yv[row * 10 + c] * yv[row * 10 + c];
    EXPECT_NEAR(ys / 10, 0.0, 1e-12);
    EXPECT_NEAR(yss / 10, var / (var + 1e-5), 1e-12);
  }
}

// L = sum(y * w). Gradients from backward(dy = w) against central differences, in double.
TEST(LayerNormCpu, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, cols = 7;
  const LayerNormArgs args{rows, cols, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> x0 = as_f64(testing::random_uniform(rows * cols, 2, -2.0f, 2.0f));
  const std::vector<double> g0 = as_f64(testing::random_uniform(cols, 3, 0.5f, 1.5f));
  const std::vector<double> b0 = as_f64(testing::random_uniform(cols, 4));
  const std::vector<double> w = as_f64(testing::random_uniform(rows * cols, 5));
  TensorView x = pool.from_f64(x0, {rows, cols});
  TensorView gamma = pool.from_f64(g0, {cols});
  TensorView beta = pool.from_f64(b0, {cols});
  TensorView y = pool.empty(DType::kF64, {rows, cols});
  TensorView mean = pool.empty(DType::kF64, {rows});
  TensorView rstd = pool.empty(DType::kF64, {rows});
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv,
                  const std::vector<double>& bv) {
    set(x, xv);
    set(gamma, gv);
    set(beta, bv);
    layernorm_forward(args, y, mean, rstd, x, gamma, beta, stream);
    return dot(testing::to_host_f64(y), w);
  };
  const std::vector<double> num_dx =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(v, g0, b0); }, x0);
  const std::vector<double> num_dg =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(x0, v, b0); }, g0);
  const std::vector<double> num_db =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(x0, g0, v); }, b0);
  loss(x0, g0, b0);  // leaves mean/rstd of x0 for backward

  const TensorView dy = pool.from_f64(w, {rows, cols});
  TensorView dx = pool.empty(DType::kF64, {rows, cols});
  TensorView dgamma = pool.from_f64(std::vector<double>(cols, 0.0), {cols});
  TensorView dbeta = pool.from_f64(std::vector<double>(cols, 0.0), {cols});
  layernorm_backward(args, Accumulate::kOverwrite, dx, dgamma, dbeta, dy, x, gamma, mean, rstd,
                     engine::Workspace{}, stream);
  const std::vector<double> got_dx = testing::to_host_f64(dx);
  const std::vector<double> got_dg = testing::to_host_f64(dgamma);
  const std::vector<double> got_db = testing::to_host_f64(dbeta);
  EXPECT_GT(dot(got_dx, got_dx), 0.0);
  EXPECT_TRUE(testing::tensors_near(got_dx, num_dx, Tol{1e-7, 1e-6}));
  EXPECT_TRUE(testing::tensors_near(got_dg, num_dg, Tol{1e-7, 1e-6}));
  EXPECT_TRUE(testing::tensors_near(got_db, num_db, Tol{1e-7, 1e-6}));

  // kAdd: dx += the same gradient onto a random start; dgamma/dbeta (+=) double exactly.
  const std::vector<double> start = as_f64(testing::random_uniform(rows * cols, 6));
  set(dx, start);
  layernorm_backward(args, Accumulate::kAdd, dx, dgamma, dbeta, dy, x, gamma, mean, rstd,
                     engine::Workspace{}, stream);
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host_f64(dx), add(start, got_dx), Tol{1e-15, 1e-14}));
  const std::vector<double> dg2 = testing::to_host_f64(dgamma), db2 = testing::to_host_f64(dbeta);
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(dg2[c], 2.0 * got_dg[c]) << c;
    EXPECT_EQ(db2[c], 2.0 * got_db[c]) << c;
  }
}

// y = layernorm(a + b): dL/da = dL/db = dx of layernorm_backward at x = sum.
TEST(LayerNormCpu, ResidualGradientFlowsToBothInputs) {
  const int64_t rows = 2, cols = 9;
  const LayerNormArgs args{rows, cols, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> a0 = as_f64(testing::random_uniform(rows * cols, 7));
  const std::vector<double> b0 = as_f64(testing::random_uniform(rows * cols, 8));
  const std::vector<double> w = as_f64(testing::random_uniform(rows * cols, 9));
  const TensorView gamma =
      pool.from_f64(as_f64(testing::random_uniform(cols, 10, 0.5f, 1.5f)), {cols});
  const TensorView beta = pool.from_f64(as_f64(testing::random_uniform(cols, 11)), {cols});
  TensorView a = pool.from_f64(a0, {rows, cols});
  TensorView b = pool.from_f64(b0, {rows, cols});
  TensorView sum = pool.empty(DType::kF64, {rows, cols});
  TensorView y = pool.empty(DType::kF64, {rows, cols});
  TensorView mean = pool.empty(DType::kF64, {rows});
  TensorView rstd = pool.empty(DType::kF64, {rows});
  auto loss = [&](const std::vector<double>& av, const std::vector<double>& bv) {
    set(a, av);
    set(b, bv);
    residual_layernorm_forward(args, sum, y, mean, rstd, a, b, gamma, beta, stream);
    return dot(testing::to_host_f64(y), w);
  };
  const std::vector<double> num_da =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(v, b0); }, a0);
  const std::vector<double> num_db =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(a0, v); }, b0);
  loss(a0, b0);
  EXPECT_EQ(testing::to_host_f64(sum), add(a0, b0));

  // The residual forward's y equals plain layernorm of the sum.
  TensorView y_plain = pool.empty(DType::kF64, {rows, cols});
  TensorView mean2 = pool.empty(DType::kF64, {rows});
  TensorView rstd2 = pool.empty(DType::kF64, {rows});
  layernorm_forward(args, y_plain, mean2, rstd2, sum, gamma, beta, stream);
  EXPECT_EQ(testing::to_host_f64(y_plain), testing::to_host_f64(y));

  TensorView dx = pool.empty(DType::kF64, {rows, cols});
  TensorView dgamma = pool.from_f64(std::vector<double>(cols, 0.0), {cols});
  TensorView dbeta = pool.from_f64(std::vector<double>(cols, 0.0), {cols});
  layernorm_backward(args, Accumulate::kOverwrite, dx, dgamma, dbeta,
                     pool.from_f64(w, {rows, cols}), sum, gamma, mean, rstd, engine::Workspace{},
                     stream);
  const std::vector<double> got = testing::to_host_f64(dx);
  EXPECT_TRUE(testing::tensors_near(got, num_da, Tol{1e-7, 1e-6}));
  EXPECT_TRUE(testing::tensors_near(got, num_db, Tol{1e-7, 1e-6}));
}

// bf16 residual: the stored sum is round(a + b) and y normalizes that rounded sum.
TEST(LayerNormCpu, ResidualNormalizesRoundedSum) {
  const int64_t rows = 4, cols = 16;
  const LayerNormArgs args{rows, cols, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> a = testing::round_bf16(testing::random_uniform(rows * cols, 12));
  const std::vector<float> b = testing::round_bf16(testing::random_uniform(rows * cols, 13));
  const std::vector<float> g = testing::random_uniform(cols, 14),
                           be = testing::random_uniform(cols, 15);
  std::vector<float> s(a.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = engine::round_to_bf16(a[i] + b[i]);
  TensorView sum = pool.empty(DType::kBF16, {rows, cols});
  TensorView y = pool.empty(DType::kBF16, {rows, cols});
  TensorView mean = pool.empty(DType::kF32, {rows}), rstd = pool.empty(DType::kF32, {rows});
  residual_layernorm_forward(args, sum, y, mean, rstd, pool.from(a, DType::kBF16, {rows, cols}),
                             pool.from(b, DType::kBF16, {rows, cols}),
                             pool.from(g, DType::kBF16, {cols}),
                             pool.from(be, DType::kBF16, {cols}), stream);
  EXPECT_EQ(testing::to_host(sum), s);
  TensorView y2 = pool.empty(DType::kBF16, {rows, cols});
  TensorView mean2 = pool.empty(DType::kF32, {rows}), rstd2 = pool.empty(DType::kF32, {rows});
  layernorm_forward(args, y2, mean2, rstd2, pool.from(s, DType::kBF16, {rows, cols}),
                    pool.from(g, DType::kBF16, {cols}), pool.from(be, DType::kBF16, {cols}),
                    stream);
  EXPECT_EQ(testing::to_host(y), testing::to_host(y2));
  EXPECT_EQ(testing::to_host(mean), testing::to_host(mean2));
}

TEST(LayerNormCpu, F32GradientsAccumulateExactlyTwice) {
  const int64_t rows = 5, cols = 12;
  const LayerNormArgs args{rows, cols, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x =
      pool.from(testing::random_uniform(rows * cols, 16), DType::kF32, {rows, cols});
  const TensorView gamma = pool.from(testing::random_uniform(cols, 17), DType::kF32, {cols});
  const TensorView beta = pool.from(testing::random_uniform(cols, 18), DType::kF32, {cols});
  TensorView y = pool.empty(DType::kF32, {rows, cols});
  TensorView mean = pool.empty(DType::kF32, {rows}), rstd = pool.empty(DType::kF32, {rows});
  layernorm_forward(args, y, mean, rstd, x, gamma, beta, stream);
  const TensorView dy =
      pool.from(testing::random_uniform(rows * cols, 19), DType::kF32, {rows, cols});
  TensorView dx = pool.empty(DType::kF32, {rows, cols});
  TensorView dgamma = pool.from(std::vector<float>(cols, 0.0f), DType::kF32, {cols});
  TensorView dbeta = pool.from(std::vector<float>(cols, 0.0f), DType::kF32, {cols});
  layernorm_backward(args, Accumulate::kOverwrite, dx, dgamma, dbeta, dy, x, gamma, mean, rstd,
                     engine::Workspace{}, stream);
  const std::vector<float> g1 = testing::to_host(dgamma), b1 = testing::to_host(dbeta);
  layernorm_backward(args, Accumulate::kOverwrite, dx, dgamma, dbeta, dy, x, gamma, mean, rstd,
                     engine::Workspace{}, stream);
  const std::vector<float> g2 = testing::to_host(dgamma), b2 = testing::to_host(dbeta);
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(g2[c], 2.0f * g1[c]);
    EXPECT_EQ(b2[c], 2.0f * b1[c]);
  }
}

TEST(LayerNormCpuDeathTest, RejectsBadArguments) {
  const LayerNormArgs args{2, 4, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x = pool.from(testing::random_uniform(8, 20), DType::kF32, {2, 4});
  const TensorView g = pool.from(testing::random_uniform(4, 21), DType::kF32, {4});
  TensorView mean = pool.empty(DType::kF32, {2}), rstd = pool.empty(DType::kF32, {2});
  EXPECT_DEATH(
      layernorm_forward(args, pool.empty(DType::kF32, {2, 5}), mean, rstd, x, g, g, stream),
      "y must be");
  EXPECT_DEATH(layernorm_forward(args, pool.empty(DType::kF32, {2, 4}), mean, rstd, x,
                                 pool.empty(DType::kF32, {5}), g, stream),
               "gamma must be");
  EXPECT_DEATH(layernorm_backward(args, Accumulate::kAdd, pool.empty(DType::kF32, {2, 4}),
                                  pool.empty(DType::kBF16, {4}), pool.empty(DType::kF32, {4}), x, x,
                                  g, mean, rstd, engine::Workspace{}, stream),
               "dgamma must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin. The CPU twin computes in double from the same (bf16-rounded) inputs and rounds
// once; the GPU computes in f32.
// Tolerances: bf16 outputs may land one bf16 ulp apart (<= 2^-7 relative): rtol 1e-2, plus an
// atol for values near 0 (where g - mean(g) ... cancels). f32 outputs: f32 statistics vs double,
// 1e-4. mean/rstd and dgamma/dbeta are f32 on both sides from identical inputs: 1e-4 relative
// (dgamma/dbeta sum `rows` terms, so atol grows with rows).

struct GpuCase {
  int64_t rows, cols;
  DType dtype;
  bool misaligned;  // views start one element past an aligned base: the scalar kernel path
};

class LayerNormGpu : public ::testing::TestWithParam<GpuCase> {};

Tol act_tol(DType t) { return t == DType::kBF16 ? Tol{1e-2, 1e-2, 1e-4} : Tol{1e-4, 1e-4, 1e-8}; }

// A [rows, cols] tensor of `values` whose data starts `shift` elements past an aligned base.
TensorView shifted(TensorPool& pool, const std::vector<float>& values, DType dtype, int64_t rows,
                   int64_t cols, bool shift) {
  if (!shift) return pool.from(values, dtype, {rows, cols});
  std::vector<float> padded(values.size() + 1, 0.5f);
  std::copy(values.begin(), values.end(), padded.begin() + 1);
  TensorView base = pool.from(padded, dtype, {rows * cols + 1});
  return engine::reshape(engine::slice_rows(base, 1, rows * cols + 1), {rows, cols});
}

TEST_P(LayerNormGpu, ForwardMatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const LayerNormArgs args{p.rows, p.cols, 1e-5f};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const int64_t n = p.rows * p.cols;
  // An offset mean, so the two-pass variance matters.
  const std::vector<float> a = testing::random_uniform(n, 30, 0.5f, 2.5f);
  const std::vector<float> b = testing::random_uniform(n, 31);
  const std::vector<float> g = testing::random_uniform(p.cols, 32, 0.5f, 1.5f);
  const std::vector<float> be = testing::random_uniform(p.cols, 33);

  for (bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "residual" : "plain");
    TensorView out[2][4];  // [cpu, gpu] x {y, mean, rstd, sum}
    for (int d = 0; d < 2; ++d) {
      TensorPool& pool = d == 0 ? cpool : gpool;
      engine::Stream& s = d == 0 ? cs.get() : gs.get();
      out[d][0] = pool.empty(p.dtype, {p.rows, p.cols});
      out[d][1] = pool.empty(DType::kF32, {p.rows});
      out[d][2] = pool.empty(DType::kF32, {p.rows});
      const TensorView av = shifted(pool, a, p.dtype, p.rows, p.cols, p.misaligned);
      const TensorView gv = pool.from(g, p.dtype, {p.cols}), bev = pool.from(be, p.dtype, {p.cols});
      if (residual) {
        out[d][3] = pool.empty(p.dtype, {p.rows, p.cols});
        residual_layernorm_forward(args, out[d][3], out[d][0], out[d][1], out[d][2], av,
                                   pool.from(b, p.dtype, {p.rows, p.cols}), gv, bev, s);
      } else {
        layernorm_forward(args, out[d][0], out[d][1], out[d][2], av, gv, bev, s);
      }
    }
    EXPECT_TRUE(testing::tensors_near(testing::to_host(out[1][0]), testing::to_host(out[0][0]),
                                      act_tol(p.dtype)));
    EXPECT_TRUE(testing::tensors_near(testing::to_host(out[1][1]), testing::to_host(out[0][1]),
                                      Tol{1e-5, 1e-4, 1e-8}));
    EXPECT_TRUE(testing::tensors_near(testing::to_host(out[1][2]), testing::to_host(out[0][2]),
                                      Tol{1e-5, 1e-4, 1e-8}));
    // The rounded sum is computed identically on both sides.
    if (residual) {
      EXPECT_EQ(testing::to_host(out[1][3]), testing::to_host(out[0][3]));
    }
  }
}

TEST_P(LayerNormGpu, BackwardMatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const LayerNormArgs args{p.rows, p.cols, 1e-5f};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const int64_t n = p.rows * p.cols;
  const std::vector<float> x = testing::random_uniform(n, 40, -1.0f, 2.0f);
  const std::vector<float> dy = testing::random_uniform(n, 41);
  const std::vector<float> g = testing::random_uniform(p.cols, 42, 0.5f, 1.5f);
  const std::vector<float> be = testing::random_uniform(p.cols, 43);
  const std::vector<float> dx0 = testing::random_uniform(n, 44);
  const std::vector<float> dg0 = testing::random_uniform(p.cols, 45);
  const std::vector<float> db0 = testing::random_uniform(p.cols, 46);

  // mean/rstd: from the CPU forward, given to both backwards so only the backward differs.
  TensorView c_x = cpool.from(x, p.dtype, {p.rows, p.cols});
  TensorView c_g = cpool.from(g, p.dtype, {p.cols});
  TensorView c_y = cpool.empty(p.dtype, {p.rows, p.cols});
  TensorView c_mean = cpool.empty(DType::kF32, {p.rows}),
             c_rstd = cpool.empty(DType::kF32, {p.rows});
  layernorm_forward(args, c_y, c_mean, c_rstd, c_x, c_g, cpool.from(be, p.dtype, {p.cols}), cs);
  const std::vector<float> mean = testing::to_host(c_mean), rstd = testing::to_host(c_rstd);
  const TensorView g_x = shifted(gpool, x, p.dtype, p.rows, p.cols, p.misaligned);
  const TensorView g_g = gpool.from(g, p.dtype, {p.cols});
  const TensorView g_mean = gpool.from(mean, DType::kF32, {p.rows});
  const TensorView g_rstd = gpool.from(rstd, DType::kF32, {p.rows});
  const engine::Workspace ws = gpool.workspace(layernorm_backward_workspace_bytes(args));

  for (Accumulate acc : {Accumulate::kOverwrite, Accumulate::kAdd}) {
    SCOPED_TRACE(acc == Accumulate::kAdd ? "kAdd" : "kOverwrite");
    TensorView c_dx = acc == Accumulate::kAdd ? cpool.from(dx0, p.dtype, {p.rows, p.cols})
                                              : cpool.empty(p.dtype, {p.rows, p.cols});
    TensorView g_dx = acc == Accumulate::kAdd ? gpool.from(dx0, p.dtype, {p.rows, p.cols})
                                              : gpool.empty(p.dtype, {p.rows, p.cols});
    TensorView c_dg = cpool.from(dg0, DType::kF32, {p.cols}),
               c_db = cpool.from(db0, DType::kF32, {p.cols});
    TensorView g_dg = gpool.from(dg0, DType::kF32, {p.cols}),
               g_db = gpool.from(db0, DType::kF32, {p.cols});
    layernorm_backward(args, acc, c_dx, c_dg, c_db, cpool.from(dy, p.dtype, {p.rows, p.cols}), c_x,
                       c_g, c_mean, c_rstd, engine::Workspace{}, cs);
    const TensorView g_dy = gpool.from(dy, p.dtype, {p.rows, p.cols});
    layernorm_backward(args, acc, g_dx, g_dg, g_db, g_dy, g_x, g_g, g_mean, g_rstd, ws, gs);
    EXPECT_TRUE(
        testing::tensors_near(testing::to_host(g_dx), testing::to_host(c_dx), act_tol(p.dtype)));
    const Tol ptol{1e-5 * static_cast<double>(p.rows), 1e-4, 1e-8};
    const std::vector<float> dg1 = testing::to_host(g_dg), db1 = testing::to_host(g_db);
    EXPECT_TRUE(testing::tensors_near(dg1, testing::to_host(c_dg), ptol));
    EXPECT_TRUE(testing::tensors_near(db1, testing::to_host(c_db), ptol));

    // Deterministic, and += : from zero, two calls give exactly twice one call.
    TensorView z_dg = gpool.from(std::vector<float>(p.cols, 0.0f), DType::kF32, {p.cols});
    TensorView z_db = gpool.from(std::vector<float>(p.cols, 0.0f), DType::kF32, {p.cols});
    layernorm_backward(args, acc, g_dx, z_dg, z_db, g_dy, g_x, g_g, g_mean, g_rstd, ws, gs);
    const std::vector<float> once_g = testing::to_host(z_dg), once_b = testing::to_host(z_db);
    layernorm_backward(args, acc, g_dx, z_dg, z_db, g_dy, g_x, g_g, g_mean, g_rstd, ws, gs);
    const std::vector<float> twice_g = testing::to_host(z_dg), twice_b = testing::to_host(z_db);
    for (int64_t c = 0; c < p.cols; ++c) {
      ASSERT_EQ(twice_g[c], 2.0f * once_g[c]) << c;
      ASSERT_EQ(twice_b[c], 2.0f * once_b[c]) << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LayerNormGpu,
    ::testing::Values(
        GpuCase{1, 768, DType::kBF16, false}, GpuCase{1, 768, DType::kF32, false},
        GpuCase{64, 768, DType::kBF16, false}, GpuCase{64, 768, DType::kF32, false},
        GpuCase{33, 13, DType::kBF16, false},  // cols % 8 != 0
        GpuCase{33, 13, DType::kF32, false},
        GpuCase{7, 1000, DType::kBF16, true},  // vector width fits, pointers don't
        GpuCase{5, 4097, DType::kBF16, false}, GpuCase{5, 4097, DType::kF32, false},
        GpuCase{1000, 64, DType::kBF16, false},  // many row groups
        // 16-byte partial sums: a partial column tile, many groups
        GpuCase{129, 1000, DType::kBF16, false}, GpuCase{300, 2048, DType::kF32, false},
        GpuCase{4099, 768, DType::kBF16, false}, GpuCase{2, 12288, DType::kBF16, false},
        GpuCase{2, 12288, DType::kF32, false},
        // Row-resident path at the GPT widths with many blocks of rows, and a
        // width whose packs do not fill the last lane round (1000 / 8 = 125).
        GpuCase{2050, 2048, DType::kBF16, false}, GpuCase{1000, 1024, DType::kBF16, false},
        GpuCase{777, 1024, DType::kF32, false}, GpuCase{3001, 1000, DType::kBF16, false}));

}  // namespace
}  // namespace anvil::ops
