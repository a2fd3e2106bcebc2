// Dispatcher for the elementwise activations (math in ops/activation.h):
//   forward : y = act(x) (=);  backward: dx = dy * act'(x) (=, dx may alias dy)
// Checks dtypes, shapes and devices, then runs the CPU or CUDA twin.
#include "ops/activation.h"

#include <string>

#include "engine/status.h"
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

void activation_dropout_forward(Activation act, const DropoutArgs& drop, TensorView y,
                                ConstTensorView x, Stream& stream) {
  if (drop.p == 0.0f || !stream.is_cuda()) {  // the CPU twin: the two ops in sequence
    activation_forward(act, y, x, stream);
    if (drop.p != 0.0f) dropout_forward(drop, y, y, stream);
    return;
  }
  constexpr const char* kOp = "activation_dropout_forward";
  check_elementwise_x(kOp, x, stream);
  check_like(kOp, "y", y, x, stream);
  ANVIL_CHECK_MSG(
      drop.p > 0.0f && drop.p < 1.0f,
      std::string(kOp) + ": dropout p must be in [0, 1), got " + std::to_string(drop.p));
  if (x.numel() == 0) return;
  cuda::activation_dropout_forward(act, drop, y, x, stream);
}

void activation_dropout_backward(Activation act, const DropoutArgs& drop, TensorView dx,
                                 ConstTensorView dy, ConstTensorView x, Stream& stream) {
  if (drop.p == 0.0f || !stream.is_cuda()) {  // the CPU twin: the two ops in sequence
    if (drop.p != 0.0f) dropout_backward(drop, dx, dy, stream);
    activation_backward(act, dx, drop.p != 0.0f ? ConstTensorView(dx) : dy, x, stream);
    return;
  }
  constexpr const char* kOp = "activation_dropout_backward";
  check_elementwise_x(kOp, x, stream);
  check_like(kOp, "dx", dx, x, stream);
  check_like(kOp, "dy", dy, x, stream);
  ANVIL_CHECK_MSG(
      drop.p > 0.0f && drop.p < 1.0f,
      std::string(kOp) + ": dropout p must be in [0, 1), got " + std::to_string(drop.p));
  if (x.numel() == 0) return;
  cuda::activation_dropout_backward(act, drop, dx, dy, x, stream);
}

}  // namespace anvil::ops
