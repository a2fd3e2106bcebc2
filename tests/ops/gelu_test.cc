// Tests of GELU, tanh approximation (ops/gelu.h): y = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715
// x^3))) (=), dx = dy * gelu'(x) (=, dx may alias dy).
// CPU twin: known values, central finite differences in double, aliasing.
// GPU: against the CPU twin, bf16 and f32, odd sizes, misaligned views, aliasing.
#include "ops/gelu.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/memory.h"
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

TEST(GeluCpu, KnownValues) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x = pool.from_f64({0.0, 1.0, -1.0, 10.0, -10.0}, {5});
  TensorView y = pool.empty(DType::kF64, {5});
  gelu_forward(y, x, stream);
  const std::vector<double> v = testing::to_host_f64(y);
  // The formula evaluated in Python float64 (torch's gelu(approximate="tanh") agrees).
  EXPECT_EQ(v[0], 0.0);
  EXPECT_NEAR(v[1], 0.8411919906082768, 1e-15);
  EXPECT_NEAR(v[2], -0.15880800939172324, 1e-15);
  EXPECT_NEAR(v[3], 10.0, 1e-15);
  EXPECT_NEAR(v[4], 0.0, 1e-15);
}

TEST(GeluCpu, BackwardMatchesFiniteDifferences) {
  const int64_t n = 64;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> x0 = as_f64(testing::random_uniform(n, 1, -4.0f, 4.0f));
  const std::vector<double> w = as_f64(testing::random_uniform(n, 2));
  TensorView x = pool.from_f64(x0, {n});
  TensorView y = pool.empty(DType::kF64, {n});
  const std::vector<double> num = testing::numeric_gradient(
      [&](const std::vector<double>& v) {
        std::memcpy(x.data, v.data(), v.size() * sizeof(double));
        gelu_forward(y, x, stream);
        const std::vector<double> yv = testing::to_host_f64(y);
        double s = 0.0;
        for (int64_t i = 0; i < n; ++i) s += yv[i] * w[i];
        return s;
      },
      x0);
  std::memcpy(x.data, x0.data(), x0.size() * sizeof(double));
  TensorView dx = pool.empty(DType::kF64, {n});
  gelu_backward(dx, pool.from_f64(w, {n}), x, stream);
  const std::vector<double> got = testing::to_host_f64(dx);
  EXPECT_TRUE(testing::tensors_near(got, num, Tol{1e-8, 1e-7}));

  // dx may alias dy.
  TensorView dy = pool.from_f64(w, {n});
  gelu_backward(dy, dy, x, stream);
  EXPECT_EQ(testing::to_host_f64(dy), got);
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin (CPU in double from the same rounded inputs, rounded once; GPU in f32 with
// tanhf). bf16: at most one bf16 ulp apart (<= 2^-7 relative) -> rtol 8e-3, atol 1e-5 for values
// near 0. f32: tanhf's 2-ulp error, scaled by up to ~9 in gelu'(x) where 1 - tanh^2 cancels
// (|x| ~ 5): ~2e-6 absolute -> atol 1e-5, rtol 1e-5.

struct GpuCase {
  int64_t n;
  DType dtype;
  bool misaligned;
};

class GeluGpu : public ::testing::TestWithParam<GpuCase> {};

TensorView shifted(TensorPool& pool, const std::vector<float>& values, DType dtype, bool shift) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (!shift) return pool.from(values, dtype, {n});
  std::vector<float> padded(values.size() + 1, 0.25f);
  std::copy(values.begin(), values.end(), padded.begin() + 1);
  return engine::slice_rows(pool.from(padded, dtype, {n + 1}), 1, n + 1);
}

TEST_P(GeluGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const std::vector<float> x = testing::random_uniform(p.n, 3, -5.0f, 5.0f);
  const std::vector<float> dy = testing::random_uniform(p.n, 4);
  const Tol tol = p.dtype == DType::kBF16 ? Tol{1e-5, 8e-3, 1e-4} : Tol{1e-5, 1e-5, 1e-9};

  const TensorView cx = cpool.from(x, p.dtype, {p.n});
  const TensorView gx = shifted(gpool, x, p.dtype, p.misaligned);
  TensorView cy = cpool.empty(p.dtype, {p.n});
  TensorView gy = shifted(gpool, std::vector<float>(p.n, 0.0f), p.dtype, p.misaligned);
  engine::poison(gy, gs.get());
  gelu_forward(cy, cx, cs);
  gelu_forward(gy, gx, gs);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(gy), testing::to_host(cy), tol));

  TensorView cdx = cpool.empty(p.dtype, {p.n});
  gelu_backward(cdx, cpool.from(dy, p.dtype, {p.n}), cx, cs);
  TensorView gdx = shifted(gpool, std::vector<float>(p.n, 0.0f), p.dtype, p.misaligned);
  engine::poison(gdx, gs.get());
  const TensorView gdy = shifted(gpool, dy, p.dtype, p.misaligned);
  gelu_backward(gdx, gdy, gx, gs);
  const std::vector<float> got = testing::to_host(gdx);
  EXPECT_TRUE(testing::tensors_near(got, testing::to_host(cdx), tol));
  // In place (dx aliases dy): the same result.
  TensorView inplace = shifted(gpool, dy, p.dtype, p.misaligned);
  gelu_backward(inplace, inplace, gx, gs);
  EXPECT_EQ(testing::to_host(inplace), got);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, GeluGpu,
    ::testing::Values(GpuCase{1, DType::kBF16, false}, GpuCase{1, DType::kF32, false},
                      GpuCase{7, DType::kBF16, false}, GpuCase{7, DType::kF32, false},
                      GpuCase{4096, DType::kBF16, false}, GpuCase{4096, DType::kF32, false},
                      GpuCase{4097, DType::kBF16, true}, GpuCase{4097, DType::kF32, true},
                      GpuCase{(1 << 20) + 3, DType::kBF16, false},
                      GpuCase{(1 << 20) + 3, DType::kF32, false}));

}  // namespace
}  // namespace anvil::ops
