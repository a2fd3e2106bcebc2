// Dispatcher for inverted dropout with a Philox mask regenerated from (seed, offset):
//   keep_i = philox_uniform_at(seed, offset, i) >= p
//   forward : y_i = keep_i ? x_i / (1 - p) : 0      (=)
//   backward: dx_i = keep_i ? dy_i / (1 - p) : 0    (=)
// Checks p, dtypes, shapes and devices; p == 0 is the identity (a copy, or nothing when the
// output aliases the input); otherwise runs the CPU or CUDA twin.
#include "ops/dropout.h"

#include <string>

#include "engine/memory.h"
#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

bool same_shape(const ConstTensorView& a, const ConstTensorView& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i) {
    if (a.shape[i] != b.shape[i]) return false;
  }
  return true;
}

// out and in: contiguous, same dtype (bf16/f32, f64 on the CPU) and shape, on the stream's device.
void check_pair(const char* op, const DropoutArgs& args, const char* out_name,
                const ConstTensorView& out, const char* in_name, const ConstTensorView& in,
                const Stream& stream) {
  ANVIL_CHECK_MSG(args.p >= 0.0f && args.p < 1.0f,
                  std::string(op) + ": p must be in [0, 1), got " + std::to_string(args.p));
  const DType t = in.dtype;
  const bool in_ok = detail::is_act_dtype(t, stream) && (!in.empty() || in.numel() == 0) &&
                     in.device == stream.device() && in.is_contiguous();
  ANVIL_CHECK_MSG(in_ok, std::string(op) + ": " + in_name +
                             " must be contiguous bf16 or f32 (f64 on the CPU) on " +
                             std::string(engine::device_name(stream.device())) + ", got " +
                             describe(in));
  const bool out_ok = (!out.empty() || out.numel() == 0) && out.dtype == t &&
                      out.device == stream.device() && same_shape(out, in) && out.is_contiguous();
  ANVIL_CHECK_MSG(out_ok, std::string(op) + ": " + out_name + " must be contiguous and like " +
                              in_name + " = " + describe(in) + ", got " + describe(out));
}

// p == 0 keeps everything with scale 1: out = in.
bool identity(TensorView out, ConstTensorView in, const DropoutArgs& args, const Stream& stream) {
  if (args.p != 0.0f) return false;
  if (out.data != in.data) engine::copy(out, in, stream);
  return true;
}

}  // namespace

void dropout_forward(const DropoutArgs& args, TensorView y, ConstTensorView x, Stream& stream) {
  check_pair("dropout_forward", args, "y", y, "x", x, stream);
  if (x.numel() == 0 || identity(y, x, args, stream)) return;
  if (!stream.is_cuda()) {
    cpu::dropout_forward(args, y, x, stream);
  } else {
    cuda::dropout_forward(args, y, x, stream);
  }
}

void dropout_backward(const DropoutArgs& args, TensorView dx, ConstTensorView dy, Stream& stream) {
  check_pair("dropout_backward", args, "dx", dx, "dy", dy, stream);
  if (dy.numel() == 0 || identity(dx, dy, args, stream)) return;
  if (!stream.is_cuda()) {
    cpu::dropout_backward(args, dx, dy, stream);
  } else {
    cuda::dropout_backward(args, dx, dy, stream);
  }
}

}  // namespace anvil::ops
