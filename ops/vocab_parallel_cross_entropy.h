// Vocab-parallel fused softmax + cross-entropy (Megatron vocab_parallel_cross_entropy): each TP
// rank holds the logits columns [shard_start, shard_start + shard_cols) of a vocabulary padded
// to tp * shard_cols; global columns >= vocab are padding and never enter the math. Three steps
// with an all-reduce over TP between them (the caller owns the communication):
//   1. vocab_shard_max:     m_local[r] = max_{local real c} x[r, c]                        (=)
//      all-reduce MAX  ->   m[r]
//   2. vocab_shard_sum_exp: s_local[r] = sum_{local real c} exp(x[r, c] - m[r])            (=)
//                           xt_local[r] = x[r, target[r]] if the target is local, else 0   (=)
//      all-reduce SUM  ->   s[r], xt[r]   (exactly one rank contributes xt[r])
//   3. vocab_shard_cross_entropy, with lse = m + log(s) and w = args.row_weights (or 1):
//      loss[r] = target[r] >= 0 ? w[r] (lse - xt[r]) : 0      (the same on every rank)     (=)
//      dlogits[r, c] = grad_scale * w[r] * (exp(x[r, c] - lse) - [global c == target[r]]) on
//                      real columns, 0 on padding columns and on rows with target[r] < 0  (=)
// target < 0 marks an ignored token, as in ops/cross_entropy.h. dlogits may alias logits (the
// probabilities are never materialized); an empty dlogits computes losses only.
// Targets must be below vocab (-1, or any negative value, means ignored): the dispatchers CHECK
// this on the CPU; the GPU cannot check without a host sync, so there a target >= vocab gives a
// NaN target_logit on every rank, hence a NaN loss and a NaN gradient row over the real columns
// (the gradient norm turns non-finite and the step is skipped).
// The GPU computes in f32 (__expf) with one block per row and 16-byte accesses where aligned;
// the CPU twin in double.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct VocabShardArgs {
  int64_t rows;
  int64_t vocab;  // real (global) vocabulary size
  // This rank's logits columns are the global columns [shard_start, shard_start + shard_cols).
  int64_t shard_start;
  int64_t shard_cols;  // row length of the local logits (padded_vocab / tp)
  float grad_scale = 1.0f;
  // Per-token loss weights of step 3 (ops/cross_entropy.h): [rows] f32 on the stream's device,
  // or empty (w = 1).
  ConstTensorView row_weights = {};
};

// Dtypes: logits/dlogits act (CPU f32, f64, bf16; CUDA f32, bf16); row_max, sum_exp,
// target_logit, losses ("stats") f32, or f64 when logits are f64 (CPU); all stats of one call
// share one dtype. targets: [rows] i32. Every tensor contiguous on the stream's device.

// row_max: [rows] stats (=) max of the local logits over real columns (global col < vocab);
// -inf if the shard has none. logits: [rows, shard_cols] act.
void vocab_shard_max(const VocabShardArgs& args, TensorView row_max, ConstTensorView logits,
                     Stream& s);

// Given the global row max (after an all-reduce max over TP):
// sum_exp: [rows] stats (=) sum over local real columns of exp(logit - row_max);
// target_logit: [rows] stats (=) logit of targets[r] if it lies in this shard, else 0
// (targets < 0: 0). logits: [rows, shard_cols] act; row_max: [rows] stats; targets: [rows] i32.
void vocab_shard_sum_exp(const VocabShardArgs& args, TensorView sum_exp, TensorView target_logit,
                         ConstTensorView logits, ConstTensorView row_max, ConstTensorView targets,
                         Stream& s);

// Given global sum_exp and target_logit (after all-reduce sums over TP):
// losses: [rows] stats (=) targets[r] >= 0 ? w[r] (log(sum_exp) + row_max - target_logit) : 0
// dlogits: [rows, shard_cols] act (=), may alias logits, or empty (losses only):
//   grad_scale * w[r] * (exp(logit - row_max) / sum_exp - [global col == target]) on real
//   columns, 0 on padding columns and on rows with target < 0.
void vocab_shard_cross_entropy(const VocabShardArgs& args, TensorView losses, TensorView dlogits,
                               ConstTensorView logits, ConstTensorView row_max,
                               ConstTensorView sum_exp, ConstTensorView target_logit,
                               ConstTensorView targets, Stream& s);

// Same-signature twins behind the dispatchers (tests call them directly). The CPU twin
// accumulates in double; the CUDA twin takes f32/bf16 logits and f32 stats.
namespace cpu {
void vocab_shard_max(const VocabShardArgs& args, TensorView row_max, ConstTensorView logits,
                     Stream& s);
void vocab_shard_sum_exp(const VocabShardArgs& args, TensorView sum_exp, TensorView target_logit,
                         ConstTensorView logits, ConstTensorView row_max, ConstTensorView targets,
                         Stream& s);
void vocab_shard_cross_entropy(const VocabShardArgs& args, TensorView losses, TensorView dlogits,
                               ConstTensorView logits, ConstTensorView row_max,
                               ConstTensorView sum_exp, ConstTensorView target_logit,
                               ConstTensorView targets, Stream& s);
}  // namespace cpu
namespace cuda {
void vocab_shard_max(const VocabShardArgs& args, TensorView row_max, ConstTensorView logits,
                     Stream& s);
void vocab_shard_sum_exp(const VocabShardArgs& args, TensorView sum_exp, TensorView target_logit,
                         ConstTensorView logits, ConstTensorView row_max, ConstTensorView targets,
                         Stream& s);
void vocab_shard_cross_entropy(const VocabShardArgs& args, TensorView losses, TensorView dlogits,
                               ConstTensorView logits, ConstTensorView row_max,
                               ConstTensorView sum_exp, ConstTensorView target_logit,
                               ConstTensorView targets, Stream& s);
}  // namespace cuda

}  // namespace anvil::ops
