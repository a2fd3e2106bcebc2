// Dispatcher for RMSNorm over the last dim (math in ops/rmsnorm.h):
//   forward : rstd = 1/sqrt(mean(x^2) + eps), y = cast_act(x * rstd) * gamma   (= y, rstd)
//   residual: sum = a + b rounded to the activation type (=), y = rmsnorm(sum)
//   backward: dx (= or += per Accumulate), dgamma +=
// Checks shapes, dtypes, devices and the workspace size, then runs the CPU or CUDA twin.
#include "ops/rmsnorm.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::DType;

using detail::check_act_dtype;
using detail::check_arg;
using detail::f32_or_f64;

void check_args(const char* op, const RmsNormArgs& a) {
  ANVIL_CHECK_MSG(a.rows >= 0 && a.cols > 0 && a.cols <= (int64_t{1} << 30) && a.eps >= 0.0f,
                  std::string(op) + ": need rows >= 0, 0 < cols <= 2^30, eps >= 0, got rows=" +
                      std::to_string(a.rows) + " cols=" + std::to_string(a.cols) +
                      " eps=" + std::to_string(a.eps));
}

void check_forward(const char* op, const RmsNormArgs& args, const ConstTensorView& y,
                   const ConstTensorView& rstd, const ConstTensorView& x,
                   const ConstTensorView& gamma, const Stream& stream) {
  check_args(op, args);
  const DType act = x.dtype;
  check_act_dtype(op, act, stream);
  check_arg(op, "y", y, act, {args.rows, args.cols}, stream);
  check_arg(op, "rstd", rstd, f32_or_f64(act, rstd.dtype), {args.rows}, stream);
  check_arg(op, "gamma", gamma, act, {args.cols}, stream);
}

}  // namespace

void rmsnorm_forward(const RmsNormArgs& args, TensorView y, TensorView rstd, ConstTensorView x,
                     ConstTensorView gamma, Stream& stream) {
  constexpr const char* kOp = "rmsnorm_forward";
  check_forward(kOp, args, y, rstd, x, gamma, stream);
  check_arg(kOp, "x", x, x.dtype, {args.rows, args.cols}, stream);
  if (args.rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::rmsnorm_forward(args, y, rstd, x, gamma, stream);
  } else {
    cuda::rmsnorm_forward(args, y, rstd, x, gamma, stream);
  }
}

void residual_rmsnorm_forward(const RmsNormArgs& args, TensorView sum, TensorView y,
                              TensorView rstd, ConstTensorView a, ConstTensorView b,
                              ConstTensorView gamma, Stream& stream) {
  constexpr const char* kOp = "residual_rmsnorm_forward";
  check_forward(kOp, args, y, rstd, a, gamma, stream);
  check_arg(kOp, "a", a, a.dtype, {args.rows, args.cols}, stream);
  check_arg(kOp, "b", b, a.dtype, {args.rows, args.cols}, stream);
  check_arg(kOp, "sum", sum, a.dtype, {args.rows, args.cols}, stream);
  if (args.rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::residual_rmsnorm_forward(args, sum, y, rstd, a, b, gamma, stream);
  } else {
    cuda::residual_rmsnorm_forward(args, sum, y, rstd, a, b, gamma, stream);
  }
}

// The CUDA size; the CPU twin needs none, so this is enough for either backend.
size_t rmsnorm_backward_workspace_bytes(const RmsNormArgs& args) {
  return cuda::rmsnorm_backward_workspace_bytes(args);
}

void rmsnorm_backward(const RmsNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                      ConstTensorView dy, ConstTensorView x, ConstTensorView gamma,
                      ConstTensorView rstd, Workspace ws, Stream& stream) {
  constexpr const char* kOp = "rmsnorm_backward";
  check_args(kOp, args);
  const DType act = x.dtype;
  check_act_dtype(kOp, act, stream);
  check_arg(kOp, "dx", dx, act, {args.rows, args.cols}, stream);
  check_arg(kOp, "dgamma", dgamma, f32_or_f64(act, dgamma.dtype), {args.cols}, stream);
  check_arg(kOp, "dy", dy, act, {args.rows, args.cols}, stream);
  check_arg(kOp, "x", x, act, {args.rows, args.cols}, stream);
  check_arg(kOp, "gamma", gamma, act, {args.cols}, stream);
  check_arg(kOp, "rstd", rstd, f32_or_f64(act, rstd.dtype), {args.rows}, stream);
  if (args.rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::rmsnorm_backward(args, acc, dx, dgamma, dy, x, gamma, rstd, ws, stream);
  } else {
    const size_t need = cuda::rmsnorm_backward_workspace_bytes(args);
    ANVIL_CHECK_MSG(ws.bytes >= need && (need == 0 || ws.data != nullptr),
                    std::string(kOp) + ": workspace must hold " + std::to_string(need) +
                        " bytes (rmsnorm_backward_workspace_bytes), got " +
                        std::to_string(ws.bytes));
    cuda::rmsnorm_backward(args, acc, dx, dgamma, dy, x, gamma, rstd, ws, stream);
  }
}

}  // namespace anvil::ops
