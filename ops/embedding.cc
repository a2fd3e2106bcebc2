// Dispatcher for token + learned position embedding (math in ops/embedding.h):
//   forward : out[t, :] = wte[tokens[t], :] + wpe[positions[t], :]                    (=)
//   backward: dwte[tokens[t], :] += dout[t, :]; dwpe[positions[t], :] += dout[t, :]  (+=)
// Checks shapes, dtypes and devices, then runs the CPU or CUDA twin. On the CPU ids are
// range-checked here (fatal); on the GPU an id out of range is undefined (see the header).
#include "ops/embedding.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

using detail::check_arg;

void check_args(const char* op, const EmbeddingArgs& a) {
  ANVIL_CHECK_MSG(a.tokens >= 0 && a.dim > 0 && a.vocab > 0 && a.max_pos > 0,
                  std::string(op) + ": need tokens >= 0 and dim, vocab, max_pos > 0, got tokens=" +
                      std::to_string(a.tokens) + " dim=" + std::to_string(a.dim) + " vocab=" +
                      std::to_string(a.vocab) + " max_pos=" + std::to_string(a.max_pos));
}

void check_act_dtype(const char* op, DType t, const Stream& stream) {
  const bool ok = t == DType::kBF16 || t == DType::kF32 || (!stream.is_cuda() && t == DType::kF64);
  ANVIL_CHECK_MSG(ok, std::string(op) + ": activations must be bf16 or f32 (f64 on the CPU), got " +
                          std::string(engine::dtype_name(t)));
}

// CPU only: every id in [0, limit).
void check_ids(const char* op, const char* arg, const ConstTensorView& ids, int64_t limit) {
  const int32_t* p = ids.as<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ANVIL_CHECK_MSG(p[i] >= 0 && p[i] < limit,
                    std::string(op) + ": " + arg + "[" + std::to_string(i) + "] = " +
                        std::to_string(p[i]) + " is outside [0, " + std::to_string(limit) + ")");
  }
}

}  // namespace

void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream) {
  constexpr const char* kOp = "embedding_forward";
  check_args(kOp, args);
  const DType act = wte.dtype;
  check_act_dtype(kOp, act, stream);
  check_arg(kOp, "out", out, act, {args.tokens, args.dim}, stream);
  check_arg(kOp, "tokens", tokens, DType::kI32, {args.tokens}, stream);
  check_arg(kOp, "positions", positions, DType::kI32, {args.tokens}, stream);
  check_arg(kOp, "wte", wte, act, {args.vocab, args.dim}, stream);
  check_arg(kOp, "wpe", wpe, act, {args.max_pos, args.dim}, stream);
  if (args.tokens == 0) return;
  if (!stream.is_cuda()) {
    check_ids(kOp, "tokens", tokens, args.vocab);
    check_ids(kOp, "positions", positions, args.max_pos);
    cpu::embedding_forward(args, out, tokens, positions, wte, wpe, stream);
  } else {
    cuda::embedding_forward(args, out, tokens, positions, wte, wpe, stream);
  }
}

void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& stream) {
  constexpr const char* kOp = "embedding_backward";
  check_args(kOp, args);
  const DType act = dout.dtype;
  check_act_dtype(kOp, act, stream);
  // Parameter gradients are f32; f64 is allowed with f64 activations (CPU finite differences).
  const DType grad = act == DType::kF64 ? dwte.dtype : DType::kF32;
  ANVIL_CHECK_MSG(
      grad == DType::kF32 || grad == DType::kF64,
      std::string(kOp) + ": dwte must be f32 (or f64 with f64 dout), got " + describe(dwte));
  check_arg(kOp, "dwte", dwte, grad, {args.vocab, args.dim}, stream);
  check_arg(kOp, "dwpe", dwpe, grad, {args.max_pos, args.dim}, stream);
  check_arg(kOp, "dout", dout, act, {args.tokens, args.dim}, stream);
  check_arg(kOp, "tokens", tokens, DType::kI32, {args.tokens}, stream);
  check_arg(kOp, "positions", positions, DType::kI32, {args.tokens}, stream);
  if (args.tokens == 0) return;
  if (!stream.is_cuda()) {
    check_ids(kOp, "tokens", tokens, args.vocab);
    check_ids(kOp, "positions", positions, args.max_pos);
    cpu::embedding_backward(args, dwte, dwpe, dout, tokens, positions, stream);
  } else {
    cuda::embedding_backward(args, dwte, dwpe, dout, tokens, positions, stream);
  }
}

}  // namespace anvil::ops
