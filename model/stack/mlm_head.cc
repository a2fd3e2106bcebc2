// The MLM head (GptConfig::head kMlm: Megatron's BertLMHead, with binary_head its binary head; HF
// BertPreTrainingHeads: the blocks of model/blocks/mlm_head.h), run by GptModel on the last
// pipeline stage, on the heads' input X = the encoder output [B*T, d] (post-LN: the last layer's
// output; pre-LN: ln_f of it):
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
#include "model/blocks/mlm_head.h"

#include <cstdint>
#include <vector>

#include "engine/memory.h"
#include "model/stack/gpt_impl.h"
#include "parallel/comm.h"

namespace anvil::model {

namespace {

blocks::MlmHeadScratch scratch(const gpt_detail::Buffers& b) {
  return {b.proj, b.op_ws, b.bias_sums, b.dcls, b.dcls_other};
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
  const blocks::MlmHeadConfig c = gpt_detail::mlm_head_config(cfg, shape);
  gpt_detail::HeadActs& hd = buf.head[static_cast<size_t>(slot)];
  const blocks::MlmHeadWeights& w = buf.w.bert;
  // MLM transform (replicated over TP), then the tied decoder with its vocab-parallel bias.
  blocks::mlm_transform_forward(c, hd.mlm, hd.lnf, w, s);
  blocks::mlm_decoder_forward(hd.logits, hd.mlm.out, buf.w.lm_head, w, s);
  lm_loss(sd, hd, train, s);
  if (!cfg.binary_head) return;
  blocks::binary_head_forward(c, hd.mlm, hd.lnf, buf.cls_rows, buf.batch_rows, w, sd.binary_labels,
                              train, s);
}

void GptModel::Impl::mlm_head_backward(const gpt_detail::SlotData& sd, int64_t slot,
                                       float grad_scale, engine::Stream& s) {
  const blocks::MlmHeadConfig c = gpt_detail::mlm_head_config(cfg, shape);
  const gpt_detail::HeadActs& hd = buf.head[static_cast<size_t>(slot)];
  const blocks::MlmHeadWeights& w = buf.w.bert;
  const blocks::MlmHeadWeights& g = buf.g.bert;
  // The logits hold d(loss sum)/d(logits); grad_scale enters as the GEMMs' alpha.
  blocks::mlm_decoder_backward(buf.dln, buf.g.lm_head, g, hd.logits, hd.mlm.out, buf.w.lm_head,
                               scratch(buf), grad_scale, s);  // d u, partial over the vocab
  tp.all_reduce(buf.dln, s);
  blocks::mlm_transform_backward(c, buf.dln, g, buf.dln, hd.lnf, hd.mlm, w, scratch(buf), s);
  if (!cfg.binary_head) return;
  // The binary loss enters the loss sum with weight counted / B (see the top of this file).
  const float weight =
      static_cast<float>(static_cast<double>(sd.counted) / static_cast<double>(shape.micro_batch));
  blocks::binary_head_backward(c, buf.dln, g, hd.mlm, buf.cls_rows, buf.batch_rows, w, scratch(buf),
                               grad_scale * weight, s);
}

}  // namespace anvil::model
