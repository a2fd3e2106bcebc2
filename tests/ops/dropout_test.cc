// Tests of inverted dropout (ops/dropout.h): keep_i = philox_uniform_at(seed, offset, i) >= p,
// y_i = keep_i ? x_i / (1 - p) : 0 (=), backward with the same mask (=).
// CPU twin: mask equals philox_uniform_at, kept fraction within a binomial bound, kept values
// scaled exactly, backward uses the same mask, p = 0 is the identity, aliasing, offsets differ.
// GPU: masks and values identical bit for bit to the CPU twin for the same (seed, offset).
#include "ops/dropout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/memory.h"
#include "engine/philox.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;

// x values away from zero, so a zero output means "dropped".
std::vector<float> nonzero_inputs(int64_t n, uint64_t seed) {
  std::vector<float> v = testing::random_uniform(n, seed, 0.5f, 1.5f);
  for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];
  return v;
}

std::vector<bool> zero_mask(const std::vector<float>& v) {
  std::vector<bool> m(v.size());
  for (size_t i = 0; i < v.size(); ++i) m[i] = v[i] == 0.0f;
  return m;
}

TEST(DropoutCpu, MaskScaleFractionAndBackward) {
  const int64_t n = 200003;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = nonzero_inputs(n, 1);
  const std::vector<float> dy = nonzero_inputs(n, 2);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    SCOPED_TRACE(p);
    const DropoutArgs args{p, 1234, 5678};
    TensorView y = pool.empty(DType::kF32, {n});
    dropout_forward(args, y, pool.from(x, DType::kF32, {n}), stream);
    TensorView dx = pool.empty(DType::kF32, {n});
    dropout_backward(args, dx, pool.from(dy, DType::kF32, {n}), stream);
    const std::vector<float> yv = testing::to_host(y), dxv = testing::to_host(dx);
    const float scale = 1.0f / (1.0f - p);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = engine::philox_uniform_at(args.seed, args.offset, i) >= p;
      kept += keep;
      ASSERT_EQ(yv[i], keep ? x[i] * scale : 0.0f) << i;
      ASSERT_EQ(dxv[i], keep ? dy[i] * scale : 0.0f) << i;
    }
    // Binomial(n, 1 - p): 6 standard deviations.
    const double frac = static_cast<double>(kept) / n;
    EXPECT_NEAR(frac, 1.0 - p, 6.0 * std::sqrt(p * (1.0 - p) / n));
  }
}

TEST(DropoutCpu, ZeroProbabilityIsIdentity) {
  const int64_t n = 1001;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = nonzero_inputs(n, 3);
  TensorView y = pool.empty(DType::kBF16, {n});
  dropout_forward(DropoutArgs{0.0f, 1, 2}, y, pool.from(x, DType::kBF16, {n}), stream);
  EXPECT_EQ(testing::to_host(y), testing::round_bf16(x));
  TensorView inplace = pool.from(x, DType::kF32, {n});
  dropout_backward(DropoutArgs{0.0f, 1, 2}, inplace, inplace, stream);
  EXPECT_EQ(testing::to_host(inplace), x);
}

TEST(DropoutCpu, AliasingF64AndOffsets) {
  const int64_t n = 4099;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = nonzero_inputs(n, 4);
  const DropoutArgs args{0.3f, 99, 0};
  TensorView y = pool.empty(DType::kF32, {n});
  dropout_forward(args, y, pool.from(x, DType::kF32, {n}), stream);
  TensorView inplace = pool.from(x, DType::kF32, {n});
  dropout_forward(args, inplace, inplace, stream);
  EXPECT_EQ(testing::to_host(inplace), testing::to_host(y));

  // f64: same mask, scale 1 / (1 - p) in double.
  TensorView y64 = pool.empty(DType::kF64, {n});
  dropout_forward(args, y64, pool.from_f64(std::vector<double>(x.begin(), x.end()), {n}), stream);
  const std::vector<double> v64 = testing::to_host_f64(y64);
  const std::vector<float> v32 = testing::to_host(y);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(v64[i] == 0.0, v32[i] == 0.0f) << i;
    ASSERT_NEAR(v64[i], v32[i], 1e-6) << i;
  }

  // Another offset (or seed) gives another mask.
  TensorView y2 = pool.empty(DType::kF32, {n});
  dropout_forward(DropoutArgs{0.3f, 99, 1025}, y2, pool.from(x, DType::kF32, {n}), stream);
  EXPECT_NE(zero_mask(testing::to_host(y2)), zero_mask(v32));
  dropout_forward(DropoutArgs{0.3f, 100, 0}, y2, pool.from(x, DType::kF32, {n}), stream);
  EXPECT_NE(zero_mask(testing::to_host(y2)), zero_mask(v32));
}

TEST(DropoutCpuDeathTest, RejectsBadArguments) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x = pool.from(nonzero_inputs(8, 5), DType::kF32, {8});
  EXPECT_DEATH(dropout_forward(DropoutArgs{1.0f, 0, 0}, pool.empty(DType::kF32, {8}), x, stream),
               "p must be in");
  EXPECT_DEATH(dropout_forward(DropoutArgs{0.5f, 0, 0}, pool.empty(DType::kBF16, {8}), x, stream),
               "y must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin: same (seed, offset) -> the same zeros and the same values, bit for bit.

struct GpuCase {
  int64_t n;
  DType dtype;
  bool misaligned;
};

class DropoutGpu : public ::testing::TestWithParam<GpuCase> {};

TensorView shifted(TensorPool& pool, const std::vector<float>& values, DType dtype, bool shift) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (!shift) return pool.from(values, dtype, {n});
  std::vector<float> padded(values.size() + 1, 0.25f);
  std::copy(values.begin(), values.end(), padded.begin() + 1);
  return engine::slice_rows(pool.from(padded, dtype, {n + 1}), 1, n + 1);
}

TEST_P(DropoutGpu, MasksAndValuesMatchCpuBitForBit) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const std::vector<float> x = nonzero_inputs(p.n, 6);
  // 64-bit seed and an offset past 2^32, so both halves of the Philox key and counter matter.
  const DropoutArgs args{0.37f, 0x9e3779b97f4a7c15ull, (uint64_t{1} << 33) + 5};

  TensorView cy = cpool.empty(p.dtype, {p.n});
  dropout_forward(args, cy, cpool.from(x, p.dtype, {p.n}), cs);
  TensorView gy = shifted(gpool, std::vector<float>(p.n, 0.0f), p.dtype, p.misaligned);
  engine::poison(gy, gs.get());
  dropout_forward(args, gy, shifted(gpool, x, p.dtype, p.misaligned), gs);
  const std::vector<float> c = testing::to_host(cy), g = testing::to_host(gy);
  EXPECT_EQ(zero_mask(g), zero_mask(c));
  EXPECT_EQ(g, c);
  if (p.n >= 1000) {
    int64_t kept = 0;
    for (float v : g) kept += v != 0.0f;
    const double frac = static_cast<double>(kept) / p.n;
    EXPECT_NEAR(frac, 1.0 - args.p, 6.0 * std::sqrt(args.p * (1.0 - args.p) / p.n));
  }

  // Backward, in place on the GPU: the same mask as the forward.
  TensorView gd = shifted(gpool, x, p.dtype, p.misaligned);
  dropout_backward(args, gd, gd, gs);
  EXPECT_EQ(testing::to_host(gd), c);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, DropoutGpu,
    ::testing::Values(GpuCase{1, DType::kBF16, false}, GpuCase{3, DType::kF32, false},
                      GpuCase{4, DType::kBF16, false}, GpuCase{1001, DType::kBF16, false},
                      GpuCase{1001, DType::kF32, true}, GpuCase{4097, DType::kBF16, true},
                      GpuCase{(1 << 20) + 5, DType::kBF16, false},
                      GpuCase{(1 << 20) + 5, DType::kF32, false}));

}  // namespace
}  // namespace anvil::ops
