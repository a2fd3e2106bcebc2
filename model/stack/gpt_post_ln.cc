// Post-LN transformer layers (GptConfig::norm_placement kPost: original BERT, HF BertLayer):
//   h = x + Drop(attn(x));   y = LN1(h);   post_sum = y + Drop(mlp(y));   out = LN2(post_sum)
// the layer block's post-LN form (model/blocks/layer.h: TP, sequence parallelism, the dropout
// sites 1 + 3l, 2 + 3l, 3 + 3l of the pre-LN layers). LN1 and LN2 are ln_1 and ln_2.
// Backward (GptModel::Impl::layer_backward, shared with pre-LN), dres = d out on entry and d x
// on exit:
//   d post_sum = LN2'(dres);  d y = d post_sum + mlp'(d post_sum);  d h = LN1'(d y);
//   d x = d h + attn'(d h)
// Parameter gradients accumulate (+=). Saved (LayerActs): x, h, ln2 = y gathered, post_sum,
// both norms' statistics (and ln1 = x gathered, with sequence parallelism only).
#include "model/stack/gpt_impl.h"

namespace anvil::model {

void GptModel::Impl::post_layer_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                                        engine::TensorView out, bool train, engine::Stream& s) {
  layer_block_forward(sd, slot, local, {}, out, train, s);
}

}  // namespace anvil::model
