// GELU, tanh approximation (GPT-2):
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (=)
//   dx = dy * dy/dx                                          (=)
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

// y, x: same shape, contiguous, act dtype.
void gelu_forward(TensorView y, ConstTensorView x, Stream& stream);
// dx, dy, x: same shape, act dtype. dx may alias dy.
void gelu_backward(TensorView dx, ConstTensorView dy, ConstTensorView x, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16; cuda: bf16/f32 (math in f32).
namespace cpu {
void gelu_forward(TensorView y, ConstTensorView x, Stream& stream);
void gelu_backward(TensorView dx, ConstTensorView dy, ConstTensorView x, Stream& stream);
}  // namespace cpu
namespace cuda {
void gelu_forward(TensorView y, ConstTensorView x, Stream& stream);
void gelu_backward(TensorView dx, ConstTensorView dy, ConstTensorView x, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
