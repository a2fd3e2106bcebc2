// GPT-2 forward and backward over one micro-batch and one model chunk (the math is in gpt.h).
// Rows r = b*T + t.
// Forward, with Drop = hidden dropout (train only):
//   x_0 = Drop(wte[tok] + wpe[pos])
//   per layer: ln1 = LN1(x) (fused with the residual sum x = h' + Drop(mlp') of the previous
//   layer for l > 0); qkv = ln1 Wqkv^T + b; atty = attention(qkv); h = x + Drop(atty Wo^T + bo);
//   ln2 = LN2(h) (fused); gelu = gelu_tanh(ln2 Wfc^T + bfc); mlp = gelu Wp^T + bp
//   x_L = h + Drop(mlp) fused with lnf = LNf(x_L); logits = lnf wte^T; losses = CE(logits)
// The pieces are the shared blocks (model/blocks/): embedding.h, layer.h (attention.h: c_attn
// = W_qkv, c_proj = W_o; mlp.h: c_fc = W_in, mlp c_proj = W_out; norm.h) and lm_head.h; this
// file maps GPT's buffers, dropout sites and ZeRO hooks onto them.
// A training forward overwrites the logits with dlogits = softmax - onehot (grad_scale 1), so
// backward never re-reads the logits: it folds grad_scale into the alpha of the two LM-head
// GEMMs. Backward is the exact reverse: dres carries d(residual stream); each layernorm
// backward adds (+=) its input gradient into it; parameter gradients accumulate (+=).
// Tensor parallelism (Megatron): c_attn and c_fc are column-parallel (local heads / hidden
// units, input replicated: identity forward, sum of the input gradient over TP backward),
// attention and MLP projections row-parallel (partial outputs summed over TP forward, the
// bias added once, by TP rank 0; identity backward). The embedding is vocab-parallel (rows of
// other ranks' tokens are 0, summed over TP) and so is the LM head: each rank has the logits of
// its vocabulary slice and the cross-entropy combines row max, sum of exponentials and target
// logit over TP (ops/vocab_parallel_cross_entropy.h).
// A chunk that does not end the model outputs x = h + Drop(mlp) of its last layer. With a hidden
// head (GptModel::set_hidden_head) the final chunk stops at lnf and its backward starts from the
// caller's dlnf.
// Architecture options (GptConfig, docs/models.md): LN may be RMSNorm (no beta); no biases; no
// wpe (alibi / rotary / none); x_0 = Drop(LN_e(wte[tok])) with the embedding LayerNorm; q, k
// rotated after c_attn (rotary; their gradients rotated back after the attention backward);
// the ALiBi bias inside flash attention; gelu = act(g) * u over c_fc's [g | u] (GLU); the LM
// head lm_head instead of wte (untied). The encoder features (BERT uses them all): + tte[type]
// in the embedding (type_vocab_size > 0; TP rank 0, before the sum), bidirectional attention up
// to each sample's length (causal false), post-LN layers (the layer block's post-LN form,
// gpt_post_ln.cc), GELU-erf, and the MLM and binary heads (head kMlm, mlm_head.cc) on x_final
// (post-LN) or ln_f's output instead of the LM head.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/layer.h"
#include "model/blocks/lm_head.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "model/stack/gpt_impl.h"
#include "ops/dropout.h"
#include "ops/layernorm.h"

namespace anvil::model {

namespace {

using engine::ConstTensorView;
using engine::TensorView;

blocks::AttentionWeights attention_weights(const gpt_detail::LayerWeights& w) {
  return {w.qkv_w, w.qkv_b, {}, {}, w.attn_proj_w, w.attn_proj_b};
}

blocks::AttentionActs attention_acts(const gpt_detail::LayerActs& a) {
  return {a.qkv, {}, a.lse, a.probs, a.atty, a.keep};
}

// Rotary positions; the document masks (segments), the prefix-LM prefix ends and BERT's
// key-padding mask (lengths).
blocks::AttentionInputs attention_inputs(const gpt_detail::SlotData& sd) {
  blocks::AttentionInputs in;
  in.positions = sd.positions;
  if (sd.has_segments) in.masks.seg_q = in.masks.seg_k = sd.segments;
  if (sd.has_prefix) in.masks.prefix_end = sd.prefix_end;
  if (!sd.lengths.empty()) in.masks.kv_lengths = sd.lengths;
  return in;
}

blocks::LayerInputs layer_inputs(const gpt_detail::SlotData& sd) {
  blocks::LayerInputs in;
  in.attn = attention_inputs(sd);
  return in;
}

// GPT's layer fields as the layer block names them: ln_2 / ln2 are the MLP sub-layer's norm
// (pre-LN: its input; post-LN: LN2 after it, with ln2 = LN1(h) the MLP input).
blocks::LayerActs layer_acts(const gpt_detail::LayerActs& a) {
  blocks::LayerActs b;
  b.x = a.x;
  b.ln1 = a.ln1, b.ln1_mean = a.ln1_mean, b.ln1_rstd = a.ln1_rstd;
  b.attn = attention_acts(a);
  b.h = a.h;
  b.ln_mlp = a.ln2, b.ln_mlp_mean = a.ln2_mean, b.ln_mlp_rstd = a.ln2_rstd;
  b.mlp = a.mlp;
  b.post_sum = a.post_sum;
  return b;
}

blocks::LayerWeights layer_weights(const gpt_detail::LayerWeights& w) {
  blocks::LayerWeights b;
  b.ln1_g = w.ln1_g, b.ln1_b = w.ln1_b;
  b.ln_mlp_g = w.ln2_g, b.ln_mlp_b = w.ln2_b;
  b.attn = attention_weights(w);
  b.mlp = gpt_detail::mlp_weights(w);
  return b;
}

blocks::EmbeddingInputs embedding_inputs(const gpt_detail::SlotData& sd) {
  return {sd.tokens, sd.positions, sd.token_types};
}

}  // namespace

void GptModel::Impl::sync_layernorm_grads(const gpt_detail::LayerWeights& g, engine::Stream& s) {
  tp.sum_row_grads({g.ln1_g, g.ln1_b, g.ln2_g, g.ln2_b}, s);
}

void GptModel::Impl::set_batch(int64_t chunk, int64_t slot, const GptBatch& batch,
                               engine::Stream& s) {
  ANVIL_CHECK_MSG(chunk >= 0 && chunk < n_chunks() && slot >= 0 && slot < buf.slots,
                  absl::StrCat("GptModel::set_batch: chunk ", chunk, " of ", n_chunks(), ", slot ",
                               slot, " of ", buf.slots));
  ANVIL_CHECK_MSG(batch.tokens && batch.positions && batch.targets,
                  "GptModel::set_batch: tokens, positions and targets are required");
  const int64_t bt = shape.micro_batch * shape.seq_len;
  const engine::Device host = engine::Device::kCpu;
  gpt_detail::SlotData& d = buf.slot_data(chunk, slot);
  auto put = [&](TensorView dst, const int32_t* src) {
    engine::copy(dst, engine::make_view(src, engine::DType::kI32, host, {bt}), s);
  };
  put(d.tokens, batch.tokens);
  put(d.positions, batch.positions);
  put(d.targets, batch.targets);
  d.has_segments = batch.segments != nullptr;
  if (d.has_segments) put(d.segments, batch.segments);
  d.has_prefix = batch.prefix_end != nullptr;
  if (d.has_prefix) put(d.prefix_end, batch.prefix_end);
  d.has_weights = batch.loss_weights != nullptr;
  if (d.has_weights) {
    engine::copy(d.loss_weights,
                 engine::make_view(batch.loss_weights, engine::DType::kF32, host, {bt}), s);
  }
  // The encoder features' inputs (BERT has them all): token types, key lengths (bidirectional
  // attention), binary labels; the MLM head's loss is a mean over the counted targets.
  ANVIL_CHECK_MSG((batch.token_types || cfg.type_vocab_size == 0) &&
                      (batch.lengths || cfg.causal) && (batch.binary_labels || !cfg.binary_head),
                  "GptModel::set_batch: this model needs token_types (type_vocab_size > 0), "
                  "lengths (bidirectional) and binary_labels (binary head)");
  if (cfg.type_vocab_size > 0) put(d.token_types, batch.token_types);
  const int64_t B = shape.micro_batch;
  if (!cfg.causal) {
    engine::copy(d.lengths, engine::make_view(batch.lengths, engine::DType::kI32, host, {B}), s);
  }
  if (cfg.binary_head) {
    engine::copy(d.binary_labels,
                 engine::make_view(batch.binary_labels, engine::DType::kI32, host, {B}), s);
  }
  if (!cfg.mlm_head()) return;
  d.counted = 0;
  for (int64_t i = 0; i < bt; ++i) d.counted += batch.targets[i] >= 0;
}

void GptModel::Impl::embed(int64_t slot, bool train, engine::Stream& s) {  // chunk 0
  const int64_t d = cfg.d_model;
  const gpt_detail::SlotData& sd = buf.slot_data(0, slot);
  TensorView x = buf.act(slot, buf.chunk_layers[0][0]).x;
  // Vocab-parallel (the embedding block: positions, learned only, and BERT's token types added
  // once, by TP rank 0) before the sum over TP (with sequence parallelism a reduce-scatter of
  // the whole rows into this rank's). With the embedding LayerNorm (BLOOM) the sum is its
  // input and x its output. buf.dln is the token-type term's scratch.
  const gpt_detail::EmbedActs* eln =
      buf.embed.empty() ? nullptr : &buf.embed[static_cast<size_t>(slot)];
  const TensorView sum = eln != nullptr ? eln->sum : x;
  const TensorView e = tp.sp() ? buf.proj : sum;
  blocks::embedding_forward(embedding_config(), e, embedding_inputs(sd),
                            {buf.w.wte, buf.w.wpe, buf.w.tte}, buf.dln, s);
  tp.reduce_rows_into(sum, e, s);
  if (eln != nullptr) {
    ops::layernorm_forward({rows(), d, cfg.ln_eps}, x, eln->mean, eln->rstd, sum, buf.w.wte_ln_g,
                           buf.w.wte_ln_b, s);
  }
  if (train && cfg.hidden_dropout > 0.0f) {
    ops::dropout_forward(
        {cfg.hidden_dropout, seed, site_offset(sd.dropout_offset, 0) + tp.row_shift(x)}, x, x, s);
  }
}

void GptModel::Impl::layer_block_forward(const gpt_detail::SlotData& sd, int64_t slot,
                                         int64_t local, ConstTensorView prev, TensorView out,
                                         bool train, engine::Stream& s) {
  const int64_t l = buf.layer_ids[static_cast<size_t>(local)];
  sync->gather_layer(local, s);  // ZeRO-3
  const gpt_detail::LayerWeights& lw = buf.w.layers[static_cast<size_t>(local)];
  blocks::layer_forward(layer_config(), layer_acts(buf.act(slot, local)), layer_weights(lw),
                        layer_inputs(sd), prev, out, train, layer_sites(sd, l), layer_scratch(), tp,
                        s);
}

void GptModel::Impl::layer_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                                   bool fused_input, bool train, engine::Stream& s) {
  // fused_input: x = h' + Drop(mlp') of the previous layer, fused with LN1.
  layer_block_forward(sd, slot, local, fused_input ? buf.act(slot, local - 1).h : TensorView{}, {},
                      train, s);
}

blocks::AttentionConfig GptModel::Impl::attention_config() const {
  blocks::AttentionConfig c;
  c.batch = shape.micro_batch;
  c.q_len = c.kv_len = shape.seq_len;
  c.heads = cfg.n_heads;
  c.kv_heads = cfg.kv_heads();
  c.head_dim = cfg.head_dim();
  c.tp = shard.tp;
  c.tp_rank = shard.tp_rank;
  c.causal = cfg.causal;
  c.flash = gpt_detail::uses_flash_attention(cfg, prec);
  c.recompute_probs = shard.recompute == Recompute::kSelective;  // unfused only
  c.scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim()));
  // ALiBi: Megatron's slopes of the model heads this rank holds (flash attention).
  if (cfg.position_embedding == PositionEmbedding::kAlibi) {
    c.position = blocks::AttentionPosition::kAlibi;
  } else if (cfg.position_embedding == PositionEmbedding::kRotary) {
    c.position = blocks::AttentionPosition::kRotary;
  }
  c.rotary_dim = cfg.rotary_dim();
  c.rotary_base = cfg.rotary_base;
  c.rotary_scaling = cfg.rope_scaling;
  c.dropout = cfg.attention_dropout;
  c.kernel = prec.attention;
  c.save_dropout_mask = prec.save_dropout_mask;
  return c;
}

blocks::LayerConfig GptModel::Impl::layer_config() const {
  blocks::LayerConfig c;
  c.norm = gpt_detail::norm_args(cfg, rows());
  c.attn = attention_config();
  c.mlp = gpt_detail::mlp_config(cfg, shard);
  c.post_ln = cfg.post_ln();
  c.dropout = cfg.hidden_dropout;
  return c;
}

// The dropout sites of layer `layer`: 1 + 3 layer (attention probabilities), 2 + 3 layer
// (attention output), 3 + 3 layer (MLP output).
blocks::LayerSites GptModel::Impl::layer_sites(const gpt_detail::SlotData& sd,
                                               int64_t layer) const {
  blocks::LayerSites t;
  t.seed = seed;
  t.attn_probs = site_offset(sd.dropout_offset, 1 + 3 * layer);
  t.attn_out = site_offset(sd.dropout_offset, 2 + 3 * layer);
  t.mlp_out = site_offset(sd.dropout_offset, 3 + 3 * layer);
  return t;
}

blocks::LayerScratch GptModel::Impl::layer_scratch() const {
  return {buf.proj, buf.dln, buf.dbig, buf.dglu, buf.op_ws};
}

void GptModel::Impl::head_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t last_local,
                                  bool train, engine::Stream& s) {
  gpt_detail::HeadActs& hd = buf.head[static_cast<size_t>(slot)];
  const blocks::NormArgs ln = gpt_detail::norm_args(cfg, rows());
  if (cfg.post_ln()) {  // the last layer wrote x_final; the heads read it whole
    if (tp.sp()) {
      engine::copy(tp.local_rows(hd.lnf), hd.x_final, s);
      tp.gather_rows(hd.lnf, s);
    }
  } else {
    blocks::residual_norm_forward(ln, hd.x_final, tp.local_rows(hd.lnf), hd.lnf_mean, hd.lnf_rstd,
                                  buf.act(slot, last_local).h, tp.local_rows(buf.proj), buf.w.lnf_g,
                                  buf.w.lnf_b, s);
    tp.gather_rows(hd.lnf, s);
  }
  if (hidden_head) {  // a head outside reads lnf (GptModel::final_hidden): no loss here
    engine::fill_zero(hd.losses, s);
    return;
  }
  if (cfg.mlm_head()) {
    mlm_head_forward(sd, slot, train, s);
    return;
  }
  blocks::lm_head_forward(lm_head_config(), hd.logits, hd.lnf, buf.w.lm_head, s);
  lm_loss(sd, hd, train, s);
}

void GptModel::Impl::lm_loss(const gpt_detail::SlotData& sd, gpt_detail::HeadActs& hd, bool train,
                             engine::Stream& s) {
  blocks::lm_head_loss(lm_head_config(), hd.losses, hd.logits, sd.targets,
                       sd.has_weights ? sd.loss_weights : TensorView{}, train, buf.ce,
                       shard.tp_comm, s);
}

blocks::LmHeadConfig GptModel::Impl::lm_head_config() const {
  blocks::LmHeadConfig c;
  c.rows = shape.micro_batch * shape.seq_len;
  c.d_model = cfg.d_model;
  c.vocab = cfg.loss_vocab();
  c.padded_vocab = cfg.padded();
  c.tp = shard.tp;
  c.tp_rank = shard.tp_rank;
  return c;
}

void GptModel::Impl::forward_chunk(int64_t chunk, int64_t slot, bool train, uint64_t dropout_offset,
                                   engine::Stream& s) {
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "GptModel::forward: stream device differs from the model's");
  ANVIL_CHECK_MSG(chunk >= 0 && chunk < n_chunks() && slot >= 0 && slot < buf.slots,
                  absl::StrCat("GptModel::forward_chunk: chunk ", chunk, " of ", n_chunks(),
                               ", slot ", slot, " of ", buf.slots));
  GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
  const size_t key = static_cast<size_t>(chunk * buf.slots + slot);
  ready_for_backward[key] = false;
  gpt_detail::SlotData& sd = buf.slot_data(chunk, slot);
  sd.dropout_offset = dropout_offset;
  sync->start_pass(parallel::PassDirection::kForward);
  const std::vector<int64_t>& layers = buf.chunk_layers[static_cast<size_t>(chunk)];
  if (shard.pre && chunk == 0) embed(slot, train, s);
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!cfg.post_ln()) {
      layer_forward(sd, slot, layers[i], i > 0, train, s);
      continue;
    }
    // Post-LN: each layer writes its output: the next layer's input, x_final or the chunk output.
    const TensorView out = i + 1 < layers.size()   ? buf.act(slot, layers[i + 1]).x
                           : is_final_chunk(chunk) ? buf.head[static_cast<size_t>(slot)].x_final
                                                   : buf.send_act;
    post_layer_forward(sd, slot, layers[i], out, train, s);
  }
  if (is_final_chunk(chunk)) {
    head_forward(sd, slot, layers.back(), train, s);
  } else if (!cfg.post_ln()) {
    // x = h + Drop(mlp) of the last layer; the residual add of the fused layernorm computes it
    // (its normalized output goes to scratch).
    const gpt_detail::LayerWeights& lw = buf.w.layers[static_cast<size_t>(layers.back())];
    blocks::residual_norm_forward(gpt_detail::norm_args(cfg, rows()), buf.send_act,
                                  tp.local_rows(buf.dln), buf.stat_mean, buf.stat_rstd,
                                  buf.act(slot, layers.back()).h, tp.local_rows(buf.proj), lw.ln2_g,
                                  lw.ln2_b, s);
  }
  ready_for_backward[key] = train;
}

void GptModel::Impl::head_backward(int64_t slot, float grad_scale, engine::Stream& s) {
  const gpt_detail::HeadActs& hd = buf.head[static_cast<size_t>(slot)];
  const blocks::NormArgs ln = gpt_detail::norm_args(cfg, rows());
  TensorView dlnf;  // d(head input), this rank's rows
  if (hidden_head) {
    // A head outside (set_hidden_head) left its whole, TP-replicated d(head input) in buf.dln.
    dlnf = tp.local_rows(buf.dln);
  } else if (cfg.mlm_head()) {
    // d(head input) is whole on every TP rank (the heads are replicated): keep the own rows.
    mlm_head_backward(buf.slot_data(n_chunks() - 1, slot), slot, grad_scale, s);
    dlnf = tp.local_rows(buf.dln);
  } else {
    // LM head (wte when tied): dhead += grad_scale dlogits^T lnf;  dlnf = grad_scale dlogits
    // head (summed over TP: each rank holds a vocabulary slice).
    blocks::lm_head_backward(lm_head_config(), buf.dln, buf.g.lm_head, hd.logits, hd.lnf,
                             buf.w.lm_head, grad_scale, s);
    dlnf = tp.col_parallel_in_grad(buf.dln, s);
  }
  if (cfg.post_ln()) {
    engine::copy(buf.dres, dlnf, s);
    return;
  }
  blocks::norm_backward(ln, ops::Accumulate::kOverwrite, buf.dres, buf.g.lnf_g, buf.g.lnf_b, dlnf,
                        hd.x_final, buf.w.lnf_g, hd.lnf_mean, hd.lnf_rstd, buf.op_ws, s);
}

void GptModel::Impl::layer_grads_done(int64_t local, const gpt_detail::LayerWeights& lg,
                                      engine::Stream& s) {
  // ZeRO 2/3 reduce this micro-batch's scratch now: sum its layernorm gradients over TP first
  // (the whole-buffer stages do it once per step, finish_backward).
  if (shard.zero_stage >= 2) sync_layernorm_grads(lg, s);
  sync->layer_grads_done(local, s);
}

void GptModel::Impl::layer_backward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                                    TensorView dres, engine::Stream& s) {
  const int64_t l = buf.layer_ids[static_cast<size_t>(local)];
  // Full recomputation: everything but x was overwritten by later layers; rerun the forward
  // from x (the same dropout masks: the slot keeps its dropout offset). Post-LN writes its
  // output to scratch (the next layer's input is still there, the chunk output may be in
  // flight).
  if (shard.recompute == Recompute::kFull) {
    if (cfg.post_ln()) {
      post_layer_forward(sd, slot, local, tp.local_rows(buf.dln), /*train=*/true, s);
    } else {
      layer_forward(sd, slot, local, /*fused_input=*/false, /*train=*/true, s);
    }
  } else {
    sync->gather_layer(local, s);  // ZeRO-3
  }
  sync->zero_layer_grads(local, s);  // ZeRO 2/3: the layer's gradients in zeroed scratch
  const gpt_detail::LayerWeights& lw = buf.w.layers[static_cast<size_t>(local)];
  const gpt_detail::LayerWeights& lg = buf.g.layers[static_cast<size_t>(local)];
  // dres holds d(layer output) and becomes d x.
  blocks::layer_backward(layer_config(), dres, layer_weights(lg), layer_acts(buf.act(slot, local)),
                         layer_weights(lw), layer_inputs(sd), layer_sites(sd, l), layer_scratch(),
                         tp, s);
  layer_grads_done(local, lg, s);
}

void GptModel::Impl::backward_chunk(int64_t chunk, int64_t slot, float grad_scale,
                                    engine::Stream& s) {
  ANVIL_CHECK_MSG(chunk >= 0 && chunk < n_chunks() && slot >= 0 && slot < buf.slots,
                  absl::StrCat("GptModel::backward_chunk: chunk ", chunk, " of ", n_chunks(),
                               ", slot ", slot, " of ", buf.slots));
  ANVIL_CHECK_MSG(ready_for_backward[static_cast<size_t>(chunk * buf.slots + slot)],
                  "GptModel::backward needs a preceding forward with train = true");
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "GptModel::backward: stream device differs from the model's");
  GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
  sync->start_pass(parallel::PassDirection::kBackward);
  const std::vector<int64_t>& layers = buf.chunk_layers[static_cast<size_t>(chunk)];
  TensorView dres = buf.out_grad.empty()
                        ? TensorView{}
                        : buf.out_grad[static_cast<size_t>(chunk * buf.slots + slot)];
  if (is_final_chunk(chunk)) {
    head_backward(slot, grad_scale, s);
    dres = buf.dres;
  }
  const gpt_detail::SlotData& sd = buf.slot_data(chunk, slot);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) layer_backward(sd, slot, *it, dres, s);
  last_input_grad = dres;
  if (!(shard.pre && chunk == 0)) return;
  if (cfg.hidden_dropout > 0.0f) {
    ops::dropout_backward(
        {cfg.hidden_dropout, seed, site_offset(sd.dropout_offset, 0) + tp.row_shift(dres)}, dres,
        dres, s);
  }
  if (!buf.embed.empty()) {  // dres becomes d(word embedding) through the embedding LayerNorm
    const gpt_detail::EmbedActs& e = buf.embed[static_cast<size_t>(slot)];
    ops::layernorm_backward({rows(), cfg.d_model, cfg.ln_eps}, ops::Accumulate::kOverwrite,
                            tp.local_rows(buf.dln), buf.g.wte_ln_g, buf.g.wte_ln_b, dres, e.sum,
                            buf.w.wte_ln_g, e.mean, e.rstd, buf.op_ws, s);
    dres = tp.local_rows(buf.dln);
  }
  blocks::embedding_backward(embedding_config(), {buf.g.wte, buf.g.wpe, buf.g.tte},
                             tp.gather_grad(dres, s), embedding_inputs(sd), s);
}

blocks::EmbeddingConfig GptModel::Impl::embedding_config() const {
  blocks::EmbeddingConfig c;
  c.rows = shape.micro_batch * shape.seq_len;
  c.d_model = cfg.d_model;
  c.vocab = cfg.padded();
  c.max_positions = cfg.max_seq_len;
  c.type_vocab = cfg.type_vocab_size;
  c.tp = shard.tp;
  c.tp_rank = shard.tp_rank;
  return c;
}

}  // namespace anvil::model
