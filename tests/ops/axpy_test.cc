// Tests of AXPY (ops/axpy.h): y[i] += alpha * x[i] (+=), y, x: [n], n may be 0.
// CPU twin: closed form y0 + alpha x0 on random data (f32, f64, bf16; n = 1, 3, 1000003), +=
// applied twice, x aliasing y, n == 0 leaves memory alone, NaN propagation, argument checks.
// GPU: against the CPU twin from the same random y0 (y is read-modify-write), f32 and bf16, odd
// sizes, sub-views offset by one element (x and y at the same offset: scalar head + packs; at
// different offsets: all scalar), guard elements around y left untouched, NaN propagation, and
// indices past 2^31.
#include "ops/axpy.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
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

constexpr float kAlpha = -0.7f;

// Values as a tensor of `dtype` holds them (bf16: rounded to nearest even).
std::vector<double> rounded(const std::vector<float>& v, DType dtype) {
  const std::vector<float> r = dtype == DType::kBF16 ? testing::round_bf16(v) : v;
  return {r.begin(), r.end()};
}

// y0 + alpha x0, in double.
std::vector<double> closed_form(const std::vector<double>& y0, double alpha,
                                const std::vector<double>& x0) {
  std::vector<double> out(y0.size());
  for (size_t i = 0; i < y0.size(); ++i) out[i] = y0[i] + alpha * x0[i];
  return out;
}

// Storage rounding of the result: one f32 rounding (f32), one bf16 ulp (bf16), exact-ish (f64).
Tol storage_tol(DType dtype) {
  if (dtype == DType::kF64) return Tol{1e-15, 1e-15, 1e-24};
  if (dtype == DType::kF32) return Tol{1e-12, 1.2e-7, 1e-12};
  return Tol{1e-6, 8e-3, 1e-4};
}

// ---------------------------------------------------------------------------------------------
// CPU twin

struct CpuCase {
  int64_t n;
  DType dtype;
};

void PrintTo(const CpuCase& c, std::ostream* os) {
  *os << "n = " << c.n << ", " << engine::dtype_name(c.dtype);
}

class AxpyCpu : public ::testing::TestWithParam<CpuCase> {};

TEST_P(AxpyCpu, MatchesClosedForm) {
  const CpuCase& p = GetParam();
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  std::vector<double> y0, x0;
  TensorView y, x;
  if (p.dtype == DType::kF64) {
    // Full-mantissa doubles (not just widened floats).
    const std::vector<float> a = testing::random_uniform(p.n, 1),
                             b = testing::random_uniform(p.n, 2);
    const std::vector<float> c = testing::random_uniform(p.n, 3),
                             d = testing::random_uniform(p.n, 4);
    for (int64_t i = 0; i < p.n; ++i) {
      y0.push_back(a[i] + 1e-9 * b[i]);
      x0.push_back(c[i] + 1e-9 * d[i]);
    }
    y = pool.from_f64(y0, {p.n});
    x = pool.from_f64(x0, {p.n});
  } else {
    const std::vector<float> yf = testing::random_uniform(p.n, 1),
                             xf = testing::random_uniform(p.n, 3);
    y0 = rounded(yf, p.dtype);
    x0 = rounded(xf, p.dtype);
    y = pool.from(yf, p.dtype, {p.n});
    x = pool.from(xf, p.dtype, {p.n});
  }
  const Tol tol = storage_tol(p.dtype);
  axpy(kAlpha, y, x, stream);
  const std::vector<double> once = testing::to_host_f64(y);
  EXPECT_TRUE(testing::tensors_near(once, closed_form(y0, kAlpha, x0), tol));
  // += again: y0 + 2 alpha x0 (two roundings for f32/bf16).
  axpy(kAlpha, y, x, stream);
  // Two roundings: the first, of y0 + alpha x0 (|.| <= 1.7), is absolute when the sum cancels.
  const Tol twice{tol.rtol * 4, tol.rtol * 2, tol.max_nmse * 4};
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host_f64(y), closed_form(y0, 2.0 * kAlpha, x0), twice));
  // x untouched.
  EXPECT_EQ(testing::to_host_f64(x), x0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, AxpyCpu,
                         ::testing::Values(CpuCase{1, DType::kF32}, CpuCase{3, DType::kF32},
                                           CpuCase{1000003, DType::kF32}, CpuCase{1, DType::kF64},
                                           CpuCase{3, DType::kF64}, CpuCase{1000003, DType::kF64},
                                           CpuCase{3, DType::kBF16},
                                           CpuCase{1000003, DType::kBF16}));

TEST(AxpyCpuEdge, EmptyIsNoOp) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> yv = testing::random_uniform(4, 5), xv = testing::random_uniform(4, 6);
  TensorView ybuf = pool.from(yv, DType::kF32, {4});
  TensorView xbuf = pool.from(xv, DType::kF32, {4});
  // [0] views inside live buffers: nothing around them may change.
  axpy(kAlpha, engine::slice_rows(ybuf, 2, 2), engine::slice_rows(xbuf, 1, 1), stream);
  EXPECT_EQ(testing::to_host(ybuf), yv);
  EXPECT_EQ(testing::to_host(xbuf), xv);
}

TEST(AxpyCpuEdge, XMayBeY) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> v = {0.5, -1.25, 3.0, 1e-3, -7.0};
  TensorView y = pool.from_f64(v, {5});
  axpy(kAlpha, y, y, stream);  // y *= 1 + alpha
  const std::vector<double> got = testing::to_host_f64(y);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_DOUBLE_EQ(got[i], v[i] + double{kAlpha} * v[i]);
}

// A NaN at `at` in x must turn y[at] into NaN, for alpha != 0 and alpha == 0 (0 * NaN = NaN);
// every other element keeps its closed-form value.
::testing::AssertionResult nan_exactly_at(const std::vector<double>& got,
                                          const std::vector<double>& ref,
                                          const std::vector<int64_t>& at, Tol tol) {
  std::vector<bool> is_nan(got.size(), false);
  for (int64_t i : at) is_nan[static_cast<size_t>(i)] = true;
  for (size_t i = 0; i < got.size(); ++i) {
    if (is_nan[i] && !std::isnan(got[i])) {
      return ::testing::AssertionFailure() << "y[" << i << "] = " << got[i] << ", want NaN";
    }
    if (!is_nan[i] && !(std::fabs(got[i] - ref[i]) <= tol.atol + tol.rtol * std::fabs(ref[i]))) {
      return ::testing::AssertionFailure() << "y[" << i << "] = " << got[i] << ", want " << ref[i];
    }
  }
  return ::testing::AssertionSuccess();
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(AxpyCpuEdge, NanInXPropagates) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const int64_t n = 37;
  const std::vector<int64_t> at = {0, 17, n - 1};
  const std::vector<float> yv = testing::random_uniform(n, 7);
  std::vector<float> xv = testing::random_uniform(n, 8);
  for (int64_t i : at) xv[static_cast<size_t>(i)] = kNaN;
  for (float alpha : {kAlpha, 0.0f}) {
    TensorView y = pool.from(yv, DType::kF32, {n});
    axpy(alpha, y, pool.from(xv, DType::kF32, {n}), stream);
    EXPECT_TRUE(
        nan_exactly_at(testing::to_host_f64(y),
                       closed_form(rounded(yv, DType::kF32), alpha, rounded(xv, DType::kF32)), at,
                       storage_tol(DType::kF32)))
        << "alpha = " << alpha;
  }
}

TEST(AxpyCpuEdge, RejectsBadArguments) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  TensorView y = pool.from(testing::random_uniform(8, 9), DType::kF32, {8});
  TensorView x64 = pool.from(testing::random_uniform(8, 10), DType::kF64, {8});
  TensorView x7 = pool.from(testing::random_uniform(7, 11), DType::kF32, {7});
  TensorView x2d = pool.from(testing::random_uniform(8, 12), DType::kF32, {2, 4});
  TensorView i32 = pool.from_i32({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  EXPECT_DEATH(axpy(kAlpha, y, x64, stream), "axpy: y must be contiguous f64");
  EXPECT_DEATH(axpy(kAlpha, y, x7, stream), "axpy: y must be contiguous f32\\[7\\]");
  EXPECT_DEATH(axpy(kAlpha, y, x2d, stream), "axpy: x must be contiguous f32\\[8\\]");
  EXPECT_DEATH(axpy(kAlpha, i32, i32, stream), "axpy: x must be f32, bf16 or f16");
  // Partial overlap: x = y shifted by one element.
  EXPECT_DEATH(axpy(kAlpha, engine::slice_rows(y, 0, 7), engine::slice_rows(y, 1, 8), stream),
               "overlap");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin. The CPU twin computes y0 + alpha x0 in double from the same stored inputs and
// rounds once; the GPU computes fmaf(alpha, x, y) (one f32 rounding): f32 at most one ulp apart
// (<= 2^-23 relative); bf16 at most one bf16 ulp (<= 2^-7 relative).

enum class Layout {
  kAligned,      // y and x at 16-byte boundaries: packs + scalar tail
  kBothShifted,  // y and x one element past a boundary: scalar head + packs + scalar tail
  kXShifted,     // only x one element past: offsets differ, all scalar
};

struct GpuCase {
  int64_t n;
  DType dtype;
  Layout layout;
};

constexpr int64_t kPad = 16;  // guard elements on either side (a multiple of 16 bytes)

// A [n + 2 kPad] buffer holding random guards around `values` placed at kPad + shift; returns
// the [n] view; *whole is the buffer and *whole_values its initial contents.
TensorView padded(TensorPool& pool, const std::vector<float>& values, DType dtype, int64_t shift,
                  uint64_t seed, TensorView* whole, std::vector<float>* whole_values) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<float> all = testing::random_uniform(n + 2 * kPad, seed, 10.0f, 20.0f);
  std::copy(values.begin(), values.end(), all.begin() + kPad + shift);
  *whole = pool.from(all, dtype, {n + 2 * kPad});
  *whole_values = testing::to_host(*whole);
  return engine::slice_rows(*whole, kPad + shift, kPad + shift + n);
}

// The buffer outside [kPad + shift, kPad + shift + n) still holds its initial values.
::testing::AssertionResult guards_intact(const TensorView& whole, const std::vector<float>& init,
                                         int64_t shift, int64_t n) {
  const std::vector<float> now = testing::to_host(whole);
  for (int64_t i = 0; i < static_cast<int64_t>(now.size()); ++i) {
    if (i >= kPad + shift && i < kPad + shift + n) continue;
    if (now[static_cast<size_t>(i)] != init[static_cast<size_t>(i)]) {
      return ::testing::AssertionFailure()
             << "guard element " << i << " changed from " << init[static_cast<size_t>(i)] << " to "
             << now[static_cast<size_t>(i)];
    }
  }
  return ::testing::AssertionSuccess();
}

void PrintTo(const GpuCase& c, std::ostream* os) {
  const char* layouts[] = {"aligned", "x and y shifted by 1", "x shifted by 1"};
  *os << "n = " << c.n << ", " << engine::dtype_name(c.dtype) << ", "
      << layouts[static_cast<int>(c.layout)];
}

class AxpyGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(AxpyGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const std::vector<float> y0 = testing::random_uniform(p.n, 21, -2.0f, 2.0f);
  const std::vector<float> x0 = testing::random_uniform(p.n, 22);
  const int64_t y_shift = p.layout == Layout::kBothShifted ? 1 : 0;
  const int64_t x_shift = p.layout == Layout::kAligned ? 0 : 1;

  TensorView cy = cpool.from(y0, p.dtype, {p.n});
  axpy(kAlpha, cy, cpool.from(x0, p.dtype, {p.n}), cs);

  TensorView gy_whole, gx_whole;
  std::vector<float> gy_init, gx_init;
  TensorView gy = padded(gpool, y0, p.dtype, y_shift, 23, &gy_whole, &gy_init);
  const TensorView gx = padded(gpool, x0, p.dtype, x_shift, 24, &gx_whole, &gx_init);
  axpy(kAlpha, gy, gx, gs);
  const std::vector<double> ref = testing::to_host_f64(cy);
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(gy), ref, storage_tol(p.dtype)));
  EXPECT_TRUE(guards_intact(gy_whole, gy_init, y_shift, p.n));
  EXPECT_EQ(testing::to_host(gx_whole), gx_init);  // x (and its guards) untouched

  // x may be y: y *= 1 + alpha on both twins (inputs may already differ by one rounding).
  axpy(kAlpha, cy, cy, cs);
  axpy(kAlpha, gy, gy, gs);
  const Tol tol = storage_tol(p.dtype);
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(gy), testing::to_host_f64(cy),
                                    Tol{tol.atol, tol.rtol * 2, tol.max_nmse * 4}));
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, AxpyGpu,
    ::testing::Values(GpuCase{1, DType::kF32, Layout::kAligned},
                      GpuCase{3, DType::kF32, Layout::kAligned},
                      GpuCase{3, DType::kF32, Layout::kBothShifted},
                      GpuCase{3, DType::kBF16, Layout::kXShifted},
                      GpuCase{7, DType::kBF16, Layout::kBothShifted},
                      GpuCase{4096, DType::kF32, Layout::kAligned},
                      GpuCase{4097, DType::kF32, Layout::kBothShifted},
                      GpuCase{4097, DType::kF32, Layout::kXShifted},
                      GpuCase{4097, DType::kBF16, Layout::kBothShifted},
                      GpuCase{1000003, DType::kF32, Layout::kAligned},
                      GpuCase{1000003, DType::kF32, Layout::kBothShifted},
                      GpuCase{1000003, DType::kF32, Layout::kXShifted},
                      GpuCase{1000003, DType::kBF16, Layout::kAligned},
                      GpuCase{1000003, DType::kBF16, Layout::kBothShifted},
                      GpuCase{1000003, DType::kBF16, Layout::kXShifted},
                      // Several grid-stride rounds (4096 blocks x 256 threads x 4 f32 per round).
                      GpuCase{(1 << 24) + 5, DType::kF32, Layout::kBothShifted},
                      GpuCase{(1 << 24) + 5, DType::kF32, Layout::kXShifted}));

class AxpyGpuNan : public ::testing::TestWithParam<DType> {};

// NaNs in x at the scalar head, inside a pack, and in the scalar tail (both views shifted by one
// element), and in the all-scalar layout, with alpha != 0 and alpha == 0.
TEST_P(AxpyGpuNan, NanInXPropagates) {
  ANVIL_SKIP_WITHOUT_GPU();
  const DType dtype = GetParam();
  TestStream gs(Device::kCuda);
  TensorPool gpool(Device::kCuda);
  const int64_t n = 1001;
  const std::vector<int64_t> at = {0, 1, 500, n - 2, n - 1};
  const std::vector<float> yv = testing::random_uniform(n, 31);
  std::vector<float> xv = testing::random_uniform(n, 32);
  for (int64_t i : at) xv[static_cast<size_t>(i)] = kNaN;
  const std::vector<double> y0 = rounded(yv, dtype), x0 = rounded(xv, dtype);
  for (int64_t x_shift : {1, 0}) {
    for (float alpha : {kAlpha, 0.0f}) {
      TensorView yw, xw;
      std::vector<float> yi, xi;
      TensorView y = padded(gpool, yv, dtype, 1, 33, &yw, &yi);
      axpy(alpha, y, padded(gpool, xv, dtype, x_shift, 34, &xw, &xi), gs);
      EXPECT_TRUE(nan_exactly_at(testing::to_host_f64(y), closed_form(y0, alpha, x0), at,
                                 storage_tol(dtype)))
          << "alpha = " << alpha << ", x shift " << x_shift;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AxpyGpuNan, ::testing::Values(DType::kF32, DType::kBF16));

TEST(AxpyGpuEdge, EmptyIsNoOp) {
  ANVIL_SKIP_WITHOUT_GPU();
  TestStream gs(Device::kCuda);
  TensorPool gpool(Device::kCuda);
  const std::vector<float> yv = testing::random_uniform(4, 41), xv = testing::random_uniform(4, 42);
  TensorView ybuf = gpool.from(yv, DType::kF32, {4});
  TensorView xbuf = gpool.from(xv, DType::kF32, {4});
  axpy(kAlpha, engine::slice_rows(ybuf, 2, 2), engine::slice_rows(xbuf, 1, 1), gs);
  EXPECT_EQ(testing::to_host(ybuf), yv);
}

// n = 2^31 + 201 f32 (8 GiB each for x and y): windows of random data at the start, across
// element 2^31 and at the end; zeros elsewhere. 32-bit indices would wrap before the last two.
TEST(AxpyGpuEdge, IndicesPast2Pow31) {
  ANVIL_SKIP_WITHOUT_GPU();
  const int64_t n = (int64_t{1} << 31) + 201;  // windows below must not overlap
  const size_t need = 2 * static_cast<size_t>(n) * sizeof(float) + (size_t{1} << 30);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < need) GTEST_SKIP() << "needs " << (need >> 30) << " GiB of free GPU memory";
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  TensorView y = gpool.empty(DType::kF32, {n});
  TensorView x = gpool.empty(DType::kF32, {n});
  engine::fill_zero(y, gs.get());
  engine::fill_zero(x, gs.get());
  constexpr int64_t kW = 64;
  const std::vector<int64_t> starts = {0, (int64_t{1} << 31) - kW / 2, n - kW};
  std::vector<std::vector<float>> y0, x0;
  for (size_t k = 0; k < starts.size(); ++k) {
    y0.push_back(testing::random_uniform(kW, 50 + k));
    x0.push_back(testing::random_uniform(kW, 60 + k));
    engine::copy(engine::slice_rows(y, starts[k], starts[k] + kW),
                 cpool.from(y0[k], DType::kF32, {kW}), gs.get());
    engine::copy(engine::slice_rows(x, starts[k], starts[k] + kW),
                 cpool.from(x0[k], DType::kF32, {kW}), gs.get());
  }
  axpy(kAlpha, y, x, gs);
  for (size_t k = 0; k < starts.size(); ++k) {
    const std::vector<double> got =
        testing::to_host_f64(engine::slice_rows(y, starts[k], starts[k] + kW));
    EXPECT_TRUE(testing::tensors_near(
        got, closed_form(rounded(y0[k], DType::kF32), kAlpha, rounded(x0[k], DType::kF32)),
        storage_tol(DType::kF32)))
        << "window at " << starts[k];
  }
}

}  // namespace
}  // namespace anvil::ops
