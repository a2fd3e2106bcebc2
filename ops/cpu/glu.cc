// CPU twin of the gated linear units (reference for the CUDA kernels), h = [g | u] per row:
//   forward : y = round_T(act(g)) * u   (=; act's output is rounded to the activation dtype
//             before the product, as torch's act(gate) * up does in bf16)
//   backward: dg = dy * u * act'(g),  du = dy * act(g)   (= into dh = [dg | du])
// act: silu, exact erf GELU, tanh GELU, relu, identity (formulas in ops/activation_math.h).
// Math in double; f32/f64/bf16 storage.
#include "ops/glu.h"

#include <type_traits>

#include "ops/activation_math.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

double act(GluKind kind, double x) {
  switch (kind) {
    case GluKind::kSwiglu:
      return detail::silu(x);
    case GluKind::kGeglu:
      return detail::gelu_erf(x);
    case GluKind::kGegluTanh:
      return detail::gelu_tanh(x);
    case GluKind::kReglu:
      return detail::relu(x);
    case GluKind::kLiglu:
      return x;
  }
  return 0.0;
}

double act_grad(GluKind kind, double x) {
  switch (kind) {
    case GluKind::kSwiglu:
      return detail::silu_grad(x);
    case GluKind::kGeglu:
      return detail::gelu_erf_grad(x);
    case GluKind::kGegluTanh:
      return detail::gelu_tanh_grad(x);
    case GluKind::kReglu:
      return detail::relu_grad(x);
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
