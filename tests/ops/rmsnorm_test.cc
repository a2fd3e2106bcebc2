// Tests of RMSNorm and residual RMSNorm (ops/rmsnorm.h):
//   rstd = 1/sqrt(mean(x^2) + eps), y = round_T(x rstd) gamma (=); residual: sum = a + b (=)
//   backward: dx (= or +=), dgamma +=
// CPU twin: forward closed form (rows of y have mean square ms / (ms + eps) with gamma = 1), the
// HF bf16 rounding order, central finite differences in double for dx, dgamma and the residual
// variant, both Accumulate modes, += (2x), argument errors.
// GPU: against the CPU twin, bf16 and f32, awkward shapes, misaligned views, determinism, 2x.
#include "ops/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/dtype.h"
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

TEST(RmsNormCpu, ForwardClosedForm) {
  const int64_t rows = 3, cols = 10;
  const RmsNormArgs args{rows, cols, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> x = as_f64(testing::random_uniform(rows * cols, 1, -2.0f, 3.0f));
  TensorView y = pool.empty(DType::kF64, {rows, cols});
  TensorView rstd = pool.empty(DType::kF64, {rows});
  rmsnorm_forward(args, y, rstd, pool.from_f64(x, {rows, cols}),
                  pool.from_f64(std::vector<double>(cols, 1.0), {cols}), stream);
  const std::vector<double> yv = testing::to_host_f64(y), r = testing::to_host_f64(rstd);
  for (int row = 0; row < rows; ++row) {
    double ss = 0.0;
    for (int c = 0; c < cols; ++c) ss += x[row * cols + c] * x[row * cols + c];
    const double ms = ss / cols;
    EXPECT_NEAR(r[row], 1.0 / std::sqrt(ms + 1e-5), 1e-12);
    // gamma = 1: y = x rstd keeps the direction of x and has mean square ms / (ms + eps).
    double yss = 0.0;
    for (int c = 0; c < cols; ++c) yss += yv[row * cols + c] * yv[row * cols + c];
    EXPECT_NEAR(yss / cols, ms / (ms + 1e-5), 1e-12);
    for (int c = 0; c < cols; ++c) {
      EXPECT_NEAR(yv[row * cols + c] * std::sqrt(ms + 1e-5), x[row * cols + c], 1e-12);
    }
  }
}

// bf16: HF LlamaRMSNorm computes weight * (x * rstd).to(bf16), i.e. two bf16 roundings. The
// expected values are computed here from that recipe in f32 (what torch does for bf16 tensors).
TEST(RmsNormCpu, Bf16RoundsNormalizedValueBeforeGamma) {
  const int64_t rows = 4, cols = 64;
  const RmsNormArgs args{rows, cols, 1e-6f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = testing::round_bf16(testing::random_uniform(rows * cols, 2));
  const std::vector<float> g = testing::round_bf16(testing::random_uniform(cols, 3, 0.5f, 1.5f));
  TensorView y = pool.empty(DType::kBF16, {rows, cols});
  TensorView rstd = pool.empty(DType::kF32, {rows});
  rmsnorm_forward(args, y, rstd, pool.from(x, DType::kBF16, {rows, cols}),
                  pool.from(g, DType::kBF16, {cols}), stream);
  const std::vector<float> got = testing::to_host(y);
  int differs_from_one_rounding = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int64_t c = 0; c < cols; ++c) ss += double{x[r * cols + c]} * x[r * cols + c];
    const float rs = static_cast<float>(1.0 / std::sqrt(ss / cols + 1e-6));
    for (int64_t c = 0; c < cols; ++c) {
      const float xn = engine::round_to_bf16(x[r * cols + c] * rs);
      EXPECT_EQ(got[r * cols + c], engine::round_to_bf16(xn * g[c])) << r << "," << c;
      if (engine::round_to_bf16(x[r * cols + c] * rs * g[c]) != got[r * cols + c]) {
        ++differs_from_one_rounding;
      }
    }
  }
  // The double rounding is visible: otherwise this test would not tell the two recipes apart.
  EXPECT_GT(differs_from_one_rounding, 0);
}

// L = sum(y * w). Gradients from backward(dy = w) against central differences, in double.
TEST(RmsNormCpu, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, cols = 7;
  const RmsNormArgs args{rows, cols, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> x0 = as_f64(testing::random_uniform(rows * cols, 4, -2.0f, 2.0f));
  const std::vector<double> g0 = as_f64(testing::random_uniform(cols, 5, 0.5f, 1.5f));
  const std::vector<double> w = as_f64(testing::random_uniform(rows * cols, 6));
  TensorView x = pool.from_f64(x0, {rows, cols});
  TensorView gamma = pool.from_f64(g0, {cols});
  TensorView y = pool.empty(DType::kF64, {rows, cols});
  TensorView rstd = pool.empty(DType::kF64, {rows});
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv) {
    set(x, xv);
    set(gamma, gv);
    rmsnorm_forward(args, y, rstd, x, gamma, stream);
    return dot(testing::to_host_f64(y), w);
  };
  const std::vector<double> num_dx =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(v, g0); }, x0);
  const std::vector<double> num_dg =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(x0, v); }, g0);
  loss(x0, g0);  // leaves rstd of x0 for backward

  const TensorView dy = pool.from_f64(w, {rows, cols});
  TensorView dx = pool.empty(DType::kF64, {rows, cols});
  TensorView dgamma = pool.from_f64(std::vector<double>(cols, 0.0), {cols});
  rmsnorm_backward(args, Accumulate::kOverwrite, dx, dgamma, dy, x, gamma, rstd,
                   engine::Workspace{}, stream);
  const std::vector<double> got_dx = testing::to_host_f64(dx);
  const std::vector<double> got_dg = testing::to_host_f64(dgamma);
  EXPECT_TRUE(testing::tensors_near(got_dx, num_dx, Tol{1e-7, 1e-6}));
  EXPECT_TRUE(testing::tensors_near(got_dg, num_dg, Tol{1e-7, 1e-6}));

  // kAdd: dx += the same gradient onto a random start; dgamma (+=) doubles exactly.
  const std::vector<double> start = as_f64(testing::random_uniform(rows * cols, 7));
  set(dx, start);
  rmsnorm_backward(args, Accumulate::kAdd, dx, dgamma, dy, x, gamma, rstd, engine::Workspace{},
                   stream);
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host_f64(dx), add(start, got_dx), Tol{1e-15, 1e-14}));
  const std::vector<double> dg2 = testing::to_host_f64(dgamma);
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(dg2[c], 2.0 * got_dg[c]) << c;
}

// y = rmsnorm(a + b): dL/da = dL/db = dx of rmsnorm_backward at x = sum.
TEST(RmsNormCpu, ResidualGradientFlowsToBothInputs) {
  const int64_t rows = 2, cols = 9;
  const RmsNormArgs args{rows, cols, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> a0 = as_f64(testing::random_uniform(rows * cols, 8));
  const std::vector<double> b0 = as_f64(testing::random_uniform(rows * cols, 9));
  const std::vector<double> w = as_f64(testing::random_uniform(rows * cols, 10));
  const TensorView gamma =
      pool.from_f64(as_f64(testing::random_uniform(cols, 11, 0.5f, 1.5f)), {cols});
  TensorView a = pool.from_f64(a0, {rows, cols});
  TensorView b = pool.from_f64(b0, {rows, cols});
  TensorView sum = pool.empty(DType::kF64, {rows, cols});
  TensorView y = pool.empty(DType::kF64, {rows, cols});
  TensorView rstd = pool.empty(DType::kF64, {rows});
  auto loss = [&](const std::vector<double>& av, const std::vector<double>& bv) {
    set(a, av);
    set(b, bv);
    residual_rmsnorm_forward(args, sum, y, rstd, a, b, gamma, stream);
    return dot(testing::to_host_f64(y), w);
  };
  const std::vector<double> num_da =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(v, b0); }, a0);
  const std::vector<double> num_db =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(a0, v); }, b0);
  loss(a0, b0);
  EXPECT_EQ(testing::to_host_f64(sum), add(a0, b0));

  // The residual forward's y equals plain rmsnorm of the sum.
  TensorView y_plain = pool.empty(DType::kF64, {rows, cols});
  TensorView rstd2 = pool.empty(DType::kF64, {rows});
  rmsnorm_forward(args, y_plain, rstd2, sum, gamma, stream);
  EXPECT_EQ(testing::to_host_f64(y_plain), testing::to_host_f64(y));

  TensorView dx = pool.empty(DType::kF64, {rows, cols});
  TensorView dgamma = pool.from_f64(std::vector<double>(cols, 0.0), {cols});
  rmsnorm_backward(args, Accumulate::kOverwrite, dx, dgamma, pool.from_f64(w, {rows, cols}), sum,
                   gamma, rstd, engine::Workspace{}, stream);
  const std::vector<double> got = testing::to_host_f64(dx);
  EXPECT_TRUE(testing::tensors_near(got, num_da, Tol{1e-7, 1e-6}));
  EXPECT_TRUE(testing::tensors_near(got, num_db, Tol{1e-7, 1e-6}));
}

TEST(RmsNormCpuDeathTest, RejectsBadArguments) {
  const RmsNormArgs args{2, 4, 1e-5f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x = pool.from(testing::random_uniform(8, 12), DType::kF32, {2, 4});
  const TensorView g = pool.from(testing::random_uniform(4, 13), DType::kF32, {4});
  TensorView rstd = pool.empty(DType::kF32, {2});
  EXPECT_DEATH(rmsnorm_forward(args, pool.empty(DType::kF32, {2, 5}), rstd, x, g, stream),
               "y must be");
  EXPECT_DEATH(rmsnorm_forward(args, pool.empty(DType::kF32, {2, 4}), rstd, x,
                               pool.empty(DType::kF32, {5}), stream),
               "gamma must be");
  EXPECT_DEATH(rmsnorm_forward(args, pool.empty(DType::kF32, {2, 4}), pool.empty(DType::kBF16, {2}),
                               x, g, stream),
               "rstd must be");
  EXPECT_DEATH(
      rmsnorm_backward(args, Accumulate::kAdd, pool.empty(DType::kF32, {2, 4}),
                       pool.empty(DType::kBF16, {4}), x, x, g, rstd, engine::Workspace{}, stream),
      "dgamma must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin. The CPU twin computes in double from the same (bf16-rounded) inputs and rounds
// as the kernel does; the GPU computes in f32. Tolerances as in layernorm_test: bf16 outputs may
// land one bf16 ulp apart (rtol 1e-2, plus an atol near 0); f32 1e-4; rstd and dgamma are f32 on
// both sides (dgamma sums `rows` terms, so its atol grows with rows).

struct GpuCase {
  int64_t rows, cols;
  DType dtype;
  bool misaligned;  // views start one element past an aligned base: the scalar kernel path
};

class RmsNormGpu : public ::testing::TestWithParam<GpuCase> {};

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

TEST_P(RmsNormGpu, ForwardMatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const RmsNormArgs args{p.rows, p.cols, 1e-5f};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const int64_t n = p.rows * p.cols;
  const std::vector<float> a = testing::random_uniform(n, 30, -1.5f, 2.5f);
  const std::vector<float> b = testing::random_uniform(n, 31);
  const std::vector<float> g = testing::random_uniform(p.cols, 32, 0.5f, 1.5f);

  for (bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "residual" : "plain");
    TensorView out[2][3];  // [cpu, gpu] x {y, rstd, sum}; the GPU ones start as NaN
    for (int d = 0; d < 2; ++d) {
      TensorPool& pool = d == 0 ? cpool : gpool;
      engine::Stream& s = d == 0 ? cs.get() : gs.get();
      out[d][0] = pool.empty(p.dtype, {p.rows, p.cols});
      out[d][1] = pool.empty(DType::kF32, {p.rows});
      const TensorView av = shifted(pool, a, p.dtype, p.rows, p.cols, p.misaligned);
      const TensorView gv = pool.from(g, p.dtype, {p.cols});
      if (residual) {
        out[d][2] = pool.empty(p.dtype, {p.rows, p.cols});
        residual_rmsnorm_forward(args, out[d][2], out[d][0], out[d][1], av,
                                 pool.from(b, p.dtype, {p.rows, p.cols}), gv, s);
      } else {
        rmsnorm_forward(args, out[d][0], out[d][1], av, gv, s);
      }
    }
    EXPECT_TRUE(testing::tensors_near(testing::to_host(out[1][0]), testing::to_host(out[0][0]),
                                      act_tol(p.dtype)));
    EXPECT_TRUE(testing::tensors_near(testing::to_host(out[1][1]), testing::to_host(out[0][1]),
                                      Tol{1e-5, 1e-4, 1e-8}));
    if (residual) {
      EXPECT_EQ(testing::to_host(out[1][2]), testing::to_host(out[0][2]));
    }
  }
}

TEST_P(RmsNormGpu, BackwardMatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const RmsNormArgs args{p.rows, p.cols, 1e-5f};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const int64_t n = p.rows * p.cols;
  const std::vector<float> x = testing::random_uniform(n, 40, -1.0f, 2.0f);
  const std::vector<float> dy = testing::random_uniform(n, 41);
  const std::vector<float> g = testing::random_uniform(p.cols, 42, 0.5f, 1.5f);
  const std::vector<float> dx0 = testing::random_uniform(n, 44);
  const std::vector<float> dg0 = testing::random_uniform(p.cols, 45);

  // rstd: from the CPU forward, given to both backwards so only the backward differs.
  TensorView c_x = cpool.from(x, p.dtype, {p.rows, p.cols});
  TensorView c_g = cpool.from(g, p.dtype, {p.cols});
  TensorView c_y = cpool.empty(p.dtype, {p.rows, p.cols});
  TensorView c_rstd = cpool.empty(DType::kF32, {p.rows});
  rmsnorm_forward(args, c_y, c_rstd, c_x, c_g, cs);
  const TensorView g_x = shifted(gpool, x, p.dtype, p.rows, p.cols, p.misaligned);
  const TensorView g_g = gpool.from(g, p.dtype, {p.cols});
  const TensorView g_rstd = gpool.from(testing::to_host(c_rstd), DType::kF32, {p.rows});
  const engine::Workspace ws = gpool.workspace(rmsnorm_backward_workspace_bytes(args));

  for (Accumulate acc : {Accumulate::kOverwrite, Accumulate::kAdd}) {
    SCOPED_TRACE(acc == Accumulate::kAdd ? "kAdd" : "kOverwrite");
    TensorView c_dx = acc == Accumulate::kAdd ? cpool.from(dx0, p.dtype, {p.rows, p.cols})
                                              : cpool.empty(p.dtype, {p.rows, p.cols});
    TensorView g_dx = acc == Accumulate::kAdd ? gpool.from(dx0, p.dtype, {p.rows, p.cols})
                                              : gpool.empty(p.dtype, {p.rows, p.cols});
    TensorView c_dg = cpool.from(dg0, DType::kF32, {p.cols});
    TensorView g_dg = gpool.from(dg0, DType::kF32, {p.cols});
    rmsnorm_backward(args, acc, c_dx, c_dg, cpool.from(dy, p.dtype, {p.rows, p.cols}), c_x, c_g,
                     c_rstd, engine::Workspace{}, cs);
    const TensorView g_dy = gpool.from(dy, p.dtype, {p.rows, p.cols});
    rmsnorm_backward(args, acc, g_dx, g_dg, g_dy, g_x, g_g, g_rstd, ws, gs);
    EXPECT_TRUE(
        testing::tensors_near(testing::to_host(g_dx), testing::to_host(c_dx), act_tol(p.dtype)));
    const Tol ptol{1e-5 * static_cast<double>(p.rows), 1e-4, 1e-8};
    EXPECT_TRUE(testing::tensors_near(testing::to_host(g_dg), testing::to_host(c_dg), ptol));

    // Deterministic, and += : from zero, two calls give exactly twice one call.
    TensorView z_dg = gpool.from(std::vector<float>(p.cols, 0.0f), DType::kF32, {p.cols});
    rmsnorm_backward(args, acc, g_dx, z_dg, g_dy, g_x, g_g, g_rstd, ws, gs);
    const std::vector<float> once = testing::to_host(z_dg);
    rmsnorm_backward(args, acc, g_dx, z_dg, g_dy, g_x, g_g, g_rstd, ws, gs);
    const std::vector<float> twice = testing::to_host(z_dg);
    for (int64_t c = 0; c < p.cols; ++c) ASSERT_EQ(twice[c], 2.0f * once[c]) << c;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RmsNormGpu,
    ::testing::Values(GpuCase{1, 768, DType::kBF16, false}, GpuCase{1, 768, DType::kF32, false},
                      GpuCase{64, 2048, DType::kBF16, false}, GpuCase{64, 2048, DType::kF32, false},
                      GpuCase{33, 13, DType::kBF16, false},  // cols % 8 != 0
                      GpuCase{33, 13, DType::kF32, false},
                      GpuCase{7, 1000, DType::kBF16, true},  // vector width fits, pointers don't
                      GpuCase{5, 4097, DType::kBF16, false}, GpuCase{5, 4097, DType::kF32, false},
                      GpuCase{1000, 64, DType::kBF16, false},  // many row groups
                      GpuCase{2, 12288, DType::kBF16, false},
                      // Row-resident path at the GPT widths with many blocks of rows.
                      GpuCase{2050, 2048, DType::kBF16, false},
                      GpuCase{4099, 768, DType::kBF16, false},
                      GpuCase{777, 1024, DType::kF32, false},
                      GpuCase{3001, 1000, DType::kBF16, false}));

}  // namespace
}  // namespace anvil::ops
