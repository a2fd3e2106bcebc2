// Tests of the multi-threaded host AdamW of optimizer offload (ops/host_adamw.h) against the CPU
// twin of ops/adamw.h (cpu::adamw_update, itself checked against the formula in adamw_test):
// bitwise equal master, m, v and param copy (f32, bf16, f16, none) over three steps, for several
// thread counts and lengths that are not multiples of the vector width or of the 16-element
// block alignment, with weight decay and a grad_scale; NaN gradients propagate the same way;
// bad arguments are refused by name.
#include "ops/host_adamw.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/dtype.h"
#include "gtest/gtest.h"
#include "ops/adamw.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;

AdamWArgs args_for(int64_t step) {
  AdamWArgs a;
  a.lr = 3e-3f;
  a.beta1 = 0.9f;
  a.beta2 = 0.95f;
  a.eps = 1e-8f;
  a.weight_decay = 0.1f;
  a.step = step;
  a.grad_scale = 0.37f;
  return a;
}

// Byte equality of two host views of the same size.
bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

// Runs three steps of the twin and of the host AdamW from the same state and compares bytes.
void check_equal_to_twin(int64_t n, int threads, DType param_dtype, bool nan_grad = false) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " threads=" << threads
                                    << " param=" << engine::dtype_name(param_dtype));
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> w0 = testing::random_uniform(n, 1, -1.0f, 1.0f);
  const std::vector<float> m0 = testing::random_uniform(n, 2, -0.1f, 0.1f);
  const std::vector<float> v0 = testing::random_uniform(n, 3, 0.0f, 0.01f);
  TensorView master_a = pool.from(w0, DType::kF32, {n}), master_b = pool.from(w0, DType::kF32, {n});
  TensorView m_a = pool.from(m0, DType::kF32, {n}), m_b = pool.from(m0, DType::kF32, {n});
  TensorView v_a = pool.from(v0, DType::kF32, {n}), v_b = pool.from(v0, DType::kF32, {n});
  const bool with_param = param_dtype != DType::kF64;  // kF64 here means "no param copy"
  TensorView param_a = with_param ? pool.empty(param_dtype, {n}) : TensorView{};
  TensorView param_b = with_param ? pool.empty(param_dtype, {n}) : TensorView{};
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<float> g = testing::random_uniform(n, 10 + step, -2.0f, 2.0f);
    if (nan_grad) g[static_cast<size_t>(n / 2)] = std::numeric_limits<float>::quiet_NaN();
    const AdamWArgs a = args_for(step);
    cpu::adamw_update(a, master_a, m_a, v_a, param_a, pool.from(g, DType::kF32, {n}), stream);
    host_adamw_update(a, master_b, m_b, v_b, param_b, pool.from(g, DType::kF32, {n}), threads);
  }
  EXPECT_TRUE(same_bytes(master_a, master_b));
  EXPECT_TRUE(same_bytes(m_a, m_b));
  EXPECT_TRUE(same_bytes(v_a, v_b));
  if (with_param) {
    EXPECT_TRUE(same_bytes(param_a, param_b));
  }
  // The step did move the weights (a test that cannot pass by doing nothing).
  const std::vector<double> w = testing::to_host_f64(master_b);
  int moved = 0;
  for (int64_t i = 0; i < n; ++i) moved += w[static_cast<size_t>(i)] != w0[static_cast<size_t>(i)];
  EXPECT_GT(moved, n / 2);
}

TEST(HostAdamW, BitwiseEqualToCpuTwinAcrossThreadsAndLengths) {
  for (int64_t n : {1, 7, 16, 17, 63, 1000, 4099}) {
    for (int threads : {1, 2, 3, 5}) {
      check_equal_to_twin(n, threads, DType::kBF16);
    }
  }
}

TEST(HostAdamW, BitwiseEqualForEveryParamDtype) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64 /* none */}) {
    check_equal_to_twin(1031, 4, d);
  }
}

TEST(HostAdamW, NanGradientPropagatesLikeTheTwin) {
  check_equal_to_twin(257, 3, DType::kBF16, true);
}

TEST(HostAdamW, MoreThreadsThanBlocks) { check_equal_to_twin(5, 8, DType::kF32); }

TEST(HostAdamWDeathTest, RefusesBadArguments) {
  TensorPool pool(Device::kCpu);
  const int64_t n = 8;
  TensorView w = pool.empty(DType::kF32, {n});
  TensorView short_m = pool.empty(DType::kF32, {n - 1});
  TensorView v = pool.empty(DType::kF32, {n});
  TensorView g = pool.empty(DType::kF32, {n});
  TensorView g64 = pool.empty(DType::kF64, {n});
  EXPECT_DEATH(host_adamw_update(args_for(1), w, short_m, v, {}, g, 2), "m must be");
  EXPECT_DEATH(host_adamw_update(args_for(1), w, v, v, {}, g64, 2), "grad must be");
  EXPECT_DEATH(host_adamw_update(args_for(0), w, v, v, {}, g, 2), "step is 1-based");
  EXPECT_DEATH(host_adamw_update(args_for(1), w, v, v, {}, g, 0), "threads must be >= 1");
}

}  // namespace
}  // namespace anvil::ops
