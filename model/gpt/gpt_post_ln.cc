// Post-LN transformer layers (GptConfig::norm_placement kPost: original BERT, HF BertLayer):
//   h = x + Drop(attn(x));   y = LN1(h);   post_sum = y + Drop(mlp(y));   out = LN2(post_sum)
// with attn and mlp the sub-blocks the pre-LN layers use (gpt_pass.cc; TP, sequence
// parallelism, dropout sites 1 + 3l, 2 + 3l, 3 + 3l as there). LN1 and LN2 are ln_1 and ln_2.
// Backward, dres = d out on entry and d x on exit:
//   d post_sum = LN2'(dres);  d y = d post_sum + mlp'(d post_sum);  d h = LN1'(d y);
//   d x = d h + attn'(d h)
// Parameter gradients accumulate (+=). Saved (LayerActs): x, h, ln2 = y gathered, post_sum,
// both norms' statistics (and ln1 = x gathered, with sequence parallelism only).
#include "engine/memory.h"
#include "model/blocks/norm.h"
#include "model/gpt/gpt_impl.h"
#include "ops/axpy.h"

namespace anvil::model {

using engine::TensorView;

namespace {

// y += x over a whole [rows, d] tensor.
void add_into(TensorView y, engine::ConstTensorView x, engine::Stream& s) {
  ops::axpy(1.0f, flat_slice(y, 0, {y.numel()}),
            engine::make_view(x.data, x.dtype, x.device, {x.numel()}), s);
}

}  // namespace

void GptModel::Impl::post_layer_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                                        TensorView out, bool train, engine::Stream& s) {
  const int64_t l = buf.layer_ids[static_cast<size_t>(local)];
  const blocks::NormArgs ln = gpt_detail::norm_args(cfg, rows());
  gpt_detail::LayerActs& a = buf.act(slot, local);
  sync->gather_layer(local, s);  // ZeRO-3
  const gpt_detail::LayerWeights& lw = buf.w.layers[static_cast<size_t>(local)];
  // The attention reads all B*T rows of x: gathered into ln1 with sequence parallelism.
  if (tp.sp()) {
    engine::copy(tp.local_rows(a.ln1), a.x, s);
    tp.gather_rows(a.ln1, s);
  }
  const TensorView in = tp.sp() ? a.ln1 : a.x;
  TensorView proj = attention_block_forward(sd, a, lw, l, in, train, s);
  blocks::residual_norm_forward(ln, a.h, tp.local_rows(a.ln2), a.ln1_mean, a.ln1_rstd, a.x, proj,
                                lw.ln1_g, lw.ln1_b, s);
  tp.gather_rows(a.ln2, s);
  proj = mlp_block_forward(sd, a, lw, l, train, s);
  blocks::residual_norm_forward(ln, a.post_sum, out, a.ln2_mean, a.ln2_rstd, tp.local_rows(a.ln2),
                                proj, lw.ln2_g, lw.ln2_b, s);
}

void GptModel::Impl::post_layer_backward(const gpt_detail::SlotData& sd, int64_t slot,
                                         int64_t local, TensorView dres, engine::Stream& s) {
  const int64_t l = buf.layer_ids[static_cast<size_t>(local)];
  const blocks::NormArgs ln = gpt_detail::norm_args(cfg, rows());
  // Full recomputation reruns the forward from x; its output goes to scratch (the next
  // layer's input is still there, and the chunk output may be in flight).
  if (shard.recompute == Recompute::kFull) {
    post_layer_forward(sd, slot, local, tp.local_rows(buf.dln), /*train=*/true, s);
  } else {
    sync->gather_layer(local, s);  // ZeRO-3
  }
  sync->zero_layer_grads(local, s);  // ZeRO 2/3: the layer's gradients in zeroed scratch
  const gpt_detail::LayerActs& a = buf.act(slot, local);
  const gpt_detail::LayerWeights& lw = buf.w.layers[static_cast<size_t>(local)];
  const gpt_detail::LayerWeights& lg = buf.g.layers[static_cast<size_t>(local)];
  const TensorView scratch = tp.local_rows(buf.dln);
  // dres = d post_sum = LN2'(d out) (through scratch: a norm backward writes apart from dy).
  blocks::norm_backward(ln, ops::Accumulate::kOverwrite, scratch, lg.ln2_g, lg.ln2_b, dres,
                        a.post_sum, lw.ln2_g, a.ln2_mean, a.ln2_rstd, buf.op_ws, s);
  engine::copy(dres, scratch, s);
  // dres = d y = d post_sum + d(MLP input).
  add_into(dres, mlp_block_backward(sd, a, lw, lg, l, dres, s), s);
  // dres = d h = LN1'(d y).
  blocks::norm_backward(ln, ops::Accumulate::kOverwrite, scratch, lg.ln1_g, lg.ln1_b, dres, a.h,
                        lw.ln1_g, a.ln1_mean, a.ln1_rstd, buf.op_ws, s);
  engine::copy(dres, scratch, s);
  // dres = d x = d h + d(attention input).
  add_into(dres, attention_block_backward(sd, a, lw, lg, l, tp.sp() ? a.ln1 : a.x, dres, s), s);
  layer_grads_done(local, lg, s);
}

}  // namespace anvil::model
