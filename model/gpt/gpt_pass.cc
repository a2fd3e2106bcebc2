// GPT-2 forward and backward over one micro-batch and one model chunk (the math is in gpt.h).
// Rows r = b*T + t.
// Forward, with Drop = hidden dropout (train only):
//   x_0 = Drop(wte[tok] + wpe[pos])
//   per layer: ln1 = LN1(x) (fused with the residual sum x = h' + Drop(mlp') of the previous
//   layer for l > 0); qkv = ln1 Wqkv^T + b; atty = attention(qkv); h = x + Drop(atty Wo^T + bo);
//   ln2 = LN2(h) (fused); gelu = gelu_tanh(ln2 Wfc^T + bfc); mlp = gelu Wp^T + bp (the shared
//   MLP block, model/blocks/mlp.h: c_fc = W_in, c_proj = W_out)
//   x_L = h + Drop(mlp) fused with lnf = LNf(x_L); logits = lnf wte^T; losses = CE(logits)
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
// head lm_head instead of wte (untied). BERT (type bert): + tte[type] in the embedding (TP rank
// 0, before the sum), bidirectional attention up to each sample's length, post-LN layers
// (gpt_post_ln.cc, sharing the attention / MLP sub-blocks here), GELU-erf, and the MLM and
// binary heads (bert_head.cc) on x_final (post-LN) or ln_f's output instead of the LM head.
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/blocks/linear.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "model/gpt/gpt_impl.h"
#include "ops/attention.h"
#include "ops/axpy.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/flash_attention.h"
#include "ops/gemm.h"
#include "ops/layernorm.h"
#include "ops/rotary.h"
#include "ops/vocab_parallel_cross_entropy.h"
#include "parallel/comm.h"

namespace anvil::model {

namespace {

using blocks::input_grad;
using blocks::linear;
using blocks::row_linear;
using blocks::weight_grad;
using engine::ConstTensorView;
using engine::TensorView;

// q | k | v column blocks of a fused [B*T, 3*H*Dh] buffer.
std::array<TensorView, 3> split_qkv(TensorView qkv) {
  const int64_t hd = qkv.dim(1) / 3;
  return {engine::slice_cols(qkv, 0, hd), engine::slice_cols(qkv, hd, 2 * hd),
          engine::slice_cols(qkv, 2 * hd, 3 * hd)};
}

TensorView rows_view(TensorView flat, int64_t rows, int64_t cols) {
  return flat_slice(flat, 0, {rows, cols});
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
  if (!cfg.bert()) return;
  ANVIL_CHECK_MSG(batch.token_types && batch.lengths && (batch.binary_labels || !cfg.binary_head),
                  "GptModel::set_batch: BERT needs token_types, lengths and binary_labels");
  put(d.token_types, batch.token_types);
  const int64_t B = shape.micro_batch;
  engine::copy(d.lengths, engine::make_view(batch.lengths, engine::DType::kI32, host, {B}), s);
  if (cfg.binary_head) {
    engine::copy(d.binary_labels,
                 engine::make_view(batch.binary_labels, engine::DType::kI32, host, {B}), s);
  }
  d.counted = 0;
  for (int64_t i = 0; i < bt; ++i) d.counted += batch.targets[i] >= 0;
}

void GptModel::Impl::embed(int64_t slot, bool train, engine::Stream& s) {  // chunk 0
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model;
  const int64_t vrows = cfg.padded() / shard.tp;  // of this rank's embedding slice
  const gpt_detail::SlotData& sd = buf.slot_data(0, slot);
  TensorView x = buf.act(slot, buf.chunk_layers[0][0]).x;
  ops::EmbeddingArgs ea{bt, d, vrows, cfg.max_seq_len};
  ea.vocab_start = shard.tp_rank * vrows;
  // Vocab-parallel: positions (learned only) are added once (TP rank 0) before the sum over TP
  // (with sequence parallelism a reduce-scatter of the whole rows into this rank's). With the
  // embedding LayerNorm (BLOOM) the sum is its input and x its output.
  const gpt_detail::EmbedActs* eln =
      buf.embed.empty() ? nullptr : &buf.embed[static_cast<size_t>(slot)];
  const TensorView sum = eln != nullptr ? eln->sum : x;
  const TensorView e = tp.sp() ? buf.proj : sum;
  ops::embedding_forward(ea, e, sd.tokens, sd.positions, buf.w.wte,
                         shard.tp_rank == 0 ? buf.w.wpe : TensorView{}, s);
  if (!buf.w.tte.empty() && shard.tp_rank == 0) {  // BERT: + tte[type], once before the TP sum
    const TensorView t = buf.dln;                  // scratch [B*T, d]
    ops::embedding_forward(token_type_args(), t, sd.token_types, {}, buf.w.tte, {}, s);
    ops::axpy(1.0f, flat_slice(e, 0, {bt * d}), flat_slice(t, 0, {bt * d}), s);
  }
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

void GptModel::Impl::hidden_drop(const gpt_detail::SlotData& sd, TensorView x, int64_t site,
                                 bool train, engine::Stream& s) {
  if (train && cfg.hidden_dropout > 0.0f) {  // in place, on this rank's rows
    ops::dropout_forward(
        {cfg.hidden_dropout, seed, site_offset(sd.dropout_offset, site) + tp.row_shift(x)}, x, x,
        s);
  }
}

TensorView GptModel::Impl::attention_block_forward(const gpt_detail::SlotData& sd,
                                                   gpt_detail::LayerActs& a,
                                                   const gpt_detail::LayerWeights& lw, int64_t l,
                                                   ConstTensorView in, bool train,
                                                   engine::Stream& s) {
  linear(a.qkv, in, lw.qkv_w, lw.qkv_b, s);
  if (cfg.position_embedding == PositionEmbedding::kRotary) {  // q, k rotated in place
    const auto [q, k, v] = split_qkv(a.qkv);
    ops::rotary_forward(rotary_args(), q, sd.positions, s);
    ops::rotary_forward(rotary_args(), k, sd.positions, s);
  }
  attention_core_forward(sd, a, l, train, s);
  row_linear(buf.proj, a.atty, lw.attn_proj_w, lw.attn_proj_b, shard.tp_rank == 0, s);
  TensorView proj = tp.row_parallel_out(buf.proj, s);
  hidden_drop(sd, proj, 2 + 3 * l, train, s);
  return proj;
}

TensorView GptModel::Impl::mlp_block_forward(const gpt_detail::SlotData& sd,
                                             gpt_detail::LayerActs& a,
                                             const gpt_detail::LayerWeights& lw, int64_t l,
                                             bool train, engine::Stream& s) {
  blocks::mlp_forward(gpt_detail::mlp_config(cfg, shard), buf.proj, a.mlp, a.ln2,
                      gpt_detail::mlp_weights(lw), train, {}, s);
  TensorView proj = tp.row_parallel_out(buf.proj, s);
  hidden_drop(sd, proj, 3 + 3 * l, train, s);
  return proj;
}

void GptModel::Impl::layer_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                                   bool fused_input, bool train, engine::Stream& s) {
  const int64_t l = buf.layer_ids[static_cast<size_t>(local)];
  const blocks::NormArgs ln = gpt_detail::norm_args(cfg, rows());
  gpt_detail::LayerActs& a = buf.act(slot, local);
  sync->gather_layer(local, s);  // ZeRO-3
  const gpt_detail::LayerWeights& lw = buf.w.layers[static_cast<size_t>(local)];
  if (!fused_input) {
    blocks::norm_forward(ln, tp.local_rows(a.ln1), a.ln1_mean, a.ln1_rstd, a.x, lw.ln1_g, lw.ln1_b,
                         s);
  } else {  // x = h' + Drop(mlp') of the previous layer, fused with LN1
    blocks::residual_norm_forward(ln, a.x, tp.local_rows(a.ln1), a.ln1_mean, a.ln1_rstd,
                                  buf.act(slot, local - 1).h, tp.local_rows(buf.proj), lw.ln1_g,
                                  lw.ln1_b, s);
  }
  tp.gather_rows(a.ln1, s);
  const TensorView proj = attention_block_forward(sd, a, lw, l, a.ln1, train, s);
  blocks::residual_norm_forward(ln, a.h, tp.local_rows(a.ln2), a.ln2_mean, a.ln2_rstd, a.x, proj,
                                lw.ln2_g, lw.ln2_b, s);
  tp.gather_rows(a.ln2, s);
  mlp_block_forward(sd, a, lw, l, train, s);
}

ops::RotaryArgs GptModel::Impl::rotary_args() const {
  return {shape.micro_batch * shape.seq_len, cfg.n_heads / shard.tp, cfg.head_dim(),
          cfg.rotary_dim(), cfg.rotary_base};
}

ops::AttentionArgs GptModel::Impl::attention_args(int64_t layer, float dropout_p,
                                                  uint64_t dropout_offset) const {
  const int64_t heads = cfg.n_heads / shard.tp;
  ops::AttentionArgs aa{shape.micro_batch,
                        shape.seq_len,
                        heads,
                        cfg.head_dim(),
                        1.0f / std::sqrt(static_cast<float>(cfg.head_dim())),
                        dropout_p,
                        seed,
                        site_offset(dropout_offset, 1 + 3 * layer)};
  aa.total_heads = cfg.n_heads;
  aa.head_offset = shard.tp_rank * heads;
  return aa;
}

namespace {

ops::FlashAttentionArgs flash_args(const ops::AttentionArgs& aa, const GptConfig& cfg) {
  ops::FlashAttentionArgs fa;
  // ALiBi: Megatron's slopes of the model heads head_offset .. head_offset + heads - 1.
  if (cfg.position_embedding == PositionEmbedding::kAlibi) fa.bias = ops::AttentionBias::kAlibi;
  fa.batch = aa.batch, fa.q_len = fa.kv_len = aa.seq, fa.heads = aa.heads;
  fa.head_dim = aa.head_dim, fa.causal = cfg.causal, fa.scale = aa.scale;
  fa.dropout_p = aa.dropout_p, fa.seed = aa.seed, fa.offset = aa.offset;
  fa.total_heads = aa.total_heads, fa.head_offset = aa.head_offset;
  return fa;
}

ops::AttentionMasks document_masks(const gpt_detail::SlotData& sd) {
  ops::AttentionMasks m;
  if (sd.has_segments) m.seg_q = m.seg_k = sd.segments;
  if (!sd.lengths.empty()) m.kv_lengths = sd.lengths;  // BERT's key-padding mask
  return m;
}

}  // namespace

void GptModel::Impl::attention_core_forward(const gpt_detail::SlotData& sd,
                                            gpt_detail::LayerActs& a, int64_t layer, bool train,
                                            engine::Stream& s) {
  const ops::AttentionArgs aa =
      attention_args(layer, train ? cfg.attention_dropout : 0.0f, sd.dropout_offset);
  if (a.lse.empty()) {
    ops::attention_forward(aa, a.atty, a.probs, a.qkv, sd.has_segments ? sd.segments : TensorView{},
                           buf.op_ws, s);
    return;
  }
  const auto [q, k, v] = split_qkv(a.qkv);
  ops::flash_attention_forward(flash_args(aa, cfg), a.atty, a.lse, q, k, v, document_masks(sd), s);
}

void GptModel::Impl::attention_core_backward(const gpt_detail::SlotData& sd,
                                             const gpt_detail::LayerActs& a, int64_t layer,
                                             TensorView dqkv, TensorView datty, engine::Stream& s) {
  const ops::AttentionArgs aa = attention_args(layer, cfg.attention_dropout, sd.dropout_offset);
  if (a.lse.empty()) {
    const TensorView segments = sd.has_segments ? sd.segments : TensorView{};
    if (shard.recompute == Recompute::kSelective) {
      // The probabilities were not kept: recompute them (atty is rewritten with equal values).
      ops::attention_forward(aa, a.atty, a.probs, a.qkv, segments, buf.op_ws, s);
    }
    ops::attention_backward(aa, dqkv, datty, a.qkv, a.probs, segments, buf.op_ws, s);
    return;
  }
  const auto [q, k, v] = split_qkv(a.qkv);
  const auto [dq, dk, dv] = split_qkv(dqkv);
  ops::flash_attention_backward(flash_args(aa, cfg), dq, dk, dv, {}, datty, q, k, v, a.atty, a.lse,
                                document_masks(sd), buf.op_ws, s);
}

void GptModel::Impl::head_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t last_local,
                                  bool train, engine::Stream& s) {
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model;
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
  if (cfg.bert()) {
    bert_head_forward(sd, slot, train, s);
    return;
  }
  ops::GemmArgs head{bt, cfg.padded() / shard.tp, d};
  head.trans_b = true;
  ops::gemm(head, hd.logits, hd.lnf, buf.w.lm_head, {}, {}, s);
  lm_loss(sd, hd, train, s);
}

void GptModel::Impl::lm_loss(const gpt_detail::SlotData& sd, gpt_detail::HeadActs& hd, bool train,
                             engine::Stream& s) {
  const int64_t bt = shape.micro_batch * shape.seq_len, cols = cfg.padded() / shard.tp;
  // Training: dlogits (grad_scale 1) replace the logits in place; evaluation keeps the logits.
  const TensorView dlogits = train ? hd.logits : TensorView{};
  if (shard.tp == 1) {
    ops::softmax_cross_entropy({bt, cfg.vocab_size, cfg.padded(), 1.0f}, hd.losses, dlogits,
                               hd.logits, sd.targets, s);
    return;
  }
  const TensorView row_max = flat_slice(buf.ce, 0, {bt});
  const TensorView sums = flat_slice(buf.ce, bt, {2 * bt});  // sum of exp | target logit
  const TensorView sum_exp = flat_slice(buf.ce, bt, {bt});
  const TensorView target_logit = flat_slice(buf.ce, 2 * bt, {bt});
  const ops::VocabShardArgs va{bt, cfg.vocab_size, shard.tp_rank * cols, cols, 1.0f};
  ops::vocab_shard_max(va, row_max, hd.logits, s);
  shard.tp_comm->all_reduce(row_max, parallel::ReduceOp::kMax, s);
  ops::vocab_shard_sum_exp(va, sum_exp, target_logit, hd.logits, row_max, sd.targets, s);
  shard.tp_comm->all_reduce(sums, parallel::ReduceOp::kSum, s);
  ops::vocab_shard_cross_entropy(va, hd.losses, dlogits, hd.logits, row_max, sum_exp, target_logit,
                                 sd.targets, s);
}

void GptModel::Impl::forward_chunk(int64_t chunk, int64_t slot, bool train, uint64_t dropout_offset,
                                   engine::Stream& s) {
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "GptModel::forward: stream device differs from the model's");
  ANVIL_CHECK_MSG(chunk >= 0 && chunk < n_chunks() && slot >= 0 && slot < buf.slots,
                  absl::StrCat("GptModel::forward_chunk: chunk ", chunk, " of ", n_chunks(),
                               ", slot ", slot, " of ", buf.slots));
  gpt_detail::GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
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
  } else if (cfg.bert()) {
    // d(head input) is whole on every TP rank (the heads are replicated): keep the own rows.
    bert_head_backward(buf.slot_data(n_chunks() - 1, slot), slot, grad_scale, s);
    dlnf = tp.local_rows(buf.dln);
  } else {
    // LM head (wte when tied): dhead += grad_scale dlogits^T lnf;  dlnf = grad_scale dlogits
    // head (summed over TP: each rank holds a vocabulary slice).
    weight_grad(buf.g.lm_head, hd.logits, hd.lnf, s, grad_scale);
    input_grad(buf.dln, hd.logits, buf.w.lm_head, s, grad_scale);
    dlnf = tp.col_parallel_in_grad(buf.dln, s);
  }
  if (cfg.post_ln()) {
    engine::copy(buf.dres, dlnf, s);
    return;
  }
  blocks::norm_backward(ln, ops::Accumulate::kOverwrite, buf.dres, buf.g.lnf_g, buf.g.lnf_b, dlnf,
                        hd.x_final, buf.w.lnf_g, hd.lnf_mean, hd.lnf_rstd, buf.op_ws, s);
}

TensorView GptModel::Impl::drop_grad(const gpt_detail::SlotData& sd, int64_t site, TensorView dres,
                                     engine::Stream& s) {
  if (cfg.hidden_dropout <= 0.0f) return tp.gather_grad(dres, s);
  const TensorView local = tp.local_rows(buf.proj);
  ops::dropout_backward(
      {cfg.hidden_dropout, seed, site_offset(sd.dropout_offset, site) + tp.row_shift(local)}, local,
      dres, s);
  return tp.gather_grad(local, s);
}

TensorView GptModel::Impl::mlp_block_backward(const gpt_detail::SlotData& sd,
                                              const gpt_detail::LayerActs& a,
                                              const gpt_detail::LayerWeights& lw,
                                              const gpt_detail::LayerWeights& lg, int64_t l,
                                              TensorView dres, engine::Stream& s) {
  const blocks::MlpConfig mc = gpt_detail::mlp_config(cfg, shard);
  const int64_t bt = shape.micro_batch * shape.seq_len;
  const blocks::MlpScratch scratch{rows_view(buf.dbig, bt, mc.in_width()), buf.dglu};
  // MLP: out = Drop(gelu Wp^T + bp); dres holds d out.
  const TensorView dproj = drop_grad(sd, 3 + 3 * l, dres, s);
  blocks::mlp_backward(mc, buf.dln, gpt_detail::mlp_weights(lg), dproj, a.ln2, a.mlp,
                       gpt_detail::mlp_weights(lw), {}, scratch, s);
  return tp.col_parallel_in_grad(buf.dln, s);
}

TensorView GptModel::Impl::attention_block_backward(const gpt_detail::SlotData& sd,
                                                    const gpt_detail::LayerActs& a,
                                                    const gpt_detail::LayerWeights& lw,
                                                    const gpt_detail::LayerWeights& lg, int64_t l,
                                                    ConstTensorView in, TensorView dres,
                                                    engine::Stream& s) {
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model, n_tp = shard.tp;
  const TensorView dqkv = rows_view(buf.dbig, bt, 3 * d / n_tp);
  const TensorView datty = rows_view(buf.dln, bt, d / n_tp);
  // Attention: out = Drop(atty Wo^T + bo); dres holds d out.
  const TensorView dproj = drop_grad(sd, 2 + 3 * l, dres, s);
  blocks::linear_backward(datty, lg.attn_proj_w, lg.attn_proj_b, dproj, a.atty, lw.attn_proj_w, s);
  attention_core_backward(sd, a, l, dqkv, datty, s);
  if (cfg.position_embedding == PositionEmbedding::kRotary) {  // d(q, k before the rotation)
    const auto [dq, dk, dv] = split_qkv(dqkv);
    ops::rotary_backward(rotary_args(), dq, sd.positions, s);
    ops::rotary_backward(rotary_args(), dk, sd.positions, s);
  }
  blocks::linear_backward(buf.dln, lg.qkv_w, lg.qkv_b, dqkv, in, lw.qkv_w, s);
  return tp.col_parallel_in_grad(buf.dln, s);
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
  const blocks::NormArgs ln = gpt_detail::norm_args(cfg, rows());
  // Full recomputation: everything but x was overwritten by later layers; rerun the forward
  // from x (the same dropout masks: the slot keeps its dropout offset).
  if (shard.recompute == Recompute::kFull) {
    layer_forward(sd, slot, local, /*fused_input=*/false, /*train=*/true, s);
  } else {
    sync->gather_layer(local, s);  // ZeRO-3
  }
  sync->zero_layer_grads(local, s);  // ZeRO 2/3: the layer's gradients in zeroed scratch
  const gpt_detail::LayerActs& a = buf.act(slot, local);
  const gpt_detail::LayerWeights& lw = buf.w.layers[static_cast<size_t>(local)];
  const gpt_detail::LayerWeights& lg = buf.g.layers[static_cast<size_t>(local)];
  // x_{l+1} = h + Drop(mlp); dres holds d x_{l+1}.
  TensorView dln = mlp_block_backward(sd, a, lw, lg, l, dres, s);
  // dres becomes d h = d x_{l+1} + LN2'(dln) (dproj, possibly aliasing dres, is consumed).
  blocks::norm_backward(ln, ops::Accumulate::kAdd, dres, lg.ln2_g, lg.ln2_b, dln, a.h, lw.ln2_g,
                        a.ln2_mean, a.ln2_rstd, buf.op_ws, s);
  // h = x + Drop(attn).
  dln = attention_block_backward(sd, a, lw, lg, l, a.ln1, dres, s);
  // dres becomes d x_l.
  blocks::norm_backward(ln, ops::Accumulate::kAdd, dres, lg.ln1_g, lg.ln1_b, dln, a.x, lw.ln1_g,
                        a.ln1_mean, a.ln1_rstd, buf.op_ws, s);
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
  gpt_detail::GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
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
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    if (cfg.post_ln()) {
      post_layer_backward(sd, slot, *it, dres, s);
    } else {
      layer_backward(sd, slot, *it, dres, s);
    }
  }
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
  const int64_t vrows = cfg.padded() / shard.tp;
  ops::EmbeddingArgs ea{shape.micro_batch * shape.seq_len, cfg.d_model, vrows, cfg.max_seq_len};
  ea.vocab_start = shard.tp_rank * vrows;
  const TensorView demb = tp.gather_grad(dres, s);
  ops::embedding_backward(ea, buf.g.wte, buf.g.wpe, demb, sd.tokens, sd.positions, s);
  if (!buf.g.tte.empty()) {
    ops::embedding_backward(token_type_args(), buf.g.tte, {}, demb, sd.token_types, {}, s);
  }
}

ops::EmbeddingArgs GptModel::Impl::token_type_args() const {
  return {shape.micro_batch * shape.seq_len, cfg.d_model, cfg.type_vocab_size, 0};
}

}  // namespace anvil::model
