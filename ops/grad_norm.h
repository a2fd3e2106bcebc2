// Squared L2 norm for global gradient-norm clipping:  out[0] += sum_i x_i^2   (+=, f32)
// Several buffers accumulate into one scalar; the caller takes sqrt and folds
// min(1, max_norm / norm) into AdamWArgs::grad_scale, so clipping costs no extra pass.
// A NaN or inf in x makes out non-finite, which the train loop reports as a skipped step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;
using engine::Workspace;

// Bytes of workspace sum_squares needs for x of n elements (the GPU's per-block partial sums; the
// CPU needs none). The GPU result is deterministic: the block count depends on n only and the
// partials are reduced in a fixed order, without atomics.
size_t sum_squares_workspace_bytes(int64_t n);

// out: [1] f32 (+=); x: [n] f32.
void sum_squares(TensorView out, ConstTensorView x, Workspace ws, Stream& stream);

// Same-name twins behind the dispatcher. CPU: x and out f32 or f64 (one dtype), summed in double,
// workspace unused. CUDA: f32.
namespace cpu {
void sum_squares(TensorView out, ConstTensorView x, Workspace ws, Stream& stream);
}  // namespace cpu
namespace cuda {
size_t sum_squares_workspace_bytes(int64_t n);
void sum_squares(TensorView out, ConstTensorView x, Workspace ws, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
