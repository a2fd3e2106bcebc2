// The MLP block's forward and backward (see mlp.h): W_in, the activation (with its dropout),
// W_out, and the exact reverse, over ops/gemm.h's epilogues where they fuse.
#include "model/blocks/mlp.h"

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "model/blocks/linear.h"
#include "ops/activation.h"
#include "ops/dropout.h"
#include "ops/gelu.h"
#include "ops/gemm.h"
#include "ops/glu.h"

namespace anvil::model::blocks {

namespace {

using engine::ConstTensorView;
using engine::TensorView;

ops::GluKind glu_kind(MlpActivation a) {
  switch (a) {
    case MlpActivation::kSwiglu:
      return ops::GluKind::kSwiglu;
    case MlpActivation::kGeglu:
      return ops::GluKind::kGeglu;
    case MlpActivation::kReglu:
      return ops::GluKind::kReglu;
    case MlpActivation::kLiglu:
      return ops::GluKind::kLiglu;
    case MlpActivation::kGegluTanh:
      return ops::GluKind::kGegluTanh;
    case MlpActivation::kGeluTanh:
    case MlpActivation::kGeluErf:
    case MlpActivation::kRelu:
      break;
  }
  ANVIL_CHECK_MSG(false, "MLP block: not a gated activation");
  return ops::GluKind::kLiglu;
}

// The elementwise ops/activation.h function of an ungated activation other than gelu_tanh.
ops::Activation plain_activation(MlpActivation a) {
  return a == MlpActivation::kRelu ? ops::Activation::kRelu : ops::Activation::kGeluErf;
}

// relu or gelu_erf with MlpConfig::fused_dropout: ops/activation.h's one-pass dropout.
bool one_pass_dropout(const MlpConfig& c) {
  return c.fused_dropout &&
         (c.activation == MlpActivation::kRelu || c.activation == MlpActivation::kGeluErf);
}

ops::DropoutArgs dropout_args(const MlpConfig& c, const MlpDropoutSite& site) {
  return {c.act_dropout, site.seed, site.offset};
}

void check_shapes(const MlpConfig& c, ConstTensorView x, ConstTensorView pre, ConstTensorView act,
                  const MlpWeights& w) {
  const int64_t rows = x.dim(0), f = c.local_ffn();
  ANVIL_CHECK_MSG(c.tp >= 1 && c.ffn % c.tp == 0 && x.dim(1) == c.d_model,
                  absl::StrCat("MLP block: ffn ", c.ffn, " over tp ", c.tp, ", x width ", x.dim(1),
                               " vs d_model ", c.d_model));
  ANVIL_CHECK_MSG(pre.dim(0) == rows && pre.dim(1) == c.in_width() && act.dim(0) == rows &&
                      act.dim(1) == f && w.w_in.dim(0) == c.in_width() && w.w_out.dim(1) == f,
                  absl::StrCat("MLP block: pre, act, W_in or W_out shaped unlike ", rows,
                               " rows, in_width ", c.in_width(), ", ffn / tp ", f));
  ANVIL_CHECK_MSG(w.b_in.empty() != c.bias && w.b_out.empty() != c.bias,
                  "MLP block: biases present exactly when MlpConfig::bias");
}

// act (=) = f(pre): the activation without its dropout.
void activate(const MlpConfig& c, TensorView act, ConstTensorView pre, engine::Stream& s) {
  if (c.gated()) {
    ops::glu_forward(glu_kind(c.activation), act, pre, s);
  } else if (c.activation == MlpActivation::kGeluTanh) {
    ops::gelu_forward(act, pre, s);
  } else {
    ops::activation_forward(plain_activation(c.activation), act, pre, s);
  }
}

// dpre (=) = d f(pre) from dact (dpre may alias dact when ungated).
void activate_backward(const MlpConfig& c, TensorView dpre, ConstTensorView dact,
                       ConstTensorView pre, engine::Stream& s) {
  if (c.gated()) {
    ops::glu_backward(glu_kind(c.activation), dpre, dact, pre, s);
  } else if (c.activation == MlpActivation::kGeluTanh) {
    ops::gelu_backward(dpre, dact, pre, s);
  } else {
    ops::activation_backward(plain_activation(c.activation), dpre, dact, pre, s);
  }
}

// act (=) = Drop(f(pre)), the dropout in training only; one pass where one_pass_dropout.
void activate_and_drop(const MlpConfig& c, TensorView act, ConstTensorView pre, bool train,
                       const MlpDropoutSite& site, engine::Stream& s) {
  const bool drop = train && c.act_dropout > 0.0f;
  if (drop && one_pass_dropout(c)) {
    ops::activation_dropout_forward(plain_activation(c.activation), dropout_args(c, site), act, pre,
                                    s);
    return;
  }
  activate(c, act, pre, s);
  if (drop) ops::dropout_forward(dropout_args(c, site), act, act, s);
}

// dpre (=) = f'(Drop'(dact)) (dact may be overwritten); one pass where one_pass_dropout.
void drop_and_activate_backward(const MlpConfig& c, TensorView dpre, TensorView dact,
                                ConstTensorView pre, const MlpDropoutSite& site,
                                engine::Stream& s) {
  if (c.act_dropout > 0.0f && one_pass_dropout(c)) {
    ops::activation_dropout_backward(plain_activation(c.activation), dropout_args(c, site), dpre,
                                     dact, pre, s);
    return;
  }
  if (c.act_dropout > 0.0f) ops::dropout_backward(dropout_args(c, site), dact, dact, s);
  activate_backward(c, dpre, dact, pre, s);
}

}  // namespace

void mlp_forward(const MlpConfig& c, TensorView out, const MlpActs& acts, ConstTensorView x,
                 const MlpWeights& w, bool train, const MlpDropoutSite& site, engine::Stream& s) {
  check_shapes(c, x, acts.pre, acts.act, w);
  if (c.activation == MlpActivation::kGeluTanh && c.bias) {
    // One GEMM: pre = x W_in^T + b_in (saved), act = gelu_tanh(pre).
    ops::GemmArgs fc{x.dim(0), w.w_in.dim(0), w.w_in.dim(1)};
    fc.trans_b = true;
    fc.epilogue = ops::Epilogue::kBiasGelu;
    ops::gemm(fc, acts.act, x, w.w_in, w.b_in, acts.pre, s);
    if (train && c.act_dropout > 0.0f) {
      ops::dropout_forward(dropout_args(c, site), acts.act, acts.act, s);
    }
  } else {
    linear(acts.pre, x, w.w_in, w.b_in, s);
    activate_and_drop(c, acts.act, acts.pre, train, site, s);
  }
  row_linear(out, acts.act, w.w_out, w.b_out, c.tp_rank == 0, s);
}

void mlp_backward(const MlpConfig& c, TensorView dx, const MlpWeights& grads, ConstTensorView dout,
                  ConstTensorView x, const MlpActs& acts, const MlpWeights& w,
                  const MlpDropoutSite& site, const MlpScratch& scratch, engine::Stream& s) {
  check_shapes(c, x, acts.pre, acts.act, w);
  ANVIL_CHECK_MSG(!c.needs_dact() || !scratch.dact.empty(),
                  "MLP block: a gated activation or activation dropout needs scratch dact");
  const TensorView dpre = scratch.dpre;
  weight_bias_grad(grads.w_out, grads.b_out, dout, acts.act, s);
  if (c.needs_dact()) {  // dact = Drop'(dout W_out), then dpre = f'(dact)
    input_grad(scratch.dact, dout, w.w_out, s);
    drop_and_activate_backward(c, dpre, scratch.dact, acts.pre, site, s);
  } else if (c.activation == MlpActivation::kGeluTanh) {
    // One GEMM: dpre = (dout W_out) * gelu_tanh'(pre).
    ops::GemmArgs dg{dout.dim(0), w.w_out.dim(1), w.w_out.dim(0)};
    dg.epilogue = ops::Epilogue::kDGelu;
    ops::gemm(dg, dpre, dout, w.w_out, {}, acts.pre, s);
  } else {  // dpre = (dout W_out) * f'(pre), in place
    input_grad(dpre, dout, w.w_out, s);
    activate_backward(c, dpre, dpre, acts.pre, s);
  }
  linear_backward(dx, grads.w_in, grads.b_in, dpre, x, w.w_in, s);
}

MlpActs mlp_saved_acts(const MlpConfig& c, int64_t rows, engine::DType dtype,
                       const std::string& prefix, const TakeView& take) {
  MlpActs a;
  a.pre = take(prefix + "pre", dtype, {rows, c.in_width()});
  a.act = take(prefix + "act", dtype, {rows, c.local_ffn()});
  return a;
}

}  // namespace anvil::model::blocks
