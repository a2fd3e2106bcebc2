// Tests of the squared L2 norm (ops/grad_norm.h):  out[0] += sum_i x_i^2
// CPU twin: closed form, += semantics, NaN/inf propagation. GPU: against the CPU twin for small,
// odd, unaligned and 10^7+3 element inputs, += semantics, determinism, NaN/inf.
#include "ops/grad_norm.h"

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

// sum_{i<n} (i/n)^2 = (n-1) n (2n-1) / (6 n^2)
double closed_form(int64_t n) {
  const double d = static_cast<double>(n);
  return (d - 1.0) * d * (2.0 * d - 1.0) / (6.0 * d * d);
}

std::vector<double> ramp(int64_t n) {
  std::vector<double> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<double>(i) / static_cast<double>(n);
  return x;
}

TEST(SumSquaresCpu, ClosedFormAndAccumulation) {
  const int64_t n = 1000;
  const double want = closed_form(n);
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  // f64: exact to rounding, and a second call doubles the result exactly.
  const TensorView x64 = pool.from_f64(ramp(n), {n});
  TensorView out64 = pool.from_f64({0.0}, {1});
  sum_squares(out64, x64, engine::Workspace{}, stream);
  const double once = testing::to_host_f64(out64)[0];
  EXPECT_NEAR(once, want, 1e-12 * want);
  sum_squares(out64, x64, engine::Workspace{}, stream);
  EXPECT_EQ(testing::to_host_f64(out64)[0], 2.0 * once);

  // f32 in, f32 out: += onto a non-zero start value.
  const std::vector<double> r = ramp(n);
  const TensorView x32 = pool.from(std::vector<float>(r.begin(), r.end()), DType::kF32, {n});
  TensorView out32 = pool.from({1.5f}, DType::kF32, {1});
  sum_squares(out32, x32, engine::Workspace{}, stream);
  sum_squares(out32, x32, engine::Workspace{}, stream);
  EXPECT_NEAR(testing::to_host(out32)[0], 1.5 + 2.0 * want, 1e-6 * (1.5 + 2.0 * want));
}

TEST(SumSquaresCpu, NonFiniteInputPropagates) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x = testing::random_uniform(100, 1);
    x[57] = bad;
    TensorView out = pool.from({0.0f}, DType::kF32, {1});
    sum_squares(out, pool.from(x, DType::kF32, {100}), engine::Workspace{}, stream);
    EXPECT_FALSE(std::isfinite(testing::to_host(out)[0])) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin.

struct GpuCase {
  int64_t n;
  int64_t offset;  // elements past an aligned base (1: the scalar kernel path)
};

class SumSquaresGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(SumSquaresGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  std::vector<float> x = testing::random_uniform(p.n + p.offset, 42 + p.n);

  TestStream cpu_stream(Device::kCpu);
  TensorPool cpu(Device::kCpu);
  TensorView cpu_out = cpu.from({0.25f}, DType::kF32, {1});
  const std::vector<float> xs(x.begin() + p.offset, x.end());
  sum_squares(cpu_out, cpu.from(xs, DType::kF32, {p.n}), engine::Workspace{}, cpu_stream);
  const float ref = testing::to_host(cpu_out)[0];

  TestStream gpu_stream(Device::kCuda);
  TensorPool gpu(Device::kCuda);
  const TensorView base = gpu.from(x, DType::kF32, {p.n + p.offset});
  const ConstTensorView gx = engine::make_view(static_cast<const float*>(base.data) + p.offset,
                                               DType::kF32, Device::kCuda, {p.n});
  const engine::Workspace ws = gpu.workspace(sum_squares_workspace_bytes(p.n));
  TensorView out = gpu.from({0.25f}, DType::kF32, {1});
  sum_squares(out, gx, ws, gpu_stream);
  // Per-thread f32 sums of a few dozen terms and an f32 tree: ~1e-6 relative; 1e-5 is the bound.
  const testing::Tol tol{0.0, 1e-5};
  EXPECT_TRUE(testing::tensors_near(testing::to_host(out), {ref}, tol));

  // += : a second call adds the same sum again.
  sum_squares(out, gx, ws, gpu_stream);
  const float twice = testing::to_host(out)[0];
  EXPECT_NEAR(twice, 0.25 + 2.0 * (ref - 0.25), 1e-5 * twice);

  // Deterministic: no atomics, a fixed reduction order.
  TensorView out_a = gpu.from({0.0f}, DType::kF32, {1});
  TensorView out_b = gpu.from({0.0f}, DType::kF32, {1});
  sum_squares(out_a, gx, ws, gpu_stream);
  sum_squares(out_b, gx, ws, gpu_stream);
  EXPECT_EQ(testing::to_host(out_a)[0], testing::to_host(out_b)[0]);
}

INSTANTIATE_TEST_SUITE_P(Sizes, SumSquaresGpu,
                         ::testing::Values(GpuCase{1, 0}, GpuCase{3, 0}, GpuCase{1000, 0},
                                           GpuCase{1001, 1}, GpuCase{262147, 0},
                                           GpuCase{10000003, 0}, GpuCase{10000003, 1}));

TEST(SumSquaresGpuEdge, ClosedFormAndNonFinite) {
  ANVIL_SKIP_WITHOUT_GPU();
  TestStream stream(Device::kCuda);
  TensorPool gpu(Device::kCuda);
  const int64_t n = 1 << 20;
  const std::vector<double> r = ramp(n);
  const engine::Workspace ws = gpu.workspace(sum_squares_workspace_bytes(n));
  TensorView out = gpu.from({0.0f}, DType::kF32, {1});
  sum_squares(out, gpu.from(std::vector<float>(r.begin(), r.end()), DType::kF32, {n}), ws, stream);
  EXPECT_NEAR(testing::to_host(out)[0], closed_form(n), 1e-5 * closed_form(n));

  for (float bad : {NAN, INFINITY}) {
    std::vector<float> x = testing::random_uniform(n, 9);
    x[n / 2 + 3] = bad;
    TensorView o = gpu.from({0.0f}, DType::kF32, {1});
    sum_squares(o, gpu.from(x, DType::kF32, {n}), ws, stream);
    EXPECT_FALSE(std::isfinite(testing::to_host(o)[0])) << bad;
  }
}

}  // namespace
}  // namespace anvil::ops
