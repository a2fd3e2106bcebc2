// CPU twin of LayerNorm over the last dim (reference for the CUDA kernels):
//   forward : y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps)   (= y, mean, rstd)
//   residual: sum = a + b rounded to the activation type (=), y = layernorm(sum): the ROUNDED
//             sum is normalized, as on the GPU, so both agree on what was normalized.
//   backward, with xhat = (x - mean) * rstd and g = dy * gamma:
//     dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (= or += per Accumulate)
//     dgamma += sum_rows dy * xhat;  dbeta += sum_rows dy
// Plain loops, math in double (two-pass variance). Activations f32/f64/bf16; mean/rstd and
// dgamma/dbeta f32, or f64 with f64 activations. Needs no workspace.
#include "ops/layernorm.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

// sum: [rows, cols] T or null (plain layernorm); y: [rows, cols] T; mean, rstd: [rows] S;
// a: [rows, cols] T; b: [rows, cols] T or null; gamma, beta: [cols] T.
template <typename T, typename S>
void forward_impl(const LayerNormArgs& args, T* sum, T* y, S* mean, S* rstd, const T* a, const T* b,
                  const T* gamma, const T* beta) {
  const int64_t n = args.cols;
  std::vector<double> v(n);
  for (int64_t r = 0; r < args.rows; ++r) {
    const int64_t o = r * n;
    double s = 0.0;
    for (int64_t c = 0; c < n; ++c) {
      v[c] = load(a, o + c);
      if (b != nullptr) {
        store(sum, o + c, v[c] + load(b, o + c));
        v[c] = load(sum, o + c);  // normalize what was stored (rounded to T)
      }
      s += v[c];
    }
    const double m = s / n;
    double ss = 0.0;
    for (int64_t c = 0; c < n; ++c) ss += (v[c] - m) * (v[c] - m);
    const double rs = 1.0 / std::sqrt(ss / n + static_cast<double>(args.eps));
    for (int64_t c = 0; c < n; ++c) {
      store(y, o + c, (v[c] - m) * rs * load(gamma, c) + load(beta, c));
    }
    mean[r] = static_cast<S>(m);
    rstd[r] = static_cast<S>(rs);
  }
}

// dx: [rows, cols] T; dgamma, dbeta: [cols] G (+=); dy, x: [rows, cols] T; gamma: [cols] T;
// mean, rstd: [rows] S.
template <typename T, typename S, typename G>
void backward_impl(const LayerNormArgs& args, Accumulate acc, T* dx, G* dgamma, G* dbeta,
                   const T* dy, const T* x, const T* gamma, const S* mean, const S* rstd) {
  const int64_t n = args.cols;
  // Column sums over all rows in double, added into dgamma/dbeta once at the end, so calling
  // backward twice from zero gives exactly 2x.
  std::vector<double> dg(n, 0.0), db(n, 0.0), xhat(n), g(n);
  for (int64_t r = 0; r < args.rows; ++r) {
    const int64_t o = r * n;
    const double m = mean[r], rs = rstd[r];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t c = 0; c < n; ++c) {
      const double d = load(dy, o + c);
      xhat[c] = (load(x, o + c) - m) * rs;
      g[c] = d * load(gamma, c);
      sum_g += g[c];
      sum_gx += g[c] * xhat[c];
      dg[c] += d * xhat[c];
      db[c] += d;
    }
    const double mean_g = sum_g / n, mean_gx = sum_gx / n;
    for (int64_t c = 0; c < n; ++c) {
      double v = rs * (g[c] - mean_g - xhat[c] * mean_gx);
      if (acc == Accumulate::kAdd) v += load(dx, o + c);
      store(dx, o + c, v);
    }
  }
  for (int64_t c = 0; c < n; ++c) {
    dgamma[c] = static_cast<G>(dgamma[c] + dg[c]);
    dbeta[c] = static_cast<G>(dbeta[c] + db[c]);
  }
}

template <typename T>
void forward_typed(const LayerNormArgs& args, TensorView sum, TensorView y, TensorView mean,
                   TensorView rstd, ConstTensorView a, ConstTensorView b, ConstTensorView gamma,
                   ConstTensorView beta) {
  dispatch_f32_f64(mean.dtype, [&](auto stag) {
    using S = std::remove_pointer_t<decltype(stag)>;
    forward_impl<T, S>(args, sum.as<T>(), y.as<T>(), mean.as<S>(), rstd.as<S>(), a.as<T>(),
                       b.as<T>(), gamma.as<T>(), beta.as<T>());
  });
}

}  // namespace

void layernorm_forward(const LayerNormArgs& args, TensorView y, TensorView mean, TensorView rstd,
                       ConstTensorView x, ConstTensorView gamma, ConstTensorView beta,
                       Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::layernorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_typed<T>(args, TensorView{}, y, mean, rstd, x, ConstTensorView{}, gamma, beta);
  });
}

void residual_layernorm_forward(const LayerNormArgs& args, TensorView sum, TensorView y,
                                TensorView mean, TensorView rstd, ConstTensorView a,
                                ConstTensorView b, ConstTensorView gamma, ConstTensorView beta,
                                Stream& /*stream*/) {
  dispatch_float(a.dtype, "cpu::residual_layernorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_typed<T>(args, sum, y, mean, rstd, a, b, gamma, beta);
  });
}

size_t layernorm_backward_workspace_bytes(const LayerNormArgs& /*args*/) { return 0; }

void layernorm_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                        TensorView dbeta, ConstTensorView dy, ConstTensorView x,
                        ConstTensorView gamma, ConstTensorView mean, ConstTensorView rstd,
                        Workspace /*ws*/, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::layernorm_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dispatch_f32_f64(mean.dtype, [&](auto stag) {
      using S = std::remove_pointer_t<decltype(stag)>;
      dispatch_f32_f64(dgamma.dtype, [&](auto gtag) {
        using G = std::remove_pointer_t<decltype(gtag)>;
        backward_impl<T, S, G>(args, acc, dx.as<T>(), dgamma.as<G>(), dbeta.as<G>(), dy.as<T>(),
                               x.as<T>(), gamma.as<T>(), mean.as<S>(), rstd.as<S>());
      });
    });
  });
}

}  // namespace anvil::ops::cpu
