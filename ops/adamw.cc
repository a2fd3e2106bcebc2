// Dispatcher for the AdamW update with f32 master weights (math in ops/adamw.h):
//   m, v, master updated in place; param = cast(master) (=) unless param is empty.
// Checks shapes, dtypes and devices, then runs the CPU or CUDA twin.
#include "ops/adamw.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

bool is_flat(const ConstTensorView& v, int64_t n) {
  return !v.empty() && v.numel() == n && v.is_contiguous();
}

std::string expected(const char* arg, const std::string& want, const ConstTensorView& got) {
  return std::string("adamw_update: ") + arg + " must be " + want + ", got " + describe(got);
}

}  // namespace

void adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                  TensorView param, ConstTensorView grad, Stream& stream) {
  ANVIL_CHECK_MSG(args.step >= 1,
                  "adamw_update: step is 1-based, got " + std::to_string(args.step));
  ANVIL_CHECK_MSG(!master.empty(), expected("master", "a non-empty f32 view", master));
  const int64_t n = master.numel();
  const engine::Device dev = stream.device();
  // The CPU twin also takes f64 state (finite-difference and reference checks).
  const DType state = master.dtype;
  ANVIL_CHECK_MSG(state == DType::kF32 || (!stream.is_cuda() && state == DType::kF64),
                  expected("master", "f32", master));
  const std::string want = "contiguous " + std::string(engine::dtype_name(state)) + " [" +
                           std::to_string(n) + "] on the stream's device";
  ANVIL_CHECK_MSG(is_flat(master, n) && master.device == dev, expected("master", want, master));
  ANVIL_CHECK_MSG(is_flat(m, n) && m.dtype == state && m.device == dev, expected("m", want, m));
  ANVIL_CHECK_MSG(is_flat(v, n) && v.dtype == state && v.device == dev, expected("v", want, v));
  ANVIL_CHECK_MSG(is_flat(grad, n) && grad.dtype == state && grad.device == dev,
                  expected("grad", want, grad));
  if (!param.empty()) {
    const bool param_dtype_ok = detail::is_act_dtype(param.dtype, stream);
    ANVIL_CHECK_MSG(is_flat(param, n) && param_dtype_ok && param.device == dev,
                    expected("param",
                             "empty or contiguous bf16/f16/f32 [" + std::to_string(n) +
                                 "] on the stream's device",
                             param));
  }
  const ConstTensorView& ds = args.device_scale;
  ANVIL_CHECK_MSG(
      ds.empty() ||
          (ds.dtype == DType::kF32 && ds.numel() == 3 && ds.is_contiguous() && ds.device == dev),
      expected("device_scale", "empty or contiguous [3] f32 on the stream's device", ds));
  if (n == 0) return;
  if (!stream.is_cuda()) {
    cpu::adamw_update(args, master, m, v, param, grad, stream);
  } else {
    cuda::adamw_update(args, master, m, v, param, grad, stream);
  }
}

}  // namespace anvil::ops
