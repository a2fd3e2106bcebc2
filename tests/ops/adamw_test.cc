// Tests of AdamW with f32 master weights (ops/adamw.h):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  g = grad * grad_scale
//   master -= lr * ((m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * master);  param = cast
// The CPU twin against an independent scalar implementation of that formula in double over three
// steps (f64 twin: to rounding; f32 twin: to f32 accuracy), the first step's closed form (checks
// the bias correction), grad_scale folding, param casts; then the GPU against the CPU twin.
#include "ops/adamw.h"

#include <cmath>
#include <cstdint>
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

// The formula, written out independently of the twins, in double.
struct RefState {
  std::vector<double> master, m, v;
};
void reference_step(const AdamWArgs& a, const std::vector<double>& grad, RefState& s) {
  const double b1 = a.beta1, b2 = a.beta2, lr = a.lr, eps = a.eps, wd = a.weight_decay;
  const double t = static_cast<double>(a.step);
  for (size_t i = 0; i < grad.size(); ++i) {
    const double g = grad[i] * static_cast<double>(a.grad_scale);
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * g;
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * g * g;
    const double mhat = s.m[i] / (1.0 - std::pow(b1, t));
    const double vhat = s.v[i] / (1.0 - std::pow(b2, t));
    s.master[i] = s.master[i] - lr * (mhat / (std::sqrt(vhat) + eps) + wd * s.master[i]);
  }
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

AdamWArgs base_args() {
  AdamWArgs a;
  a.lr = 1e-2f;
  a.beta1 = 0.9f;
  a.beta2 = 0.95f;
  a.eps = 1e-8f;
  a.weight_decay = 0.1f;
  a.step = 1;
  a.grad_scale = 0.7f;
  return a;
}

// Runs three steps of the twin for `state` dtype (f32/f64) against the reference.
void check_against_reference(DType state, DType param_dtype, Tol tol) {
  const int64_t n = 37;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> w0 = testing::random_uniform(n, 1, -1.0f, 1.0f);
  // m, v start from a previous run's state (v >= 0) so every term matters.
  const std::vector<float> m0 = testing::random_uniform(n, 2, -0.1f, 0.1f);
  const std::vector<float> v0 = testing::random_uniform(n, 3, 0.0f, 0.01f);
  TensorView master = pool.from(w0, state, {n});
  TensorView m = pool.from(m0, state, {n});
  TensorView v = pool.from(v0, state, {n});
  TensorView param = pool.empty(param_dtype, {n});
  RefState ref{to_double(w0), to_double(m0), to_double(v0)};
  AdamWArgs args = base_args();
  for (int64_t step = 1; step <= 3; ++step) {
    args.step = step;
    const std::vector<float> g = testing::random_uniform(n, 10 + step, -1.0f, 1.0f);
    adamw_update(args, master, m, v, param, pool.from(g, state, {n}), stream);
    reference_step(args, to_double(g), ref);
  }
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(master), ref.master, tol));
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(m), ref.m, tol));
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(v), ref.v, tol));
  // param is the cast of master (bf16: round to nearest even, exactly).
  const std::vector<double> w = testing::to_host_f64(master);
  const std::vector<double> p = testing::to_host_f64(param);
  for (int64_t i = 0; i < n; ++i) {
    const double want = param_dtype == DType::kBF16
                            ? engine::round_to_bf16(static_cast<float>(w[i]))
                        : param_dtype == DType::kF32 ? static_cast<float>(w[i])
                                                     : w[i];
    EXPECT_EQ(p[i], want) << i;
  }
}

TEST(AdamWCpu, F64TwinMatchesFormulaOverThreeSteps) {
  check_against_reference(DType::kF64, DType::kBF16, Tol{1e-14, 1e-12, 1e-20});
  check_against_reference(DType::kF64, DType::kF64, Tol{1e-14, 1e-12, 1e-20});
}

TEST(AdamWCpu, F32TwinMatchesFormulaOverThreeSteps) {
  // f32 arithmetic: a few ulps per operation on O(1e-2..1) values.
  check_against_reference(DType::kF32, DType::kBF16, Tol{1e-7, 1e-5, 1e-10});
  check_against_reference(DType::kF32, DType::kF32, Tol{1e-7, 1e-5, 1e-10});
}

// Step 1 from m = v = 0: mhat = g, vhat = g^2, so the update is lr * (sign(g) + wd * w) up to
// eps. Without the bias correction it would be lr * 0.1 / sqrt(0.05) = 0.447 lr per element.
TEST(AdamWCpu, FirstStepClosedForm) {
  const int64_t n = 19;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> w0 = to_double(testing::random_uniform(n, 5, -1.0f, 1.0f));
  const std::vector<double> g = to_double(testing::random_uniform(n, 6, -1.0f, 1.0f));
  TensorView master = pool.from_f64(w0, {n});
  TensorView m = pool.from_f64(std::vector<double>(n, 0.0), {n});
  TensorView v = pool.from_f64(std::vector<double>(n, 0.0), {n});
  AdamWArgs args = base_args();
  adamw_update(args, master, m, v, TensorView{}, pool.from_f64(g, {n}), stream);
  const std::vector<double> w = testing::to_host_f64(master);
  const double lr = args.lr, wd = args.weight_decay, eps = args.eps;
  for (int64_t i = 0; i < n; ++i) {
    const double ag = std::fabs(g[i] * static_cast<double>(args.grad_scale));
    const double want = w0[i] - lr * (std::copysign(ag / (ag + eps), g[i]) + wd * w0[i]);
    EXPECT_NEAR(w[i], want, 1e-12) << i;
  }
}

// grad_scale folded into the update equals scaling the gradient first (the product is the same
// f32 multiplication either way, so the results are bitwise equal).
TEST(AdamWCpu, GradScaleFoldingEqualsPrescaledGrads) {
  const int64_t n = 53;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> w0 = testing::random_uniform(n, 7);
  const std::vector<float> g = testing::random_uniform(n, 8, -3.0f, 3.0f);
  AdamWArgs args = base_args();
  args.grad_scale = 0.3f;
  std::vector<float> g_scaled(g);
  for (float& x : g_scaled) x *= args.grad_scale;

  TensorView master_a = pool.from(w0, DType::kF32, {n});
  TensorView m_a = pool.from(std::vector<float>(n, 0.0f), DType::kF32, {n});
  TensorView v_a = pool.from(std::vector<float>(n, 0.0f), DType::kF32, {n});
  TensorView master_b = pool.from(w0, DType::kF32, {n});
  TensorView m_b = pool.from(std::vector<float>(n, 0.0f), DType::kF32, {n});
  TensorView v_b = pool.from(std::vector<float>(n, 0.0f), DType::kF32, {n});
  for (int64_t step = 1; step <= 2; ++step) {
    args.step = step;
    args.grad_scale = 0.3f;
    adamw_update(args, master_a, m_a, v_a, TensorView{}, pool.from(g, DType::kF32, {n}), stream);
    args.grad_scale = 1.0f;
    adamw_update(args, master_b, m_b, v_b, TensorView{}, pool.from(g_scaled, DType::kF32, {n}),
                 stream);
  }
  EXPECT_EQ(testing::to_host(master_a), testing::to_host(master_b));
  EXPECT_EQ(testing::to_host(m_a), testing::to_host(m_b));
  EXPECT_EQ(testing::to_host(v_a), testing::to_host(v_b));
  EXPECT_NE(testing::to_host(master_a), w0);
}

// device_scale (step_scale's output) replaces grad_scale bit for bit; its skip flag leaves every
// tensor as it was. Runs on the CPU, and on the GPU when there is one.
void check_device_scale(Device dev) {
  const int64_t n = 1001;
  TestStream stream(dev);
  TensorPool pool(dev);
  const std::vector<float> w0 = testing::random_uniform(n, 21);
  const std::vector<float> g = testing::random_uniform(n, 22, -3.0f, 3.0f);
  auto fresh = [&](const std::vector<float>& x) { return pool.from(x, DType::kF32, {n}); };
  const std::vector<float> zeros(n, 0.0f);
  TensorView wa = fresh(w0), ma = fresh(zeros), va = fresh(zeros),
             pa = pool.empty(DType::kBF16, {n});
  TensorView wb = fresh(w0), mb = fresh(zeros), vb = fresh(zeros),
             pb = pool.empty(DType::kBF16, {n});
  AdamWArgs host = base_args();
  host.grad_scale = 0.37f;
  AdamWArgs device = base_args();
  device.grad_scale = 5.0f;  // ignored: the device value replaces it
  device.device_scale = pool.from({0.37f, 0.0f, 2.7f}, DType::kF32, {3});
  adamw_update(host, wa, ma, va, pa, fresh(g), stream);
  adamw_update(device, wb, mb, vb, pb, fresh(g), stream);
  EXPECT_EQ(testing::to_host(wa), testing::to_host(wb));
  EXPECT_EQ(testing::to_host(ma), testing::to_host(mb));
  EXPECT_EQ(testing::to_host(va), testing::to_host(vb));
  EXPECT_EQ(testing::to_host(pa), testing::to_host(pb));
  EXPECT_NE(testing::to_host(wb), w0);
  // Skip: nothing changes, the poisoned compute copy included.
  const std::vector<float> w1 = testing::to_host(wb), m1 = testing::to_host(mb);
  TensorView pc = pool.empty(DType::kBF16, {n});
  device.device_scale = pool.from({0.0f, 1.0f, INFINITY}, DType::kF32, {3});
  device.step = 2;
  adamw_update(device, wb, mb, vb, pc, fresh(g), stream);
  EXPECT_EQ(testing::to_host(wb), w1);
  EXPECT_EQ(testing::to_host(mb), m1);
  for (float x : testing::to_host(pc)) EXPECT_TRUE(std::isnan(x));
}

TEST(AdamWCpu, DeviceScaleReplacesGradScaleAndSkips) { check_device_scale(Device::kCpu); }

TEST(AdamWGpuScale, DeviceScaleReplacesGradScaleAndSkips) {
  ANVIL_SKIP_WITHOUT_GPU();
  check_device_scale(Device::kCuda);
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin.

struct GpuCase {
  int64_t n;
  DType param;     // kBF16, kF32, or kU8 for "no param"
  bool unaligned;  // views start one element past an aligned base (scalar kernel path)
};

class AdamWGpu : public ::testing::TestWithParam<GpuCase> {};

// A view of n elements of `dtype` starting `offset` elements into a fresh buffer of `values`.
TensorView offset_view(TensorPool& pool, std::vector<float> values, DType dtype, int64_t offset) {
  values.insert(values.begin(), offset, 0.0f);
  TensorView base = pool.from(values, dtype, {static_cast<int64_t>(values.size())});
  const int64_t n = static_cast<int64_t>(values.size()) - offset;
  return engine::make_view(static_cast<char*>(base.data) + offset * engine::dtype_size(dtype),
                           dtype, base.device, {n});
}

TEST_P(AdamWGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const int64_t n = p.n;
  const int64_t off = p.unaligned ? 1 : 0;
  const bool has_param = p.param != DType::kU8;
  const std::vector<float> w0 = testing::random_uniform(n, 1);
  const std::vector<float> m0 = testing::random_uniform(n, 2, -0.1f, 0.1f);
  const std::vector<float> v0 = testing::random_uniform(n, 3, 0.0f, 0.01f);

  TestStream cpu_stream(Device::kCpu);
  TestStream gpu_stream(Device::kCuda);
  TensorPool cpu(Device::kCpu);
  TensorPool gpu(Device::kCuda);
  TensorView cw = cpu.from(w0, DType::kF32, {n}), cm = cpu.from(m0, DType::kF32, {n}),
             cv = cpu.from(v0, DType::kF32, {n});
  TensorView gw = offset_view(gpu, w0, DType::kF32, off),
             gm = offset_view(gpu, m0, DType::kF32, off),
             gv = offset_view(gpu, v0, DType::kF32, off);
  TensorView gparam;
  if (has_param) {
    gparam = offset_view(gpu, std::vector<float>(n, NAN), p.param, off);  // poisoned
  }
  AdamWArgs args = base_args();
  for (int64_t step = 1; step <= 3; ++step) {
    args.step = step;
    const std::vector<float> g = testing::random_uniform(n, 10 + step, -2.0f, 2.0f);
    adamw_update(args, cw, cm, cv, TensorView{}, cpu.from(g, DType::kF32, {n}), cpu_stream);
    adamw_update(args, gw, gm, gv, gparam, offset_view(gpu, g, DType::kF32, off), gpu_stream);
  }
  // Same f32 operations in the same order; only FMA contraction on the GPU differs (~1 ulp per
  // step), so 1e-6 relative; the 1e-7 absolute floor (1 ulp of O(1) terms) covers m and master
  // near 0, where b1 m + (1-b1) g cancels and one rounding more or less is all of the value.
  const Tol tol{1e-7, 1e-6, 1e-12};
  const std::vector<float> w = testing::to_host(gw);
  EXPECT_TRUE(testing::tensors_near(w, testing::to_host(cw), tol));
  EXPECT_TRUE(testing::tensors_near(testing::to_host(gm), testing::to_host(cm), tol));
  EXPECT_TRUE(testing::tensors_near(testing::to_host(gv), testing::to_host(cv), tol));
  if (has_param) {
    // param is exactly the cast of the GPU's own master weights.
    const std::vector<float> want = p.param == DType::kBF16 ? testing::round_bf16(w) : w;
    EXPECT_EQ(testing::to_host(gparam), want);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AdamWGpu,
    ::testing::Values(GpuCase{1, DType::kBF16, false}, GpuCase{3, DType::kF32, false},
                      GpuCase{1000, DType::kBF16, false}, GpuCase{4099, DType::kBF16, false},
                      GpuCase{4099, DType::kU8, false}, GpuCase{(1 << 22) + 5, DType::kBF16, false},
                      GpuCase{(1 << 22) + 5, DType::kF32, false}, GpuCase{1001, DType::kBF16, true},
                      GpuCase{4099, DType::kF32, true}));

}  // namespace
}  // namespace anvil::ops
