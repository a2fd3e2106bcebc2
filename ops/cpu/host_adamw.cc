// Host AdamW for optimizer offload (math and operation order in ops/host_adamw.h, equal to the
// CPU twin ops/cpu/adamw.cc): the range is cut into one block per thread; each block runs a
// branch-free loop over restrict pointers (auto-vectorized: this file is compiled with
// -fno-math-errno so sqrtf becomes a vector instruction), then a separate cast loop for the
// compute copy. The bias corrections 1 - b^t are computed in double and rounded to f32, as in
// the twin.
#include "ops/host_adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/dtype.h"
#include "engine/status.h"

namespace anvil::ops {
namespace {

using engine::ConstTensorView;
using engine::DType;

struct Coeffs {
  float lr, b1, b2, eps, wd, scale, bc1, bc2;
};

// master, m, v, grad: [n] f32.
void step_block(const Coeffs& c, float* __restrict master, float* __restrict m, float* __restrict v,
                const float* __restrict grad, int64_t n) {
  const float lr = c.lr, b1 = c.b1, b2 = c.b2, eps = c.eps, wd = c.wd, scale = c.scale;
  const float bc1 = c.bc1, bc2 = c.bc2;
  const float one_b1 = 1.0f - b1, one_b2 = 1.0f - b2;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * scale;
    const float mi = b1 * m[i] + one_b1 * g;
    const float vi = b2 * v[i] + one_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1;
    const float vhat = vi / bc2;
    const float w = master[i];
    master[i] = w - lr * (mhat / (std::sqrt(vhat) + eps) + wd * w);
  }
}

// out: [n] bf16 bits, round to nearest even (NaN stays a quiet NaN), as engine::f32_to_bf16.
void cast_bf16_block(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &in[i], 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;
    out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

void cast_block(const float* in, void* param, DType dtype, int64_t lo, int64_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(param) + lo, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16:
      cast_bf16_block(in, static_cast<uint16_t*>(param) + lo, n);
      return;
    case DType::kF16: {
      uint16_t* out = static_cast<uint16_t*>(param) + lo;
      for (int64_t i = 0; i < n; ++i) out[i] = engine::f32_to_f16(in[i]);
      return;
    }
    default:
      ANVIL_CHECK_MSG(false, "host_adamw_update: unsupported param dtype " +
                                 std::string(engine::dtype_name(dtype)));
  }
}

bool is_host_f32(const ConstTensorView& t, int64_t n) {
  return !t.empty() && t.dtype == DType::kF32 && t.device == engine::Device::kCpu &&
         t.numel() == n && t.is_contiguous();
}

std::string expected(const char* arg, const std::string& want, const ConstTensorView& got) {
  return std::string("host_adamw_update: ") + arg + " must be " + want + ", got " +
         engine::describe(got);
}

}  // namespace

void host_adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                       TensorView param, ConstTensorView grad, int threads) {
  ANVIL_CHECK_MSG(args.step >= 1,
                  "host_adamw_update: step is 1-based, got " + std::to_string(args.step));
  ANVIL_CHECK_MSG(threads >= 1,
                  "host_adamw_update: threads must be >= 1, got " + std::to_string(threads));
  ANVIL_CHECK_MSG(!master.empty(), expected("master", "a non-empty f32 host view", master));
  const int64_t n = master.numel();
  const std::string want = "contiguous f32 [" + std::to_string(n) + "] in host memory";
  ANVIL_CHECK_MSG(is_host_f32(master, n), expected("master", want, master));
  ANVIL_CHECK_MSG(is_host_f32(m, n), expected("m", want, m));
  ANVIL_CHECK_MSG(is_host_f32(v, n), expected("v", want, v));
  ANVIL_CHECK_MSG(is_host_f32(grad, n), expected("grad", want, grad));
  if (!param.empty()) {
    const bool dtype_ok =
        param.dtype == DType::kF32 || param.dtype == DType::kBF16 || param.dtype == DType::kF16;
    ANVIL_CHECK_MSG(
        dtype_ok && param.device == engine::Device::kCpu && param.numel() == n &&
            param.is_contiguous(),
        expected("param",
                 "empty or contiguous f32/bf16/f16 [" + std::to_string(n) + "] in host memory",
                 param));
  }
  if (n == 0) return;
  const double t = static_cast<double>(args.step);
  const Coeffs c{args.lr,
                 args.beta1,
                 args.beta2,
                 args.eps,
                 args.weight_decay,
                 args.grad_scale,
                 static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta1), t)),
                 static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta2), t))};
  float* pm = master.as<float>();
  float* pmo = m.as<float>();
  float* pv = v.as<float>();
  const float* pg = grad.as<float>();
  // Blocks of whole 16-element groups (64 bytes) so threads never share a cache line.
  constexpr int64_t kAlign = 16;
  const int64_t groups = (n + kAlign - 1) / kAlign;
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(threads, groups));
  const int64_t per = (groups + nt - 1) / nt * kAlign;
  auto run = [&](int64_t k) {
    const int64_t lo = std::min(n, k * per), hi = std::min(n, lo + per);
    if (hi <= lo) return;
    step_block(c, pm + lo, pmo + lo, pv + lo, pg + lo, hi - lo);
    if (!param.empty()) cast_block(pm + lo, param.data, param.dtype, lo, hi - lo);
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(nt - 1));
  for (int64_t k = 1; k < nt; ++k) pool.emplace_back(run, k);
  run(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace anvil::ops
