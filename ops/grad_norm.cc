// Dispatcher for the squared L2 norm used by global gradient clipping (ops/grad_norm.h):
//   out[0] += sum_i x_i^2   (+=)
// Checks shapes, dtypes, devices and the workspace size, then runs the CPU or CUDA twin.
#include "ops/grad_norm.h"

#include <cstdint>
#include <string>

#include "engine/status.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

}  // namespace

size_t sum_squares_workspace_bytes(int64_t n) { return cuda::sum_squares_workspace_bytes(n); }

void sum_squares(TensorView out, ConstTensorView x, Workspace ws, Stream& stream) {
  const engine::Device dev = stream.device();
  // The CPU twin also takes f64 (reference checks); out and x then share the dtype.
  const bool dtype_ok = x.dtype == DType::kF32 || (!stream.is_cuda() && x.dtype == DType::kF64);
  ANVIL_CHECK_MSG(
      !x.empty() && dtype_ok && x.is_contiguous() && x.device == dev,
      "sum_squares: x must be a contiguous f32 view on the stream's device, got " + describe(x));
  ANVIL_CHECK_MSG(!out.empty() && out.dtype == x.dtype && out.numel() == 1 && out.device == dev,
                  "sum_squares: out must be a [1] " + std::string(engine::dtype_name(x.dtype)) +
                      " view on the stream's device, got " + describe(out));
  const int64_t n = x.numel();
  if (n == 0) return;  // out += 0
  if (!stream.is_cuda()) {
    cpu::sum_squares(out, x, ws, stream);
    return;
  }
  const size_t need = sum_squares_workspace_bytes(n);
  ANVIL_CHECK_MSG(ws.data != nullptr && ws.bytes >= need &&
                      reinterpret_cast<uintptr_t>(ws.data) % alignof(float) == 0,
                  "sum_squares: workspace needs " + std::to_string(need) +
                      " bytes (4-byte aligned) for n = " + std::to_string(n) + ", got " +
                      std::to_string(ws.bytes));
  cuda::sum_squares(out, x, ws, stream);
}

}  // namespace anvil::ops
