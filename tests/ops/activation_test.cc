// Tests of the elementwise activations (ops/activation.h): exact erf GELU, relu and tanh,
//   y = act(x) (=), dx = dy * act'(x) (=, dx may alias dy).
// CPU twin: known values (evaluated independently in Python float64), central finite
// differences in double, aliasing, argument errors.
// GPU: against the CPU twin, bf16 and f32, odd sizes, misaligned views, NaN-poisoned outputs.
// With dropout (one pass): the CPU twin against its definition (the kept elements are those
// ops::dropout keeps, scaled), the GPU kernels against it (relu bit for bit, the mask exactly).
#include "ops/activation.h"

#include <algorithm>
#include <cmath>
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

constexpr Activation kActs[] = {Activation::kGeluErf, Activation::kRelu, Activation::kTanh};

const char* act_name(Activation a) {
  return a == Activation::kGeluErf ? "gelu_erf" : a == Activation::kRelu ? "relu" : "tanh";
}

std::vector<double> as_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(ActivationCpu, KnownValues) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x = pool.from_f64({0.0, 1.5, -0.5, -10.0}, {4});
  TensorView y = pool.empty(DType::kF64, {4});
  activation_forward(Activation::kGeluErf, y, x, stream);
  std::vector<double> v = testing::to_host_f64(y);
  // 0.5 x (1 + math.erf(x / math.sqrt(2))) in Python float64.
  EXPECT_EQ(v[0], 0.0);
  EXPECT_NEAR(v[1], 1.399789198096713, 1e-15);
  EXPECT_NEAR(v[2], -0.15426876936299344, 1e-15);
  EXPECT_NEAR(v[3], 0.0, 1e-20);
  activation_forward(Activation::kRelu, y, x, stream);
  EXPECT_EQ(testing::to_host_f64(y), (std::vector<double>{0.0, 1.5, 0.0, 0.0}));
  // math.tanh(x) in Python float64.
  activation_forward(Activation::kTanh, y, x, stream);
  v = testing::to_host_f64(y);
  EXPECT_EQ(v[0], 0.0);
  EXPECT_NEAR(v[1], 0.9051482536448664, 1e-15);
  EXPECT_NEAR(v[2], -0.46211715726000974, 1e-15);
  EXPECT_NEAR(v[3], -0.9999999958776927, 1e-15);
}

TEST(ActivationCpu, BackwardMatchesFiniteDifferences) {
  const int64_t n = 64;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  std::vector<double> x0 = as_f64(testing::random_uniform(n, 1, -4.0f, 4.0f));
  for (double& v : x0) {
    if (std::abs(v) < 1e-3) v = 0.5;  // relu's kink stays outside +-h
  }
  const std::vector<double> w = as_f64(testing::random_uniform(n, 2));
  TensorView x = pool.from_f64(x0, {n});
  TensorView y = pool.empty(DType::kF64, {n});
  for (Activation act : kActs) {
    SCOPED_TRACE(act_name(act));
    const std::vector<double> num = testing::numeric_gradient(
        [&](const std::vector<double>& v) {
          std::memcpy(x.data, v.data(), v.size() * sizeof(double));
          activation_forward(act, y, x, stream);
          const std::vector<double> yv = testing::to_host_f64(y);
          double s = 0.0;
          for (int64_t i = 0; i < n; ++i) s += yv[i] * w[i];
          return s;
        },
        x0);
    std::memcpy(x.data, x0.data(), x0.size() * sizeof(double));
    TensorView dx = pool.empty(DType::kF64, {n});
    activation_backward(act, dx, pool.from_f64(w, {n}), x, stream);
    const std::vector<double> got = testing::to_host_f64(dx);
    EXPECT_TRUE(testing::tensors_near(got, num, Tol{1e-8, 1e-7}));
    TensorView dy = pool.from_f64(w, {n});  // dx may alias dy
    activation_backward(act, dy, dy, x, stream);
    EXPECT_EQ(testing::to_host_f64(dy), got);
  }
}

TEST(ActivationCpuDeathTest, RejectsBadArguments) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x = pool.from(testing::random_uniform(8, 3), DType::kF32, {2, 4});
  EXPECT_DEATH(activation_forward(Activation::kRelu, pool.empty(DType::kF32, {2, 5}), x, stream),
               "y must be contiguous");
  EXPECT_DEATH(activation_forward(Activation::kRelu, pool.empty(DType::kF32, {2, 4}),
                                  pool.empty(DType::kI32, {2, 4}), stream),
               "x must be contiguous bf16, f16 or f32");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin (CPU in double from the same rounded inputs, rounded once; GPU in f32 with
// erff/expf, a few f32 ulps). bf16: at most one bf16 ulp apart -> rtol 8e-3, atol 1e-5 near 0;
// f32: 1e-5.

struct GpuCase {
  int64_t n;
  DType dtype;
  bool misaligned;
};

class ActivationGpu : public ::testing::TestWithParam<GpuCase> {};

TensorView shifted(TensorPool& pool, const std::vector<float>& values, DType dtype, bool shift) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (!shift) return pool.from(values, dtype, {n});
  std::vector<float> padded(values.size() + 1, 0.25f);
  std::copy(values.begin(), values.end(), padded.begin() + 1);
  return engine::slice_rows(pool.from(padded, dtype, {n + 1}), 1, n + 1);
}

// Streams, pools and the random inputs x (on both devices; the GPU's shifted when misaligned)
// and dy of one GPU case.
struct GpuInputs {
  GpuInputs(const GpuCase& p, uint64_t seed)
      : x(testing::random_uniform(p.n, seed, -5.0f, 5.0f)),
        dy(testing::random_uniform(p.n, seed + 1)),
        tol(p.dtype == DType::kBF16 ? Tol{1e-5, 8e-3, 1e-4} : Tol{1e-5, 1e-5, 1e-9}),
        cx(cpool.from(x, p.dtype, {p.n})),
        gx(shifted(gpool, x, p.dtype, p.misaligned)) {}
  TestStream cs{Device::kCpu}, gs{Device::kCuda};
  TensorPool cpool{Device::kCpu}, gpool{Device::kCuda};
  const std::vector<float> x, dy;
  const Tol tol;
  const TensorView cx, gx;
};

TEST_P(ActivationGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  GpuInputs in(p, 3);
  for (Activation act : kActs) {
    SCOPED_TRACE(act_name(act));
    TensorView cy = in.cpool.empty(p.dtype, {p.n});
    TensorView gy = shifted(in.gpool, std::vector<float>(p.n, 0.0f), p.dtype, p.misaligned);
    engine::poison(gy, in.gs.get());
    activation_forward(act, cy, in.cx, in.cs);
    activation_forward(act, gy, in.gx, in.gs);
    EXPECT_TRUE(testing::tensors_near(testing::to_host(gy), testing::to_host(cy), in.tol));
    TensorView cdx = in.cpool.empty(p.dtype, {p.n});
    activation_backward(act, cdx, in.cpool.from(in.dy, p.dtype, {p.n}), in.cx, in.cs);
    TensorView gdx = shifted(in.gpool, std::vector<float>(p.n, 0.0f), p.dtype, p.misaligned);
    engine::poison(gdx, in.gs.get());
    activation_backward(act, gdx, shifted(in.gpool, in.dy, p.dtype, p.misaligned), in.gx, in.gs);
    EXPECT_TRUE(testing::tensors_near(testing::to_host(gdx), testing::to_host(cdx), in.tol));
  }
}

TEST(ActivationDropoutCpu, KeepsWhatDropoutKeeps) {
  const int64_t n = 1003;
  TestStream cs(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const DropoutArgs drop{0.3f, 77, 5};
  const std::vector<float> x = testing::random_uniform(n, 9, 0.1f, 3.0f);  // relu(x) = x > 0
  TensorView y = pool.empty(DType::kF32, {n});
  activation_dropout_forward(Activation::kRelu, drop, y, pool.from(x, DType::kF32, {n}), cs);
  TensorView mask = pool.from(std::vector<float>(n, 1.0f), DType::kF32, {n});
  dropout_forward(drop, mask, mask, cs);
  const std::vector<float> got = testing::to_host(y), keep = testing::to_host(mask);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i], keep[i] != 0.0f ? x[i] * (1.0f / 0.7f) : 0.0f) << i;
    kept += keep[i] != 0.0f;
  }
  EXPECT_GT(kept, n / 2);
  EXPECT_LT(kept, n - n / 10);
  // Backward: dx = relu'(x) * Drop'(dy) = Drop'(dy) here (x > 0), in place over dy.
  const std::vector<float> dy = testing::random_uniform(n, 10);
  TensorView d = pool.from(dy, DType::kF32, {n});
  activation_dropout_backward(Activation::kRelu, drop, d, d, pool.from(x, DType::kF32, {n}), cs);
  const std::vector<float> dx = testing::to_host(d);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(dx[i], keep[i] != 0.0f ? dy[i] * (1.0f / 0.7f) : 0.0f) << i;
  }
}

TEST_P(ActivationGpu, DropoutInOnePassMatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  GpuInputs in(p, 13);
  const DropoutArgs drop{0.1f, 1234, 99};
  for (Activation act : kActs) {
    SCOPED_TRACE(act_name(act));
    TensorView cy = in.cpool.empty(p.dtype, {p.n});
    TensorView gy = shifted(in.gpool, std::vector<float>(p.n, 0.0f), p.dtype, p.misaligned);
    engine::poison(gy, in.gs.get());
    activation_dropout_forward(act, drop, cy, in.cx, in.cs);
    activation_dropout_forward(act, drop, gy, in.gx, in.gs);
    const std::vector<float> want = testing::to_host(cy), got = testing::to_host(gy);
    EXPECT_TRUE(testing::tensors_near(got, want, in.tol));
    if (act == Activation::kRelu) {
      EXPECT_EQ(got, want);
    }
    // dx aliases dy on the GPU, as the MLP calls it.
    TensorView cdx = in.cpool.empty(p.dtype, {p.n});
    activation_dropout_backward(act, drop, cdx, in.cpool.from(in.dy, p.dtype, {p.n}), in.cx, in.cs);
    TensorView gd = shifted(in.gpool, in.dy, p.dtype, p.misaligned);
    activation_dropout_backward(act, drop, gd, gd, in.gx, in.gs);
    const std::vector<float> dwant = testing::to_host(cdx), dgot = testing::to_host(gd);
    EXPECT_TRUE(testing::tensors_near(dgot, dwant, in.tol));
    if (act == Activation::kRelu) {
      EXPECT_EQ(dgot, dwant);
    }
    // The dropped elements are exactly the CPU's (where the activation is not 0 itself).
    int64_t dropped = 0;
    for (int64_t i = 0; i < p.n; ++i) {
      if (want[i] != 0.0f) {
        EXPECT_NE(got[i], 0.0f) << i;
      }
      dropped += dwant[i] == 0.0f && in.dy[i] != 0.0f;
    }
    if (p.n > 100) {
      EXPECT_GT(dropped, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ActivationGpu,
                         ::testing::Values(GpuCase{1, DType::kBF16, false},
                                           GpuCase{4096, DType::kBF16, false},
                                           GpuCase{4096, DType::kF32, false},
                                           GpuCase{1001, DType::kBF16, false},  // scalar tail
                                           GpuCase{1001, DType::kF32, true},
                                           GpuCase{777, DType::kBF16, true}));

}  // namespace
}  // namespace anvil::ops
