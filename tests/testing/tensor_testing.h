// Test helpers shared by every test binary: owned host/device buffers (through engine::Arena),
// seeded random data, poisoning, and tensor comparison with atol/rtol/NMSE that never lets a NaN
// pass and rejects an all-zero result (norm > 0, as CUTLASS's testbeds do).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/arena.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"

namespace anvil::testing {

using engine::ConstTensorView;
using engine::Device;
using engine::DType;
using engine::TensorView;

bool gpu_available();

#define ANVIL_SKIP_WITHOUT_GPU() \
  if (!::anvil::testing::gpu_available()) GTEST_SKIP() << "no CUDA device"

// A stream for `device` (CUDA device 0) with a 32 MiB cuBLASLt workspace attached.
class TestStream {
 public:
  explicit TestStream(Device device);
  engine::Stream& get() { return *stream_; }
  operator engine::Stream&() { return *stream_; }  // NOLINT: pass straight to ops

 private:
  std::unique_ptr<engine::Stream> stream_;
  engine::Arena workspace_arena_;
};

// Owns memory for tensors of one test (a growing list of arenas on one device).
class TensorPool {
 public:
  explicit TensorPool(Device device) : device_(device) {}
  // Uninitialized (poisoned with 0xff bytes: NaN for floats) tensor.
  TensorView empty(DType dtype, std::vector<int64_t> shape);
  // Tensor holding `values` converted to dtype (bf16/f16 round to nearest even; ints truncate).
  TensorView from(const std::vector<float>& values, DType dtype, std::vector<int64_t> shape);
  TensorView from_f64(const std::vector<double>& values, std::vector<int64_t> shape);
  TensorView from_i32(const std::vector<int32_t>& values, std::vector<int64_t> shape);
  engine::Workspace workspace(size_t bytes);
  Device device() const { return device_; }

 private:
  Device device_;
  std::vector<std::unique_ptr<engine::Arena>> arenas_;
};

// Seeded uniform values in [lo, hi).
std::vector<float> random_uniform(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
std::vector<int32_t> random_ints(int64_t n, uint64_t seed, int32_t lo, int32_t hi_exclusive);
// Values rounded to bf16 and back (what a bf16 device tensor holds).
std::vector<float> round_bf16(std::vector<float> v);

// Any float tensor (any device, synced on a fresh copy) as f32/f64 host values; i32 as well.
std::vector<float> to_host(ConstTensorView v);
std::vector<double> to_host_f64(ConstTensorView v);
std::vector<int32_t> to_host_i32(ConstTensorView v);

struct Tol {
  double atol;
  double rtol;
  double max_nmse = 1e-4;  // sum (g - r)^2 / sum r^2
};

// Every element |g - r| <= atol + rtol |r|, no NaN/inf in g, NMSE below max_nmse, and
// ||r|| > 0 (unless allow_zero_ref). On failure: max error and index, NMSE, first mismatches.
::testing::AssertionResult tensors_near(const std::vector<double>& got,
                                        const std::vector<double>& ref, Tol tol,
                                        bool allow_zero_ref = false);
::testing::AssertionResult tensors_near(const std::vector<float>& got,
                                        const std::vector<float>& ref, Tol tol,
                                        bool allow_zero_ref = false);

// Central finite difference of scalar f at x along every coordinate:
//   g_i = (f(x + h e_i) - f(x - h e_i)) / 2h
std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                     std::vector<double> x, double h = 1e-6);

}  // namespace anvil::testing
