// Tests of the row argmax (ops/argmax.h): out[r] = first index of the largest of x[r, :cols).
// CPU twin: against std::max_element (the first of equal maxima) on random rows, forced ties,
// columns past `cols` ignored (the padded vocabulary holds a larger value there), NaN (the first
// NaN wins, as torch.argmax), f32 / f64 / bf16. GPU: the CUDA twin equals the CPU twin exactly
// (an index, no tolerance) on random f32 and bf16 rows of awkward widths (1, 31, 257, 50257 of
// ld 50304) with many ties (values from a few levels), output poisoned with -1 before the run.
#include "ops/argmax.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;

// The first index of the largest of each row's first `cols` values (std::max_element keeps the
// first of equal maxima); NaN-free rows only.
std::vector<int32_t> reference(const std::vector<float>& x, int64_t rows, int64_t cols,
                               int64_t ld) {
  std::vector<int32_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    const auto begin = x.begin() + r * ld;
    out.push_back(static_cast<int32_t>(std::max_element(begin, begin + cols) - begin));
  }
  return out;
}

// Values from `levels` distinct numbers, so equal maxima (ties) are common.
std::vector<float> leveled(int64_t n, uint64_t seed, int levels) {
  std::vector<int32_t> k = testing::random_ints(n, seed, 0, levels);
  std::vector<float> out(k.begin(), k.end());
  for (float& v : out) v = v * 0.25f - 3.0f;
  return out;
}

std::vector<int32_t> run(Device device, DType dtype, const std::vector<float>& x, int64_t rows,
                         int64_t cols, int64_t ld) {
  TestStream stream(device);
  TensorPool pool(device);
  TensorView xv = pool.from(x, dtype, {rows, ld});
  TensorView out = pool.from_i32(std::vector<int32_t>(rows, -1), {rows});  // poison
  row_argmax({rows, cols, ld}, out, xv, stream);
  return testing::to_host_i32(out);
}

TEST(ArgmaxCpu, MatchesMaxElementOnRandomRows) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16}) {
    const int64_t rows = 7, cols = 300, ld = 384;
    std::vector<float> x = testing::random_uniform(rows * ld, 11);
    if (dtype == DType::kBF16) x = testing::round_bf16(x);
    EXPECT_EQ(run(Device::kCpu, dtype, x, rows, cols, ld), reference(x, rows, cols, ld))
        << engine::dtype_name(dtype);
  }
}

TEST(ArgmaxCpu, TiesGoToTheSmallestIndex) {
  // Row 0: the maximum 5 at 2, 4 and 6; row 1: all equal; row 2: the maximum last.
  const std::vector<float> x = {1, 0, 5, 3, 5, 0, 5, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 9};
  EXPECT_EQ(run(Device::kCpu, DType::kF32, x, 3, 7, 7), (std::vector<int32_t>{2, 0, 6}));
}

TEST(ArgmaxCpu, IgnoresColumnsPastCols) {
  // The padding column holds the largest value; cols = 3 of ld = 4 must not see it.
  const std::vector<float> x = {0, 2, 1, 100, -1, -2, -3, 100};
  EXPECT_EQ(run(Device::kCpu, DType::kF32, x, 2, 3, 4), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(run(Device::kCpu, DType::kF32, x, 2, 4, 4), (std::vector<int32_t>{3, 3}));
}

TEST(ArgmaxCpu, FirstNanWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1, nan, 7, nan, inf, 2, 3, -inf, -inf, -inf, -inf, -inf};
  EXPECT_EQ(run(Device::kCpu, DType::kF32, x, 3, 4, 4), (std::vector<int32_t>{1, 0, 0}));
}

TEST(ArgmaxGpu, MatchesCpuTwinExactly) {
  ANVIL_SKIP_WITHOUT_GPU();
  struct Case {
    int64_t rows, cols, ld;
    int levels;
  };
  for (const Case& c : {Case{5, 1, 1, 4}, Case{9, 31, 32, 4}, Case{17, 257, 384, 6},
                        Case{33, 50257, 50304, 50}, Case{3, 50257, 50304, 1 << 20}}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      std::vector<float> x = leveled(c.rows * c.ld, 5 + c.cols, c.levels);
      // Padding columns larger than anything real: must never be chosen.
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t j = c.cols; j < c.ld; ++j) x[r * c.ld + j] = 1e6f;
      }
      const std::vector<int32_t> cpu = run(Device::kCpu, dtype, x, c.rows, c.cols, c.ld);
      const std::vector<int32_t> gpu = run(Device::kCuda, dtype, x, c.rows, c.cols, c.ld);
      EXPECT_EQ(gpu, cpu) << "rows " << c.rows << " cols " << c.cols << " "
                          << engine::dtype_name(dtype);
    }
  }
}

TEST(ArgmaxGpu, NanAndInfinityAsTheCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t rows = 4, cols = 600, ld = 640;
  std::vector<float> x = testing::random_uniform(rows * ld, 3);
  x[0 * ld + 500] = nan;
  x[0 * ld + 20] = nan;                                     // row 0: the first NaN, 20
  x[1 * ld + 599] = inf;                                    // row 1: +inf last
  for (int64_t j = 0; j < cols; ++j) x[2 * ld + j] = -inf;  // row 2: all -inf: 0
  const std::vector<int32_t> cpu = run(Device::kCpu, DType::kF32, x, rows, cols, ld);
  EXPECT_EQ(cpu[0], 20);
  EXPECT_EQ(cpu[1], 599);
  EXPECT_EQ(cpu[2], 0);
  EXPECT_EQ(run(Device::kCuda, DType::kF32, x, rows, cols, ld), cpu);
}

}  // namespace
}  // namespace anvil::ops
