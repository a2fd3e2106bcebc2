// CPU twin of ops/gemm.h, the reference: OpenBLAS for the products, plain loops for epilogues.
//   D[b] = alpha * op(A[b]) op(B[b]) + beta * D[b]   (cblas_sgemm/dgemm, row-major)
//   kBias     D += bias[n]
//   kBiasGelu pre_gelu = D + bias[n] (=), D = gelu_tanh(pre_gelu)
//   kDGelu    D *= gelu_tanh'(pre_gelu)
//   bias_backward: dbias[n] += sum over rows of dy[rows, n]
// f32 and f64 (finite differences in double); bf16/f16 A and B are widened to f32 and go the f32
// way, with one rounding of D (bf16/f16 or f32) and pre_gelu at the end, as cuBLASLt computes
// 16-bit products in f32. Arguments were checked by ops/gemm.cc.
#include "ops/gemm.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/dtype.h"
#include "engine/status.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

using engine::DType;

template <typename T>
T gelu_tanh(T x) {
  const T c = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
  const T u = c * (x + static_cast<T>(0.044715) * x * x * x);
  return static_cast<T>(0.5) * x * (static_cast<T>(1) + std::tanh(u));
}

// d/dx of gelu_tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2), t = tanh(u).
template <typename T>
T gelu_tanh_grad(T x) {
  const T c = static_cast<T>(0.7978845608028654);
  const T a = static_cast<T>(0.044715);
  const T t = std::tanh(c * (x + a * x * x * x));
  return static_cast<T>(0.5) * (static_cast<T>(1) + t) +
         static_cast<T>(0.5) * x * (static_cast<T>(1) - t * t) * c *
             (static_cast<T>(1) + static_cast<T>(3) * a * x * x);
}

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
               const double* a, int lda, const double* b, int ldb, double beta, double* c,
               int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void gemm_typed(const GemmArgs& args, T* d, const T* a, const T* b, const T* bias, T* pre_gelu) {
  const int64_t m = args.m, n = args.n, k = args.k;
  const int64_t sa = args.stride_a ? args.stride_a : m * k;
  const int64_t sb = args.stride_b ? args.stride_b : k * n;
  const int64_t sd = args.stride_d ? args.stride_d : m * n;
  // Row-major leading dimensions of the stored matrices.
  const int lda = static_cast<int>(args.trans_a ? m : k);
  const int ldb = static_cast<int>(args.trans_b ? k : n);
  for (int64_t i = 0; i < args.batch; ++i) {
    T* di = d + i * sd;
    // beta = 0 overwrites: clear D first so a NaN-poisoned output cannot leak through 0 * NaN.
    if (args.beta == 0.0f) std::memset(static_cast<void*>(di), 0, sizeof(T) * m * n);
    blas_gemm(args.trans_a ? CblasTrans : CblasNoTrans, args.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              static_cast<T>(args.alpha), a + i * sa, lda, b + i * sb, ldb,
              static_cast<T>(args.beta), di, static_cast<int>(n));
  }
  switch (args.epilogue) {
    case Epilogue::kNone:
    case Epilogue::kBiasGradA:  // refused by the dispatcher (gemm_bias_grad's own)
      break;
    case Epilogue::kBias:
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c) d[r * n + c] += bias[c];
      break;
    case Epilogue::kBiasGelu:
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          const T pre = d[r * n + c] + bias[c];
          pre_gelu[r * n + c] = pre;
          d[r * n + c] = gelu_tanh(pre);
        }
      }
      break;
    case Epilogue::kDGelu:
      for (int64_t i = 0; i < m * n; ++i) d[i] *= gelu_tanh_grad(pre_gelu[i]);
      break;
  }
}

template <typename TDy, typename TAcc>
void bias_backward_typed(TAcc* dbias, const TDy* dy, int64_t rows, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    TAcc sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += static_cast<TAcc>(dy[r * n + c]);
    dbias[c] += sum;
  }
}

// The first `n` elements of a float view (any storage dtype) as f32; empty for an empty view.
std::vector<float> widen(ConstTensorView v, int64_t n) {
  std::vector<float> out;
  if (v.empty()) return out;
  out.resize(static_cast<size_t>(n));
  dispatch_float(v.dtype, "cpu::gemm", [&](auto tag) {
    const auto* p = static_cast<const std::remove_pointer_t<decltype(tag)>*>(v.data);
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(load(p, i));
  });
  return out;
}

void narrow(TensorView v, const std::vector<float>& x) {
  if (v.empty()) return;
  dispatch_float(v.dtype, "cpu::gemm", [&](auto tag) {
    auto* p = static_cast<std::remove_pointer_t<decltype(tag)>*>(v.data);
    for (size_t i = 0; i < x.size(); ++i) store(p, static_cast<int64_t>(i), x[i]);
  });
}

// bf16/f16 A and B: gemm_typed<float> on widened copies, rounded into D and pre_gelu once.
void gemm_16bit(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
                ConstTensorView bias, TensorView pre_gelu) {
  const int64_t m = args.m, n = args.n, k = args.k, last = args.batch - 1;
  // Elements spanned by each operand over the batch (strides 0: packed).
  const int64_t na = last * (args.stride_a ? args.stride_a : m * k) + m * k;
  const int64_t nb = last * (args.stride_b ? args.stride_b : k * n) + k * n;
  const int64_t nd = last * (args.stride_d ? args.stride_d : m * n) + m * n;
  const std::vector<float> af = widen(a, na), bf = widen(b, nb), biasf = widen(bias, n);
  // All of D's span is widened and written back (a 16-bit value round-trips f32 exactly), so
  // elements between strided batches keep their values; gemm_typed clears each product when
  // beta = 0. pre_gelu is read by kDGelu and written by kBiasGelu.
  std::vector<float> df = widen(d, nd);
  std::vector<float> pref = widen(pre_gelu, pre_gelu.empty() ? 0 : m * n);
  gemm_typed<float>(args, df.data(), af.data(), bf.data(), biasf.empty() ? nullptr : biasf.data(),
                    pref.empty() ? nullptr : pref.data());
  narrow(d, df);
  if (args.epilogue == Epilogue::kBiasGelu) narrow(pre_gelu, pref);
}

}  // namespace

void gemm(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
          ConstTensorView bias, TensorView pre_gelu, Stream& /*stream*/) {
  switch (a.dtype) {
    case DType::kF32:
      gemm_typed<float>(args, d.as<float>(), a.as<float>(), b.as<float>(), bias.as<float>(),
                        pre_gelu.as<float>());
      break;
    case DType::kF64:
      gemm_typed<double>(args, d.as<double>(), a.as<double>(), b.as<double>(), bias.as<double>(),
                         pre_gelu.as<double>());
      break;
    case DType::kBF16:
    case DType::kF16:
      gemm_16bit(args, d, a, b, bias, pre_gelu);
      break;
    default:
      ANVIL_CHECK_MSG(false, "cpu::gemm: a must be f32/f64/bf16/f16, got " + engine::describe(a));
  }
}

void bias_backward(TensorView dbias, ConstTensorView dy, Stream& /*stream*/) {
  const int64_t n = dy.dim(-1);
  const int64_t rows = n > 0 ? dy.numel() / n : 0;
  switch (dy.dtype) {
    case DType::kF32:
      bias_backward_typed<float, float>(dbias.as<float>(), dy.as<float>(), rows, n);
      break;
    case DType::kF64:
      bias_backward_typed<double, double>(dbias.as<double>(), dy.as<double>(), rows, n);
      break;
    case DType::kBF16:
    case DType::kF16: {
      // 16-bit storage emulated on the host: widen each element, accumulate in f32.
      const std::vector<float> w = widen(dy, rows * n);
      bias_backward_typed<float, float>(dbias.as<float>(), w.data(), rows, n);
      break;
    }
    default:
      ANVIL_CHECK_MSG(
          false, "cpu::bias_backward: dy must be f32/f64/bf16/f16, got " + engine::describe(dy));
  }
}

void gemm_bias_grad(const GemmArgs& args, TensorView d, TensorView dbias, ConstTensorView a,
                    ConstTensorView b, Stream& stream) {
  cpu::gemm(args, d, a, b, {}, {}, stream);
  cpu::bias_backward(dbias, engine::reshape(a, {args.k, args.m}), stream);
}

}  // namespace anvil::ops::cpu
