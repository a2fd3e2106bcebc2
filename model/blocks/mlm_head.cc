// BERT's MLM transform, decoder and binary head: forward and backward (see mlm_head.h).
#include "model/blocks/mlm_head.h"

#include "engine/memory.h"
#include "model/blocks/linear.h"
#include "model/param_table.h"
#include "ops/activation.h"
#include "ops/axpy.h"
#include "ops/copy_rows.h"
#include "ops/cross_entropy.h"
#include "ops/gemm.h"
#include "ops/layernorm.h"

namespace anvil::model::blocks {

using engine::ConstTensorView;
using engine::TensorView;

namespace {

// dW += alpha dy^T x and db += alpha (column sums of dy), dy left as it is (backward may run
// twice): the column sums go through `sums` (grad dtype, >= db's length), then scaled into db.
void scaled_weight_bias_grad(TensorView dw, TensorView db, ConstTensorView dy, ConstTensorView x,
                             TensorView sums, float alpha, engine::Stream& s) {
  weight_grad(dw, dy, x, s, alpha);
  const TensorView col = flat_slice(sums, 0, {db.numel()});
  engine::fill_zero(col, s);
  ops::bias_backward(col, dy, s);
  ops::axpy(alpha, db, col, s);
}

}  // namespace

MlmHeadActs mlm_head_saved_acts(const MlmHeadConfig& c, engine::DType dtype,
                                engine::DType stat_dtype, const std::string& prefix,
                                const TakeView& take) {
  const int64_t rows = c.rows, d = c.d_model, B = c.batch;
  MlmHeadActs a;
  a.pre = take(prefix + "lm_head.dense", dtype, {rows, d});
  a.act = take(prefix + "lm_head.gelu", dtype, {rows, d});
  a.out = take(prefix + "lm_head.layernorm", dtype, {rows, d});
  a.mean = take(prefix + "lm_head.layernorm.mean", stat_dtype, {rows});
  a.rstd = take(prefix + "lm_head.layernorm.rstd", stat_dtype, {rows});
  if (c.binary) {
    a.cls = take(prefix + "pooler.input", dtype, {B, d});
    a.pool_pre = take(prefix + "pooler.dense", dtype, {B, d});
    a.pooled = take(prefix + "pooler", dtype, {B, d});
    a.bin_logits = take(prefix + "binary_head.logits", dtype, {B, 2});
    a.bin_losses = take(prefix + "binary_head.losses", stat_dtype, {B});
  }
  return a;
}

void mlm_transform_forward(const MlmHeadConfig& c, const MlmHeadActs& acts, ConstTensorView x,
                           const MlmHeadWeights& w, engine::Stream& s) {
  linear(acts.pre, x, w.dense_w, w.dense_b, s);
  ops::activation_forward(ops::Activation::kGeluErf, acts.act, acts.pre, s);
  ops::layernorm_forward({c.rows, c.d_model, c.ln_eps}, acts.out, acts.mean, acts.rstd, acts.act,
                         w.ln_g, w.ln_b, s);
}

void mlm_transform_backward(const MlmHeadConfig& c, TensorView dx, const MlmHeadWeights& g,
                            ConstTensorView du, ConstTensorView x, const MlmHeadActs& acts,
                            const MlmHeadWeights& w, const MlmHeadScratch& scratch,
                            engine::Stream& s) {
  // d(gelu output) into rows_d, through the GELU in place, then the dense layer: d x.
  ops::layernorm_backward({c.rows, c.d_model, c.ln_eps}, ops::Accumulate::kOverwrite,
                          scratch.rows_d, g.ln_g, g.ln_b, du, acts.act, w.ln_g, acts.mean,
                          acts.rstd, scratch.ln_ws, s);
  ops::activation_backward(ops::Activation::kGeluErf, scratch.rows_d, scratch.rows_d, acts.pre, s);
  linear_backward(dx, g.dense_w, g.dense_b, scratch.rows_d, x, w.dense_w, s);
}

void mlm_decoder_forward(TensorView logits, ConstTensorView u, ConstTensorView wte,
                         const MlmHeadWeights& w, engine::Stream& s) {
  linear(logits, u, wte, w.out_b, s);
}

void mlm_decoder_backward(TensorView du, TensorView dwte, const MlmHeadWeights& g,
                          ConstTensorView dlogits, ConstTensorView u, ConstTensorView wte,
                          const MlmHeadScratch& scratch, float alpha, engine::Stream& s) {
  scaled_weight_bias_grad(dwte, g.out_b, dlogits, u, scratch.bias_sums, alpha, s);
  input_grad(du, dlogits, wte, s, alpha);
}

void binary_head_forward(const MlmHeadConfig& c, const MlmHeadActs& acts, ConstTensorView x,
                         ConstTensorView cls_rows, ConstTensorView batch_rows,
                         const MlmHeadWeights& w, ConstTensorView labels, bool train,
                         engine::Stream& s) {
  ops::copy_rows(acts.cls, x, batch_rows, cls_rows, s);
  linear(acts.pool_pre, acts.cls, w.pool_w, w.pool_b, s);
  ops::activation_forward(ops::Activation::kTanh, acts.pooled, acts.pool_pre, s);
  linear(acts.bin_logits, acts.pooled, w.bin_w, w.bin_b, s);
  // Training: d(binary loss sum)/d z (grad_scale 1) replaces z, as the LM logits.
  ops::softmax_cross_entropy({c.batch, 2, 2, 1.0f}, acts.bin_losses,
                             train ? acts.bin_logits : TensorView{}, acts.bin_logits, labels, s);
}

void binary_head_backward(const MlmHeadConfig& c, TensorView dx, const MlmHeadWeights& g,
                          const MlmHeadActs& acts, ConstTensorView cls_rows,
                          ConstTensorView batch_rows, const MlmHeadWeights& w,
                          const MlmHeadScratch& scratch, float alpha, engine::Stream& s) {
  scaled_weight_bias_grad(g.bin_w, g.bin_b, acts.bin_logits, acts.pooled, scratch.bias_sums, alpha,
                          s);
  input_grad(scratch.dcls, acts.bin_logits, w.bin_w, s, alpha);
  ops::activation_backward(ops::Activation::kTanh, scratch.dcls, scratch.dcls, acts.pool_pre, s);
  weight_bias_grad(g.pool_w, g.pool_b, scratch.dcls, acts.cls, s);
  // d x[cls] += d(pooler input): gather those rows, add, scatter them back.
  ops::copy_rows(scratch.dcls_sum, dx, batch_rows, cls_rows, s);
  ops::GemmArgs add{c.batch, c.d_model, c.d_model};
  add.beta = 1.0f;
  ops::gemm(add, scratch.dcls_sum, scratch.dcls, w.pool_w, {}, {}, s);
  ops::copy_rows(dx, scratch.dcls_sum, cls_rows, batch_rows, s);
}

}  // namespace anvil::model::blocks
