// Tests of the device-side step scale (ops/step_scale.h):
//   norm = sqrt(ss) / S;  skip = !finite(norm);  out = {skip ? 0 : min(1, c / (norm + 1e-6)) / S,
//   skip, norm}
// CPU twin: closed forms (clipping on and off, loss scale), NaN/inf skip, f32 and f64 input.
// GPU: against the CPU twin on random sums of squares, poisoned outputs, the same bits.
#include "ops/step_scale.h"

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

std::vector<float> run(Device dev, const StepScaleArgs& args, double ss, DType ss_dtype) {
  TestStream stream(dev);
  TensorPool pool(dev);
  TensorView out = pool.empty(DType::kF32, {3});  // poisoned
  const TensorView in = ss_dtype == DType::kF64
                            ? pool.from_f64({ss}, {1})
                            : pool.from({static_cast<float>(ss)}, DType::kF32, {1});
  step_scale(args, out, in, stream);
  return testing::to_host(out);
}

TEST(StepScaleCpu, ClosedForms) {
  // Loss scale 8, gradient norm 4 (ss = (4 * 8)^2 = 1024), clipped to 1.
  StepScaleArgs a{8.0, 1.0};
  std::vector<float> o = run(Device::kCpu, a, 1024.0, DType::kF64);
  EXPECT_EQ(o[0], static_cast<float>((1.0 / (4.0 + 1e-6)) / 8.0));
  EXPECT_EQ(o[1], 0.0f);
  EXPECT_EQ(o[2], 4.0f);
  // The same under the clip threshold: only the unscaling remains.
  a.max_norm = 10.0;
  o = run(Device::kCpu, a, 1024.0, DType::kF32);
  EXPECT_EQ(o[0], 0.125f);
  EXPECT_EQ(o[2], 4.0f);
  // No clipping at all (max_norm 0), no loss scale.
  o = run(Device::kCpu, StepScaleArgs{1.0, 0.0}, 1e6, DType::kF64);
  EXPECT_EQ(o[0], 1.0f);
  EXPECT_EQ(o[2], 1000.0f);
}

TEST(StepScaleCpu, NonFiniteSkips) {
  for (double bad : {NAN, INFINITY}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      const std::vector<float> o = run(Device::kCpu, StepScaleArgs{4.0, 1.0}, bad, dt);
      EXPECT_EQ(o[0], 0.0f);
      EXPECT_EQ(o[1], 1.0f);
      EXPECT_FALSE(std::isfinite(o[2]));
    }
  }
}

TEST(StepScaleCpu, MatchesHostFormula) {
  const StepScaleArgs a{65536.0, 1.0};
  for (double ss : {0.0, 1e-3, 2.5e9, 7.1e11}) {
    const StepScale want = step_scale_of(a, ss);
    const std::vector<float> o = run(Device::kCpu, a, ss, DType::kF64);
    EXPECT_EQ(o[0], want.grad_scale);
    EXPECT_EQ(o[2], static_cast<float>(want.norm));
  }
}

TEST(StepScaleGpu, EqualsCpuTwinBitForBit) {
  ANVIL_SKIP_WITHOUT_GPU();
  const std::vector<float> r = testing::random_uniform(64, 5, 0.0f, 30.0f);
  for (size_t i = 0; i < r.size(); ++i) {
    const double ss = std::pow(10.0, static_cast<double>(r[i]) - 10.0);
    for (const StepScaleArgs& a :
         {StepScaleArgs{1.0, 1.0}, StepScaleArgs{4096.0, 0.5}, StepScaleArgs{2.0, 0.0}}) {
      for (DType dt : {DType::kF32, DType::kF64}) {
        EXPECT_EQ(run(Device::kCuda, a, ss, dt), run(Device::kCpu, a, ss, dt)) << ss;
      }
    }
  }
  for (double bad : {NAN, INFINITY}) {
    EXPECT_EQ(run(Device::kCuda, StepScaleArgs{8.0, 1.0}, bad, DType::kF32)[1], 1.0f);
  }
}

}  // namespace
}  // namespace anvil::ops
