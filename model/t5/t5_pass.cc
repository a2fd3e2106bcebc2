// T5 forward and backward over one micro-batch (the math is in t5.h; buffers in t5_impl.h).
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
#include "model/blocks/linear.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "model/t5/t5_impl.h"
#include "ops/axpy.h"
#include "ops/cast.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/flash_attention.h"
#include "ops/gemm.h"
#include "ops/vocab_parallel_cross_entropy.h"
#include "parallel/comm.h"

namespace anvil::model {

namespace {

using blocks::input_grad;
using blocks::linear;
using blocks::weight_grad;
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

void T5Model::Impl::cross_entropy(bool train, engine::Stream& s) {
  const int64_t rd = shape.micro_batch * shape.dec_len, cols = local_vocab();
  // Training: dlogits (grad_scale 1) replace the logits in place; evaluation keeps the logits.
  const TensorView dlogits = train ? act().logits : TensorView{};
  if (shard.tp == 1) {
    ops::softmax_cross_entropy({rd, cfg.vocab_size, cfg.padded(), 1.0f}, act().losses, dlogits,
                               act().logits, act().labels, s);
    return;
  }
  // Vocab-parallel (as GPT's head): row max, then sum of exponentials and target logit, over TP.
  const TensorView row_max = flat_slice(buf.ce, 0, {rd});
  const TensorView sums = flat_slice(buf.ce, rd, {2 * rd});
  const TensorView sum_exp = flat_slice(buf.ce, rd, {rd});
  const TensorView target_logit = flat_slice(buf.ce, 2 * rd, {rd});
  const ops::VocabShardArgs va{rd, cfg.vocab_size, shard.tp_rank * cols, cols, 1.0f};
  ops::vocab_shard_max(va, row_max, act().logits, s);
  shard.tp_comm->all_reduce(row_max, parallel::ReduceOp::kMax, s);
  ops::vocab_shard_sum_exp(va, sum_exp, target_logit, act().logits, row_max, act().labels, s);
  shard.tp_comm->all_reduce(sums, parallel::ReduceOp::kSum, s);
  ops::vocab_shard_cross_entropy(va, act().losses, dlogits, act().logits, row_max, sum_exp,
                                 target_logit, act().labels, s);
}

void T5Model::Impl::dropout(TensorView x, bool train, uint64_t offset, engine::Stream& s) {
  if (train && cfg.dropout > 0.0f) ops::dropout_forward({cfg.dropout, seed, offset}, x, x, s);
}

void T5Model::Impl::dropout_grad(TensorView dx, ConstTensorView dy, uint64_t offset,
                                 engine::Stream& s) {
  ops::dropout_backward({cfg.dropout, seed, offset}, dx, dy, s);
}

TensorView T5Model::Impl::project_out(TensorView proj, bool train, int64_t site,
                                      engine::Stream& s) {
  const TensorView mine = tp.row_parallel_out(proj, s);
  dropout(mine, train, row_offset(site, mine), s);
  return mine;
}

TensorView T5Model::Impl::project_grad(int64_t rows, TensorView dres, int64_t site,
                                       engine::Stream& s) {
  const TensorView mine = tp.local_rows(scratch(buf.proj, rows, cfg.d_model));
  dropout_grad(mine, dres, row_offset(site, mine), s);
  return tp.gather_grad(mine, s);
}

namespace {

// Flash attention arguments for T5: no scaling; this rank's heads, numbered as the model's
// (dropout masks, relative-table columns).
ops::FlashAttentionArgs t5_attention(const T5Config& cfg, const T5Shard& sh, int64_t B, int64_t tq,
                                     int64_t tk, bool causal, bool rel, float p, uint64_t seed,
                                     uint64_t offset) {
  ops::FlashAttentionArgs fa;
  const int64_t heads = cfg.n_heads / sh.tp;
  fa.batch = B, fa.q_len = tq, fa.kv_len = tk, fa.heads = heads, fa.head_dim = cfg.d_kv;
  fa.total_heads = cfg.n_heads;
  fa.head_offset = sh.tp_rank * heads;
  fa.causal = causal;
  fa.scale = 1.0f;
  fa.bias = rel ? ops::AttentionBias::kRelativeBuckets : ops::AttentionBias::kNone;
  fa.dropout_p = p;
  fa.seed = seed;
  fa.offset = offset;
  return fa;
}

}  // namespace

void T5Model::Impl::ffn_forward(const LayerWeights& w, LayerActs& a, int64_t rows, bool train,
                                int64_t site_hidden, engine::Stream& s) {
  // The hidden's masks are numbered by this rank's [rows, d_ff / tp] columns (t5.h T5Shard).
  TensorView proj = scratch(buf.proj, rows, cfg.d_model);
  blocks::mlp_forward(t5_detail::ffn_config(cfg, shard), proj, a.ffn, a.ln_ff,
                      t5_detail::ffn_weights(w), train, {seed, site_offset(site_hidden)}, s);
  project_out(proj, train, site_hidden + 1, s);  // row-parallel: the partial sums over TP
}

void T5Model::Impl::encoder_layer_forward(int64_t l, bool train, bool from_x, engine::Stream& s) {
  before_layer_forward(/*decoder=*/false, l, s);
  const int64_t re = shape.micro_batch * shape.enc_len, d = cfg.d_model;
  const blocks::NormArgs rn = norm_args(enc_rows());
  const LayerWeights& w = buf.w.enc[static_cast<size_t>(l)];
  LayerActs& a = act().enc_layers[static_cast<size_t>(l)];
  TensorView proj = scratch(buf.proj, re, d);
  if (from_x) {  // x: the embedding, the previous stage's hidden or kept for recomputation
    blocks::norm_forward(rn, tp.local_rows(a.ln1), {}, a.rstd1, a.x, w.ln1, {}, s);
  } else {  // x = h' + Drop(ffn') of the previous layer
    blocks::residual_norm_forward(rn, a.x, tp.local_rows(a.ln1), {}, a.rstd1,
                                  act().enc_layers[static_cast<size_t>(l - 1)].h,
                                  tp.local_rows(proj), w.ln1, {}, s);
  }
  tp.gather_rows(a.ln1, s);
  linear(a.qkv, a.ln1, w.qkv, {}, s);
  const int64_t I = local_inner();
  ops::AttentionMasks m;
  if (act().has_lengths) m.kv_lengths = act().enc_lengths;
  m.rel_buckets = buf.rel_buckets_enc;
  m.rel_table = rel_slot(buf.rel_f32, 0);
  const auto fa = t5_attention(cfg, shard, shape.micro_batch, shape.enc_len, shape.enc_len, false,
                               true, train ? cfg.dropout : 0.0f, seed, site_offset(enc_site(l, 0)));
  ops::flash_attention_forward(fa, a.att, a.lse, engine::slice_cols(a.qkv, 0, I),
                               engine::slice_cols(a.qkv, I, 2 * I),
                               engine::slice_cols(a.qkv, 2 * I, 3 * I), m, s);
  linear(proj, a.att, w.o, {}, s);
  const TensorView attn = project_out(proj, train, enc_site(l, 1), s);
  blocks::residual_norm_forward(rn, a.h, tp.local_rows(a.ln_ff), {}, a.rstd_ff, a.x, attn, w.ln_ff,
                                {}, s);
  tp.gather_rows(a.ln_ff, s);
  ffn_forward(w, a, re, train, enc_site(l, 2), s);
}

void T5Model::Impl::decoder_layer_forward(int64_t l, bool train, bool from_x, engine::Stream& s) {
  before_layer_forward(/*decoder=*/true, l, s);
  const int64_t B = shape.micro_batch, Te = shape.enc_len, Td = shape.dec_len;
  const int64_t rd = B * Td, d = cfg.d_model, I = local_inner();
  const blocks::NormArgs rn = norm_args(dec_rows());
  const LayerWeights& w = buf.w.dec[static_cast<size_t>(l)];
  LayerActs& a = act().dec_layers[static_cast<size_t>(l)];
  TensorView proj = scratch(buf.proj, rd, d);
  const float p = train ? cfg.dropout : 0.0f;
  if (from_x) {
    blocks::norm_forward(rn, tp.local_rows(a.ln1), {}, a.rstd1, a.x, w.ln1, {}, s);
  } else {
    blocks::residual_norm_forward(rn, a.x, tp.local_rows(a.ln1), {}, a.rstd1,
                                  act().dec_layers[static_cast<size_t>(l - 1)].h2,
                                  tp.local_rows(proj), w.ln1, {}, s);
  }
  tp.gather_rows(a.ln1, s);
  // Causal self-attention with the decoder's (unidirectional) relative buckets.
  linear(a.qkv, a.ln1, w.qkv, {}, s);
  ops::AttentionMasks self;
  self.rel_buckets = buf.rel_buckets_dec;
  self.rel_table = rel_slot(buf.rel_f32, 1);
  ops::flash_attention_forward(
      t5_attention(cfg, shard, B, Td, Td, true, true, p, seed, site_offset(dec_site(l, 0))), a.att,
      a.lse, engine::slice_cols(a.qkv, 0, I), engine::slice_cols(a.qkv, I, 2 * I),
      engine::slice_cols(a.qkv, 2 * I, 3 * I), self, s);
  linear(proj, a.att, w.o, {}, s);
  const TensorView attn = project_out(proj, train, dec_site(l, 1), s);
  blocks::residual_norm_forward(rn, a.h, tp.local_rows(a.ln2), {}, a.rstd2, a.x, attn, w.ln2, {},
                                s);
  tp.gather_rows(a.ln2, s);
  // Cross-attention: queries from the decoder, keys and values from the encoder output.
  linear(a.cq, a.ln2, w.cq, {}, s);
  linear(a.ckv, act().enc, w.ckv, {}, s);
  ops::AttentionMasks cross;
  if (act().has_lengths) cross.kv_lengths = act().enc_lengths;
  ops::flash_attention_forward(
      t5_attention(cfg, shard, B, Td, Te, false, false, p, seed, site_offset(dec_site(l, 2))),
      a.catt, a.clse, a.cq, engine::slice_cols(a.ckv, 0, I), engine::slice_cols(a.ckv, I, 2 * I),
      cross, s);
  linear(proj, a.catt, w.co, {}, s);
  const TensorView cross_out = project_out(proj, train, dec_site(l, 3), s);
  blocks::residual_norm_forward(rn, a.h2, tp.local_rows(a.ln_ff), {}, a.rstd_ff, a.h, cross_out,
                                w.ln_ff, {}, s);
  tp.gather_rows(a.ln_ff, s);
  ffn_forward(w, a, rd, train, dec_site(l, 4), s);
}

void T5Model::Impl::forward(bool train, engine::Stream& s) {
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "T5Model::forward: stream device differs from the model's");
  gpt_detail::GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
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
    encoder_layer_forward(l, train, l == layers.enc_begin, s);
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
  const ops::EmbeddingArgs ea{rows, d, local_vocab(), 0, shard.tp_rank * local_vocab()};
  const TensorView e = tp.sp() ? scratch(buf.proj, rows, d) : x;
  ops::embedding_forward(ea, e, tokens, {}, buf.w.shared, {}, s);
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
    decoder_layer_forward(l, train, l == layers.dec_begin, s);
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
  ops::GemmArgs head{rd, local_vocab(), d};
  head.trans_b = true;
  head.alpha = cfg.tied() ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))) : 1.0f;
  ops::gemm(head, act().logits, act().dec, buf.w.lm_head, {}, {}, s);
  cross_entropy(train, s);
}

TensorView T5Model::Impl::ffn_backward(const LayerWeights& w, const LayerWeights& g,
                                       const LayerActs& a, int64_t rows, TensorView dout,
                                       int64_t site_hidden, engine::Stream& s) {
  const blocks::MlpConfig c = t5_detail::ffn_config(cfg, shard);
  const blocks::MlpScratch sc{
      scratch(buf.dbig, rows, c.in_width()),
      c.needs_dact() ? scratch(buf.dact, rows, c.local_ffn()) : TensorView{}};
  const TensorView dln = scratch(buf.dln, rows, cfg.d_model);
  blocks::mlp_backward(c, dln, t5_detail::ffn_weights(g), dout, a.ln_ff, a.ffn,
                       t5_detail::ffn_weights(w), {seed, site_offset(site_hidden)}, sc, s);
  return tp.col_parallel_in_grad(dln, s);  // partial over TP
}

void T5Model::Impl::encoder_layer_backward(int64_t l, engine::Stream& s) {
  before_layer_backward(/*decoder=*/false, l, s);
  const int64_t B = shape.micro_batch, Te = shape.enc_len, re = B * Te;
  const int64_t d = cfg.d_model;
  const blocks::NormArgs rn = norm_args(enc_rows());
  if (recompute_full()) encoder_layer_forward(l, /*train=*/true, /*from_x=*/true, s);
  const LayerWeights& w = buf.w.enc[static_cast<size_t>(l)];
  const LayerWeights& g = buf.g.enc[static_cast<size_t>(l)];
  const LayerActs& a = act().enc_layers[static_cast<size_t>(l)];
  TensorView dres = scratch(buf.dres, enc_rows(), d);
  // FFN: x' = h + Drop(ffn); dres holds d x'.
  const TensorView dffn = project_grad(re, dres, enc_site(l, 3), s);
  const TensorView dln = ffn_backward(w, g, a, re, dffn, enc_site(l, 2), s);
  blocks::norm_backward(rn, ops::Accumulate::kAdd, dres, g.ln_ff, {}, dln, a.h, w.ln_ff, {},
                        a.rstd_ff, buf.op_ws, s);
  // Self-attention: h = x + Drop(att o^T).
  ops::AttentionMasks m;
  if (act().has_lengths) m.kv_lengths = act().enc_lengths;
  m.rel_buckets = buf.rel_buckets_enc;
  self_attention_backward(w, g, a, Te, /*causal=*/false, m, /*rel=*/0, enc_site(l, 0),
                          enc_site(l, 1), dres, s);
  after_layer_backward(/*decoder=*/false, l, s);
}

void T5Model::Impl::decoder_layer_backward(int64_t l, engine::Stream& s) {
  before_layer_backward(/*decoder=*/true, l, s);
  const int64_t B = shape.micro_batch, Te = shape.enc_len, Td = shape.dec_len;
  const int64_t re = B * Te, rd = B * Td, d = cfg.d_model, I = local_inner();
  const blocks::NormArgs rn = norm_args(dec_rows());
  if (recompute_full()) decoder_layer_forward(l, /*train=*/true, /*from_x=*/true, s);
  const LayerWeights& w = buf.w.dec[static_cast<size_t>(l)];
  const LayerWeights& g = buf.g.dec[static_cast<size_t>(l)];
  const LayerActs& a = act().dec_layers[static_cast<size_t>(l)];
  TensorView dres = scratch(buf.dres, dec_rows(), d);
  // FFN: y' = h2 + Drop(ffn).
  const TensorView dffn = project_grad(rd, dres, dec_site(l, 5), s);
  TensorView dln = ffn_backward(w, g, a, rd, dffn, dec_site(l, 4), s);
  blocks::norm_backward(rn, ops::Accumulate::kAdd, dres, g.ln_ff, {}, dln, a.h2, w.ln_ff, {},
                        a.rstd_ff, buf.op_ws, s);
  // Cross-attention: h2 = h + Drop(catt co^T); q = ln2 cq^T, k | v = enc ckv^T.
  const TensorView dco = project_grad(rd, dres, dec_site(l, 3), s);
  TensorView dcatt = scratch(buf.dln, rd, I);
  blocks::linear_backward(dcatt, g.co, {}, dco, a.catt, w.co, s);
  TensorView dq = scratch(buf.dbig, rd, I), dkv = scratch(buf.dbig, re, 2 * I, rd * I);
  ops::AttentionMasks cross;
  if (act().has_lengths) cross.kv_lengths = act().enc_lengths;
  ops::flash_attention_backward(
      t5_attention(cfg, shard, B, Td, Te, false, false, cfg.dropout, seed,
                   site_offset(dec_site(l, 2))),
      dq, engine::slice_cols(dkv, 0, I), engine::slice_cols(dkv, I, 2 * I), {}, dcatt, a.cq,
      engine::slice_cols(a.ckv, 0, I), engine::slice_cols(a.ckv, I, 2 * I), a.catt, a.clse, cross,
      buf.op_ws, s);
  weight_grad(g.ckv, dkv, act().enc, s);
  input_grad(buf.denc, dkv, w.ckv, s, 1.0f, 1.0f);  // d enc += dkv ckv (partial over TP)
  blocks::linear_backward(scratch(buf.dln, rd, d), g.cq, {}, dq, a.ln2, w.cq, s);
  dln = tp.col_parallel_in_grad(scratch(buf.dln, rd, d), s);
  blocks::norm_backward(rn, ops::Accumulate::kAdd, dres, g.ln2, {}, dln, a.h, w.ln2, {}, a.rstd2,
                        buf.op_ws, s);
  // Causal self-attention: h = y + Drop(att o^T).
  ops::AttentionMasks self;
  self.rel_buckets = buf.rel_buckets_dec;
  self_attention_backward(w, g, a, Td, /*causal=*/true, self, /*rel=*/1, dec_site(l, 0),
                          dec_site(l, 1), dres, s);
  after_layer_backward(/*decoder=*/true, l, s);
}

void T5Model::Impl::self_attention_backward(const LayerWeights& w, const LayerWeights& g,
                                            const LayerActs& a, int64_t len, bool causal,
                                            ops::AttentionMasks masks, int64_t rel,
                                            int64_t site_probs, int64_t site_out, TensorView dres,
                                            engine::Stream& s) {
  const int64_t B = shape.micro_batch, rows = B * len, d = cfg.d_model, I = local_inner();
  const TensorView dproj = project_grad(rows, dres, site_out, s);
  TensorView datt = scratch(buf.dln, rows, I);
  blocks::linear_backward(datt, g.o, {}, dproj, a.att, w.o, s);
  TensorView dqkv = scratch(buf.dbig, rows, 3 * I);
  masks.rel_table = rel_slot(buf.rel_f32, rel);
  ops::flash_attention_backward(
      t5_attention(cfg, shard, B, len, len, causal, true, cfg.dropout, seed,
                   site_offset(site_probs)),
      engine::slice_cols(dqkv, 0, I), engine::slice_cols(dqkv, I, 2 * I),
      engine::slice_cols(dqkv, 2 * I, 3 * I), rel_slot(buf.drel_f32, rel), datt,
      engine::slice_cols(a.qkv, 0, I), engine::slice_cols(a.qkv, I, 2 * I),
      engine::slice_cols(a.qkv, 2 * I, 3 * I), a.att, a.lse, masks, buf.op_ws, s);
  blocks::linear_backward(scratch(buf.dln, rows, d), g.qkv, {}, dqkv, a.ln1, w.qkv, s);
  const TensorView dln = tp.col_parallel_in_grad(scratch(buf.dln, rows, d), s);
  blocks::norm_backward(norm_args(dres.dim(0)), ops::Accumulate::kAdd, dres, g.ln1, {}, dln, a.x,
                        w.ln1, {}, a.rstd1, buf.op_ws, s);
}

void T5Model::Impl::backward(float grad_scale, engine::Stream& s) {
  ANVIL_CHECK_MSG(act().ready_for_backward, "T5Model::backward needs a preceding training forward");
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "T5Model::backward: stream device differs from the model's");
  gpt_detail::GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
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
    // vocabulary slice: partial over TP).
    const float alpha =
        grad_scale *
        (cfg.tied() ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))) : 1.0f);
    weight_grad(buf.g.lm_head, act().logits, act().dec, s, alpha);
    input_grad(scratch(buf.dln, rd, d), act().logits, buf.w.lm_head, s, alpha);
    final_norm_backward(dres, tp.col_parallel_in_grad(scratch(buf.dln, rd, d), s), act().x_dec,
                        act().dec_rstd, buf.w.dec_final, buf.g.dec_final, n_sites() - 1, s);
  } else {
    engine::copy(dres, act().dout, s);  // d(stage output) from the next stage
  }
  // d enc: this stage's cross-attention k | v projections (each a partial sum over TP), then
  // what the later decoder stages sent.
  engine::fill_zero(buf.denc, s);
  for (int64_t l = layers.dec_end - 1; l >= layers.dec_begin; --l) decoder_layer_backward(l, s);
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
  for (int64_t l = layers.enc_end - 1; l >= layers.enc_begin; --l) encoder_layer_backward(l, s);
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
  ops::embedding_backward(
      {tokens.numel(), cfg.d_model, local_vocab(), 0, shard.tp_rank * local_vocab()}, buf.g.shared,
      {}, tp.gather_grad(dres, s), tokens, {}, s);
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
