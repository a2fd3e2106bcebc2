// T5 forward and backward over one micro-batch (the math is in t5.h; buffers in t5_impl.h).
// The encoder and decoder blocks, the shared embedding and the LM head are the shared blocks
// (model/blocks/layer.h, embedding.h, lm_head.h); this file maps T5's buffers, dropout sites,
// relative tables and ZeRO hooks onto them.
// Rows r = b*T + t. Each block's residual input is formed by the fused residual + RMSNorm of
// the next norm: x_{l+1} = h + Drop(proj) with RMS1_{l+1}(x_{l+1}), and the stack's last sum
// with its final norm. proj holds the last projection output (after its dropout).
// A training forward overwrites the logits with dlogits = softmax - onehot (grad_scale 1);
// backward folds grad_scale (and v1.0's d^-0.5) into the alpha of the two LM-head GEMMs.
// Backward is the exact reverse: dres carries d(residual stream); each RMSNorm backward adds
// (+=) its input gradient into it; denc collects d(encoder output) from every decoder layer's
// k|v projection; the relative tables' gradients are summed in f32 (drel_f32, +=, as the
// attention op gives them) and added to the parameter gradients at the end. Parameter
// gradients accumulate (+=).
// TP and sequence parallelism through parallel/tensor_parallel.h (tp): with sequence
// parallelism the residual streams (x, h, h2, dres), RMSNorm statistics and the dropouts on them
// are this rank's rows (numbered as those rows on one rank: row_offset); each norm's output is
// all-gathered (gather_rows) before the column-parallel GEMM that reads it, each row-parallel
// output reduce-scattered (project_out), and backward mirrors that (gather_grad before the
// weight gradients, reduce-scatter of the input gradients). The encoder output enc is gathered
// once per forward and read by every cross k|v; d enc is reduce-scattered after the decoder.
// Full recomputation reruns a layer's forward from its kept input before its backward.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/layer.h"
#include "model/blocks/lm_head.h"
#include "model/blocks/norm.h"
#include "model/t5/t5_impl.h"
#include "ops/axpy.h"
#include "ops/cast.h"
#include "ops/dropout.h"

namespace anvil::model {

namespace {

using engine::ConstTensorView;
using engine::TensorView;
using t5_detail::LayerActs;
using t5_detail::LayerWeights;

// The first rows x cols elements of a scratch buffer, as a contiguous [rows, cols].
TensorView scratch(TensorView flat, int64_t rows, int64_t cols, int64_t at = 0) {
  return flat_slice(flat, at, {rows, cols});
}

TensorView rel_slot(TensorView rel, int64_t k) {
  const int64_t n = rel.dim(1) * rel.dim(2);
  return flat_slice(rel, k * n, {rel.dim(1), rel.dim(2)});
}

// The last residual sum of a stack's local layers, h + Drop(proj) (proj: the last FFN output),
// as the stage's output hidden out [rows, d].
void stage_output(TensorView out, TensorView h, TensorView proj, engine::Stream& s) {
  const int64_t n = h.numel();
  engine::copy(out, h, s);
  ops::axpy(1.0f, flat_slice(out, 0, {n}), flat_slice(proj, 0, {n}), s);
}

// y += x over all elements (same shapes).
void add_into(TensorView y, TensorView x, engine::Stream& s) {
  ops::axpy(1.0f, flat_slice(y, 0, {y.numel()}), flat_slice(x, 0, {x.numel()}), s);
}

}  // namespace

void T5Model::Impl::set_batch(const T5Batch& batch, engine::Stream& s) {
  ANVIL_CHECK_MSG(batch.enc_tokens && batch.dec_tokens && batch.labels,
                  "T5Model::forward: enc_tokens, dec_tokens and labels are required");
  const int64_t B = shape.micro_batch, re = B * shape.enc_len, rd = B * shape.dec_len;
  auto check_ids = [&](const int32_t* ids, int64_t n, int32_t lo, const char* what) {
    for (int64_t i = 0; i < n; ++i) {
      ANVIL_CHECK_MSG(ids[i] >= lo && ids[i] < cfg.vocab_size,
                      absl::StrCat("T5Model::forward: ", what, "[", i, "] = ", ids[i], " outside [",
                                   lo, ", vocab_size ", cfg.vocab_size, ")"));
    }
  };
  check_ids(batch.enc_tokens, re, 0, "enc_tokens");
  check_ids(batch.dec_tokens, rd, 0, "dec_tokens");
  check_ids(batch.labels, rd, -1, "labels");
  std::vector<int32_t> lengths(static_cast<size_t>(B), static_cast<int32_t>(shape.enc_len));
  act().has_lengths = batch.enc_lengths != nullptr;
  if (act().has_lengths) {
    for (int64_t b = 0; b < B; ++b) {
      const int32_t n = batch.enc_lengths[b];
      ANVIL_CHECK_MSG(n >= 1 && n <= shape.enc_len,
                      absl::StrCat("T5Model::forward: enc_lengths[", b, "] = ", n,
                                   " outside [1, enc_len ", shape.enc_len, "]"));
      lengths[static_cast<size_t>(b)] = n;
    }
  }
  const engine::Device host = engine::Device::kCpu;
  auto put = [&](TensorView dst, const int32_t* src, int64_t n) {
    engine::copy(dst, engine::make_view(src, engine::DType::kI32, host, {n}), s);
  };
  put(act().enc_tokens, batch.enc_tokens, re);
  put(act().dec_tokens, batch.dec_tokens, rd);
  put(act().labels, batch.labels, rd);
  put(act().enc_lengths, lengths.data(), B);
  s.synchronize();  // `lengths` is a local: the copy must be done before it goes away
}

blocks::LmHeadConfig T5Model::Impl::lm_head_config() const {
  blocks::LmHeadConfig c;
  c.rows = shape.micro_batch * shape.dec_len;
  c.d_model = cfg.d_model;
  c.vocab = cfg.loss_vocab();
  c.padded_vocab = cfg.padded();
  c.tp = shard.tp;
  c.tp_rank = shard.tp_rank;
  // v1.0 (tied): the head's input is scaled by d^-1/2.
  if (cfg.tied())
    c.input_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d_model)));
  return c;
}

void T5Model::Impl::dropout(TensorView x, bool train, uint64_t offset, engine::Stream& s) {
  if (train && cfg.dropout > 0.0f) ops::dropout_forward({cfg.dropout, seed, offset}, x, x, s);
}

void T5Model::Impl::dropout_grad(TensorView dx, ConstTensorView dy, uint64_t offset,
                                 engine::Stream& s) {
  ops::dropout_backward({cfg.dropout, seed, offset}, dx, dy, s);
}

namespace {

// The attention block (model/blocks/attention.h) for T5: flash attention without scaling;
// this rank's heads, numbered as the model's (dropout masks, relative-table columns); self
// attention with the relative-bucket bias, cross attention without.
blocks::AttentionConfig t5_attention(const T5Config& cfg, const T5Shard& sh, int64_t B, int64_t tq,
                                     int64_t tk, bool cross, bool causal) {
  blocks::AttentionConfig c;
  c.batch = B, c.q_len = tq, c.kv_len = tk;
  c.heads = cfg.n_heads, c.head_dim = cfg.d_kv;
  c.tp = sh.tp, c.tp_rank = sh.tp_rank;
  c.cross = cross, c.causal = causal;
  c.scale = 1.0f;
  c.position =
      cross ? blocks::AttentionPosition::kNone : blocks::AttentionPosition::kRelativeBuckets;
  c.dropout = cfg.dropout;
  return c;
}

blocks::AttentionWeights self_weights(const LayerWeights& w) {
  return {w.qkv, {}, {}, {}, w.o, {}};
}

blocks::AttentionWeights cross_weights(const LayerWeights& w) {
  return {w.cq, {}, w.ckv, {}, w.co, {}};
}

blocks::AttentionActs self_acts(const LayerActs& a) {
  return {a.qkv, {}, a.lse, {}, a.att, a.keep};
}

blocks::AttentionActs cross_acts(const LayerActs& a) {
  return {a.cq, a.ckv, a.clse, {}, a.catt, a.ckeep};
}

// T5's block fields as the layer block names them: ln2 / rstd2 (decoder) the cross-attention
// norm, ln_ff / rstd_ff the FFN's; h2 the residual after the cross-attention.
blocks::LayerActs layer_acts(const LayerActs& a) {
  blocks::LayerActs b;
  b.x = a.x;
  b.ln1 = a.ln1, b.ln1_rstd = a.rstd1;
  b.attn = self_acts(a);
  b.h = a.h;
  b.ln_cross = a.ln2, b.ln_cross_rstd = a.rstd2;
  b.cross = cross_acts(a);
  b.hc = a.h2;
  b.ln_mlp = a.ln_ff, b.ln_mlp_rstd = a.rstd_ff;
  b.mlp = a.ffn;
  return b;
}

blocks::LayerWeights layer_weights(const LayerWeights& w) {
  blocks::LayerWeights b;
  b.ln1_g = w.ln1, b.ln_cross_g = w.ln2, b.ln_mlp_g = w.ln_ff;
  b.attn = self_weights(w);
  b.cross = cross_weights(w);
  b.mlp = t5_detail::ffn_weights(w);
  return b;
}

}  // namespace

blocks::LayerConfig T5Model::Impl::layer_config(bool decoder) const {
  const int64_t B = shape.micro_batch, Te = shape.enc_len, Td = shape.dec_len;
  blocks::LayerConfig c;
  c.norm = norm_args(decoder ? dec_rows() : enc_rows());
  c.attn = decoder ? t5_attention(cfg, shard, B, Td, Td, false, true)
                   : t5_attention(cfg, shard, B, Te, Te, false, false);
  c.cross = decoder;
  c.cross_attn = t5_attention(cfg, shard, B, Td, Te, true, false);
  c.attn.save_dropout_mask = c.cross_attn.save_dropout_mask = prec.save_dropout_mask;
  // The FFN hidden's masks are numbered by this rank's [rows, d_ff / tp] columns (t5.h T5Shard).
  c.mlp = t5_detail::ffn_config(cfg, shard);
  c.mlp.fused_dropout = prec.fused_activation_dropout;
  c.dropout = cfg.dropout;
  return c;
}

blocks::LayerInputs T5Model::Impl::layer_inputs(bool decoder) {
  blocks::LayerInputs in;
  if (!decoder && act().has_lengths) in.attn.masks.kv_lengths = act().enc_lengths;
  in.attn.masks.rel_buckets = decoder ? buf.rel_buckets_dec : buf.rel_buckets_enc;
  in.attn.masks.rel_table = rel_slot(buf.rel_f32, decoder ? 1 : 0);
  in.d_rel_table = rel_slot(buf.drel_f32, decoder ? 1 : 0);
  if (decoder) {
    if (act().has_lengths) in.cross.masks.kv_lengths = act().enc_lengths;
    in.memory = act().enc;
    in.dmemory = buf.denc;  // d enc += dkv ckv (partial over TP)
  }
  return in;
}

blocks::LayerSites T5Model::Impl::layer_sites(bool decoder, int64_t l) const {
  auto at = [&](int64_t k) { return site_offset(decoder ? dec_site(l, k) : enc_site(l, k)); };
  blocks::LayerSites t;
  t.seed = seed;
  t.attn_probs = at(0), t.attn_out = at(1);
  if (decoder) {
    t.cross_probs = at(2), t.cross_out = at(3), t.mlp_act = at(4), t.mlp_out = at(5);
  } else {
    t.mlp_act = at(2), t.mlp_out = at(3);
  }
  return t;
}

blocks::LayerScratch T5Model::Impl::layer_scratch() const {
  return {buf.proj, buf.dln, buf.dbig, buf.dact, buf.op_ws};
}

void T5Model::Impl::layer_forward(bool decoder, int64_t l, bool train, bool from_x,
                                  engine::Stream& s) {
  before_layer_forward(decoder, l, s);
  const auto& stack = decoder ? act().dec_layers : act().enc_layers;
  const LayerWeights& w = (decoder ? buf.w.dec : buf.w.enc)[static_cast<size_t>(l)];
  const blocks::LayerConfig c = layer_config(decoder);
  // from_x: x is the embedding, the previous stage's hidden or kept for recomputation; else
  // x = h' + Drop(ffn') of the previous layer.
  const TensorView prev =
      from_x ? TensorView{}
             : blocks::last_residual(c, layer_acts(stack[static_cast<size_t>(l - 1)]));
  blocks::layer_forward(c, layer_acts(stack[static_cast<size_t>(l)]), layer_weights(w),
                        layer_inputs(decoder), prev, {}, train, layer_sites(decoder, l),
                        layer_scratch(), tp, s);
}

void T5Model::Impl::layer_backward(bool decoder, int64_t l, engine::Stream& s) {
  before_layer_backward(decoder, l, s);
  if (recompute_full()) layer_forward(decoder, l, /*train=*/true, /*from_x=*/true, s);
  const LayerWeights& w = (decoder ? buf.w.dec : buf.w.enc)[static_cast<size_t>(l)];
  const LayerWeights& g = (decoder ? buf.g.dec : buf.g.enc)[static_cast<size_t>(l)];
  const LayerActs& a = (decoder ? act().dec_layers : act().enc_layers)[static_cast<size_t>(l)];
  // dres holds d(layer output) and becomes d x.
  const TensorView dres = scratch(buf.dres, decoder ? dec_rows() : enc_rows(), cfg.d_model);
  blocks::layer_backward(layer_config(decoder), dres, layer_weights(g), layer_acts(a),
                         layer_weights(w), layer_inputs(decoder), layer_sites(decoder, l),
                         layer_scratch(), tp, s);
  after_layer_backward(decoder, l, s);
}

void T5Model::Impl::forward(bool train, engine::Stream& s) {
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "T5Model::forward: stream device differs from the model's");
  GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
  act().ready_for_backward = false;
  sync->start_pass(parallel::PassDirection::kForward);
  // The relative tables as the attention op takes them (f32).
  if (has_enc()) ops::cast(rel_slot(buf.rel_f32, 0), buf.w.rel_enc, s);
  if (has_dec()) ops::cast(rel_slot(buf.rel_f32, 1), buf.w.rel_dec, s);
  if (has_enc()) encoder_forward(train, s);
  if (has_dec()) decoder_forward(train, s);
  act().ready_for_backward = train;
}

void T5Model::Impl::encoder_forward(bool train, engine::Stream& s) {
  const int64_t re = shape.micro_batch * shape.enc_len, d = cfg.d_model;
  const int64_t Le = cfg.n_encoder_layers;
  LayerActs& first = act().enc_layers[static_cast<size_t>(layers.enc_begin)];
  if (embeds_enc()) embed(first.x, act().enc_tokens, train, 0, s);
  for (int64_t l = layers.enc_begin; l < layers.enc_end; ++l) {
    layer_forward(/*decoder=*/false, l, train, l == layers.enc_begin, s);
  }
  const TensorView last_h = act().enc_layers[static_cast<size_t>(layers.enc_end - 1)].h;
  const TensorView last_proj = tp.local_rows(scratch(buf.proj, re, d));
  if (!ends_enc()) {
    stage_output(buf.out, last_h, last_proj, s);
    return;
  }
  final_norm(act().x_enc, act().enc_norm, act().enc_rstd, act().enc, last_h, last_proj,
             buf.w.enc_final, train, 1 + 4 * Le, s);
}

void T5Model::Impl::embed(TensorView x, TensorView tokens, bool train, int64_t site,
                          engine::Stream& s) {
  // Vocab-parallel: each rank's rows of its slice (others 0), summed over TP (with sequence
  // parallelism reduce-scattered into this rank's rows x).
  const int64_t rows = tokens.numel(), d = cfg.d_model;
  const TensorView e = tp.sp() ? scratch(buf.proj, rows, d) : x;
  blocks::embedding_forward(embedding_config(rows), e, {tokens, {}, {}}, {buf.w.shared, {}, {}}, {},
                            s);
  tp.reduce_rows_into(x, e, s);
  dropout(x, train, row_offset(site, x), s);
}

void T5Model::Impl::final_norm(TensorView sum, TensorView norm, TensorView rstd, TensorView out,
                               TensorView h, TensorView proj, TensorView gamma, bool train,
                               int64_t site, engine::Stream& s) {
  blocks::residual_norm_forward(norm_args(sum.dim(0)), sum, norm, {}, rstd, h, proj, gamma, {}, s);
  const TensorView mine = tp.local_rows(out);
  ops::dropout_forward({train ? cfg.dropout : 0.0f, seed, row_offset(site, mine)}, mine, norm, s);
}

void T5Model::Impl::decoder_forward(bool train, engine::Stream& s) {
  const int64_t rd = shape.micro_batch * shape.dec_len, d = cfg.d_model;
  const int64_t Le = cfg.n_encoder_layers;
  LayerActs& first = act().dec_layers[static_cast<size_t>(layers.dec_begin)];
  // The encoder output: this rank's rows (from the encoder or the previous stage) to all rows.
  tp.gather_rows(act().enc, s);
  if (embeds_dec()) embed(first.x, act().dec_tokens, train, 2 + 4 * Le, s);
  for (int64_t l = layers.dec_begin; l < layers.dec_end; ++l) {
    layer_forward(/*decoder=*/true, l, train, l == layers.dec_begin, s);
  }
  const TensorView last_h2 = act().dec_layers[static_cast<size_t>(layers.dec_end - 1)].h2;
  const TensorView last_proj = tp.local_rows(scratch(buf.proj, rd, d));
  if (!post()) {
    stage_output(buf.out, last_h2, last_proj, s);
    return;
  }
  final_norm(act().x_dec, act().dec_norm, act().dec_rstd, act().dec, last_h2, last_proj,
             buf.w.dec_final, train, n_sites() - 1, s);
  tp.gather_rows(act().dec, s);

  // LM head (v1.0: tied, the input scaled by d^-1/2) and the loss; training keeps dlogits.
  const blocks::LmHeadConfig head = lm_head_config();
  blocks::lm_head_forward(head, act().logits, act().dec, buf.w.lm_head, s);
  blocks::lm_head_loss(head, act().losses, act().logits, act().labels, {}, train, buf.ce,
                       shard.tp_comm, s);
}

void T5Model::Impl::backward(float grad_scale, engine::Stream& s) {
  ANVIL_CHECK_MSG(act().ready_for_backward, "T5Model::backward needs a preceding training forward");
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "T5Model::backward: stream device differs from the model's");
  GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
  engine::fill_zero(buf.drel_f32, s);
  sync->start_pass(parallel::PassDirection::kBackward);
  if (has_dec()) decoder_backward(grad_scale, s);
  if (has_enc()) encoder_backward(s);
  add_relative_grads(s);
}

void T5Model::Impl::decoder_backward(float grad_scale, engine::Stream& s) {
  const int64_t rd = shape.micro_batch * shape.dec_len;
  const int64_t d = cfg.d_model, Le = cfg.n_encoder_layers;
  TensorView dres = scratch(buf.dres, dec_rows(), d);
  if (post()) {
    // LM head: d head += alpha dlogits^T dec; d dec = alpha dlogits head (each rank's
    // vocabulary slice: partial over TP), alpha = grad_scale (v1.0: times d^-1/2).
    blocks::lm_head_backward(lm_head_config(), scratch(buf.dln, rd, d), buf.g.lm_head, act().logits,
                             act().dec, buf.w.lm_head, grad_scale, s);
    final_norm_backward(dres, tp.col_parallel_in_grad(scratch(buf.dln, rd, d), s), act().x_dec,
                        act().dec_rstd, buf.w.dec_final, buf.g.dec_final, n_sites() - 1, s);
  } else {
    engine::copy(dres, act().dout, s);  // d(stage output) from the next stage
  }
  // d enc: this stage's cross-attention k | v projections (each a partial sum over TP), then
  // what the later decoder stages sent.
  engine::fill_zero(buf.denc, s);
  for (int64_t l = layers.dec_end - 1; l >= layers.dec_begin; --l)
    layer_backward(/*decoder=*/true, l, s);
  const TensorView denc = tp.row_parallel_out(buf.denc, s);
  if (!post()) add_into(denc, act().denc_in, s);
  if (embeds_dec()) embed_backward(dres, act().dec_tokens, 2 + 4 * Le, s);
}

void T5Model::Impl::encoder_backward(engine::Stream& s) {
  const int64_t d = cfg.d_model, Le = cfg.n_encoder_layers;
  TensorView dres = scratch(buf.dres, enc_rows(), d);
  if (ends_enc()) {
    // From d enc (this rank's rows): the decoder's on this stage (pp = 1) or the first decoder
    // stage's.
    const TensorView denc = tp.local_rows(buf.denc);
    if (pipelined()) engine::copy(denc, act().denc_in, s);
    final_norm_backward(dres, denc, act().x_enc, act().enc_rstd, buf.w.enc_final, buf.g.enc_final,
                        1 + 4 * Le, s);
  } else {
    engine::copy(dres, act().dout, s);
  }
  for (int64_t l = layers.enc_end - 1; l >= layers.enc_begin; --l)
    layer_backward(/*decoder=*/false, l, s);
  if (embeds_enc()) embed_backward(dres, act().enc_tokens, 0, s);
}

void T5Model::Impl::final_norm_backward(TensorView dres, TensorView dout, TensorView sum,
                                        TensorView rstd, TensorView gamma, TensorView dgamma,
                                        int64_t site, engine::Stream& s) {
  dropout_grad(dout, dout, row_offset(site, dout), s);
  blocks::norm_backward(norm_args(dres.dim(0)), ops::Accumulate::kOverwrite, dres, dgamma, {}, dout,
                        sum, gamma, {}, rstd, buf.op_ws, s);
}

void T5Model::Impl::embed_backward(TensorView dres, TensorView tokens, int64_t site,
                                   engine::Stream& s) {
  dropout_grad(dres, dres, row_offset(site, dres), s);
  blocks::embedding_backward(embedding_config(tokens.numel()), {buf.g.shared, {}, {}},
                             tp.gather_grad(dres, s), {tokens, {}, {}}, s);
}

blocks::EmbeddingConfig T5Model::Impl::embedding_config(int64_t rows) const {
  blocks::EmbeddingConfig c;
  c.rows = rows;
  c.d_model = cfg.d_model;
  c.vocab = cfg.padded();
  c.tp = shard.tp;
  c.tp_rank = shard.tp_rank;
  return c;
}

void T5Model::Impl::add_relative_grads(engine::Stream& s) {
  // Each TP rank wrote its heads' columns; from f32 into the gradient dtype.
  tp.all_reduce(buf.drel_f32, s);
  const int64_t n = cfg.num_buckets * cfg.n_heads;
  for (const auto& [k, grad, held] :
       {std::tuple<int64_t, TensorView, bool>{0, buf.g.rel_enc, has_enc()},
        {1, buf.g.rel_dec, has_dec()}}) {
    if (!held) continue;
    ops::cast(buf.rel_grad, flat_slice(buf.drel_f32, k * n, {n}), s);
    ops::axpy(1.0f, flat_slice(grad, 0, {n}), buf.rel_grad, s);
  }
}

}  // namespace anvil::model
