// Tests of optimizer offload (parallel/offload_optimizer.h): OffloadOptimizer::step over ranges
// with different state and value offsets (as ZeRO pieces have), with and without weight decay,
// cut into chunks of several sizes (not multiples of the vector width), with several host
// thread counts, against ops::adamw_update on the stream's device over the same ranges:
//   CPU: master, m, v and the compute copy bitwise equal over three steps (the host path is the
//        real one: separate host arena, staging copies, the threaded host AdamW);
//   GPU (skipped without one): the offloaded step against the device AdamW kernel, to f32
//        rounding (the device contracts to FMA), the compute copy exactly the cast of the host
//        master. Runs on every rank under mpirun (single-rank math).
#include "parallel/offload_optimizer.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/memory.h"
#include "gtest/gtest.h"
#include "ops/adamw.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;

constexpr int64_t kState = 1000, kValue = 1400;

// State [0, 300) <- value [5, 305) decay; [300, 550) <- [400, 650) no decay; [550, 1000) <-
// [900, 1350) decay. Value elements outside the ranges must stay untouched.
std::vector<OffloadRange> ranges() {
  return {{0, 5, 300, true}, {300, 400, 250, false}, {550, 900, 450, true}};
}

ops::AdamWArgs args_for(int64_t step) {
  ops::AdamWArgs a;
  a.lr = 3e-3f;
  a.weight_decay = 0.1f;
  a.step = step;
  a.grad_scale = 0.61f;
  return a;
}

TensorView sub(TensorView v, int64_t begin, int64_t n) {
  return engine::slice_rows(v, begin, begin + n);
}

struct Result {
  std::vector<float> master, m, v, value;
};

// Three steps; offload: through OffloadOptimizer, else adamw_update per range on the device.
Result run(Device dev, bool offload, DType param, int64_t chunk, int threads) {
  TestStream stream(dev);
  TensorPool pool(dev);
  TensorPool host(Device::kCpu);
  const std::vector<float> w0 = testing::random_uniform(kState, 1);
  const std::vector<float> m0 = testing::random_uniform(kState, 2, -0.1f, 0.1f);
  const std::vector<float> v0 = testing::random_uniform(kState, 3, 0.0f, 0.01f);
  TensorView value = pool.from(testing::random_uniform(kValue, 4), param, {kValue});
  TensorView master, m, v;
  std::unique_ptr<OffloadOptimizer> o;
  if (offload) {
    auto created = OffloadOptimizer::create(kState, param, dev, 0, {threads, chunk});
    EXPECT_TRUE(created.ok()) << created.status();
    o = std::move(*created);
    master = o->master();
    m = o->m();
    v = o->v();
    EXPECT_EQ(master.device, Device::kCpu);
    engine::copy(master, host.from(w0, DType::kF32, {kState}), stream);
    engine::copy(m, host.from(m0, DType::kF32, {kState}), stream);
    engine::copy(v, host.from(v0, DType::kF32, {kState}), stream);
  } else {
    master = pool.from(w0, DType::kF32, {kState});
    m = pool.from(m0, DType::kF32, {kState});
    v = pool.from(v0, DType::kF32, {kState});
  }
  for (int64_t step = 1; step <= 3; ++step) {
    TensorView grad =
        pool.from(testing::random_uniform(kState, 10 + step, -2.0f, 2.0f), DType::kF32, {kState});
    const ops::AdamWArgs a = args_for(step);
    if (offload) {
      o->step(a, ranges(), grad, value, stream);
    } else {
      for (const OffloadRange& r : ranges()) {
        ops::AdamWArgs ra = a;
        if (!r.decay) ra.weight_decay = 0.0f;
        auto s = [&](TensorView t) { return sub(t, r.state_begin, r.numel); };
        ops::adamw_update(ra, s(master), s(m), s(v), sub(value, r.value_begin, r.numel), s(grad),
                          stream);
      }
    }
  }
  stream.get().synchronize();
  return {testing::to_host(master), testing::to_host(m), testing::to_host(v),
          testing::to_host(value)};
}

TEST(OffloadOptimizer, CpuBitwiseEqualToDeviceAdamW) {
  for (DType param : {DType::kF32, DType::kBF16}) {
    const Result want = run(Device::kCpu, false, param, 0, 1);
    for (int64_t chunk : {int64_t{7}, int64_t{64}, int64_t{1} << 22}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << "param=" << engine::dtype_name(param)
                                          << " chunk=" << chunk << " threads=" << threads);
        const Result got = run(Device::kCpu, true, param, chunk, threads);
        EXPECT_EQ(got.master, want.master);
        EXPECT_EQ(got.m, want.m);
        EXPECT_EQ(got.v, want.v);
        EXPECT_EQ(got.value, want.value);  // incl. the untouched elements between the ranges
      }
    }
  }
  // The steps moved the weights (the comparison is not of two unchanged buffers).
  const Result moved = run(Device::kCpu, true, DType::kF32, 64, 2);
  EXPECT_NE(moved.master, testing::random_uniform(kState, 1));
}

TEST(OffloadOptimizer, RefusesBadOptions) {
  EXPECT_FALSE(OffloadOptimizer::create(10, DType::kI32, Device::kCpu, 0, {}).ok());
  EXPECT_FALSE(OffloadOptimizer::create(10, DType::kF32, Device::kCpu, 0, {1, 0}).ok());
  EXPECT_FALSE(OffloadOptimizer::create(-1, DType::kF32, Device::kCpu, 0, {}).ok());
}

TEST(OffloadOptimizer, GpuMatchesDeviceAdamW) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (DType param : {DType::kF32, DType::kBF16}) {
    const Result want = run(Device::kCuda, false, param, 0, 1);
    for (int64_t chunk : {int64_t{7}, int64_t{1} << 22}) {
      SCOPED_TRACE(::testing::Message()
                   << "param=" << engine::dtype_name(param) << " chunk=" << chunk);
      const Result got = run(Device::kCuda, true, param, chunk, 4);
      const testing::Tol tol{1e-7, 1e-6, 1e-12};
      EXPECT_TRUE(testing::tensors_near(got.master, want.master, tol));
      EXPECT_TRUE(testing::tensors_near(got.m, want.m, tol));
      EXPECT_TRUE(testing::tensors_near(got.v, want.v, tol));
      // The compute copy: exactly the cast of the host master inside the ranges, unchanged
      // outside them (compared with the reference run, which writes the same elements).
      std::vector<float> cast =
          param == DType::kBF16 ? testing::round_bf16(got.master) : got.master;
      for (const OffloadRange& r : ranges()) {
        for (int64_t i = 0; i < r.numel; ++i) {
          ASSERT_EQ(got.value[r.value_begin + i], cast[r.state_begin + i]) << r.value_begin + i;
        }
      }
      EXPECT_EQ(got.value[0], want.value[0]);
      EXPECT_EQ(got.value[kValue - 1], want.value[kValue - 1]);
    }
  }
}

}  // namespace
}  // namespace anvil::parallel
