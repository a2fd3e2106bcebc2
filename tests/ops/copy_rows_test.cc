// Tests of ops/copy_rows.h: dst[dst_rows[i], :] = src[src_rows[i], :], other rows untouched.
// CPU twin: against a plain host loop over vectors on random data, with a column block of a
// wider source (row stride > cols) and a strided destination, f32 and bf16; n == 0 is a no-op.
// GPU: the CUDA twin equals the CPU twin bit for bit (f32, bf16, i32) on the same inputs; the
// destination starts poisoned (NaN), so rows the op should leave alone stay NaN in both and
// rows it must write compare as values.
#include "ops/copy_rows.h"

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

constexpr int64_t kSrcRows = 7, kSrcLd = 10, kCols = 6, kDstRows = 9, kDstLd = 8;
const std::vector<int32_t> kDstIdx = {8, 0, 3, 5};
const std::vector<int32_t> kSrcIdx = {6, 6, 0, 2};

// Runs copy_rows on `device` from src (values) [kSrcRows, kSrcLd] (cols [2, 2 + kCols)) into a
// dst [kDstRows, kDstLd] (cols [1, 1 + kCols)) that starts as `init`; returns all of dst.
std::vector<float> run(Device device, DType dtype, const std::vector<float>& src_values,
                       const std::vector<float>& init) {
  TestStream stream(device);
  TensorPool pool(device);
  TensorView src = pool.from(src_values, dtype, {kSrcRows, kSrcLd});
  TensorView dst = pool.from(init, dtype, {kDstRows, kDstLd});
  TensorView di = pool.from_i32(kDstIdx, {4});
  TensorView si = pool.from_i32(kSrcIdx, {4});
  copy_rows(engine::slice_cols(dst, 1, 1 + kCols), engine::slice_cols(src, 2, 2 + kCols), di, si,
            stream);
  return testing::to_host(dst);
}

TEST(CopyRowsCpu, MatchesHostLoop) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::vector<float> src = testing::random_uniform(kSrcRows * kSrcLd, 1);
    std::vector<float> init = testing::random_uniform(kDstRows * kDstLd, 2);
    if (dtype == DType::kBF16) {
      src = testing::round_bf16(src);
      init = testing::round_bf16(init);
    }
    std::vector<float> want = init;
    for (size_t i = 0; i < kDstIdx.size(); ++i) {
      for (int64_t c = 0; c < kCols; ++c) {
        want[kDstIdx[i] * kDstLd + 1 + c] = src[kSrcIdx[i] * kSrcLd + 2 + c];
      }
    }
    const std::vector<float> got = run(Device::kCpu, dtype, src, init);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "dtype " << engine::dtype_name(dtype);
  }
}

TEST(CopyRowsCpu, NoRowsIsANoOp) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> init = testing::random_uniform(12, 3);
  TensorView dst = pool.from(init, DType::kF32, {3, 4});
  TensorView src = pool.from(testing::random_uniform(8, 4), DType::kF32, {2, 4});
  TensorView none = pool.from_i32({}, {0});
  copy_rows(dst, src, none, none, stream);
  EXPECT_EQ(testing::to_host(dst), init);
}

TEST(CopyRowsCpuDeath, IndexOutOfRange) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  TensorView dst = pool.from(testing::random_uniform(12, 3), DType::kF32, {3, 4});
  TensorView src = pool.from(testing::random_uniform(8, 4), DType::kF32, {2, 4});
  TensorView di = pool.from_i32({3}, {1});
  TensorView si = pool.from_i32({0}, {1});
  EXPECT_DEATH(copy_rows(dst, src, di, si, stream), "copies src row 0 of 2 to dst row 3 of 3");
}

TEST(CopyRowsGpu, EqualsCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const std::vector<float> src = testing::random_uniform(kSrcRows * kSrcLd, 5);
    // NaN everywhere: rows not copied must stay NaN, copied rows must be values.
    const std::vector<float> init(kDstRows * kDstLd, std::nanf(""));
    const std::vector<float> cpu = run(Device::kCpu, dtype, src, init);
    const std::vector<float> gpu = run(Device::kCuda, dtype, src, init);
    ASSERT_EQ(cpu.size(), gpu.size());
    int64_t written = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
      ASSERT_EQ(std::isnan(cpu[i]), std::isnan(gpu[i])) << "element " << i;
      if (!std::isnan(cpu[i])) {
        ++written;
        EXPECT_EQ(cpu[i], gpu[i]) << "element " << i;
      }
    }
    EXPECT_EQ(written, static_cast<int64_t>(kDstIdx.size()) * kCols);
  }
}

}  // namespace
}  // namespace anvil::ops
