// Dispatcher for token + learned position embedding, vocab-parallel capable (math in
// ops/embedding.h):
//   forward : out[t, :] = [tokens[t] in shard] wte[tokens[t] - vocab_start, :]
//                         + (wpe given ? wpe[positions[t], :] : 0)                        (=)
//   backward: dwte[tokens[t] - vocab_start, :] += dout[t, :] for tokens in the shard;
//             dwpe[positions[t], :] += dout[t, :] when dwpe is given                     (+=)
// Checks shapes, dtypes and devices, then runs the CPU or CUDA twin. On the CPU negative token
// ids and positions outside [0, max_pos) are fatal here; on the GPU a negative token id gives a
// zero row and a bad position is undefined (see the header).
#include "ops/embedding.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

using detail::check_act_dtype;
using detail::check_arg;

void check_args(const char* op, const EmbeddingArgs& a) {
  ANVIL_CHECK_MSG(
      a.tokens >= 0 && a.dim > 0 && a.vocab > 0 && a.max_pos >= 0 && a.vocab_start >= 0,
      std::string(op) + ": need tokens, max_pos, vocab_start >= 0 and dim, vocab > 0, got tokens=" +
          std::to_string(a.tokens) + " dim=" + std::to_string(a.dim) +
          " vocab=" + std::to_string(a.vocab) + " max_pos=" + std::to_string(a.max_pos) +
          " vocab_start=" + std::to_string(a.vocab_start));
}

// The position table (wpe or dwpe) and positions: both checked when the table is given.
void check_position_args(const char* op, const char* table_name, const ConstTensorView& table,
                         DType dtype, const ConstTensorView& positions, const EmbeddingArgs& a,
                         const Stream& stream) {
  if (table.empty()) return;
  ANVIL_CHECK_MSG(a.max_pos > 0, std::string(op) + ": " + table_name +
                                     " is given but max_pos = " + std::to_string(a.max_pos));
  check_arg(op, table_name, table, dtype, {a.max_pos, a.dim}, stream);
  check_arg(op, "positions", positions, DType::kI32, {a.tokens}, stream);
}

// CPU only: every id in [0, limit) (limit < 0: no upper bound).
void check_ids(const char* op, const char* arg, const ConstTensorView& ids, int64_t limit) {
  const int32_t* p = ids.as<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ANVIL_CHECK_MSG(p[i] >= 0 && (limit < 0 || p[i] < limit),
                    std::string(op) + ": " + arg + "[" + std::to_string(i) +
                        "] = " + std::to_string(p[i]) + " is outside [0, " +
                        (limit < 0 ? std::string("inf") : std::to_string(limit)) + ")");
  }
}

// CPU only: token ids >= 0 (ids of other vocabulary shards are legal), positions < max_pos.
void check_ids_cpu(const char* op, const ConstTensorView& tokens, const ConstTensorView& positions,
                   bool with_positions, const EmbeddingArgs& a) {
  check_ids(op, "tokens", tokens, /*limit=*/-1);
  if (with_positions) check_ids(op, "positions", positions, a.max_pos);
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
  check_arg(kOp, "wte", wte, act, {args.vocab, args.dim}, stream);
  check_position_args(kOp, "wpe", wpe, act, positions, args, stream);
  if (args.tokens == 0) return;
  if (!stream.is_cuda()) {
    check_ids_cpu(kOp, tokens, positions, !wpe.empty(), args);
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
  check_position_args(kOp, "dwpe", dwpe, grad, positions, args, stream);
  check_arg(kOp, "dout", dout, act, {args.tokens, args.dim}, stream);
  check_arg(kOp, "tokens", tokens, DType::kI32, {args.tokens}, stream);
  if (args.tokens == 0) return;
  if (!stream.is_cuda()) {
    check_ids_cpu(kOp, tokens, positions, !dwpe.empty(), args);
    cpu::embedding_backward(args, dwte, dwpe, dout, tokens, positions, stream);
  } else {
    cuda::embedding_backward(args, dwte, dwpe, dout, tokens, positions, stream);
  }
}

}  // namespace anvil::ops
