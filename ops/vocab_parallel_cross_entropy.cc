// Dispatchers for the vocab-parallel softmax + cross-entropy (math in
// ops/vocab_parallel_cross_entropy.h), over local logits x = global columns
// [shard_start, shard_start + shard_cols), real where the global column is < vocab:
//   vocab_shard_max:           row_max[r] = max_{real c} x[r, c]                          (=)
//   vocab_shard_sum_exp:       sum_exp[r] = sum_{real c} exp(x[r, c] - row_max[r]),
//                              target_logit[r] = local target ? x[r, target] : 0          (=)
//   vocab_shard_cross_entropy: loss[r], dlogits[r, :] from the all-reduced stats          (=)
// Checks arguments (shapes, dtypes, devices; on the CPU also target < vocab), then runs the CPU
// or CUDA twin.
#include "ops/vocab_parallel_cross_entropy.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::DType;

using detail::check_arg;

void check_args(const char* op, const VocabShardArgs& a) {
  ANVIL_CHECK_MSG(
      a.rows >= 0 && a.vocab >= 1 && a.shard_start >= 0 && a.shard_cols >= 1,
      std::string(op) + ": need rows, shard_start >= 0 and vocab, shard_cols >= 1, got rows=" +
          std::to_string(a.rows) + " vocab=" + std::to_string(a.vocab) + " shard_start=" +
          std::to_string(a.shard_start) + " shard_cols=" + std::to_string(a.shard_cols));
}

// logits: [rows, shard_cols] bf16/f32 (f64 on the CPU). Returns the stats dtype the caller's
// first stats tensor `stat` has, after checking it is allowed with these logits.
DType check_logits_and_stats_dtype(const char* op, const VocabShardArgs& a,
                                   const ConstTensorView& logits, const ConstTensorView& stat,
                                   const Stream& stream) {
  const DType act = logits.dtype;
  ANVIL_CHECK_MSG(detail::is_act_dtype(act, stream),
                  std::string(op) + ": logits must be bf16, f16 or f32 (f64 on the CPU), got " +
                      std::string(engine::dtype_name(act)));
  check_arg(op, "logits", logits, act, {a.rows, a.shard_cols}, stream);
  const bool stat_ok =
      stat.dtype == DType::kF32 || (act == DType::kF64 && stat.dtype == DType::kF64);
  ANVIL_CHECK_MSG(stat_ok, std::string(op) +
                               ": row statistics and losses must be f32 (or f64 with f64 logits), "
                               "got " +
                               std::string(engine::dtype_name(stat.dtype)) + " with " +
                               std::string(engine::dtype_name(act)) + " logits");
  return stat.dtype;
}

void check_targets(const char* op, const VocabShardArgs& a, const ConstTensorView& targets,
                   const Stream& stream) {
  check_arg(op, "targets", targets, DType::kI32, {a.rows}, stream);
  if (stream.is_cuda()) return;  // the GPU turns a target >= vocab into NaN (see the header)
  const int32_t* t = targets.as<int32_t>();
  for (int64_t r = 0; r < a.rows; ++r) {
    ANVIL_CHECK_MSG(t[r] < a.vocab, std::string(op) + ": targets[" + std::to_string(r) +
                                        "] = " + std::to_string(t[r]) +
                                        " is not below vocab = " + std::to_string(a.vocab));
  }
}

}  // namespace

void vocab_shard_max(const VocabShardArgs& args, TensorView row_max, ConstTensorView logits,
                     Stream& s) {
  constexpr const char* kOp = "vocab_shard_max";
  check_args(kOp, args);
  const DType stat = check_logits_and_stats_dtype(kOp, args, logits, row_max, s);
  check_arg(kOp, "row_max", row_max, stat, {args.rows}, s);
  if (args.rows == 0) return;
  if (s.is_cuda()) {
    cuda::vocab_shard_max(args, row_max, logits, s);
  } else {
    cpu::vocab_shard_max(args, row_max, logits, s);
  }
}

void vocab_shard_sum_exp(const VocabShardArgs& args, TensorView sum_exp, TensorView target_logit,
                         ConstTensorView logits, ConstTensorView row_max, ConstTensorView targets,
                         Stream& s) {
  constexpr const char* kOp = "vocab_shard_sum_exp";
  check_args(kOp, args);
  const DType stat = check_logits_and_stats_dtype(kOp, args, logits, sum_exp, s);
  check_arg(kOp, "sum_exp", sum_exp, stat, {args.rows}, s);
  check_arg(kOp, "target_logit", target_logit, stat, {args.rows}, s);
  check_arg(kOp, "row_max", row_max, stat, {args.rows}, s);
  check_targets(kOp, args, targets, s);
  if (args.rows == 0) return;
  if (s.is_cuda()) {
    cuda::vocab_shard_sum_exp(args, sum_exp, target_logit, logits, row_max, targets, s);
  } else {
    cpu::vocab_shard_sum_exp(args, sum_exp, target_logit, logits, row_max, targets, s);
  }
}

void vocab_shard_cross_entropy(const VocabShardArgs& args, TensorView losses, TensorView dlogits,
                               ConstTensorView logits, ConstTensorView row_max,
                               ConstTensorView sum_exp, ConstTensorView target_logit,
                               ConstTensorView targets, Stream& s) {
  constexpr const char* kOp = "vocab_shard_cross_entropy";
  check_args(kOp, args);
  const DType stat = check_logits_and_stats_dtype(kOp, args, logits, losses, s);
  check_arg(kOp, "losses", losses, stat, {args.rows}, s);
  if (!dlogits.empty()) {
    check_arg(kOp, "dlogits", dlogits, logits.dtype, {args.rows, args.shard_cols}, s);
  }
  check_arg(kOp, "row_max", row_max, stat, {args.rows}, s);
  check_arg(kOp, "sum_exp", sum_exp, stat, {args.rows}, s);
  check_arg(kOp, "target_logit", target_logit, stat, {args.rows}, s);
  check_targets(kOp, args, targets, s);
  if (!args.row_weights.empty()) {
    check_arg(kOp, "row_weights", args.row_weights, DType::kF32, {args.rows}, s);
  }
  if (args.rows == 0) return;
  if (s.is_cuda()) {
    cuda::vocab_shard_cross_entropy(args, losses, dlogits, logits, row_max, sum_exp, target_logit,
                                    targets, s);
  } else {
    cpu::vocab_shard_cross_entropy(args, losses, dlogits, logits, row_max, sum_exp, target_logit,
                                   targets, s);
  }
}

}  // namespace anvil::ops
