// Dispatcher for the row argmax (math in ops/argmax.h):
//   out[r] = first index of the largest of x[r, 0 .. cols)   (=)   out: [rows] i32, x: [rows, ld]
// Checks the sizes, dtypes, shapes and devices, then runs the CPU or CUDA twin.
#include "ops/argmax.h"

#include <string>

#include "absl/strings/str_format.h"
#include "engine/checked_math.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {

void row_argmax(const ArgmaxArgs& a, TensorView out, ConstTensorView x, Stream& stream) {
  constexpr const char* kOp = "row_argmax";
  ANVIL_CHECK_MSG(
      a.rows >= 0 && a.rows <= engine::kMaxDimension && a.cols >= 1 && a.cols <= a.ld,
      absl::StrFormat("%s: need 0 <= rows < 2^31 and 1 <= cols <= ld, got rows %d, cols %d, "
                      "ld %d",
                      kOp, a.rows, a.cols, a.ld));
  const engine::DType t = x.dtype;
  const bool ok = t == engine::DType::kF32 || t == engine::DType::kBF16 ||
                  (!stream.is_cuda() && t == engine::DType::kF64);
  ANVIL_CHECK_MSG(ok, std::string(kOp) + ": x must be f32 or bf16 (f64 on the CPU), got " +
                          engine::describe(x));
  detail::check_arg(kOp, "x", x, t, {a.rows, a.ld}, stream);
  detail::check_arg(kOp, "out", out, engine::DType::kI32, {a.rows}, stream);
  if (a.rows == 0) return;
  if (stream.is_cuda()) {
    cuda::row_argmax(a, out, x, stream);
  } else {
    cpu::row_argmax(a, out, x, stream);
  }
}

}  // namespace anvil::ops
