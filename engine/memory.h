// Copies and fills on views, ordered on a stream. Both views must have equal numel and dtype
// (copy) and be contiguous; host<->device copies work from pageable or pinned host memory.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::engine {

// dst = src (any device pair).
void copy(TensorView dst, ConstTensorView src, const Stream& s);
// dst = 0 (all bytes).
void fill_zero(TensorView dst, const Stream& s);
// Sets every byte to 0xff: a NaN in every float type, so an output an op forgot to write fails
// the comparison.
void poison(TensorView dst, const Stream& s);

}  // namespace anvil::engine
