// Tests of the elementwise dtype conversion (ops/cast.h): y = (dst dtype) x, round to nearest
// even; y = x for equal dtypes.
// CPU twin: bit patterns against engine::f32_to_bf16 / f32_to_f16 and exact widening, on random
// values plus ties, subnormals, overflow, signed zeros and infinities.
// GPU: every pair of f32/bf16/f16 (identity included) equal to the CPU twin byte for byte.
#include "ops/cast.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/cuda_check.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;

// Random values over many binades, plus the cases rounding gets wrong first.
std::vector<float> cast_inputs(int64_t n) {
  std::vector<float> v = testing::random_uniform(n, 1, -1.0f, 1.0f);
  const std::vector<float> e = testing::random_uniform(n, 2, -30.0f, 30.0f);
  for (int64_t i = 0; i < n; ++i) v[i] *= std::exp2(e[i]);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {
      0.0f,
      -0.0f,
      1.0f,
      -1.0f,
      inf,
      -inf,
      1.0f + std::exp2(-8.0f),          // bf16 tie, rounds down to even
      1.0f + 3.0f * std::exp2(-8.0f),   // bf16 tie, rounds up to even
      1.0f + std::exp2(-11.0f),         // f16 tie
      1.0f + 3.0f * std::exp2(-11.0f),  // f16 tie
      65504.0f,
      65519.0f,
      65520.0f,  // f16 max, below and at the overflow tie
      1e-40f,
      -3e-39f,  // f32 subnormals
      6e-8f,
      3e-5f,
      1e-8f,  // f16 subnormal range and underflow
      3.4e38f,
      std::numeric_limits<float>::max()};
  for (size_t i = 0; i < special.size() && i < v.size(); ++i) v[i] = special[i];
  return v;
}

std::vector<uint8_t> bytes_of(ConstTensorView v) {
  std::vector<uint8_t> out(v.bytes());
  if (v.device == Device::kCpu) {
    std::memcpy(out.data(), v.data, out.size());
  } else {
    ANVIL_CUDA_CHECK(cudaDeviceSynchronize());
    ANVIL_CUDA_CHECK(cudaMemcpy(out.data(), v.data, out.size(), cudaMemcpyDeviceToHost));
  }
  return out;
}

template <typename U>
std::vector<U> words_of(ConstTensorView v) {
  const std::vector<uint8_t> b = bytes_of(v);
  std::vector<U> w(b.size() / sizeof(U));
  std::memcpy(w.data(), b.data(), b.size());
  return w;
}

TEST(CastCpu, MatchesEngineConversionsBitForBit) {
  const int64_t n = 4096;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = cast_inputs(n);
  const TensorView x32 = pool.from(x, DType::kF32, {n});

  TensorView b16 = pool.empty(DType::kBF16, {n});
  cast(b16, x32, stream);
  TensorView h16 = pool.empty(DType::kF16, {n});
  cast(h16, x32, stream);
  const std::vector<uint16_t> bw = words_of<uint16_t>(b16), hw = words_of<uint16_t>(h16);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bw[i], engine::f32_to_bf16(x[i])) << i << " x=" << x[i];
    ASSERT_EQ(hw[i], engine::f32_to_f16(x[i])) << i << " x=" << x[i];
  }
  EXPECT_EQ(bw[6], engine::f32_to_bf16(1.0f));                            // tie to even: down
  EXPECT_EQ(engine::bf16_to_f32(bw[7]), 1.0f + 4.0f * std::exp2(-8.0f));  // tie to even: up
  EXPECT_TRUE(std::isinf(engine::f16_to_f32(hw[12])));                    // 65520 overflows f16

  // Widening is exact; bf16 -> f16 equals f32_to_f16 of the exact bf16 value.
  TensorView back = pool.empty(DType::kF32, {n});
  cast(back, b16, stream);
  const std::vector<uint32_t> backw = words_of<uint32_t>(back);
  TensorView b2h = pool.empty(DType::kF16, {n});
  cast(b2h, b16, stream);
  const std::vector<uint16_t> b2hw = words_of<uint16_t>(b2h);
  TensorView h2b = pool.empty(DType::kBF16, {n});
  cast(h2b, h16, stream);
  const std::vector<uint16_t> h2bw = words_of<uint16_t>(h2b);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(backw[i], static_cast<uint32_t>(bw[i]) << 16) << i;
    ASSERT_EQ(b2hw[i], engine::f32_to_f16(engine::bf16_to_f32(bw[i]))) << i;
    ASSERT_EQ(h2bw[i], engine::f32_to_bf16(engine::f16_to_f32(hw[i]))) << i;
  }

  // Identity copies bytes (NaN included) and is a no-op in place.
  std::vector<float> with_nan = x;
  with_nan[3] = std::numeric_limits<float>::quiet_NaN();
  const TensorView src = pool.from(with_nan, DType::kF32, {n});
  TensorView same = pool.empty(DType::kF32, {n});
  cast(same, src, stream);
  EXPECT_EQ(bytes_of(same), bytes_of(src));
  cast(same, same, stream);
  EXPECT_EQ(bytes_of(same), bytes_of(src));
}

TEST(CastCpu, F64ToF32) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> x = {0.1, -1.0 / 3.0, 1e300, 1e-50};
  TensorView y = pool.empty(DType::kF32, {4});
  cast(y, pool.from_f64(x, {4}), stream);
  const std::vector<float> v = testing::to_host(y);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(v[i], static_cast<float>(x[i])) << i;
}

TEST(CastCpuDeathTest, RejectsBadArguments) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView x = pool.from({1.0f, 2.0f, 3.0f}, DType::kF32, {3});
  EXPECT_DEATH(cast(pool.empty(DType::kBF16, {4}), x, stream), "numel");
  EXPECT_DEATH(cast(pool.empty(DType::kI32, {3}), x, stream), "y must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin: byte-exact for every pair (inputs have no NaN: NaN payloads may differ).

struct GpuCase {
  DType from, to;
  int64_t n;
  bool misaligned;
};

class CastGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(CastGpu, MatchesCpuTwinBitForBit) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const std::vector<float> x = cast_inputs(p.n);
  TensorView cy = cpool.empty(p.to, {p.n});
  cast(cy, cpool.from(x, p.from, {p.n}), cs);

  const int64_t shift = p.misaligned ? 1 : 0;
  std::vector<float> padded(p.n + shift, 0.5f);
  std::copy(x.begin(), x.end(), padded.begin() + shift);
  const TensorView gx =
      engine::slice_rows(gpool.from(padded, p.from, {p.n + shift}), shift, p.n + shift);
  TensorView gy = engine::slice_rows(gpool.empty(p.to, {p.n + shift}), shift, p.n + shift);
  cast(gy, gx, gs);
  const std::vector<uint8_t> g = bytes_of(gy), c = bytes_of(cy);
  ASSERT_EQ(g.size(), c.size());
  const size_t es = engine::dtype_size(p.to);
  for (size_t i = 0; i < g.size(); i += es) {
    ASSERT_EQ(std::memcmp(&g[i], &c[i], es), 0)
        << "element " << i / es << " x=" << x[i / es] << " gpu " << testing::to_host(gy)[i / es]
        << " cpu " << testing::to_host(cy)[i / es];
  }
}

std::vector<GpuCase> all_cases() {
  std::vector<GpuCase> cases;
  for (DType from : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (DType to : {DType::kF32, DType::kBF16, DType::kF16}) {
      cases.push_back({from, to, 1, false});
      cases.push_back({from, to, 4096 + 3, false});
      cases.push_back({from, to, 1001, true});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CastGpu, ::testing::ValuesIn(all_cases()));

}  // namespace
}  // namespace anvil::ops
