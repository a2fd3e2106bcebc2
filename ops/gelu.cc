// Dispatcher for GELU, tanh approximation (math in ops/gelu.h):
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (=)
//   dx = dy * dy/dx                                          (=, dx may alias dy)
// Checks dtypes, shapes and devices, then runs the CPU or CUDA twin.
#include "ops/gelu.h"

#include <string>

#include "engine/status.h"

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

// `v` must be a contiguous tensor like `ref` (dtype, shape) on the stream's device.
void check_like(const char* op, const char* arg, const ConstTensorView& v,
                const ConstTensorView& ref, const Stream& stream) {
  const bool ok = (!v.empty() || v.numel() == 0) && v.dtype == ref.dtype &&
                  v.device == stream.device() && same_shape(v, ref) && v.is_contiguous();
  ANVIL_CHECK_MSG(ok, std::string(op) + ": " + arg + " must be contiguous, on " +
                          std::string(engine::device_name(stream.device())) +
                          " and like x = " + describe(ref) + ", got " + describe(v));
}

void check_x(const char* op, const ConstTensorView& x, const Stream& stream) {
  const DType t = x.dtype;
  const bool ok =
      (t == DType::kBF16 || t == DType::kF32 || (!stream.is_cuda() && t == DType::kF64)) &&
      (!x.empty() || x.numel() == 0) && x.device == stream.device() && x.is_contiguous();
  ANVIL_CHECK_MSG(ok, std::string(op) + ": x must be contiguous bf16 or f32 (f64 on the CPU) on " +
                          std::string(engine::device_name(stream.device())) + ", got " +
                          describe(x));
}

}  // namespace

void gelu_forward(TensorView y, ConstTensorView x, Stream& stream) {
  constexpr const char* kOp = "gelu_forward";
  check_x(kOp, x, stream);
  check_like(kOp, "y", y, x, stream);
  if (x.numel() == 0) return;
  if (!stream.is_cuda()) {
    cpu::gelu_forward(y, x, stream);
  } else {
    cuda::gelu_forward(y, x, stream);
  }
}

void gelu_backward(TensorView dx, ConstTensorView dy, ConstTensorView x, Stream& stream) {
  constexpr const char* kOp = "gelu_backward";
  check_x(kOp, x, stream);
  check_like(kOp, "dx", dx, x, stream);
  check_like(kOp, "dy", dy, x, stream);
  if (x.numel() == 0) return;
  if (!stream.is_cuda()) {
    cpu::gelu_backward(dx, dy, x, stream);
  } else {
    cuda::gelu_backward(dx, dy, x, stream);
  }
}

}  // namespace anvil::ops
