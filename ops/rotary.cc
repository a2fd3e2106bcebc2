// Dispatcher for rotary position embedding (math in ops/rotary.h), in place on a row-strided
// [rows, heads * head_dim] view: forward rotates by +theta, backward by -theta (=).
// Checks the arguments, then runs the CPU or CUDA twin.
#include "ops/rotary.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"
#include "ops/rotary_detail.h"

namespace anvil::ops {
namespace {

using engine::DType;

std::string str(int64_t v) { return std::to_string(v); }

void check(const char* op, const RotaryArgs& a, const ConstTensorView& x,
           const ConstTensorView& positions, const Stream& stream) {
  ANVIL_CHECK_MSG(a.rows >= 0 && a.heads > 0 && a.head_dim > 0 && a.rot_dim >= 0 &&
                      a.rot_dim <= a.head_dim && a.rot_dim % 2 == 0 && a.base > 0.0f,
                  std::string(op) +
                      ": need rows >= 0, heads > 0, 0 <= rot_dim <= head_dim with rot_dim even, "
                      "base > 0; got rows=" +
                      str(a.rows) + " heads=" + str(a.heads) + " head_dim=" + str(a.head_dim) +
                      " rot_dim=" + str(a.rot_dim) + " base=" + std::to_string(a.base));
  detail::check_act_dtype(op, x.dtype, stream);
  const int64_t cols = a.heads * a.head_dim;
  const bool ok = (!x.empty() || a.rows == 0) && x.device == stream.device() && x.ndim == 2 &&
                  x.dim(0) == a.rows && x.dim(1) == cols && x.strides[1] == 1 &&
                  x.strides[0] >= cols;
  ANVIL_CHECK_MSG(ok, std::string(op) + ": x must be a 2-D [" + str(a.rows) + ", " + str(cols) +
                          "] view on " + std::string(engine::device_name(stream.device())) +
                          " with unit column stride and row stride >= " + str(cols) + ", got " +
                          engine::describe(x) + " (row stride " +
                          str(x.ndim == 2 ? x.strides[0] : 0) + ")");
  detail::check_arg(op, "positions", positions, DType::kI32, {a.rows}, stream);
  const RotaryScaling& sc = a.scaling;
  ANVIL_CHECK_MSG(sc.type == RotaryScalingType::kNone ||
                      (sc.factor > 0.0f &&
                       (sc.type == RotaryScalingType::kLinear ||
                        (sc.low_freq_factor > 0.0f && sc.high_freq_factor > sc.low_freq_factor &&
                         sc.original_max_position > 0))),
                  std::string(op) +
                      ": rope scaling needs factor > 0 (llama3: 0 < low_freq_factor < "
                      "high_freq_factor, original_max_position > 0); got factor " +
                      std::to_string(sc.factor) + ", low_freq_factor " +
                      std::to_string(sc.low_freq_factor) + ", high_freq_factor " +
                      std::to_string(sc.high_freq_factor) + ", original_max_position " +
                      str(sc.original_max_position));
}

}  // namespace

std::vector<float> rotary_inv_freqs(float base, int64_t rot_dim, const RotaryScaling& scaling) {
  std::vector<float> out(static_cast<size_t>(rot_dim / 2));
  for (int64_t i = 0; i < rot_dim / 2; ++i) {
    out[static_cast<size_t>(i)] = detail::rotary_inv_freq(base, i, rot_dim, scaling);
  }
  return out;
}

void rotary_forward(const RotaryArgs& args, TensorView x, ConstTensorView positions,
                    Stream& stream) {
  check("rotary_forward", args, x, positions, stream);
  if (args.rows == 0 || args.rot_dim == 0) return;
  if (!stream.is_cuda()) {
    cpu::rotary_forward(args, x, positions, stream);
  } else {
    cuda::rotary_forward(args, x, positions, stream);
  }
}

void rotary_backward(const RotaryArgs& args, TensorView dx, ConstTensorView positions,
                     Stream& stream) {
  check("rotary_backward", args, dx, positions, stream);
  if (args.rows == 0 || args.rot_dim == 0) return;
  if (!stream.is_cuda()) {
    cpu::rotary_backward(args, dx, positions, stream);
  } else {
    cuda::rotary_backward(args, dx, positions, stream);
  }
}

}  // namespace anvil::ops
