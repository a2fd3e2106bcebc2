// The LM head block's forward, loss and backward (see lm_head.h).
#include "model/blocks/lm_head.h"

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "model/blocks/linear.h"
#include "ops/cross_entropy.h"
#include "ops/gemm.h"
#include "ops/vocab_parallel_cross_entropy.h"

namespace anvil::model::blocks {

namespace {

using engine::TensorView;

// Elements [at, at + n) of a contiguous buffer, as [n].
TensorView span(TensorView flat, int64_t at, int64_t n) {
  ANVIL_CHECK_MSG(flat.is_contiguous() && at >= 0 && at + n <= flat.numel(),
                  absl::StrCat("LM head: ", n, " elements at ", at, " of a ", flat.numel(),
                               "-element scratch"));
  return engine::make_view(static_cast<char*>(flat.data) + at * engine::dtype_size(flat.dtype),
                           flat.dtype, flat.device, {n});
}

void check(const LmHeadConfig& c) {
  ANVIL_CHECK_MSG(c.tp >= 1 && c.padded_vocab % c.tp == 0 && c.vocab <= c.padded_vocab,
                  absl::StrCat("LM head: padded vocabulary ", c.padded_vocab, " over tp ", c.tp,
                               ", real vocabulary ", c.vocab));
}

}  // namespace

void lm_head_forward(const LmHeadConfig& c, TensorView logits, engine::ConstTensorView x,
                     engine::ConstTensorView w, engine::Stream& s) {
  check(c);
  ops::GemmArgs head{c.rows, c.local_cols(), c.d_model};
  head.trans_b = true;
  head.alpha = c.input_scale;
  ops::gemm(head, logits, x, w, {}, {}, s);
}

void lm_head_loss(const LmHeadConfig& c, TensorView losses, TensorView logits,
                  engine::ConstTensorView targets, engine::ConstTensorView weights, bool train,
                  TensorView ce, parallel::Comm* tp_comm, engine::Stream& s) {
  check(c);
  const int64_t rows = c.rows, cols = c.local_cols();
  const TensorView dlogits = train ? logits : TensorView{};
  if (c.tp == 1) {
    ops::softmax_cross_entropy({rows, c.vocab, c.padded_vocab, 1.0f, weights}, losses, dlogits,
                               logits, targets, s);
    return;
  }
  ANVIL_CHECK_MSG(tp_comm != nullptr, "LM head: tp > 1 needs the TP communicator");
  const TensorView row_max = span(ce, 0, rows);
  const TensorView sums = span(ce, rows, 2 * rows);  // sum of exp | target logit
  const TensorView sum_exp = span(ce, rows, rows);
  const TensorView target_logit = span(ce, 2 * rows, rows);
  const ops::VocabShardArgs va{rows, c.vocab, c.tp_rank * cols, cols, 1.0f, weights};
  ops::vocab_shard_max(va, row_max, logits, s);
  tp_comm->all_reduce(row_max, parallel::ReduceOp::kMax, s);
  ops::vocab_shard_sum_exp(va, sum_exp, target_logit, logits, row_max, targets, s);
  tp_comm->all_reduce(sums, parallel::ReduceOp::kSum, s);
  ops::vocab_shard_cross_entropy(va, losses, dlogits, logits, row_max, sum_exp, target_logit,
                                 targets, s);
}

void lm_head_backward(const LmHeadConfig& c, TensorView dx, TensorView dw,
                      engine::ConstTensorView dlogits, engine::ConstTensorView x,
                      engine::ConstTensorView w, float grad_scale, engine::Stream& s) {
  check(c);
  const float alpha = grad_scale * c.input_scale;
  weight_grad(dw, dlogits, x, s, alpha);
  input_grad(dx, dlogits, w, s, alpha);
}

LmHeadActs lm_head_saved_acts(const LmHeadConfig& c, engine::DType dtype, engine::DType stat_dtype,
                              const std::string& prefix, const TakeView& take) {
  return {take(prefix + "logits", dtype, {c.rows, c.local_cols()}),
          take(prefix + "losses", stat_dtype, {c.rows})};
}

}  // namespace anvil::model::blocks
