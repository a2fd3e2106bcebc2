// Elementwise dtype conversion: y = (dst dtype) x  (=). f32 <-> bf16 <-> f16, round to nearest
// even. Also y = x for equal dtypes.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

// y, x: same numel, contiguous, float dtypes.
void cast(TensorView y, ConstTensorView x, Stream& stream);

}  // namespace anvil::ops
