// Tests of the device-side loss sums (ops/loss_sums.h):
//   S = sum x + w sum y;  out[k] += scales[k] S  (scales[k] != 0)
// CPU twin: closed forms (ramps), += onto set values, untouched entries, f32 and f64, the exact
// index-order double sum of the host loop it replaces. GPU: against the CPU twin on random data
// of several lengths (1, 1000, 32768 + 5, 10^6 + 3), every scaled entry changed, a zero-scale
// entry untouched, NaN passes through as NaN.
#include "ops/loss_sums.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;

std::vector<double> run(Device dev, const LossSumArgs& a, const std::vector<double>& start,
                        const std::vector<float>& x, const std::vector<float>& y) {
  TestStream stream(dev);
  TensorPool pool(dev);
  TensorView out = pool.from_f64(start, {static_cast<int64_t>(start.size())});
  const TensorView xv = pool.from(x, DType::kF32, {static_cast<int64_t>(x.size())});
  const TensorView yv =
      y.empty() ? TensorView{} : pool.from(y, DType::kF32, {static_cast<int64_t>(y.size())});
  add_loss_sums(a, out, xv, yv, stream);
  return testing::to_host_f64(out);
}

TEST(LossSumsCpu, ClosedFormsAndUntouchedEntries) {
  // x = 0, 1, ..., 99 (sum 4950); y = 1 x 10 (sum 10), weight 0.5: S = 4955.
  std::vector<float> x(100), y(10, 1.0f);
  for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i);
  LossSumArgs a;
  a.y_weight = 0.5;
  a.scales = {1.0, 0.25, 0.0, -2.0};
  const std::vector<double> o = run(Device::kCpu, a, {1.0, 2.0, 3.0, 4.0}, x, y);
  EXPECT_EQ(o, (std::vector<double>{4956.0, 2.0 + 4955.0 * 0.25, 3.0, 4.0 - 2.0 * 4955.0}));
  // Without y, into a shorter out.
  LossSumArgs b;
  b.scales = {3.0};
  EXPECT_EQ(run(Device::kCpu, b, {0.5}, x, {}), (std::vector<double>{0.5 + 3.0 * 4950.0}));
}

TEST(LossSumsCpu, IsTheHostLoopsDoubleSum) {
  const std::vector<float> x = testing::random_uniform(10007, 3, 0.0f, 12.0f);
  double want = 0.0;
  for (float v : x) want += static_cast<double>(v);
  LossSumArgs a;
  a.scales = {1.0};
  EXPECT_EQ(run(Device::kCpu, a, {0.0}, x, {})[0], want);
}

TEST(LossSumsCpu, RefusesScalesPastOut) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  LossSumArgs a;
  a.scales = {1.0, 1.0};
  EXPECT_DEATH(add_loss_sums(a, pool.from_f64({0.0}, {1}), pool.from({1.0f}, DType::kF32, {1}),
                             TensorView{}, stream),
               "scales\\[1\\] is set but out has 1 entries");
}

TEST(LossSumsGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t n : {1, 1000, 32768 + 5, 1000003}) {
    const std::vector<float> x = testing::random_uniform(n, 10 + n, 0.0f, 11.0f);
    const std::vector<float> y = testing::random_uniform(33, 7, 0.0f, 2.0f);
    LossSumArgs a;
    a.y_weight = 0.37;
    a.scales = {1.0, 1.0 / 4096.0, 0.0, 2.5};
    const std::vector<double> start{1.25, -3.0, 7.0, 0.5};
    const std::vector<double> g = run(Device::kCuda, a, start, x, y);
    const std::vector<double> c = run(Device::kCpu, a, start, x, y);
    ASSERT_EQ(g.size(), c.size());
    for (size_t k = 0; k < g.size(); ++k) {
      EXPECT_NEAR(g[k], c[k], 1e-12 * std::abs(c[k]) + 1e-12) << n << " " << k;
      if (k != 2) {
        EXPECT_NE(g[k], start[k]) << "entry not accumulated";
      }
    }
    EXPECT_EQ(g[2], 7.0);  // scale 0: untouched
  }
  std::vector<float> bad = testing::random_uniform(100, 1);
  bad[57] = NAN;
  LossSumArgs a;
  a.scales = {1.0};
  EXPECT_TRUE(std::isnan(run(Device::kCuda, a, {0.0}, bad, {})[0]));
}

}  // namespace
}  // namespace anvil::ops
