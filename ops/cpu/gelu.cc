// CPU twin of GELU, tanh approximation (reference for the CUDA kernels):
//   y  = 0.5 x (1 + t),  t = tanh(u),  u = sqrt(2/pi) (x + 0.044715 x^3)              (=)
//   dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2))         (=)
// Math in double; f32/f64/bf16 storage. dx may alias dy (each element is read before written).
#include "ops/gelu.h"

#include <cmath>
#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;

double gelu(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5 * x * (1.0 + t);
}

double gelu_grad(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
}

}  // namespace

void gelu_forward(TensorView y, ConstTensorView x, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::gelu_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xp = x.as<T>();
    T* yp = y.as<T>();
    for (int64_t i = 0; i < x.numel(); ++i) store(yp, i, gelu(load(xp, i)));
  });
}

void gelu_backward(TensorView dx, ConstTensorView dy, ConstTensorView x, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::gelu_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xp = x.as<T>();
    const T* dyp = dy.as<T>();
    T* dxp = dx.as<T>();
    for (int64_t i = 0; i < x.numel(); ++i) store(dxp, i, load(dyp, i) * gelu_grad(load(xp, i)));
  });
}

}  // namespace anvil::ops::cpu
