// Dispatcher for causal multi-head self-attention (math in ops/attention.h):
//   S = q k^T * scale (masked unless j <= i and, with segments, same document),
//   P = softmax(S) (= probs), out = dropout(P) v   (= out)
//   backward: dqkv (=) through the same path, the dropout mask regenerated from Philox.
// Checks shapes, dtypes, devices, the segments, the head range and the workspace, then runs the
// CPU or CUDA twin.
#include "ops/attention.h"

#include <string>

#include "engine/status.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

// A contiguous view holding rows x cols elements with cols as its last dimension (any leading
// split: [B*T, C], [B, T, C] ...).
bool holds(const ConstTensorView& v, int64_t rows, int64_t cols) {
  return v.is_contiguous() && v.ndim >= 1 && v.dim(-1) == cols && v.numel() == rows * cols;
}

std::string dims(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

std::string expected(const char* op, const char* arg, const std::string& want,
                     const ConstTensorView& got) {
  return std::string(op) + ": " + arg + " must be " + want + ", got " + describe(got);
}

// total_heads >= heads (0 meaning heads) and 0 <= head_offset <= total_heads - heads.
void check_head_range(const char* op, const AttentionArgs& args) {
  const int64_t total = args.total_heads == 0 ? args.heads : args.total_heads;
  ANVIL_CHECK_MSG(
      args.total_heads >= 0 && args.head_offset >= 0 && args.head_offset + args.heads <= total,
      std::string(op) + ": need 0 <= head_offset and head_offset + heads <= " +
          "total_heads (0: heads), got head_offset=" + std::to_string(args.head_offset) +
          " heads=" + std::to_string(args.heads) +
          " total_heads=" + std::to_string(args.total_heads));
}

// segments: empty (plain causal) or a contiguous i32 [B*T] on the stream's device.
void check_segments(const char* op, const AttentionArgs& args, ConstTensorView segments,
                    const Stream& stream) {
  if (segments.empty()) return;
  const int64_t bt = args.batch * args.seq;
  ANVIL_CHECK_MSG(
      segments.dtype == DType::kI32 && segments.device == stream.device() &&
          segments.is_contiguous() && segments.ndim == 1 && segments.dim(0) == bt,
      expected(op, "segments",
               "empty (plain causal) or a contiguous i32 [B*T] = [" + std::to_string(bt) + "] on " +
                   std::string(engine::device_name(stream.device())) +
                   " (document ids, see ops/attention.h)",
               segments));
}

// prefix_end: empty or a contiguous i32 [B*T] on the stream's device.
void check_prefix(const char* op, const AttentionArgs& args, const Stream& stream) {
  const ConstTensorView& p = args.prefix_end;
  if (p.empty()) return;
  const int64_t bt = args.batch * args.seq;
  ANVIL_CHECK_MSG(p.dtype == DType::kI32 && p.device == stream.device() && p.is_contiguous() &&
                      p.ndim == 1 && p.dim(0) == bt,
                  expected(op, "prefix_end",
                           "empty or a contiguous i32 [B*T] = [" + std::to_string(bt) + "] on " +
                               std::string(engine::device_name(stream.device())) +
                               " (per-query prefix ends, see ops/attention.h)",
                           p));
}

// Checks what forward and backward share; returns the act dtype (qkv's).
DType check_common(const char* op, const AttentionArgs& args, ConstTensorView qkv,
                   ConstTensorView probs, ConstTensorView segments, Workspace ws,
                   const Stream& stream) {
  ANVIL_CHECK_MSG(args.batch >= 1 && args.seq >= 1 && args.heads >= 1 && args.head_dim >= 1,
                  std::string(op) + ": need batch, seq, heads, head_dim >= 1, got B=" +
                      std::to_string(args.batch) + " T=" + std::to_string(args.seq) +
                      " H=" + std::to_string(args.heads) + " Dh=" + std::to_string(args.head_dim));
  check_head_range(op, args);
  ANVIL_CHECK_MSG(
      args.dropout_p >= 0.0f && args.dropout_p < 1.0f,
      std::string(op) + ": dropout_p must be in [0, 1), got " + std::to_string(args.dropout_p));
  const engine::Device dev = stream.device();
  const DType act = qkv.dtype;
  const bool act_ok = stream.is_cuda()
                          ? (act == DType::kBF16 || act == DType::kF16 || act == DType::kF32)
                          : (act == DType::kF32 || act == DType::kF64);
  const std::string act_name = stream.is_cuda() ? "bf16/f16/f32" : "f32/f64";
  const int64_t bt = args.batch * args.seq, hd = args.heads * args.head_dim;
  ANVIL_CHECK_MSG(
      !qkv.empty() && act_ok && qkv.device == dev && holds(qkv, bt, 3 * hd),
      expected(op, "qkv",
               "a contiguous " + act_name + " " + dims(bt, 3 * hd) + " on the stream's device",
               qkv));
  const std::string dt(engine::dtype_name(act));
  ANVIL_CHECK_MSG(!probs.empty() && probs.dtype == act && probs.device == dev &&
                      holds(probs, args.batch * args.heads * args.seq, args.seq),
                  expected(op, "probs",
                           "a contiguous " + dt + " [" + std::to_string(args.batch) + ", " +
                               std::to_string(args.heads) + ", " + std::to_string(args.seq) + ", " +
                               std::to_string(args.seq) + "]",
                           probs));
  check_segments(op, args, segments, stream);
  check_prefix(op, args, stream);
  if (stream.is_cuda()) {
    const size_t need = cuda::attention_workspace_bytes(args, engine::dtype_size(act));
    ANVIL_CHECK_MSG(ws.data != nullptr && ws.bytes >= need,
                    std::string(op) + ": workspace needs " + std::to_string(need) +
                        " bytes (attention_workspace_bytes), got " + std::to_string(ws.bytes));
  }
  return act;
}

}  // namespace

size_t attention_workspace_bytes(const AttentionArgs& args) {
  // Sized for the widest act dtype the CUDA path takes (f32); bf16 uses a prefix of it.
  return cuda::attention_workspace_bytes(args, 4);
}

void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, ConstTensorView segments, Workspace ws,
                       Stream& stream) {
  const char* op = "attention_forward";
  const DType act = check_common(op, args, qkv, probs, segments, ws, stream);
  const int64_t bt = args.batch * args.seq, hd = args.heads * args.head_dim;
  ANVIL_CHECK_MSG(
      !out.empty() && out.dtype == act && out.device == stream.device() && holds(out, bt, hd),
      expected(op, "out",
               "a contiguous " + std::string(engine::dtype_name(act)) + " " + dims(bt, hd), out));
  if (stream.is_cuda()) {
    cuda::attention_forward(args, out, probs, qkv, segments, ws, stream);
  } else {
    cpu::attention_forward(args, out, probs, qkv, segments, ws, stream);
  }
}

void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, ConstTensorView segments,
                        Workspace ws, Stream& stream) {
  const char* op = "attention_backward";
  const DType act = check_common(op, args, qkv, probs, segments, ws, stream);
  const int64_t bt = args.batch * args.seq, hd = args.heads * args.head_dim;
  const std::string dt(engine::dtype_name(act));
  ANVIL_CHECK_MSG(
      !dout.empty() && dout.dtype == act && dout.device == stream.device() && holds(dout, bt, hd),
      expected(op, "dout", "a contiguous " + dt + " " + dims(bt, hd), dout));
  ANVIL_CHECK_MSG(!dqkv.empty() && dqkv.dtype == act && dqkv.device == stream.device() &&
                      holds(dqkv, bt, 3 * hd),
                  expected(op, "dqkv", "a contiguous " + dt + " " + dims(bt, 3 * hd), dqkv));
  if (stream.is_cuda()) {
    cuda::attention_backward(args, dqkv, dout, qkv, probs, segments, ws, stream);
  } else {
    cpu::attention_backward(args, dqkv, dout, qkv, probs, segments, ws, stream);
  }
}

}  // namespace anvil::ops
