// Dispatcher for GELU, tanh approximation (math in ops/gelu.h):
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (=)
//   dx = dy * dy/dx                                          (=, dx may alias dy)
// Checks dtypes, shapes and devices, then runs the CPU or CUDA twin.
#include "ops/gelu.h"

#include "ops/arg_check.h"

namespace anvil::ops {

using detail::check_elementwise_x;
using detail::check_like;

void gelu_forward(TensorView y, ConstTensorView x, Stream& stream) {
  constexpr const char* kOp = "gelu_forward";
  check_elementwise_x(kOp, x, stream);
  check_like(kOp, "y", y, x, stream);
  if (x.numel() == 0) return;
  if (!stream.is_cuda()) {
    cpu::gelu_forward(y, x, stream);
  } else {
    cuda::gelu_forward(y, x, stream);
  }
}

void gelu_backward(TensorView dx, ConstTensorView dy, ConstTensorView x, Stream& stream) {
  constexpr const char* kOp = "gelu_backward";
  check_elementwise_x(kOp, x, stream);
  check_like(kOp, "dx", dx, x, stream);
  check_like(kOp, "dy", dy, x, stream);
  if (x.numel() == 0) return;
  if (!stream.is_cuda()) {
    cpu::gelu_backward(dx, dy, x, stream);
  } else {
    cuda::gelu_backward(dx, dy, x, stream);
  }
}

}  // namespace anvil::ops
