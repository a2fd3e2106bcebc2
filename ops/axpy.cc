// Dispatcher for AXPY (math in ops/axpy.h):
//   y[i] += alpha * x[i]   (+=)   y, x: [n] contiguous, one dtype, on the stream's device
// Checks dtypes, shapes, devices and overlap, then runs the CPU or CUDA twin (n == 0: no-op).
#include "ops/axpy.h"

#include <cstdint>
#include <string>

#include "engine/dtype.h"
#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

// x must be a float dtype the stream's twin supports.
void check_dtype(const char* op, const ConstTensorView& x, const Stream& stream) {
  ANVIL_CHECK_MSG(
      detail::is_act_dtype(x.dtype, stream),
      std::string(op) + ": x must be f32, bf16 or f16 (f64 on the CPU), got " + describe(x));
}

// x and y must be the same memory or disjoint: a partial overlap would read elements of x that
// another thread already updated through y.
void check_overlap(const char* op, const ConstTensorView& y, const ConstTensorView& x) {
  const auto* yb = static_cast<const char*>(y.data);
  const auto* xb = static_cast<const char*>(x.data);
  const size_t bytes = x.bytes();
  const bool ok = yb == xb || yb + bytes <= xb || xb + bytes <= yb;
  ANVIL_CHECK_MSG(ok, std::string(op) + ": x and y overlap partially (x = " + describe(x) +
                          ", y = " + describe(y) + ")");
}

}  // namespace

void axpy(float alpha, TensorView y, ConstTensorView x, Stream& stream) {
  constexpr const char* kOp = "axpy";
  check_dtype(kOp, x, stream);
  const int64_t n = x.numel();
  detail::check_arg(kOp, "x", x, x.dtype, {n}, stream);
  detail::check_arg(kOp, "y", y, x.dtype, {n}, stream);
  if (n == 0) return;
  check_overlap(kOp, y, x);
  if (!stream.is_cuda()) {
    cpu::axpy(alpha, y, x, stream);
  } else {
    cuda::axpy(alpha, y, x, stream);
  }
}

}  // namespace anvil::ops
