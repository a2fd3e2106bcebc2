// Elementwise activations for models that use them on their own (BERT's and T5's MLPs, BERT's
// pooler):
//   kGeluErf: y = 0.5 x (1 + erf(x / sqrt 2))  (exact GELU: torch F.gelu's default, HF "gelu")
//   kRelu   : y = max(x, 0)                      (relu'(0) = 0, as torch)
//   kTanh   : y = tanh(x), tanh' = 1 - tanh^2    (BERT's pooler)
//   forward : y = act(x)           (=)
//   backward: dx = dy * act'(x)    (=, dx may alias dy)
// With dropout (ops/dropout.h, T5's DenseReluDense), one pass instead of two, the same bits:
//   forward : y = Drop(act(x))     (act(x) rounded to the storage type, then dropped)
//   backward: dx = Drop'(dy) * act'(x)   (Drop'(dy) rounded first; dx may alias dy)
// GPT-2's tanh GELU is ops/gelu.h; the gated units (act(g) * u) are ops/glu.h.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"
#include "ops/dropout.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

enum class Activation { kGeluErf, kRelu, kTanh };

// y, x: same shape, contiguous, act dtype.
void activation_forward(Activation act, TensorView y, ConstTensorView x, Stream& stream);
// dx, dy, x: same shape, act dtype. dx may alias dy.
void activation_backward(Activation act, TensorView dx, ConstTensorView dy, ConstTensorView x,
                         Stream& stream);
// As above with dropout drop on the activation's output (drop.p == 0: no dropout).
void activation_dropout_forward(Activation act, const DropoutArgs& drop, TensorView y,
                                ConstTensorView x, Stream& stream);
void activation_dropout_backward(Activation act, const DropoutArgs& drop, TensorView dx,
                                 ConstTensorView dy, ConstTensorView x, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16 (math in double); cuda: bf16/f32 (math in f32).
namespace cpu {
void activation_forward(Activation act, TensorView y, ConstTensorView x, Stream& stream);
void activation_backward(Activation act, TensorView dx, ConstTensorView dy, ConstTensorView x,
                         Stream& stream);
}  // namespace cpu
namespace cuda {
void activation_forward(Activation act, TensorView y, ConstTensorView x, Stream& stream);
void activation_backward(Activation act, TensorView dx, ConstTensorView dy, ConstTensorView x,
                         Stream& stream);
// One kernel each (the CPU twin is the two ops in sequence, in the public functions).
void activation_dropout_forward(Activation act, const DropoutArgs& drop, TensorView y,
                                ConstTensorView x, Stream& stream);
void activation_dropout_backward(Activation act, const DropoutArgs& drop, TensorView dx,
                                 ConstTensorView dy, ConstTensorView x, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
