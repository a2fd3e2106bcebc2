// CPU twin of the gated linear units (reference for the CUDA kernels), h = [g | u] per row:
//   forward : y = round_T(act(g)) * u   (=; act's output is rounded to the activation dtype
//             before the product, as torch's act(gate) * up does in bf16)
//   backward: dg = dy * u * act'(g),  du = dy * act(g)   (= into dh = [dg | du])
// act: silu x sigmoid(x); exact GELU 0.5 x (1 + erf(x / sqrt 2)); relu (act'(0) = 0); identity.
// Math in double; f32/f64/bf16 storage.
#include "ops/glu.h"

#include <cmath>
#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)

double act(GluKind kind, double x) {
  switch (kind) {
    case GluKind::kSwiglu:
      return x / (1.0 + std::exp(-x));
    case GluKind::kGeglu:
      return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
    case GluKind::kReglu:
      return x > 0.0 ? x : 0.0;
    case GluKind::kLiglu:
      return x;
  }
  return 0.0;
}

double act_grad(GluKind kind, double x) {
  switch (kind) {
    case GluKind::kSwiglu: {
      const double s = 1.0 / (1.0 + std::exp(-x));
      return s * (1.0 + x * (1.0 - s));
    }
    case GluKind::kGeglu:
      return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    case GluKind::kReglu:
      return x > 0.0 ? 1.0 : 0.0;
    case GluKind::kLiglu:
      return 1.0;
  }
  return 0.0;
}

}  // namespace

void glu_forward(GluKind kind, TensorView y, ConstTensorView h, Stream& /*stream*/) {
  dispatch_float(h.dtype, "cpu::glu_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const int64_t rows = h.shape[0], f = h.shape[1] / 2;
    const T* hp = h.as<T>();
    T* yp = y.as<T>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < f; ++c) {
        const double a = round_as<T>(act(kind, load(hp, r * 2 * f + c)));
        store(yp, r * f + c, a * load(hp, r * 2 * f + f + c));
      }
    }
  });
}

void glu_backward(GluKind kind, TensorView dh, ConstTensorView dy, ConstTensorView h,
                  Stream& /*stream*/) {
  dispatch_float(h.dtype, "cpu::glu_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const int64_t rows = h.shape[0], f = h.shape[1] / 2;
    const T* hp = h.as<T>();
    const T* dyp = dy.as<T>();
    T* dhp = dh.as<T>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < f; ++c) {
        const double g = load(hp, r * 2 * f + c), u = load(hp, r * 2 * f + f + c);
        const double d = load(dyp, r * f + c);
        store(dhp, r * 2 * f + c, d * u * act_grad(kind, g));
        store(dhp, r * 2 * f + f + c, d * act(kind, g));
      }
    }
  });
}

}  // namespace anvil::ops::cpu
