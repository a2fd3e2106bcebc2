// Dispatcher of ops/flash_attention.h: checks the arguments (shapes, strides, dtypes, devices,
// masks, the head range, the workspace), then runs the CPU or the CUDA twin.
//   forward : out (=), lse (=);  backward: dq, dk, dv (=), d_rel_table (+=).
#include "ops/flash_attention.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"
#include "ops/flash_attention_detail.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

std::string str(int64_t x) { return std::to_string(x); }

int64_t model_heads(const FlashAttentionArgs& a) {
  return a.total_heads == 0 ? a.heads : a.total_heads;
}

// A 2-D row-strided act view [rows, heads*Dh] (unit column stride, row stride >= heads*Dh);
// heads: the call's query heads (q, out) or kv heads (k, v).
void check_rows(const char* op, const char* arg, const ConstTensorView& v, DType act, int64_t rows,
                const FlashAttentionArgs& a, const Stream& stream, int64_t heads = 0) {
  const int64_t cols = (heads == 0 ? a.heads : heads) * a.head_dim;
  bool ok = !v.empty() && v.dtype == act && v.device == stream.device() && v.ndim == 2 &&
            v.dim(0) == rows && v.dim(1) == cols && v.strides[1] == 1 && v.strides[0] >= cols;
  std::string want = "a 2-D " + std::string(engine::dtype_name(act)) + " [" + str(rows) + ", " +
                     str(cols) + "] with unit column stride and row stride >= " + str(cols);
  if (ok && stream.is_cuda()) {  // 16-byte vector loads of each head's row
    ok = v.strides[0] % 8 == 0 && reinterpret_cast<uintptr_t>(v.data) % 16 == 0;
    want += ", 16-byte aligned rows (row stride a multiple of 8)";
  }
  ANVIL_CHECK_MSG(ok, std::string(op) + ": " + arg + " must be " + want + ", got " + describe(v) +
                          " (row stride " + str(v.ndim == 2 ? v.strides[0] : 0) + ")");
}

void check_masks(const char* op, const FlashAttentionArgs& a, const AttentionMasks& m,
                 const Stream& stream) {
  ANVIL_CHECK_MSG(m.seg_q.empty() == m.seg_k.empty(),
                  std::string(op) +
                      ": seg_q and seg_k come together (use the same view twice "
                      "for self-attention)");
  if (!m.seg_q.empty()) {
    detail::check_arg(op, "seg_q", m.seg_q, DType::kI32, {a.batch * a.q_len}, stream);
    detail::check_arg(op, "seg_k", m.seg_k, DType::kI32, {a.batch * a.kv_len}, stream);
  }
  if (!m.kv_lengths.empty()) {
    detail::check_arg(op, "kv_lengths", m.kv_lengths, DType::kI32, {a.batch}, stream);
  }
  if (!m.prefix_end.empty()) {
    ANVIL_CHECK_MSG(a.causal, std::string(op) +
                                  ": prefix_end widens the causal mask, so it needs causal = "
                                  "true (without causal every key is already visible)");
    detail::check_arg(op, "prefix_end", m.prefix_end, DType::kI32, {a.batch * a.q_len}, stream);
  }
  if (!m.dropout_keep.empty()) {
    detail::check_arg(op, "dropout_keep", m.dropout_keep, DType::kI32,
                      {flash_attention_keep_words(a)}, stream);
  }
  if (a.bias == AttentionBias::kRelativeBuckets) {
    detail::check_arg(op, "rel_buckets", m.rel_buckets, DType::kI32, {a.q_len + a.kv_len - 1},
                      stream);
    ANVIL_CHECK_MSG(m.rel_table.ndim == 2 && m.rel_table.dim(1) == model_heads(a),
                    std::string(op) + ": rel_table must be f32 [num_buckets, total_heads = " +
                        str(model_heads(a)) + "], got " + describe(m.rel_table));
    detail::check_arg(op, "rel_table", m.rel_table, DType::kF32,
                      {m.rel_table.dim(0), model_heads(a)}, stream);
  }
}

// What forward and backward share; returns the act dtype (q's).
DType check_common(const char* op, const FlashAttentionArgs& a, ConstTensorView q,
                   ConstTensorView k, ConstTensorView v, ConstTensorView lse,
                   const AttentionMasks& m, const Stream& stream) {
  ANVIL_CHECK_MSG(a.batch >= 1 && a.q_len >= 1 && a.kv_len >= 1 && a.heads >= 1 && a.head_dim >= 1,
                  std::string(op) + ": need batch, q_len, kv_len, heads, head_dim >= 1, got B=" +
                      str(a.batch) + " Tq=" + str(a.q_len) + " Tk=" + str(a.kv_len) +
                      " H=" + str(a.heads) + " Dh=" + str(a.head_dim));
  ANVIL_CHECK_MSG(
      a.total_heads >= 0 && a.head_offset >= 0 && a.head_offset + a.heads <= model_heads(a),
      std::string(op) + ": need head_offset + heads <= total_heads (0: heads), got " +
          "head_offset=" + str(a.head_offset) + " heads=" + str(a.heads) +
          " total_heads=" + str(a.total_heads));
  ANVIL_CHECK_MSG(a.kv_heads >= 0 && a.heads % a.kv() == 0,
                  std::string(op) + ": kv_heads must divide heads (0: heads), got kv_heads=" +
                      str(a.kv_heads) + " heads=" + str(a.heads));
  ANVIL_CHECK_MSG(a.kv() == a.heads || a.bias != AttentionBias::kRelativeBuckets,
                  std::string(op) + ": relative buckets need kv_heads == heads, got kv_heads=" +
                      str(a.kv_heads) + " heads=" + str(a.heads));
  ANVIL_CHECK_MSG(
      a.dropout_p >= 0.0f && a.dropout_p < 1.0f,
      std::string(op) + ": dropout_p must be in [0, 1), got " + std::to_string(a.dropout_p));
  const DType act = q.dtype;
  if (stream.is_cuda()) {
    ANVIL_CHECK_MSG(flash_attention_cuda_supports(act, a.head_dim),
                    std::string(op) +
                        ": the CUDA kernels take bf16 or f16 with head_dim a multiple of 8 in "
                        "[32, 256], got " +
                        describe(q) + " head_dim " + str(a.head_dim));
  } else {
    ANVIL_CHECK_MSG(
        detail::is_act_dtype(act, stream),
        std::string(op) + ": the CPU twin takes f32, f64, bf16 or f16, got " + describe(q));
  }
  check_rows(op, "q", q, act, a.batch * a.q_len, a, stream);
  check_rows(op, "k", k, act, a.batch * a.kv_len, a, stream, a.kv());
  check_rows(op, "v", v, act, a.batch * a.kv_len, a, stream, a.kv());
  detail::check_arg(op, "lse", lse, DType::kF32, {a.batch, a.heads, a.q_len}, stream);
  check_masks(op, a, m, stream);
  return act;
}

int64_t buckets_of(const AttentionMasks& m) { return m.rel_table.empty() ? 0 : m.rel_table.dim(0); }

}  // namespace

float alibi_slope(int64_t k, int64_t n) { return detail::alibi_slope_of(k, n); }

bool flash_attention_cuda_supports(DType act, int64_t head_dim) {
  return (act == DType::kBF16 || act == DType::kF16) && head_dim % 8 == 0 && head_dim >= 32 &&
         head_dim <= 256;
}

int64_t flash_attention_keep_words(const FlashAttentionArgs& args) {
  return args.batch * args.heads * detail::keep_strips(args.q_len) *
         detail::keep_groups(args.kv_len) * 32;
}

size_t flash_attention_workspace_bytes(const FlashAttentionArgs& args, int64_t num_buckets) {
  return cuda::flash_attention_workspace_bytes(args, num_buckets);
}

void flash_attention_forward(const FlashAttentionArgs& args, TensorView out, TensorView lse,
                             ConstTensorView q, ConstTensorView k, ConstTensorView v,
                             const AttentionMasks& masks, Stream& stream) {
  const char* op = "flash_attention_forward";
  const DType act = check_common(op, args, q, k, v, lse, masks, stream);
  check_rows(op, "out", out, act, args.batch * args.q_len, args, stream);
  if (stream.is_cuda()) {
    cuda::flash_attention_forward(args, out, lse, q, k, v, masks, stream);
  } else {
    cpu::flash_attention_forward(args, out, lse, q, k, v, masks, stream);
  }
}

void flash_attention_backward(const FlashAttentionArgs& args, TensorView dq, TensorView dk,
                              TensorView dv, TensorView d_rel_table, ConstTensorView dout,
                              ConstTensorView q, ConstTensorView k, ConstTensorView v,
                              ConstTensorView out, ConstTensorView lse, const AttentionMasks& masks,
                              Workspace ws, Stream& stream) {
  const char* op = "flash_attention_backward";
  const DType act = check_common(op, args, q, k, v, lse, masks, stream);
  const int64_t rq = args.batch * args.q_len, rk = args.batch * args.kv_len;
  check_rows(op, "out", out, act, rq, args, stream);
  check_rows(op, "dout", dout, act, rq, args, stream);
  check_rows(op, "dq", dq, act, rq, args, stream);
  check_rows(op, "dk", dk, act, rk, args, stream, args.kv());
  check_rows(op, "dv", dv, act, rk, args, stream, args.kv());
  if (args.bias == AttentionBias::kRelativeBuckets) {
    detail::check_arg(op, "d_rel_table", d_rel_table, DType::kF32,
                      {buckets_of(masks), model_heads(args)}, stream);
  } else {
    ANVIL_CHECK_MSG(d_rel_table.empty(), std::string(op) +
                                             ": d_rel_table is only for kRelativeBuckets, got " +
                                             describe(d_rel_table));
  }
  if (stream.is_cuda()) {
    const size_t need = cuda::flash_attention_workspace_bytes(args, buckets_of(masks));
    ANVIL_CHECK_MSG(ws.bytes >= need && (need == 0 || ws.data != nullptr),
                    std::string(op) + ": workspace needs " + std::to_string(need) +
                        " bytes (flash_attention_workspace_bytes), got " +
                        std::to_string(ws.bytes));
    cuda::flash_attention_backward(args, dq, dk, dv, d_rel_table, dout, q, k, v, out, lse, masks,
                                   ws, stream);
  } else {
    cpu::flash_attention_backward(args, dq, dk, dv, d_rel_table, dout, q, k, v, out, lse, masks, ws,
                                  stream);
  }
}

}  // namespace anvil::ops
