// Dispatcher for the gated linear units (math in ops/glu.h):
//   forward : y = act(g) * u, h = [g | u] per row            (=)
//   backward: dh = [dy * u * act'(g) | dy * act(g)]           (=)
// Checks dtypes, shapes and devices, then runs the CPU or CUDA twin.
#include "ops/glu.h"

#include <string>
#include <utility>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using detail::check_act_dtype;
using detail::check_arg;

// h must be a 2-D [rows, 2f] tensor (f >= 1); returns {rows, f}.
std::pair<int64_t, int64_t> check_h(const char* op, const ConstTensorView& h,
                                    const Stream& stream) {
  check_act_dtype(op, h.dtype, stream);
  ANVIL_CHECK_MSG(
      h.ndim == 2 && h.shape[1] >= 2 && h.shape[1] % 2 == 0,
      std::string(op) + ": h must be [rows, 2f] = [gate | up], got " + engine::describe(h));
  check_arg(op, "h", h, h.dtype, {h.shape[0], h.shape[1]}, stream);
  return {h.shape[0], h.shape[1] / 2};
}

}  // namespace

void glu_forward(GluKind kind, TensorView y, ConstTensorView h, Stream& stream) {
  constexpr const char* kOp = "glu_forward";
  const auto [rows, f] = check_h(kOp, h, stream);
  check_arg(kOp, "y", y, h.dtype, {rows, f}, stream);
  if (rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::glu_forward(kind, y, h, stream);
  } else {
    cuda::glu_forward(kind, y, h, stream);
  }
}

void glu_backward(GluKind kind, TensorView dh, ConstTensorView dy, ConstTensorView h,
                  Stream& stream) {
  constexpr const char* kOp = "glu_backward";
  const auto [rows, f] = check_h(kOp, h, stream);
  check_arg(kOp, "dh", dh, h.dtype, {rows, 2 * f}, stream);
  check_arg(kOp, "dy", dy, h.dtype, {rows, f}, stream);
  ANVIL_CHECK_MSG(dh.data != h.data, std::string(kOp) + ": dh must not alias h");
  if (rows == 0) return;
  if (!stream.is_cuda()) {
    cpu::glu_backward(kind, dh, dy, h, stream);
  } else {
    cuda::glu_backward(kind, dh, dy, h, stream);
  }
}

}  // namespace anvil::ops
