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

// Activation dtypes: bf16, f16 (fp16 training) or f32, plus f64 on the CPU (finite-difference
// tests in double).
bool is_act_dtype(engine::DType t, const engine::Stream& stream);

// Activation dtype check shared by the row/elementwise ops: is_act_dtype or a fatal CHECK.
void check_act_dtype(const char* op, engine::DType t, const engine::Stream& stream);

// Statistics and parameter gradients are f32; with f64 activations (CPU finite-difference
// checks) they may be f64 as well. `given` is the dtype the caller passed.
engine::DType f32_or_f64(engine::DType act, engine::DType given);

// `arg` of `op` must be a contiguous `dtype` tensor of `shape` on the stream's device.
void check_arg(const char* op, const char* arg, const engine::ConstTensorView& v,
               engine::DType dtype, std::initializer_list<int64_t> shape,
               const engine::Stream& stream);

// Elementwise ops: x must be a contiguous bf16/f16/f32 (f64 on the CPU) tensor on the stream's
// device, and `arg` a contiguous tensor like x (dtype, shape) there.
void check_elementwise_x(const char* op, const engine::ConstTensorView& x,
                         const engine::Stream& stream);
void check_like(const char* op, const char* arg, const engine::ConstTensorView& v,
                const engine::ConstTensorView& x, const engine::Stream& stream);

}  // namespace anvil::ops::detail
