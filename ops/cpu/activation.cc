// CPU twin of the elementwise activations (reference for the CUDA kernels):
//   forward : y = act(x) (=);  backward: dx = dy * act'(x) (=, dx may alias dy: each element is
//   read before it is written)
// act: exact erf GELU, relu or tanh (ops/activation_math.h). Math in double; f32/f64/bf16 storage.
#include "ops/activation.h"

#include <cmath>
#include <type_traits>

#include "ops/activation_math.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

double act_value(Activation act, double x) {
  switch (act) {
    case Activation::kGeluErf:
      return detail::gelu_erf(x);
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kRelu:
      break;
  }
  return detail::relu(x);
}

double act_grad(Activation act, double x) {
  switch (act) {
    case Activation::kGeluErf:
      return detail::gelu_erf_grad(x);
    case Activation::kTanh:
      return detail::tanh_grad(x);
    case Activation::kRelu:
      break;
  }
  return detail::relu_grad(x);
}

}  // namespace

void activation_forward(Activation act, TensorView y, ConstTensorView x, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::activation_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xp = x.as<T>();
    T* yp = y.as<T>();
    for (int64_t i = 0; i < x.numel(); ++i) store(yp, i, act_value(act, load(xp, i)));
  });
}

void activation_backward(Activation act, TensorView dx, ConstTensorView dy, ConstTensorView x,
                         Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::activation_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xp = x.as<T>();
    const T* dyp = dy.as<T>();
    T* dxp = dx.as<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      store(dxp, i, load(dyp, i) * act_grad(act, load(xp, i)));
    }
  });
}

}  // namespace anvil::ops::cpu
