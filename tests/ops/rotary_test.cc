// Tests of rotary position embedding (ops/rotary.h), rotate_half layout, in place:
//   (x_i, x_{i+R/2}) <- (x_i cos - x_{i+R/2} sin, x_{i+R/2} cos + x_i sin), theta = pos
//   base^(-2i/R)
// CPU twin: against the formula evaluated here in double (angles from HF's f32 recipe differ
// from exact ones by a few f32 ulps: tolerance stated), closed forms (each rotated pair keeps its
// norm; position 0 is the identity; backward after forward gives x back; dims past rot_dim and
// columns outside the view are untouched), backward = gradient by central differences, errors.
// GPU: against the CPU twin on q and k column views of a fused qkv, bf16 and f32, vector and
// scalar paths, large positions; the v columns must stay bitwise unchanged.
#include "ops/rotary.h"

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

// A fused [rows, 3 * heads * head_dim] f64 qkv of random values and its q column view.
struct Qkv {
  TensorView all;
  TensorView q;
};

Qkv make_qkv(TensorPool& pool, const RotaryArgs& a, uint64_t seed) {
  const int64_t w = a.heads * a.head_dim;
  Qkv out;
  out.all = pool.from_f64(as_f64(testing::random_uniform(a.rows * 3 * w, seed)), {a.rows, 3 * w});
  out.q = engine::slice_cols(out.all, 0, w);
  return out;
}

TEST(RotaryCpu, MatchesFormulaAndLeavesOtherColumnsAlone) {
  const RotaryArgs args{5, 2, 10, 6, 10000.0f};  // rot_dim 6 of head_dim 10: 4 dims pass through
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<int32_t> pos = {0, 1, 7, 100, 2047};
  Qkv qkv = make_qkv(pool, args, 1);
  const std::vector<double> before = testing::to_host_f64(qkv.all);
  rotary_forward(args, qkv.q, pool.from_i32(pos, {5}), stream);
  const std::vector<double> after = testing::to_host_f64(qkv.all);
  const int64_t ld = 3 * args.heads * args.head_dim, half = args.rot_dim / 2;
  for (int64_t r = 0; r < args.rows; ++r) {
    for (int64_t c = 0; c < ld; ++c) {
      const int64_t h = c / args.head_dim, d = c % args.head_dim;
      const double x = before[r * ld + c], got = after[r * ld + c];
      if (c >= args.heads * args.head_dim || d >= args.rot_dim) {
        EXPECT_EQ(got, x) << r << "," << c;  // outside the view or past rot_dim
        continue;
      }
      const int64_t i = d % half;
      const double theta = pos[r] * std::pow(10000.0, -2.0 * i / args.rot_dim);
      const double lo = before[r * ld + h * args.head_dim + i];
      const double hi = before[r * ld + h * args.head_dim + i + half];
      const double want = d < half ? lo * std::cos(theta) - hi * std::sin(theta)
                                   : hi * std::cos(theta) + lo * std::sin(theta);
      // The angle is formed in f32 (HF's recipe): |d theta| <= a few ulp(theta) ~ 2047 * 2^-22.
      EXPECT_NEAR(got, want, 2e-3 * (pos[r] + 1) / 2048.0) << r << "," << c;
    }
  }
}

TEST(RotaryCpu, ClosedForms) {
  const RotaryArgs args{4, 3, 8, 8, 500000.0f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<int32_t> pos = {0, 3, 0, 4095};
  const TensorView p = pool.from_i32(pos, {4});
  Qkv qkv = make_qkv(pool, args, 2);
  const std::vector<double> x0 = testing::to_host_f64(qkv.all);
  rotary_forward(args, qkv.q, p, stream);
  const std::vector<double> x1 = testing::to_host_f64(qkv.all);
  const int64_t ld = 3 * args.heads * args.head_dim, half = args.rot_dim / 2;
  for (int64_t r = 0; r < args.rows; ++r) {
    for (int64_t h = 0; h < args.heads; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t o = r * ld + h * args.head_dim + i;
        // Each (i, i + half) pair keeps its length.
        EXPECT_NEAR(std::hypot(x1[o], x1[o + half]), std::hypot(x0[o], x0[o + half]), 1e-14);
        if (pos[r] == 0) {  // position 0: identity, exactly (cos 0 = 1, sin 0 = 0)
          EXPECT_EQ(x1[o], x0[o]);
          EXPECT_EQ(x1[o + half], x0[o + half]);
        }
      }
    }
  }
  // Rotating back restores x.
  rotary_backward(args, qkv.q, p, stream);
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(qkv.all), x0, Tol{1e-14, 1e-14}));
}

// L = sum(w * rotary(x)): dL/dx = rotary_backward(w), against central differences.
TEST(RotaryCpu, BackwardIsTheGradient) {
  const RotaryArgs args{3, 2, 6, 4, 10000.0f};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView p = pool.from_i32({2, 5, 11}, {3});
  const int64_t n = args.rows * args.heads * args.head_dim;
  const std::vector<double> x0 = as_f64(testing::random_uniform(n, 3));
  const std::vector<double> w = as_f64(testing::random_uniform(n, 4));
  TensorView x = pool.empty(DType::kF64, {args.rows, args.heads * args.head_dim});
  const std::vector<double> num = testing::numeric_gradient(
      [&](const std::vector<double>& v) {
        std::memcpy(x.data, v.data(), v.size() * sizeof(double));
        rotary_forward(args, x, p, stream);
        const std::vector<double> y = testing::to_host_f64(x);
        double s = 0.0;
        for (int64_t i = 0; i < n; ++i) s += y[i] * w[i];
        return s;
      },
      x0);
  TensorView dx = pool.from_f64(w, {args.rows, args.heads * args.head_dim});
  rotary_backward(args, dx, p, stream);
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(dx), num, Tol{1e-8, 1e-7}));
}

TEST(RotaryCpuDeathTest, RejectsBadArguments) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  TensorView x = pool.from(testing::random_uniform(16, 5), DType::kF32, {2, 8});
  const TensorView p = pool.from_i32({0, 1}, {2});
  EXPECT_DEATH(rotary_forward(RotaryArgs{2, 2, 4, 3}, x, p, stream), "rot_dim even");
  EXPECT_DEATH(rotary_forward(RotaryArgs{2, 2, 4, 6}, x, p, stream), "rot_dim <= head_dim");
  EXPECT_DEATH(rotary_forward(RotaryArgs{2, 3, 4, 4}, x, p, stream), "x must be a 2-D \\[2, 12\\]");
  EXPECT_DEATH(rotary_forward(RotaryArgs{2, 2, 4, 4}, x, pool.from_i32({0, 1, 2}, {3}), stream),
               "positions must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin. Both rotate by the same f32 angle (shared inv_freq recipe); cos/sin differ by
// sincosf's couple of f32 ulps from the double ones, the rotation by f32 vs double arithmetic:
// f32 1e-5; bf16 one bf16 ulp (rtol 1e-2, atol 1e-2).

struct GpuCase {
  int64_t rows, heads, head_dim, rot_dim;
  DType dtype;
};

class RotaryGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(RotaryGpu, MatchesCpuTwinOnFusedQkvViews) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& c = GetParam();
  const RotaryArgs args{c.rows, c.heads, c.head_dim, c.rot_dim, 10000.0f};
  const Tol tol = c.dtype == DType::kBF16 ? Tol{1e-2, 1e-2, 1e-4} : Tol{1e-5, 1e-5, 1e-9};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const int64_t w = c.heads * c.head_dim;
  const std::vector<float> qkv = testing::random_uniform(c.rows * 3 * w, 20);
  const std::vector<int32_t> pos = testing::random_ints(c.rows, 21, 0, 4096);
  TensorView c_all = cpool.from(qkv, c.dtype, {c.rows, 3 * w});
  TensorView g_all = gpool.from(qkv, c.dtype, {c.rows, 3 * w});
  const TensorView c_pos = cpool.from_i32(pos, {c.rows}), g_pos = gpool.from_i32(pos, {c.rows});
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    for (int part = 0; part < 2; ++part) {  // q, then k
      TensorView cv = engine::slice_cols(c_all, part * w, (part + 1) * w);
      TensorView gv = engine::slice_cols(g_all, part * w, (part + 1) * w);
      if (backward) {
        rotary_backward(args, cv, c_pos, cs);
        rotary_backward(args, gv, g_pos, gs);
      } else {
        rotary_forward(args, cv, c_pos, cs);
        rotary_forward(args, gv, g_pos, gs);
      }
    }
    const std::vector<float> got = testing::to_host(g_all), want = testing::to_host(c_all);
    EXPECT_TRUE(testing::tensors_near(got, want, tol));
    // v (columns [2w, 3w)) is outside both views: bitwise what was uploaded.
    const std::vector<float> start = testing::to_host(cpool.from(qkv, c.dtype, {c.rows, 3 * w}));
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 2 * w; j < 3 * w; ++j) {
        ASSERT_EQ(got[r * 3 * w + j], start[r * 3 * w + j]) << r << "," << j;
      }
    }
    // Make the next round start from identical values on both sides.
    g_all = gpool.from(want, c.dtype, {c.rows, 3 * w});
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RotaryGpu,
                         ::testing::Values(GpuCase{64, 16, 64, 64, DType::kBF16},
                                           GpuCase{64, 16, 64, 64, DType::kF32},
                                           GpuCase{37, 4, 128, 32, DType::kBF16},  // partial
                                           GpuCase{37, 4, 128, 32, DType::kF32},
                                           GpuCase{9, 3, 10, 6, DType::kBF16},  // scalar path
                                           GpuCase{9, 3, 10, 6, DType::kF32},
                                           GpuCase{1, 1, 256, 256, DType::kBF16}));

}  // namespace
}  // namespace anvil::ops
