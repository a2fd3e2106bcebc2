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

// Same-signature twins. The public function checks arguments and dispatches on stream.is_cuda().
// cpu: f32/bf16/f16/f64 (f64 -> bf16/f16 goes through f32: rounds twice). cuda: f32/bf16/f16.
// NaN payloads may differ between the two (the device returns a canonical NaN); finite values
// and infinities agree bit for bit.
namespace cpu {
void cast(TensorView y, ConstTensorView x, Stream& stream);
}  // namespace cpu
namespace cuda {
void cast(TensorView y, ConstTensorView x, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
