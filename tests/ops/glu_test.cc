// Tests of the gated linear units (ops/glu.h): h = [g | u] per row,
//   y = act(g) * u (=), dh = [dy u act'(g) | dy act(g)] (=), act in {silu, erf-GELU, relu, id}.
// CPU twin: known values of each activation (formulas evaluated independently here), central
// finite differences in double for every kind, the bf16 rounding of act(g) before the product,
// argument errors.
// GPU: against the CPU twin, bf16 and f32, every kind, odd widths, misaligned views.
#include "ops/glu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
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

constexpr GluKind kKinds[] = {GluKind::kSwiglu, GluKind::kGeglu, GluKind::kReglu, GluKind::kLiglu,
                              GluKind::kGegluTanh};

std::string kind_name(GluKind k) {
  switch (k) {
    case GluKind::kSwiglu:
      return "swiglu";
    case GluKind::kGeglu:
      return "geglu";
    case GluKind::kReglu:
      return "reglu";
    case GluKind::kLiglu:
      return "liglu";
    case GluKind::kGegluTanh:
      return "geglu_tanh";
  }
  return "?";
}

std::vector<double> as_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Known activation values at g = 1.5, -0.5 with u = 2: y = 2 act(g). Reference numbers from
// Python float64: silu(1.5) = 1.5 / (1 + exp(-1.5)) = 1.2263617..., torch F.gelu (erf) of 1.5 =
// 1.3997892..., HF gelu_new (tanh) of 1.5 = 1.3995716..., and at -0.5: silu = -0.1887703...,
// gelu = -0.1542688..., gelu_new = -0.1542860...
TEST(GluCpu, KnownValues) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView h = pool.from_f64({1.5, -0.5, 2.0, 2.0}, {1, 4});
  const double expect[5][2] = {{2 * 1.2263617142904655, 2 * -0.1887703343990727},
                               {2 * 1.399789198096713, 2 * -0.15426876936299344},
                               {2 * 1.5, 0.0},
                               {2 * 1.5, 2 * -0.5},
                               {2 * 1.3995715769802328, 2 * -0.15428599017485606}};
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE(kind_name(kKinds[k]));
    TensorView y = pool.empty(DType::kF64, {1, 2});
    glu_forward(kKinds[k], y, h, stream);
    const std::vector<double> v = testing::to_host_f64(y);
    EXPECT_NEAR(v[0], expect[k][0], 1e-14);
    EXPECT_NEAR(v[1], expect[k][1], 1e-14);
  }
}

// L = sum(y * w). dh from backward(dy = w) against central differences, every kind.
TEST(GluCpu, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, f = 5;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  std::vector<double> h0 = as_f64(testing::random_uniform(rows * 2 * f, 1, -3.0f, 3.0f));
  // Keep relu's kink away from the +-h of the differences.
  for (double& v : h0) {
    if (std::abs(v) < 1e-3) v = 0.5;
  }
  const std::vector<double> w = as_f64(testing::random_uniform(rows * f, 2));
  TensorView h = pool.from_f64(h0, {rows, 2 * f});
  TensorView y = pool.empty(DType::kF64, {rows, f});
  for (GluKind kind : kKinds) {
    SCOPED_TRACE(kind_name(kind));
    const std::vector<double> num = testing::numeric_gradient(
        [&](const std::vector<double>& v) {
          std::memcpy(h.data, v.data(), v.size() * sizeof(double));
          glu_forward(kind, y, h, stream);
          const std::vector<double> yv = testing::to_host_f64(y);
          double s = 0.0;
          for (size_t i = 0; i < yv.size(); ++i) s += yv[i] * w[i];
          return s;
        },
        h0);
    std::memcpy(h.data, h0.data(), h0.size() * sizeof(double));
    TensorView dh = pool.empty(DType::kF64, {rows, 2 * f});
    glu_backward(kind, dh, pool.from_f64(w, {rows, f}), h, stream);
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(dh), num, Tol{1e-7, 1e-6}));
  }
}

// bf16: act(g) is rounded to bf16 before the product (torch's silu(gate) * up in bf16). The
// expected values follow that recipe in f32 here.
TEST(GluCpu, Bf16RoundsActivationBeforeProduct) {
  const int64_t rows = 8, f = 32;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> h = testing::round_bf16(testing::random_uniform(rows * 2 * f, 3, -3, 3));
  TensorView y = pool.empty(DType::kBF16, {rows, f});
  glu_forward(GluKind::kSwiglu, y, pool.from(h, DType::kBF16, {rows, 2 * f}), stream);
  const std::vector<float> got = testing::to_host(y);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < f; ++c) {
      const double g = h[r * 2 * f + c];
      const float a = engine::round_to_bf16(static_cast<float>(g / (1.0 + std::exp(-g))));
      EXPECT_EQ(got[r * f + c], engine::round_to_bf16(a * h[r * 2 * f + f + c])) << r << "," << c;
    }
  }
}

TEST(GluCpuDeathTest, RejectsBadArguments) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView h = pool.from(testing::random_uniform(12, 4), DType::kF32, {2, 6});
  EXPECT_DEATH(glu_forward(GluKind::kSwiglu, pool.empty(DType::kF32, {2, 6}), h, stream),
               "y must be");
  EXPECT_DEATH(glu_forward(GluKind::kSwiglu, pool.empty(DType::kF32, {2, 2}),
                           pool.empty(DType::kF32, {2, 5}), stream),
               "h must be \\[rows, 2f\\]");
  EXPECT_DEATH(glu_backward(GluKind::kGeglu, pool.empty(DType::kF32, {2, 3}),
                            pool.empty(DType::kF32, {2, 3}), h, stream),
               "dh must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin (double math, same rounding recipe). bf16: one bf16 ulp (rtol 1e-2, atol
// 1e-2 for values near 0); f32: f32 expf/erff vs double, 1e-5.

struct GpuCase {
  int64_t rows, f;
  DType dtype;
  bool misaligned;  // h starts one element past an aligned base: the scalar kernel path
};

class GluGpu : public ::testing::TestWithParam<GpuCase> {};

TensorView shifted(TensorPool& pool, const std::vector<float>& values, DType dtype, int64_t rows,
                   int64_t cols, bool shift) {
  if (!shift) return pool.from(values, dtype, {rows, cols});
  std::vector<float> padded(values.size() + 1, 0.5f);
  std::copy(values.begin(), values.end(), padded.begin() + 1);
  TensorView base = pool.from(padded, dtype, {rows * cols + 1});
  return engine::reshape(engine::slice_rows(base, 1, rows * cols + 1), {rows, cols});
}

TEST_P(GluGpu, ForwardAndBackwardMatchCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const Tol tol = p.dtype == DType::kBF16 ? Tol{1e-2, 1e-2, 1e-4} : Tol{1e-5, 1e-5, 1e-9};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const std::vector<float> h = testing::random_uniform(p.rows * 2 * p.f, 10, -4.0f, 4.0f);
  const std::vector<float> dy = testing::random_uniform(p.rows * p.f, 11);
  const TensorView c_h = cpool.from(h, p.dtype, {p.rows, 2 * p.f});
  const TensorView g_h = shifted(gpool, h, p.dtype, p.rows, 2 * p.f, p.misaligned);
  for (GluKind kind : kKinds) {
    SCOPED_TRACE(kind_name(kind));
    TensorView c_y = cpool.empty(p.dtype, {p.rows, p.f}), g_y = gpool.empty(p.dtype, {p.rows, p.f});
    glu_forward(kind, c_y, c_h, cs);
    glu_forward(kind, g_y, g_h, gs);
    EXPECT_TRUE(testing::tensors_near(testing::to_host(g_y), testing::to_host(c_y), tol));
    TensorView c_dh = cpool.empty(p.dtype, {p.rows, 2 * p.f});
    TensorView g_dh = gpool.empty(p.dtype, {p.rows, 2 * p.f});
    glu_backward(kind, c_dh, cpool.from(dy, p.dtype, {p.rows, p.f}), c_h, cs);
    glu_backward(kind, g_dh, gpool.from(dy, p.dtype, {p.rows, p.f}), g_h, gs);
    EXPECT_TRUE(testing::tensors_near(testing::to_host(g_dh), testing::to_host(c_dh), tol));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GluGpu,
                         ::testing::Values(GpuCase{1, 8, DType::kBF16, false},
                                           GpuCase{64, 2816, DType::kBF16, false},
                                           GpuCase{64, 2816, DType::kF32, false},
                                           GpuCase{33, 13, DType::kBF16, false},  // f % 8 != 0
                                           GpuCase{33, 13, DType::kF32, false},
                                           GpuCase{7, 1000, DType::kBF16, true},
                                           GpuCase{7, 1000, DType::kF32, true}));

}  // namespace
}  // namespace anvil::ops
