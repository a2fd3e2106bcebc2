// Inverted dropout with a Philox mask regenerated from (seed, offset), never stored:
//   keep_i = philox_uniform_at(seed, offset, i) >= p
//   forward : y_i = keep_i ? x_i / (1 - p) : 0      (=)
//   backward: dx_i = keep_i ? dy_i / (1 - p) : 0    (=)
// Identical masks on CPU and GPU for the same (seed, offset). y may alias x, dx may alias dy.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct DropoutArgs {
  float p;  // drop probability in [0, 1)
  uint64_t seed;
  uint64_t offset;  // Philox counter offset; callers advance it by numel/4 + 1 per use
};

void dropout_forward(const DropoutArgs& args, TensorView y, ConstTensorView x, Stream& stream);
void dropout_backward(const DropoutArgs& args, TensorView dx, ConstTensorView dy, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda();
// p == 0 is handled there as an identity (a copy, nothing when aliased).
// cpu: f32/f64/bf16; cuda: bf16/f32. Both compute keep ? x * (1.0f / (1.0f - p)) : 0 in f32 (f64
// on the CPU for f64), so f32/bf16 results agree bit for bit.
namespace cpu {
void dropout_forward(const DropoutArgs& args, TensorView y, ConstTensorView x, Stream& stream);
void dropout_backward(const DropoutArgs& args, TensorView dx, ConstTensorView dy, Stream& stream);
}  // namespace cpu
namespace cuda {
void dropout_forward(const DropoutArgs& args, TensorView y, ConstTensorView x, Stream& stream);
void dropout_backward(const DropoutArgs& args, TensorView dx, ConstTensorView dy, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
