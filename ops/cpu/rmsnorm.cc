// CPU twin of RMSNorm over the last dim (reference for the CUDA kernels):
//   forward : rstd = 1/sqrt(mean(x^2) + eps),  y = round_T(x * rstd) * gamma   (= y, rstd)
//             (round_T: the activation dtype's rounding, as HF LlamaRMSNorm casts the normalized
//             value to the input dtype before the weight multiply)
//   residual: sum = a + b rounded to T (=), y = rmsnorm(sum) of the ROUNDED sum, as on the GPU.
//   backward, with xhat = x * rstd and g = dy * gamma (the rounding above taken as identity):
//     dx = rstd * (g - xhat * mean(g * xhat))   (= or += per Accumulate)
//     dgamma += sum_rows dy * xhat
// Plain loops, math in double. Activations f32/f64/bf16; rstd and dgamma f32, or f64 with f64
// activations. Needs no workspace.
#include "ops/rmsnorm.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

// sum: [rows, cols] T or null (plain rmsnorm); y: [rows, cols] T; rstd: [rows] S;
// a: [rows, cols] T; b: [rows, cols] T or null; gamma: [cols] T.
template <typename T, typename S>
void forward_impl(const RmsNormArgs& args, T* sum, T* y, S* rstd, const T* a, const T* b,
                  const T* gamma) {
  const int64_t n = args.cols;
  std::vector<double> v(n);
  for (int64_t r = 0; r < args.rows; ++r) {
    const int64_t o = r * n;
    double ss = 0.0;
    for (int64_t c = 0; c < n; ++c) {
      v[c] = load(a, o + c);
      if (b != nullptr) {
        store(sum, o + c, v[c] + load(b, o + c));
        v[c] = load(sum, o + c);  // normalize what was stored (rounded to T)
      }
      ss += v[c] * v[c];
    }
    const double rs = 1.0 / std::sqrt(ss / n + static_cast<double>(args.eps));
    for (int64_t c = 0; c < n; ++c) store(y, o + c, round_as<T>(v[c] * rs) * load(gamma, c));
    rstd[r] = static_cast<S>(rs);
  }
}

// dx: [rows, cols] T; dgamma: [cols] G (+=); dy, x: [rows, cols] T; gamma: [cols] T;
// rstd: [rows] S.
template <typename T, typename S, typename G>
void backward_impl(const RmsNormArgs& args, Accumulate acc, T* dx, G* dgamma, const T* dy,
                   const T* x, const T* gamma, const S* rstd) {
  const int64_t n = args.cols;
  // Column sums over all rows in double, added into dgamma once at the end, so calling backward
  // twice from zero gives exactly 2x.
  std::vector<double> dg(n, 0.0), xhat(n), g(n);
  for (int64_t r = 0; r < args.rows; ++r) {
    const int64_t o = r * n;
    const double rs = rstd[r];
    double sum_gx = 0.0;
    for (int64_t c = 0; c < n; ++c) {
      const double d = load(dy, o + c);
      xhat[c] = load(x, o + c) * rs;
      g[c] = d * load(gamma, c);
      sum_gx += g[c] * xhat[c];
      dg[c] += d * xhat[c];
    }
    const double mean_gx = sum_gx / n;
    for (int64_t c = 0; c < n; ++c) {
      double v = rs * (g[c] - xhat[c] * mean_gx);
      if (acc == Accumulate::kAdd) v += load(dx, o + c);
      store(dx, o + c, v);
    }
  }
  for (int64_t c = 0; c < n; ++c) dgamma[c] = static_cast<G>(dgamma[c] + dg[c]);
}

template <typename T>
void forward_typed(const RmsNormArgs& args, TensorView sum, TensorView y, TensorView rstd,
                   ConstTensorView a, ConstTensorView b, ConstTensorView gamma) {
  dispatch_f32_f64(rstd.dtype, [&](auto stag) {
    using S = std::remove_pointer_t<decltype(stag)>;
    forward_impl<T, S>(args, sum.as<T>(), y.as<T>(), rstd.as<S>(), a.as<T>(), b.as<T>(),
                       gamma.as<T>());
  });
}

}  // namespace

void rmsnorm_forward(const RmsNormArgs& args, TensorView y, TensorView rstd, ConstTensorView x,
                     ConstTensorView gamma, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::rmsnorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_typed<T>(args, TensorView{}, y, rstd, x, ConstTensorView{}, gamma);
  });
}

void residual_rmsnorm_forward(const RmsNormArgs& args, TensorView sum, TensorView y,
                              TensorView rstd, ConstTensorView a, ConstTensorView b,
                              ConstTensorView gamma, Stream& /*stream*/) {
  dispatch_float(a.dtype, "cpu::residual_rmsnorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_typed<T>(args, sum, y, rstd, a, b, gamma);
  });
}

size_t rmsnorm_backward_workspace_bytes(const RmsNormArgs& /*args*/) { return 0; }

void rmsnorm_backward(const RmsNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                      ConstTensorView dy, ConstTensorView x, ConstTensorView gamma,
                      ConstTensorView rstd, Workspace /*ws*/, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::rmsnorm_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dispatch_f32_f64(rstd.dtype, [&](auto stag) {
      using S = std::remove_pointer_t<decltype(stag)>;
      dispatch_f32_f64(dgamma.dtype, [&](auto gtag) {
        using G = std::remove_pointer_t<decltype(gtag)>;
        backward_impl<T, S, G>(args, acc, dx.as<T>(), dgamma.as<G>(), dy.as<T>(), x.as<T>(),
                               gamma.as<T>(), rstd.as<S>());
      });
    });
  });
}

}  // namespace anvil::ops::cpu
