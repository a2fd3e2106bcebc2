// Scalar activation functions and their derivatives, shared by the CPU twins (F = double) and
// the CUDA kernels (F = float) of ops/glu and ops/activation, so both evaluate one formula:
//   silu(x) = x sigmoid(x),              silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
//   gelu_erf(x) = 0.5 x (1 + erf(x/√2)),  gelu_erf'(x) = 0.5 (1 + erf(x/√2)) + x φ(x)
//   relu(x) = max(x, 0),                 relu'(x) = [x > 0]  (0 at 0, as torch)
//   tanh(x),                             tanh'(x) = 1 - tanh(x)^2
//   gelu_tanh(x) = 0.5 x (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3)),
//   gelu_tanh'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// gelu_erf is exact GELU (torch F.gelu's default, HF "gelu"); gelu_tanh is HF "gelu_new" (T5
// v1.1's gated GELU). GPT-2's standalone tanh GELU is ops/gelu.
#pragma once

#include <cmath>

#include "engine/philox.h"  // ANVIL_HOST_DEVICE

namespace anvil::ops::detail {

template <typename F>
ANVIL_HOST_DEVICE F silu(F x) {
  return x / (F(1) + exp(-x));
}
template <typename F>
ANVIL_HOST_DEVICE F silu_grad(F x) {
  const F s = F(1) / (F(1) + exp(-x));
  return s * (F(1) + x * (F(1) - s));
}

template <typename F>
ANVIL_HOST_DEVICE F gelu_erf(F x) {
  return F(0.5) * x * (F(1) + erf(x * F(0.70710678118654752440)));
}
template <typename F>
ANVIL_HOST_DEVICE F gelu_erf_grad(F x) {
  // 0.39894228... = 1/sqrt(2 pi): x phi(x) = x exp(-x^2/2) / sqrt(2 pi)
  return F(0.5) * (F(1) + erf(x * F(0.70710678118654752440))) +
         x * F(0.39894228040143267794) * exp(F(-0.5) * x * x);
}

template <typename F>
ANVIL_HOST_DEVICE F gelu_tanh(F x) {
  // 0.79788456... = sqrt(2/pi)
  const F t = tanh(F(0.79788456080286535588) * (x + F(0.044715) * x * x * x));
  return F(0.5) * x * (F(1) + t);
}
template <typename F>
ANVIL_HOST_DEVICE F gelu_tanh_grad(F x) {
  const F t = tanh(F(0.79788456080286535588) * (x + F(0.044715) * x * x * x));
  return F(0.5) * (F(1) + t) +
         F(0.5) * x * (F(1) - t * t) * F(0.79788456080286535588) * (F(1) + F(3 * 0.044715) * x * x);
}

template <typename F>
ANVIL_HOST_DEVICE F relu(F x) {
  return x > F(0) ? x : F(0);
}
template <typename F>
ANVIL_HOST_DEVICE F relu_grad(F x) {
  return x > F(0) ? F(1) : F(0);
}

template <typename F>
ANVIL_HOST_DEVICE F tanh_grad(F x) {
  const F t = tanh(x);
  return F(1) - t * t;
}

}  // namespace anvil::ops::detail
