// AXPY, for accumulating gradients (e.g. a reduce-scattered shard into the owner's shard):
//   y[i] += alpha * x[i]   (+=)   for i in [0, n)
// y and x are flat [n] vectors of one dtype; n may be 0 (a no-op) and up to ~1e9 (int64 indexing).
// NaN/inf in x or y propagate into y (never dropped, even for alpha == 0).
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

// y: [n] (+=); x: [n], same dtype and device as y. CPU: f32, f64 or bf16; CUDA: f32 or bf16
// (math in f32, one fused multiply-add per element). x may be y itself (y *= 1 + alpha); a
// partial overlap of x and y is rejected.
void axpy(float alpha, TensorView y, ConstTensorView x, Stream& stream);

// Same-signature twins. The public function checks arguments and dispatches on stream.is_cuda().
// cpu: f32/f64/bf16, math in double (the reference); cuda: f32/bf16, math in f32.
namespace cpu {
void axpy(float alpha, TensorView y, ConstTensorView x, Stream& stream);
}  // namespace cpu
namespace cuda {
void axpy(float alpha, TensorView y, ConstTensorView x, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
