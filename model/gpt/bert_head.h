// BERT's heads (Megatron's BertLMHead + binary head, HF BertPreTrainingHeads), run by GptModel on
// the last pipeline stage for type bert, on the heads' input X = the encoder output [B*T, d]
// (post-LN: the last layer's output; pre-LN: ln_f of it):
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
#pragma once

#include "engine/stream.h"
#include "model/gpt/gpt.h"
#include "model/gpt/gpt_layout.h"

namespace anvil::model {

// Writes the binary head's constant row indices (Buffers::cls_rows = b*T, batch_rows = b);
// nothing where they are absent (not BERT, not the last stage, no binary head).
void bert_head_setup(const GptConfig& cfg, const GptRunShape& shape, gpt_detail::Buffers& b,
                     engine::Stream& s);

}  // namespace anvil::model
