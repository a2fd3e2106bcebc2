// The MLM head (GptConfig::head kMlm: Megatron's BertLMHead, with binary_head its binary head; HF
// BertPreTrainingHeads), run by GptModel on the last pipeline stage, on the heads' input X = the
// encoder output [B*T, d] (post-LN: the last layer's output; pre-LN: ln_f of it):
//   MLM   : u = LN_m(gelu_erf(X Wd^T + bd));  logits = u wte^T + out_b   (tied decoder + bias)
//           mlm loss = sum over counted targets of CE(logits, target)  (vocab-parallel CE)
//   binary: p = tanh(X[cls] Wp^T + bp) on the [CLS] rows b*T;  z = p Wb^T + bb  [B, 2]
//           binary loss = sum over samples of CE(z, is_random)
// The micro-batch loss sum is mlm + (counted / B) * binary, so loss_sum / counted = Megatron's
// lm_loss (mean over the masked tokens) + sop_loss (mean over the samples), its
// pretrain_bert.py loss; backward scales the binary logits' gradient accordingly.
// Tensor parallelism as Megatron: dense, LN_m, pooler and binary head replicated (identical on
// every TP rank, so their gradients are too), the decoder and out_b vocab-parallel; d u is
// summed over TP (an all-reduce even with sequence parallelism: the heads see all B*T rows).
// Backward: parameter gradients (+=), d X (=) [B*T, d] in buf.dln, whole on every TP rank.
#include <cstdint>
#include <vector>

#include "engine/memory.h"
#include "model/blocks/linear.h"
#include "model/stack/gpt_impl.h"
#include "ops/activation.h"
#include "ops/axpy.h"
#include "ops/copy_rows.h"
#include "ops/cross_entropy.h"
#include "ops/gemm.h"
#include "ops/layernorm.h"
#include "parallel/comm.h"

namespace anvil::model {

using blocks::input_grad;
using blocks::linear;
using blocks::weight_bias_grad;
using blocks::weight_grad;
using engine::TensorView;

namespace {

// dW += alpha dy^T x and db += alpha (column sums of dy), dy left as it is (backward may run
// twice): the column sums go through `sums` (grad dtype, >= db's length), then scaled into db.
void scaled_weight_bias_grad(TensorView dw, TensorView db, engine::ConstTensorView dy,
                             engine::ConstTensorView x, TensorView sums, float alpha,
                             engine::Stream& s) {
  weight_grad(dw, dy, x, s, alpha);
  const TensorView col = flat_slice(sums, 0, {db.numel()});
  engine::fill_zero(col, s);
  ops::bias_backward(col, dy, s);
  ops::axpy(alpha, db, col, s);
}

}  // namespace

void mlm_head_setup(const GptConfig& cfg, const GptRunShape& shape, gpt_detail::Buffers& b,
                    engine::Stream& s) {
  if (!cfg.binary_head || b.cls_rows.empty()) return;
  std::vector<int32_t> cls, rows;
  for (int64_t i = 0; i < shape.micro_batch; ++i) {
    cls.push_back(static_cast<int32_t>(i * shape.seq_len));
    rows.push_back(static_cast<int32_t>(i));
  }
  const engine::Device host = engine::Device::kCpu;
  engine::copy(b.cls_rows,
               engine::make_view(cls.data(), engine::DType::kI32, host, {shape.micro_batch}), s);
  engine::copy(b.batch_rows,
               engine::make_view(rows.data(), engine::DType::kI32, host, {shape.micro_batch}), s);
  s.synchronize();  // the host vectors go out of scope
}

void GptModel::Impl::mlm_head_forward(const gpt_detail::SlotData& sd, int64_t slot, bool train,
                                      engine::Stream& s) {
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model, B = shape.micro_batch;
  gpt_detail::HeadActs& hd = buf.head[static_cast<size_t>(slot)];
  const gpt_detail::BertHeadWeights& w = buf.w.bert;
  // MLM transform (replicated over TP), then the tied decoder with its vocab-parallel bias.
  linear(hd.mlm_pre, hd.lnf, w.dense_w, w.dense_b, s);
  ops::activation_forward(ops::Activation::kGeluErf, hd.mlm_act, hd.mlm_pre, s);
  ops::layernorm_forward({bt, d, cfg.ln_eps}, hd.mlm_ln, hd.mlm_mean, hd.mlm_rstd, hd.mlm_act,
                         w.ln_g, w.ln_b, s);
  linear(hd.logits, hd.mlm_ln, buf.w.lm_head, w.out_b, s);
  lm_loss(sd, hd, train, s);
  if (!cfg.binary_head) return;
  ops::copy_rows(hd.cls, hd.lnf, buf.batch_rows, buf.cls_rows, s);
  linear(hd.pool_pre, hd.cls, w.pool_w, w.pool_b, s);
  ops::activation_forward(ops::Activation::kTanh, hd.pooled, hd.pool_pre, s);
  linear(hd.bin_logits, hd.pooled, w.bin_w, w.bin_b, s);
  // Training: d(binary loss sum)/d z (grad_scale 1) replaces z, as the LM logits.
  ops::softmax_cross_entropy({B, 2, 2, 1.0f}, hd.bin_losses, train ? hd.bin_logits : TensorView{},
                             hd.bin_logits, sd.binary_labels, s);
}

void GptModel::Impl::mlm_head_backward(const gpt_detail::SlotData& sd, int64_t slot,
                                       float grad_scale, engine::Stream& s) {
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model, B = shape.micro_batch;
  const gpt_detail::HeadActs& hd = buf.head[static_cast<size_t>(slot)];
  const gpt_detail::BertHeadWeights& w = buf.w.bert;
  const gpt_detail::BertHeadWeights& g = buf.g.bert;
  // The logits hold d(loss sum)/d(logits); grad_scale enters as the GEMMs' alpha.
  scaled_weight_bias_grad(buf.g.lm_head, g.out_b, hd.logits, hd.mlm_ln, buf.bias_sums, grad_scale,
                          s);
  input_grad(buf.dln, hd.logits, buf.w.lm_head, s, grad_scale);  // d u, partial over the vocab
  tp.all_reduce(buf.dln, s);
  // d(gelu output) into proj, through the GELU in place, then the dense layer: d X into dln.
  ops::layernorm_backward({bt, d, cfg.ln_eps}, ops::Accumulate::kOverwrite, buf.proj, g.ln_g,
                          g.ln_b, buf.dln, hd.mlm_act, w.ln_g, hd.mlm_mean, hd.mlm_rstd, buf.op_ws,
                          s);
  ops::activation_backward(ops::Activation::kGeluErf, buf.proj, buf.proj, hd.mlm_pre, s);
  blocks::linear_backward(buf.dln, g.dense_w, g.dense_b, buf.proj, hd.lnf, w.dense_w, s);
  if (!cfg.binary_head) return;
  // The binary loss enters the loss sum with weight counted / B (see the top of this file).
  const float weight = static_cast<float>(static_cast<double>(sd.counted) / static_cast<double>(B));
  scaled_weight_bias_grad(g.bin_w, g.bin_b, hd.bin_logits, hd.pooled, buf.bias_sums,
                          grad_scale * weight, s);
  input_grad(buf.dcls, hd.bin_logits, w.bin_w, s, grad_scale * weight);
  ops::activation_backward(ops::Activation::kTanh, buf.dcls, buf.dcls, hd.pool_pre, s);
  weight_bias_grad(g.pool_w, g.pool_b, buf.dcls, hd.cls, s);
  // d X[cls] += d(pooler input): gather those rows, add, scatter them back.
  ops::copy_rows(buf.dcls_other, buf.dln, buf.batch_rows, buf.cls_rows, s);
  ops::GemmArgs add{B, d, d};
  add.beta = 1.0f;
  ops::gemm(add, buf.dcls_other, buf.dcls, w.pool_w, {}, {}, s);
  ops::copy_rows(buf.dln, buf.dcls_other, buf.cls_rows, buf.batch_rows, s);
}

}  // namespace anvil::model
