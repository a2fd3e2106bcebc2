// Dispatcher for the elementwise activations (math in ops/activation.h):
//   forward : y = act(x) (=);  backward: dx = dy * act'(x) (=, dx may alias dy)
// Checks dtypes, shapes and devices, then runs the CPU or CUDA twin.
#include "ops/activation.h"

#include "ops/arg_check.h"

namespace anvil::ops {

using detail::check_elementwise_x;
using detail::check_like;

void activation_forward(Activation act, TensorView y, ConstTensorView x, Stream& stream) {
  constexpr const char* kOp = "activation_forward";
  check_elementwise_x(kOp, x, stream);
  check_like(kOp, "y", y, x, stream);
  if (x.numel() == 0) return;
  if (!stream.is_cuda()) {
    cpu::activation_forward(act, y, x, stream);
  } else {
    cuda::activation_forward(act, y, x, stream);
  }
}

void activation_backward(Activation act, TensorView dx, ConstTensorView dy, ConstTensorView x,
                         Stream& stream) {
  constexpr const char* kOp = "activation_backward";
  check_elementwise_x(kOp, x, stream);
  check_like(kOp, "dx", dx, x, stream);
  check_like(kOp, "dy", dy, x, stream);
  if (x.numel() == 0) return;
  if (!stream.is_cuda()) {
    cpu::activation_backward(act, dx, dy, x, stream);
  } else {
    cuda::activation_backward(act, dx, dy, x, stream);
  }
}

}  // namespace anvil::ops
