// The transformer layer's forward and backward (see layer.h): the attention, cross-attention and
// MLP sub-layers between their norms, the TP mappings and the output dropouts.
#include "model/blocks/layer.h"

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "ops/axpy.h"
#include "ops/dropout.h"

namespace anvil::model::blocks {

namespace {

using engine::ConstTensorView;
using engine::TensorView;
using parallel::TensorParallel;

// Elements [at, at + rows * cols) of a contiguous scratch buffer, as [rows, cols].
TensorView first(TensorView flat, int64_t rows, int64_t cols, int64_t at = 0) {
  ANVIL_CHECK_MSG(flat.is_contiguous() && at >= 0 && at + rows * cols <= flat.numel(),
                  absl::StrCat("layer block: scratch of ", flat.numel(), " elements for [", rows,
                               ", ", cols, "] at ", at));
  return engine::make_view(static_cast<char*>(flat.data) + at * engine::dtype_size(flat.dtype),
                           flat.dtype, flat.device, {rows, cols});
}

// y += x over all elements of two contiguous tensors of the same size.
void add_into(TensorView y, ConstTensorView x, engine::Stream& s) {
  ops::axpy(1.0f, engine::make_view(y.data, y.dtype, y.device, {y.numel()}),
            engine::make_view(x.data, x.dtype, x.device, {x.numel()}), s);
}

// The per-layer shapes the sub-layers share.
struct Dims {
  int64_t rows, d;  // all rows of the micro-batch, model width
};

Dims dims(const LayerConfig& c) { return {c.attn.rows(), c.norm.cols}; }

// A sub-layer's output: its partial sum over TP in proj, summed into this rank's rows
// (returned) and dropped there, in place.
TensorView sublayer_out(const LayerConfig& c, TensorView proj, bool train, uint64_t seed,
                        uint64_t site, const TensorParallel& tp, engine::Stream& s) {
  const TensorView mine = tp.row_parallel_out(proj, s);
  if (train && c.dropout > 0.0f) {
    ops::dropout_forward({c.dropout, seed, site + tp.row_shift(mine)}, mine, mine, s);
  }
  return mine;
}

// Its backward: d(sub-layer partial output) over all rows, from d(dropout output) in dres.
TensorView sublayer_grad(const LayerConfig& c, TensorView proj, TensorView dres, uint64_t seed,
                         uint64_t site, const TensorParallel& tp, engine::Stream& s) {
  if (c.dropout <= 0.0f) return tp.gather_grad(dres, s);
  const TensorView local = tp.local_rows(proj);
  ops::dropout_backward({c.dropout, seed, site + tp.row_shift(local)}, local, dres, s);
  return tp.gather_grad(local, s);
}

// The attention sub-layer (self or cross) from its input ln [R, d]: this rank's rows of
// Drop(attention output).
TensorView attention_part(const LayerConfig& c, bool cross, const LayerActs& a,
                          const LayerWeights& w, const LayerInputs& in, ConstTensorView ln,
                          bool train, const LayerSites& sites, const LayerScratch& sc,
                          const TensorParallel& tp, engine::Stream& s) {
  const Dims dm = dims(c);
  const TensorView proj = first(sc.proj, dm.rows, dm.d);
  if (cross) {
    attention_forward(c.cross_attn, proj, a.cross, ln, in.memory, w.cross, in.cross, train,
                      {sites.seed, sites.cross_probs}, sc.ws, s);
    return sublayer_out(c, proj, train, sites.seed, sites.cross_out, tp, s);
  }
  attention_forward(c.attn, proj, a.attn, ln, {}, w.attn, in.attn, train,
                    {sites.seed, sites.attn_probs}, sc.ws, s);
  return sublayer_out(c, proj, train, sites.seed, sites.attn_out, tp, s);
}

TensorView mlp_part(const LayerConfig& c, const LayerActs& a, const LayerWeights& w, bool train,
                    const LayerSites& sites, const LayerScratch& sc, const TensorParallel& tp,
                    engine::Stream& s) {
  const Dims dm = dims(c);
  const TensorView proj = first(sc.proj, dm.rows, dm.d);
  mlp_forward(c.mlp, proj, a.mlp, a.ln_mlp, w.mlp, train, {sites.seed, sites.mlp_act}, s);
  return sublayer_out(c, proj, train, sites.seed, sites.mlp_out, tp, s);
}

// Backward of the attention sub-layer from d(its dropped output) in dres: d(its input) [rows,
// d] summed over TP (in scratch.dln).
TensorView attention_part_backward(const LayerConfig& c, bool cross, TensorView dres,
                                   const LayerWeights& g, const LayerActs& a, const LayerWeights& w,
                                   const LayerInputs& in, ConstTensorView ln,
                                   const LayerSites& sites, const LayerScratch& sc,
                                   const TensorParallel& tp, engine::Stream& s) {
  const Dims dm = dims(c);
  const TensorView proj = first(sc.proj, dm.rows, dm.d), dln = first(sc.dln, dm.rows, dm.d);
  const AttentionConfig& ac = cross ? c.cross_attn : c.attn;
  const int64_t inner = ac.inner();
  AttentionScratch as;
  as.datt = first(sc.dln, dm.rows, inner);  // consumed before d(input) is written over it
  if (cross) {
    as.dqkv = first(sc.dbig, dm.rows, inner);
    as.dkv = first(sc.dbig, ac.kv_rows(), 2 * inner, dm.rows * inner);
    const TensorView dproj = sublayer_grad(c, proj, dres, sites.seed, sites.cross_out, tp, s);
    attention_backward(ac, dln, in.dmemory, g.cross, {}, dproj, ln, in.memory, a.cross, w.cross,
                       in.cross, {sites.seed, sites.cross_probs}, as, sc.ws, s);
  } else {
    as.dqkv = first(sc.dbig, dm.rows, ac.qkv_cols());
    const TensorView dproj = sublayer_grad(c, proj, dres, sites.seed, sites.attn_out, tp, s);
    attention_backward(ac, dln, {}, g.attn, in.d_rel_table, dproj, ln, {}, a.attn, w.attn, in.attn,
                       {sites.seed, sites.attn_probs}, as, sc.ws, s);
  }
  return tp.col_parallel_in_grad(dln, s);
}

TensorView mlp_part_backward(const LayerConfig& c, TensorView dres, const LayerWeights& g,
                             const LayerActs& a, const LayerWeights& w, const LayerSites& sites,
                             const LayerScratch& sc, const TensorParallel& tp, engine::Stream& s) {
  const Dims dm = dims(c);
  const TensorView proj = first(sc.proj, dm.rows, dm.d), dln = first(sc.dln, dm.rows, dm.d);
  const MlpScratch ms{
      first(sc.dbig, dm.rows, c.mlp.in_width()),
      c.mlp.needs_dact() ? first(sc.dact, dm.rows, c.mlp.local_ffn()) : TensorView{}};
  const TensorView dproj = sublayer_grad(c, proj, dres, sites.seed, sites.mlp_out, tp, s);
  mlp_backward(c.mlp, dln, g.mlp, dproj, a.ln_mlp, a.mlp, w.mlp, {sites.seed, sites.mlp_act}, ms,
               s);
  return tp.col_parallel_in_grad(dln, s);
}

void check(const LayerConfig& c, const LayerActs& a) {
  ANVIL_CHECK_MSG(c.norm.cols == c.mlp.d_model && a.x.dim(0) == c.norm.rows,
                  absl::StrCat("layer block: x has ", a.x.dim(0), " rows, the norms ", c.norm.rows,
                               "; width ", c.norm.cols, " vs the MLP's d_model ", c.mlp.d_model));
  ANVIL_CHECK_MSG(!(c.post_ln && c.cross), "layer block: post-LN layers have no cross-attention");
}

void pre_ln_forward(const LayerConfig& c, const LayerActs& a, const LayerWeights& w,
                    const LayerInputs& in, ConstTensorView prev, bool train,
                    const LayerSites& sites, const LayerScratch& sc, const TensorParallel& tp,
                    engine::Stream& s) {
  const Dims dm = dims(c);
  if (prev.empty()) {
    norm_forward(c.norm, tp.local_rows(a.ln1), a.ln1_mean, a.ln1_rstd, a.x, w.ln1_g, w.ln1_b, s);
  } else {  // x = prev + Drop(mlp) of the previous layer, fused with N1
    residual_norm_forward(c.norm, a.x, tp.local_rows(a.ln1), a.ln1_mean, a.ln1_rstd, prev,
                          tp.local_rows(first(sc.proj, dm.rows, dm.d)), w.ln1_g, w.ln1_b, s);
  }
  tp.gather_rows(a.ln1, s);
  TensorView out = attention_part(c, false, a, w, in, a.ln1, train, sites, sc, tp, s);
  if (c.cross) {
    residual_norm_forward(c.norm, a.h, tp.local_rows(a.ln_cross), a.ln_cross_mean, a.ln_cross_rstd,
                          a.x, out, w.ln_cross_g, w.ln_cross_b, s);
    tp.gather_rows(a.ln_cross, s);
    out = attention_part(c, true, a, w, in, a.ln_cross, train, sites, sc, tp, s);
  }
  const TensorView sum = c.cross ? a.hc : a.h, residual = c.cross ? a.h : a.x;
  residual_norm_forward(c.norm, sum, tp.local_rows(a.ln_mlp), a.ln_mlp_mean, a.ln_mlp_rstd,
                        residual, out, w.ln_mlp_g, w.ln_mlp_b, s);
  tp.gather_rows(a.ln_mlp, s);
  mlp_part(c, a, w, train, sites, sc, tp, s);
}

void post_ln_forward(const LayerConfig& c, const LayerActs& a, const LayerWeights& w,
                     const LayerInputs& in, TensorView out, bool train, const LayerSites& sites,
                     const LayerScratch& sc, const TensorParallel& tp, engine::Stream& s) {
  // The attention reads all rows of x: gathered into ln1 with sequence parallelism.
  if (tp.sp()) {
    engine::copy(tp.local_rows(a.ln1), a.x, s);
    tp.gather_rows(a.ln1, s);
  }
  TensorView proj =
      attention_part(c, false, a, w, in, tp.sp() ? a.ln1 : a.x, train, sites, sc, tp, s);
  residual_norm_forward(c.norm, a.h, tp.local_rows(a.ln_mlp), a.ln1_mean, a.ln1_rstd, a.x, proj,
                        w.ln1_g, w.ln1_b, s);
  tp.gather_rows(a.ln_mlp, s);
  proj = mlp_part(c, a, w, train, sites, sc, tp, s);
  residual_norm_forward(c.norm, a.post_sum, out, a.ln_mlp_mean, a.ln_mlp_rstd,
                        tp.local_rows(a.ln_mlp), proj, w.ln_mlp_g, w.ln_mlp_b, s);
}

void pre_ln_backward(const LayerConfig& c, TensorView dres, const LayerWeights& g,
                     const LayerActs& a, const LayerWeights& w, const LayerInputs& in,
                     const LayerSites& sites, const LayerScratch& sc, const TensorParallel& tp,
                     engine::Stream& s) {
  // y = h' + Drop(mlp); dres holds d y and becomes d h' = d y + Nm'(d mlp input).
  TensorView dln = mlp_part_backward(c, dres, g, a, w, sites, sc, tp, s);
  norm_backward(c.norm, ops::Accumulate::kAdd, dres, g.ln_mlp_g, g.ln_mlp_b, dln,
                last_residual(c, a), w.ln_mlp_g, a.ln_mlp_mean, a.ln_mlp_rstd, sc.ws, s);
  if (c.cross) {  // hc = h + Drop(cross): dres becomes d h
    dln = attention_part_backward(c, true, dres, g, a, w, in, a.ln_cross, sites, sc, tp, s);
    norm_backward(c.norm, ops::Accumulate::kAdd, dres, g.ln_cross_g, g.ln_cross_b, dln, a.h,
                  w.ln_cross_g, a.ln_cross_mean, a.ln_cross_rstd, sc.ws, s);
  }
  // h = x + Drop(attn): dres becomes d x.
  dln = attention_part_backward(c, false, dres, g, a, w, in, a.ln1, sites, sc, tp, s);
  norm_backward(c.norm, ops::Accumulate::kAdd, dres, g.ln1_g, g.ln1_b, dln, a.x, w.ln1_g,
                a.ln1_mean, a.ln1_rstd, sc.ws, s);
}

void post_ln_backward(const LayerConfig& c, TensorView dres, const LayerWeights& g,
                      const LayerActs& a, const LayerWeights& w, const LayerInputs& in,
                      const LayerSites& sites, const LayerScratch& sc, const TensorParallel& tp,
                      engine::Stream& s) {
  const Dims dm = dims(c);
  // A norm backward writes apart from its dy: through this rank's rows of dln.
  const TensorView mine = tp.local_rows(first(sc.dln, dm.rows, dm.d));
  // dres = d post_sum = Nm'(d out).
  norm_backward(c.norm, ops::Accumulate::kOverwrite, mine, g.ln_mlp_g, g.ln_mlp_b, dres, a.post_sum,
                w.ln_mlp_g, a.ln_mlp_mean, a.ln_mlp_rstd, sc.ws, s);
  engine::copy(dres, mine, s);
  // dres = d u = d post_sum + d(MLP input).
  add_into(dres, mlp_part_backward(c, dres, g, a, w, sites, sc, tp, s), s);
  // dres = d h = N1'(d u).
  norm_backward(c.norm, ops::Accumulate::kOverwrite, mine, g.ln1_g, g.ln1_b, dres, a.h, w.ln1_g,
                a.ln1_mean, a.ln1_rstd, sc.ws, s);
  engine::copy(dres, mine, s);
  // dres = d x = d h + d(attention input).
  const ConstTensorView x_all = tp.sp() ? a.ln1 : a.x;
  add_into(dres, attention_part_backward(c, false, dres, g, a, w, in, x_all, sites, sc, tp, s), s);
}

}  // namespace

void layer_forward(const LayerConfig& c, const LayerActs& acts, const LayerWeights& w,
                   const LayerInputs& in, ConstTensorView prev, TensorView out, bool train,
                   const LayerSites& sites, const LayerScratch& scratch, const TensorParallel& tp,
                   engine::Stream& s) {
  check(c, acts);
  if (c.post_ln) {
    post_ln_forward(c, acts, w, in, out, train, sites, scratch, tp, s);
  } else {
    pre_ln_forward(c, acts, w, in, prev, train, sites, scratch, tp, s);
  }
}

void layer_backward(const LayerConfig& c, TensorView dres, const LayerWeights& grads,
                    const LayerActs& acts, const LayerWeights& w, const LayerInputs& in,
                    const LayerSites& sites, const LayerScratch& scratch, const TensorParallel& tp,
                    engine::Stream& s) {
  check(c, acts);
  if (c.post_ln) {
    post_ln_backward(c, dres, grads, acts, w, in, sites, scratch, tp, s);
  } else {
    pre_ln_backward(c, dres, grads, acts, w, in, sites, scratch, tp, s);
  }
}

LayerActs layer_saved_acts(const LayerConfig& c, engine::DType dtype, engine::DType stat_dtype,
                           const std::string& prefix, const TakeView& take) {
  const int64_t rows = c.norm.rows, all = c.attn.rows(), d = c.norm.cols;
  auto stats = [&](const std::string& name, TensorView& mean, TensorView& rstd) {
    if (c.norm.kind == NormKind::kLayerNorm)
      mean = take(prefix + name + ".mean", stat_dtype, {rows});
    rstd = take(prefix + name + ".rstd", stat_dtype, {rows});
  };
  LayerActs a;
  a.x = take(prefix + "x", dtype, {rows, d});
  if (!c.post_ln || rows != all) a.ln1 = take(prefix + "ln1", dtype, {all, d});
  stats("ln1", a.ln1_mean, a.ln1_rstd);
  a.attn = attention_saved_acts(c.attn, dtype, prefix + "attn.", take);
  a.h = take(prefix + "h", dtype, {rows, d});
  if (c.cross) {
    a.ln_cross = take(prefix + "ln_cross", dtype, {all, d});
    stats("ln_cross", a.ln_cross_mean, a.ln_cross_rstd);
    a.cross = attention_saved_acts(c.cross_attn, dtype, prefix + "cross.", take);
    a.hc = take(prefix + "hc", dtype, {rows, d});
  }
  a.ln_mlp = take(prefix + "ln_mlp", dtype, {all, d});
  stats("ln_mlp", a.ln_mlp_mean, a.ln_mlp_rstd);
  a.mlp = mlp_saved_acts(c.mlp, all, dtype, prefix + "mlp.", take);
  if (c.post_ln) a.post_sum = take(prefix + "post_sum", dtype, {rows, d});
  return a;
}

}  // namespace anvil::model::blocks
