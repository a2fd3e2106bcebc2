// Dispatcher for LayerNorm over the last dim (math in ops/layernorm.h):
//   forward : y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps)   (= y, mean, rstd)
//   residual: sum = a + b rounded to the activation type (=), y = layernorm(sum)
//   backward: dx (= or += per Accumulate), dgamma +=, dbeta +=
// Checks shapes, dtypes, devices and the workspace size, then runs the CPU or CUDA twin.
#include "ops/layernorm.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

using detail::check_act_dtype;
using detail::check_arg;
using detail::f32_or_f64;

void check_args(const char* op, const LayerNormArgs& a) {
  ANVIL_CHECK_MSG(a.rows >= 0 && a.cols > 0 && a.cols <= (int64_t{1} << 30) && a.eps >= 0.0f,
                  std::string(op) + ": need rows >= 0, 0 < cols <= 2^30, eps >= 0, got rows=" +
                      std::to_string(a.rows) + " cols=" + std::to_string(a.cols) +
                      " eps=" + std::to_string(a.eps));
}

void check_forward(const char* op, const LayerNormArgs& args, const ConstTensorView& y,
                   const ConstTensorView& mean, const ConstTensorView& rstd,
                   const ConstTensorView& x, const ConstTensorView& gamma,
                   const ConstTensorView& beta, const Stream& stream) {
  check_args(op, args);
  const DType act = x.dtype;
  check_act_dtype(op, act, stream);
  const DType stat = f32_or_f64(act, mean.dtype);
  check_arg(op, "y", y, act, {args.rows, args.cols}, stream);
  check_arg(op, "mean", mean, stat, {args.rows}, stream);
  check_arg(op, "rstd", rstd, stat, {args.rows}, stream);
  check_arg(op, "gamma", gamma, act, {args.cols}, stream);
  check_arg(op, "beta", beta, act, {args.cols}, stream);
}

}  // namespace

void layernorm_forward(const LayerNormArgs& args, TensorView y, TensorView mean, TensorView rstd,
                       ConstTensorView x, ConstTensorView gamma, ConstTensorView beta,
                       Stream& stream) {
  constexpr const char* kOp = "layernorm_forward";
  check_forward(kOp, args, y, mean, rstd, x, gamma, beta, stream);
  check_arg(kOp, "x", x, x.dtype, {args.rows, args.cols}, stream);
  if (args.rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::layernorm_forward(args, y, mean, rstd, x, gamma, beta, stream);
  } else {
    cuda::layernorm_forward(args, y, mean, rstd, x, gamma, beta, stream);
  }
}

void residual_layernorm_forward(const LayerNormArgs& args, TensorView sum, TensorView y,
                                TensorView mean, TensorView rstd, ConstTensorView a,
                                ConstTensorView b, ConstTensorView gamma, ConstTensorView beta,
                                Stream& stream) {
  constexpr const char* kOp = "residual_layernorm_forward";
  check_forward(kOp, args, y, mean, rstd, a, gamma, beta, stream);
  check_arg(kOp, "a", a, a.dtype, {args.rows, args.cols}, stream);
  check_arg(kOp, "b", b, a.dtype, {args.rows, args.cols}, stream);
  check_arg(kOp, "sum", sum, a.dtype, {args.rows, args.cols}, stream);
  if (args.rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::residual_layernorm_forward(args, sum, y, mean, rstd, a, b, gamma, beta, stream);
  } else {
    cuda::residual_layernorm_forward(args, sum, y, mean, rstd, a, b, gamma, beta, stream);
  }
}

// The CUDA size; the CPU twin needs none, so this is enough for either backend.
size_t layernorm_backward_workspace_bytes(const LayerNormArgs& args) {
  return cuda::layernorm_backward_workspace_bytes(args);
}

void layernorm_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                        TensorView dbeta, ConstTensorView dy, ConstTensorView x,
                        ConstTensorView gamma, ConstTensorView mean, ConstTensorView rstd,
                        Workspace ws, Stream& stream) {
  constexpr const char* kOp = "layernorm_backward";
  check_args(kOp, args);
  const DType act = x.dtype;
  check_act_dtype(kOp, act, stream);
  const DType stat = f32_or_f64(act, mean.dtype);
  const DType grad = f32_or_f64(act, dgamma.dtype);
  check_arg(kOp, "dx", dx, act, {args.rows, args.cols}, stream);
  check_arg(kOp, "dgamma", dgamma, grad, {args.cols}, stream);
  check_arg(kOp, "dbeta", dbeta, grad, {args.cols}, stream);
  check_arg(kOp, "dy", dy, act, {args.rows, args.cols}, stream);
  check_arg(kOp, "x", x, act, {args.rows, args.cols}, stream);
  check_arg(kOp, "gamma", gamma, act, {args.cols}, stream);
  check_arg(kOp, "mean", mean, stat, {args.rows}, stream);
  check_arg(kOp, "rstd", rstd, stat, {args.rows}, stream);
  if (args.rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::layernorm_backward(args, acc, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, ws, stream);
  } else {
    const size_t need = cuda::layernorm_backward_workspace_bytes(args);
    ANVIL_CHECK_MSG(ws.bytes >= need && (need == 0 || ws.data != nullptr),
                    std::string(kOp) + ": workspace must hold " + std::to_string(need) +
                        " bytes (layernorm_backward_workspace_bytes), got " +
                        std::to_string(ws.bytes));
    cuda::layernorm_backward(args, acc, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, ws, stream);
  }
}

}  // namespace anvil::ops
