// Argument checks shared by the op dispatchers: a failed check aborts with a message naming
// the op, the argument, and the expected vs actual dtype/shape/device.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "engine/dtype.h"
#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops::detail {

// True when v is contiguous with exactly `shape`.
bool has_shape(const engine::ConstTensorView& v, std::initializer_list<int64_t> shape);

// `arg` of `op` must be a contiguous `dtype` tensor of `shape` on the stream's device.
void check_arg(const char* op, const char* arg, const engine::ConstTensorView& v,
               engine::DType dtype, std::initializer_list<int64_t> shape,
               const engine::Stream& stream);

}  // namespace anvil::ops::detail
