// Dispatcher for the fused softmax + cross-entropy (math in ops/cross_entropy.h):
//   loss[r] = w[r] (logsumexp(logits[r, :vocab]) - logits[r, target[r]])              (=)
//   dlogits[r, c] = grad_scale * w[r] * (softmax[c] - [c == target[r]]), 0 on padding (=)
// Checks shapes, dtypes and devices, then runs the CPU or CUDA twin.
#include "ops/cross_entropy.h"

#include <initializer_list>
#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

bool is_shape(const ConstTensorView& v, std::initializer_list<int64_t> shape) {
  if (v.ndim != static_cast<int>(shape.size())) return false;
  int i = 0;
  for (int64_t s : shape) {
    if (v.shape[i++] != s) return false;
  }
  return v.is_contiguous();
}

std::string expected(const char* arg, const std::string& want, const ConstTensorView& got) {
  return std::string("softmax_cross_entropy: ") + arg + " must be " + want + ", got " +
         describe(got);
}

}  // namespace

void softmax_cross_entropy(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                           ConstTensorView logits, ConstTensorView targets, Stream& stream) {
  const int64_t rows = args.rows;
  const int64_t pv = args.padded_vocab;
  ANVIL_CHECK_MSG(
      rows >= 0 && args.vocab >= 1 && pv >= args.vocab,
      "softmax_cross_entropy: need rows >= 0 and 1 <= vocab <= padded_vocab, got rows=" +
          std::to_string(rows) + " vocab=" + std::to_string(args.vocab) +
          " padded_vocab=" + std::to_string(pv));
  const std::string dims = "[" + std::to_string(rows) + ", " + std::to_string(pv) + "]";
  const std::string dims1 = "[" + std::to_string(rows) + "]";
  const engine::Device dev = stream.device();
  const bool float_act = detail::is_act_dtype(logits.dtype, stream);
  ANVIL_CHECK_MSG(
      !logits.empty() && float_act && logits.device == dev && is_shape(logits, {rows, pv}),
      expected("logits", "contiguous bf16/f16/f32 " + dims + " on the stream's device", logits));
  ANVIL_CHECK_MSG(
      !targets.empty() && targets.dtype == DType::kI32 && targets.device == dev &&
          is_shape(targets, {rows}),
      expected("targets", "contiguous i32 " + dims1 + " on the stream's device", targets));
  const bool loss_f64_ok = logits.dtype == DType::kF64;  // CPU finite-difference checks
  ANVIL_CHECK_MSG(
      !losses.empty() &&
          (losses.dtype == DType::kF32 || (loss_f64_ok && losses.dtype == DType::kF64)) &&
          losses.device == dev && is_shape(losses, {rows}),
      expected("losses", "contiguous f32 " + dims1 + " on the stream's device", losses));
  ANVIL_CHECK_MSG(dlogits.empty() || (dlogits.dtype == logits.dtype && dlogits.device == dev &&
                                      is_shape(dlogits, {rows, pv})),
                  expected("dlogits",
                           "empty or contiguous " + std::string(engine::dtype_name(logits.dtype)) +
                               " " + dims + " (logits' dtype) on the stream's device",
                           dlogits));
  const ConstTensorView& w = args.row_weights;
  ANVIL_CHECK_MSG(
      w.empty() || (w.dtype == DType::kF32 && w.device == dev && is_shape(w, {rows})),
      expected("row_weights", "empty or contiguous f32 " + dims1 + " on the stream's device", w));
  if (rows == 0) return;
  if (!stream.is_cuda()) {
    // Only the CPU can afford to look at targets here; the GPU kernel turns an out-of-range
    // target into a NaN loss and gradient instead (see the header).
    const int32_t* t = targets.as<int32_t>();
    for (int64_t r = 0; r < rows; ++r) {
      ANVIL_CHECK_MSG(t[r] < args.vocab, "softmax_cross_entropy: targets[" + std::to_string(r) +
                                             "] = " + std::to_string(t[r]) +
                                             " is not below vocab = " + std::to_string(args.vocab));
    }
    cpu::softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
  } else {
    cuda::softmax_cross_entropy(args, losses, dlogits, logits, targets, stream);
  }
}

}  // namespace anvil::ops
