// CPU twin of AdamW with decoupled weight decay, element by element (math in ops/adamw.h):
//   g = grad * grad_scale      (grad_scale from device_scale when given; skip flag: no update)
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   master -= lr * ((m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * master)
//   param = cast(master)  (bf16/f16 round to nearest even; skipped when param is empty)
// Arithmetic runs in the state dtype T (f32 or f64), in the same order as the CUDA kernel; the
// bias corrections 1 - b^t are computed in double and then rounded to T.
#include "ops/adamw.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "engine/dtype.h"
#include "engine/status.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

using engine::DType;

template <typename T>
void adamw_loop(const AdamWArgs& args, T* master, T* m, T* v, void* param, DType param_dtype,
                const T* grad, int64_t n) {
  const T lr = static_cast<T>(args.lr);
  const T b1 = static_cast<T>(args.beta1);
  const T b2 = static_cast<T>(args.beta2);
  const T eps = static_cast<T>(args.eps);
  const T wd = static_cast<T>(args.weight_decay);
  const float* ds = args.device_scale.empty() ? nullptr : args.device_scale.as<float>();
  if (ds != nullptr && ds[1] != 0.0f) return;  // skipped step
  const T scale = static_cast<T>(ds != nullptr ? ds[0] : args.grad_scale);
  const double t = static_cast<double>(args.step);
  const T bc1 = static_cast<T>(1.0 - std::pow(static_cast<double>(args.beta1), t));
  const T bc2 = static_cast<T>(1.0 - std::pow(static_cast<double>(args.beta2), t));
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i] * scale;
    m[i] = b1 * m[i] + (T(1) - b1) * g;
    v[i] = b2 * v[i] + (T(1) - b2) * g * g;
    const T mhat = m[i] / bc1;
    const T vhat = v[i] / bc2;
    master[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * master[i]);
    if (param == nullptr) continue;
    // The compute copy: f64, f32, or bf16/f16 rounded from the f32 master (scalar_io).
    dispatch_float(param_dtype, "adamw_update (cpu)", [&](auto tag) {
      store(static_cast<decltype(tag)>(param), i, static_cast<double>(master[i]));
    });
  }
}

}  // namespace

void adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                  TensorView param, ConstTensorView grad, Stream& /*stream*/) {
  const int64_t n = master.numel();
  void* p = param.empty() ? nullptr : param.data;
  switch (master.dtype) {
    case DType::kF32:
      adamw_loop<float>(args, master.as<float>(), m.as<float>(), v.as<float>(), p, param.dtype,
                        grad.as<float>(), n);
      break;
    case DType::kF64:
      adamw_loop<double>(args, master.as<double>(), m.as<double>(), v.as<double>(), p, param.dtype,
                         grad.as<double>(), n);
      break;
    default:
      ANVIL_CHECK_MSG(false, "adamw_update (cpu): unsupported state dtype " +
                                 std::string(engine::dtype_name(master.dtype)));
  }
}

}  // namespace anvil::ops::cpu
