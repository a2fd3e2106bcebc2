// The language-model head GPT and T5 share (BERT's MLM decoder is its last GEMM): one TP rank's
// vocabulary slice of
//   logits = s x W^T              [rows, padded / tp]   (=; s: input_scale, T5 v1.0's d^-1/2)
//   loss_r = CE(logits_r, target_r)   over the whole real vocabulary, target < 0 ignored (=)
// W [padded / tp, d] is vocab-parallel (Megatron: the tied wte slice or an untied head). With
// tp > 1 the cross-entropy combines the row max, then the sum of exponentials and the target
// logit, over the TP group (ops/vocab_parallel_cross_entropy.h; scratch ce [3 rows] stat dtype).
// A training loss writes dlogits = softmax - onehot (grad_scale 1) over the logits in place, so
// the backward never re-reads the logits; it folds grad_scale and s into the alpha of its two
// GEMMs: dW += a dlogits^T x, dx = a dlogits W (=, partial over TP), a = grad_scale * s.
// Private to model/.
#pragma once

#include <cstdint>
#include <string>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "model/blocks/mlp.h"
#include "parallel/comm.h"

namespace anvil::model::blocks {

struct LmHeadConfig {
  int64_t rows = 0;
  int64_t d_model = 0;
  int64_t vocab = 0;         // real vocabulary
  int64_t padded_vocab = 0;  // the whole padded vocabulary (a multiple of tp)
  int64_t tp = 1, tp_rank = 0;
  float input_scale = 1.0f;

  int64_t local_cols() const { return padded_vocab / tp; }
};

// Saved per micro-batch: logits [rows, padded / tp] (dtype; dlogits after a training loss) and
// losses [rows] (stat dtype), named prefix + "logits" / "losses": the head's memory-plan entries.
struct LmHeadActs {
  engine::TensorView logits, losses;
};
LmHeadActs lm_head_saved_acts(const LmHeadConfig& c, engine::DType dtype, engine::DType stat_dtype,
                              const std::string& prefix, const TakeView& take);

// logits [rows, padded / tp] (=) from x [rows, d] and this rank's W [padded / tp, d].
void lm_head_forward(const LmHeadConfig& c, engine::TensorView logits, engine::ConstTensorView x,
                     engine::ConstTensorView w, engine::Stream& s);

// losses [rows] (=) of logits against targets [rows] i32 (< 0: ignored), each times its weight
// in weights [rows] f32 (empty: 1; ops/cross_entropy.h row_weights); train: dlogits (grad_scale
// 1, times the weight) replace the logits. tp > 1: ce [3 rows] scratch (stat dtype) and the TP
// group's communicator.
void lm_head_loss(const LmHeadConfig& c, engine::TensorView losses, engine::TensorView logits,
                  engine::ConstTensorView targets, engine::ConstTensorView weights, bool train,
                  engine::TensorView ce, parallel::Comm* tp_comm, engine::Stream& s);

// dW (+=) and dx (=, partial over TP) from the dlogits the training loss left, scaled by
// grad_scale (d total / d loss_r).
void lm_head_backward(const LmHeadConfig& c, engine::TensorView dx, engine::TensorView dw,
                      engine::ConstTensorView dlogits, engine::ConstTensorView x,
                      engine::ConstTensorView w, float grad_scale, engine::Stream& s);

}  // namespace anvil::model::blocks
