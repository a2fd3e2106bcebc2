// BERT's pretraining heads (Megatron's BertLMHead and binary head; HF BertPreTrainingHeads) on
// the encoder output X [rows = B*T, d]:
//   transform: u = LN(gelu_erf(X Wd^T + bd))            [rows, d]           (=, replicated over TP)
//   decoder  : logits = u W^T + out_b                   [rows, padded / tp] (=; W the tied wte
//              slice, out_b vocab-parallel); its loss is the LM head block's (lm_head.h)
//   binary   : p = tanh(X[cls] Wp^T + bp);  z = p Wb^T + bb   [B, 2] (=, replicated over TP)
//              loss_b = CE(z, label_b) per sample (=); training: dz (grad_scale 1) replaces z
// Backward: parameter gradients (+=) and d X (=) from d u (transform), d u (=, partial over the
// vocabulary: the caller sums it over TP) from dlogits (decoder), d X[cls] (+=) from dz (binary).
// The [CLS] rows are given as index lists (cls_rows = b*T, batch_rows = b, i32 [B]).
// Private to model/.
#pragma once

#include <cstdint>
#include <string>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "model/blocks/mlp.h"

namespace anvil::model::blocks {

struct MlmHeadConfig {
  int64_t rows = 0;   // B*T
  int64_t batch = 0;  // B: the binary head's rows
  int64_t d_model = 0;
  float ln_eps = 1e-12f;
  bool binary = false;  // the pooler and binary head
};

// The heads' parameters (or their gradients, same shapes).
struct MlmHeadWeights {
  engine::TensorView dense_w, dense_b;  // [d, d], [d]   lm_head.dense
  engine::TensorView ln_g, ln_b;        // [d]           lm_head.layernorm
  engine::TensorView out_b;             // [padded / tp] lm_head.bias (vocab-parallel)
  engine::TensorView pool_w, pool_b;    // [d, d], [d]   pooler.dense (binary)
  engine::TensorView bin_w, bin_b;      // [2, d], [2]   binary_head (binary)
};

// Saved per micro-batch (act dtype unless said): the transform's pre [rows, d] (dense output),
// act [rows, d] (GELU-erf), out [rows, d] (= u), mean, rstd [rows] (stat dtype); binary: cls,
// pool_pre, pooled [B, d], logits [B, 2] (dz after a training loss), losses [B] (stat dtype).
struct MlmHeadActs {
  engine::TensorView pre, act, out, mean, rstd;
  engine::TensorView cls, pool_pre, pooled, bin_logits, bin_losses;
};
// The memory-plan entries, named prefix + "lm_head.dense" ... "binary_head.losses".
MlmHeadActs mlm_head_saved_acts(const MlmHeadConfig& c, engine::DType dtype,
                                engine::DType stat_dtype, const std::string& prefix,
                                const TakeView& take);

// Scratch of the backward: rows_d [rows, d] act dtype; ln_ws the layernorm backward's workspace;
// bias_sums [>= padded / tp] grad dtype; binary: dcls, dcls_sum [B, d] act dtype.
struct MlmHeadScratch {
  engine::TensorView rows_d;
  engine::Workspace ln_ws;
  engine::TensorView bias_sums, dcls, dcls_sum;
};

// acts.out = u from x [rows, d].
void mlm_transform_forward(const MlmHeadConfig& c, const MlmHeadActs& acts,
                           engine::ConstTensorView x, const MlmHeadWeights& w, engine::Stream& s);
// dx [rows, d] (=) from du [rows, d] (whole over TP); dx may alias du (read first).
void mlm_transform_backward(const MlmHeadConfig& c, engine::TensorView dx, const MlmHeadWeights& g,
                            engine::ConstTensorView du, engine::ConstTensorView x,
                            const MlmHeadActs& acts, const MlmHeadWeights& w,
                            const MlmHeadScratch& scratch, engine::Stream& s);

// logits [rows, padded / tp] (=) = u wte^T + out_b, wte: this rank's [padded / tp, d] slice.
void mlm_decoder_forward(engine::TensorView logits, engine::ConstTensorView u,
                         engine::ConstTensorView wte, const MlmHeadWeights& w, engine::Stream& s);
// d wte (+=), g.out_b (+=) and du [rows, d] (=, partial over TP) from dlogits, all scaled by
// alpha (d total / d loss).
void mlm_decoder_backward(engine::TensorView du, engine::TensorView dwte, const MlmHeadWeights& g,
                          engine::ConstTensorView dlogits, engine::ConstTensorView u,
                          engine::ConstTensorView wte, const MlmHeadScratch& scratch, float alpha,
                          engine::Stream& s);

// acts.bin_losses [B] (=) of the binary head on the [CLS] rows of x [rows, d] against labels [B]
// i32; train: dz replaces acts.bin_logits.
void binary_head_forward(const MlmHeadConfig& c, const MlmHeadActs& acts, engine::ConstTensorView x,
                         engine::ConstTensorView cls_rows, engine::ConstTensorView batch_rows,
                         const MlmHeadWeights& w, engine::ConstTensorView labels, bool train,
                         engine::Stream& s);
// Pooler and binary-head gradients (+=) and dx's [CLS] rows (+=) from the dz the training loss
// left, scaled by alpha (d total / d loss_b).
void binary_head_backward(const MlmHeadConfig& c, engine::TensorView dx, const MlmHeadWeights& g,
                          const MlmHeadActs& acts, engine::ConstTensorView cls_rows,
                          engine::ConstTensorView batch_rows, const MlmHeadWeights& w,
                          const MlmHeadScratch& scratch, float alpha, engine::Stream& s);

}  // namespace anvil::model::blocks
