// GPT-2 forward and backward over one micro-batch (the math is in gpt.h). Rows r = b*T + t.
// Forward, with Drop = hidden dropout (train only):
//   x_0 = Drop(wte[tok] + wpe[pos])
//   per layer: ln1 = LN1(x) (fused with the residual sum x = h' + Drop(mlp') of the previous
//   layer for l > 0); qkv = ln1 Wqkv^T + b; atty = attention(qkv); h = x + Drop(atty Wo^T + bo);
//   ln2 = LN2(h) (fused); gelu = gelu_tanh(ln2 Wfc^T + bfc); mlp = gelu Wp^T + bp
//   x_L = h + Drop(mlp) fused with lnf = LNf(x_L); logits = lnf wte^T; losses = CE(logits)
// A training forward overwrites the logits with dlogits = softmax - onehot (grad_scale 1), so
// backward never re-reads the logits: it folds grad_scale into the alpha of the two LM-head
// GEMMs. Backward is the exact reverse: dres carries d(residual stream); each layernorm
// backward adds (+=) its input gradient into it; parameter gradients accumulate (+=).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/gpt_impl.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/layernorm.h"

namespace anvil::model {

namespace {

using engine::ConstTensorView;
using engine::TensorView;
using ops::Epilogue;

// y [rows, out] = x [rows, in] W^T + b, W: [out, in].
void linear(TensorView y, ConstTensorView x, ConstTensorView w, ConstTensorView b,
            engine::Stream& s) {
  ops::GemmArgs g{x.dim(0), w.dim(0), w.dim(1)};
  g.trans_b = true;
  g.epilogue = Epilogue::kBias;
  ops::gemm(g, y, x, w, b, {}, s);
}

// dW [out, in] += dy^T x (f32 gradient); dy: [rows, out], x: [rows, in].
void weight_grad(TensorView dw, ConstTensorView dy, ConstTensorView x, engine::Stream& s,
                 float alpha = 1.0f) {
  ops::GemmArgs g{dw.dim(0), dw.dim(1), dy.dim(0)};
  g.trans_a = true;
  g.alpha = alpha;
  g.beta = 1.0f;
  ops::gemm(g, dw, dy, x, {}, {}, s);
}

// dx [rows, in] = dy [rows, out] W [out, in].
void input_grad(TensorView dx, ConstTensorView dy, ConstTensorView w, engine::Stream& s,
                float alpha = 1.0f) {
  ops::GemmArgs g{dy.dim(0), w.dim(1), w.dim(0)};
  g.alpha = alpha;
  ops::gemm(g, dx, dy, w, {}, {}, s);
}

TensorView rows_view(TensorView flat, int64_t rows, int64_t cols) {
  return flat_slice(flat, 0, {rows, cols});
}

// The caller owns the stream: attach the model's cuBLASLt workspace for one pass and put the
// caller's back afterwards (later GEMMs on the stream are ordered after ours, so no sync).
class GemmWorkspaceScope {
 public:
  GemmWorkspaceScope(engine::Stream& s, engine::Workspace ws) : s_(s), saved_(s.gemm_workspace()) {
    if (s_.is_cuda()) s_.set_gemm_workspace(ws);
  }
  ~GemmWorkspaceScope() {
    if (s_.is_cuda()) s_.set_gemm_workspace(saved_);
  }

 private:
  engine::Stream& s_;
  engine::Workspace saved_;
};

}  // namespace

void GptModel::Impl::forward(const int32_t* tokens, const int32_t* positions,
                             const int32_t* targets, bool train, engine::Stream& s) {
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "GptModel::forward: stream device differs from the model's");
  GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
  ready_for_backward = false;
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model;
  const engine::Device host = engine::Device::kCpu;
  engine::copy(buf.tokens, engine::make_view(tokens, engine::DType::kI32, host, {bt}), s);
  engine::copy(buf.positions, engine::make_view(positions, engine::DType::kI32, host, {bt}), s);
  engine::copy(buf.targets, engine::make_view(targets, engine::DType::kI32, host, {bt}), s);

  const float p_hidden = train ? cfg.hidden_dropout : 0.0f;
  const float p_attn = train ? cfg.attention_dropout : 0.0f;
  auto drop = [&](TensorView x, int64_t site) {  // in place
    if (p_hidden > 0.0f) ops::dropout_forward({p_hidden, seed, site_offset(site)}, x, x, s);
  };
  const gpt_detail::Weights& w = buf.w;
  const ops::LayerNormArgs ln{bt, d, cfg.ln_eps};

  ops::embedding_forward({bt, d, cfg.padded(), cfg.max_seq_len}, buf.layers[0].x, buf.tokens,
                         buf.positions, w.wte, w.wpe, s);
  drop(buf.layers[0].x, 0);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    gpt_detail::LayerActs& a = buf.layers[l];
    const gpt_detail::LayerWeights& lw = w.layers[l];
    if (l == 0) {
      ops::layernorm_forward(ln, a.ln1, a.ln1_mean, a.ln1_rstd, a.x, lw.ln1_g, lw.ln1_b, s);
    } else {  // x = h' + Drop(mlp') of the previous layer, fused with LN1
      ops::residual_layernorm_forward(ln, a.x, a.ln1, a.ln1_mean, a.ln1_rstd, buf.layers[l - 1].h,
                                      buf.proj, lw.ln1_g, lw.ln1_b, s);
    }
    linear(a.qkv, a.ln1, lw.qkv_w, lw.qkv_b, s);
    ops::AttentionArgs aa{shape.micro_batch,
                          shape.seq_len,
                          cfg.n_heads,
                          cfg.head_dim(),
                          1.0f / std::sqrt(static_cast<float>(cfg.head_dim())),
                          p_attn,
                          seed,
                          site_offset(1 + 3 * l)};
    ops::attention_forward(aa, a.atty, a.probs, a.qkv, buf.op_ws, s);
    linear(buf.proj, a.atty, lw.attn_proj_w, lw.attn_proj_b, s);
    drop(buf.proj, 2 + 3 * l);
    ops::residual_layernorm_forward(ln, a.h, a.ln2, a.ln2_mean, a.ln2_rstd, a.x, buf.proj, lw.ln2_g,
                                    lw.ln2_b, s);
    ops::GemmArgs fc{bt, cfg.ffn(), d};
    fc.trans_b = true;
    fc.epilogue = Epilogue::kBiasGelu;
    ops::gemm(fc, a.gelu, a.ln2, lw.fc_w, lw.fc_b, a.pre_gelu, s);
    linear(buf.proj, a.gelu, lw.mlp_proj_w, lw.mlp_proj_b, s);
    drop(buf.proj, 3 + 3 * l);
  }
  ops::residual_layernorm_forward(ln, buf.x_final, buf.lnf, buf.lnf_mean, buf.lnf_rstd,
                                  buf.layers.back().h, buf.proj, w.lnf_g, w.lnf_b, s);
  ops::GemmArgs head{bt, cfg.padded(), d};
  head.trans_b = true;
  ops::gemm(head, buf.logits, buf.lnf, w.wte, {}, {}, s);
  // Training: dlogits (grad_scale 1) replace the logits in place; evaluation keeps the logits.
  ops::softmax_cross_entropy({bt, cfg.vocab_size, cfg.padded(), 1.0f}, buf.losses,
                             train ? buf.logits : TensorView{}, buf.logits, buf.targets, s);
  ready_for_backward = train;
}

void GptModel::Impl::backward(float grad_scale, engine::Stream& s) {
  ANVIL_CHECK_MSG(ready_for_backward,
                  "GptModel::backward needs a preceding forward with train = true");
  ANVIL_CHECK_MSG(s.device() == prec.device,
                  "GptModel::backward: stream device differs from the model's");
  GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model;
  const float p_hidden = cfg.hidden_dropout;
  const gpt_detail::Weights& w = buf.w;
  const gpt_detail::Weights& g = buf.g;
  const ops::LayerNormArgs ln{bt, d, cfg.ln_eps};
  const TensorView dfc = rows_view(buf.dbig, bt, cfg.ffn());
  const TensorView dqkv = rows_view(buf.dbig, bt, 3 * d);
  // d(projection output) from d(residual): through the dropout mask, or dres itself.
  auto drop_grad = [&](int64_t site) -> TensorView {
    if (p_hidden <= 0.0f) return buf.dres;
    ops::dropout_backward({p_hidden, seed, site_offset(site)}, buf.proj, buf.dres, s);
    return buf.proj;
  };

  // Tied LM head: dwte += grad_scale dlogits^T lnf;  dlnf = grad_scale dlogits wte.
  weight_grad(g.wte, buf.logits, buf.lnf, s, grad_scale);
  input_grad(buf.dln, buf.logits, w.wte, s, grad_scale);
  ops::layernorm_backward(ln, ops::Accumulate::kOverwrite, buf.dres, g.lnf_g, g.lnf_b, buf.dln,
                          buf.x_final, w.lnf_g, buf.lnf_mean, buf.lnf_rstd, buf.op_ws, s);
  for (int64_t l = cfg.n_layers - 1; l >= 0; --l) {
    const gpt_detail::LayerActs& a = buf.layers[l];
    const gpt_detail::LayerWeights& lw = w.layers[l];
    const gpt_detail::LayerWeights& lg = g.layers[l];
    // MLP: x_{l+1} = h + Drop(gelu Wp^T + bp); dres holds d x_{l+1}.
    TensorView dproj = drop_grad(3 + 3 * l);
    weight_grad(lg.mlp_proj_w, dproj, a.gelu, s);
    ops::bias_backward(lg.mlp_proj_b, dproj, s);
    ops::GemmArgs dg{bt, cfg.ffn(), d};
    dg.epilogue = Epilogue::kDGelu;  // dfc = (dproj Wp) * gelu'(pre_gelu)
    ops::gemm(dg, dfc, dproj, lw.mlp_proj_w, {}, a.pre_gelu, s);
    weight_grad(lg.fc_w, dfc, a.ln2, s);
    ops::bias_backward(lg.fc_b, dfc, s);
    input_grad(buf.dln, dfc, lw.fc_w, s);
    // dres becomes d h = d x_{l+1} + LN2'(dln) (dproj, possibly aliasing dres, is consumed).
    ops::layernorm_backward(ln, ops::Accumulate::kAdd, buf.dres, lg.ln2_g, lg.ln2_b, buf.dln, a.h,
                            lw.ln2_g, a.ln2_mean, a.ln2_rstd, buf.op_ws, s);
    // Attention: h = x + Drop(atty Wo^T + bo).
    dproj = drop_grad(2 + 3 * l);
    weight_grad(lg.attn_proj_w, dproj, a.atty, s);
    ops::bias_backward(lg.attn_proj_b, dproj, s);
    input_grad(buf.dln, dproj, lw.attn_proj_w, s);  // d atty
    ops::AttentionArgs aa{shape.micro_batch,
                          shape.seq_len,
                          cfg.n_heads,
                          cfg.head_dim(),
                          1.0f / std::sqrt(static_cast<float>(cfg.head_dim())),
                          cfg.attention_dropout,
                          seed,
                          site_offset(1 + 3 * l)};
    ops::attention_backward(aa, dqkv, buf.dln, a.qkv, a.probs, buf.op_ws, s);
    weight_grad(lg.qkv_w, dqkv, a.ln1, s);
    ops::bias_backward(lg.qkv_b, dqkv, s);
    input_grad(buf.dln, dqkv, lw.qkv_w, s);
    // dres becomes d x_l.
    ops::layernorm_backward(ln, ops::Accumulate::kAdd, buf.dres, lg.ln1_g, lg.ln1_b, buf.dln, a.x,
                            lw.ln1_g, a.ln1_mean, a.ln1_rstd, buf.op_ws, s);
  }
  if (p_hidden > 0.0f) {
    ops::dropout_backward({p_hidden, seed, site_offset(0)}, buf.dres, buf.dres, s);
  }
  ops::embedding_backward({bt, d, cfg.padded(), cfg.max_seq_len}, g.wte, g.wpe, buf.dres,
                          buf.tokens, buf.positions, s);
}

}  // namespace anvil::model
