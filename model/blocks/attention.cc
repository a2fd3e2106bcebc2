// The attention block's forward and backward (see attention.h): the input projections, the
// rotary rotation, the flash or unfused core, the output projection, and the exact reverse.
#include "model/blocks/attention.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "model/blocks/linear.h"
#include "ops/attention.h"
#include "ops/rotary.h"

namespace anvil::model::blocks {

namespace {

using engine::ConstTensorView;
using engine::TensorView;

// Column blocks [0, I), [I, 2I), ... of a fused buffer of n * I columns.
template <size_t N>
std::array<TensorView, N> split(TensorView fused, int64_t inner) {
  std::array<TensorView, N> parts;
  for (size_t i = 0; i < N; ++i) {
    const int64_t at = static_cast<int64_t>(i) * inner;
    parts[i] = engine::slice_cols(fused, at, at + inner);
  }
  return parts;
}

// q, k, v views of the saved projections (self: qkv; cross: qkv = q, kv = k | v).
std::array<TensorView, 3> qkv_views(const AttentionConfig& c, TensorView qkv, TensorView kv) {
  if (!c.cross) return split<3>(qkv, c.inner());
  const auto [k, v] = split<2>(kv, c.inner());
  return {qkv, k, v};
}

void check(const AttentionConfig& c, ConstTensorView x, ConstTensorView memory,
           const AttentionActs& a) {
  ANVIL_CHECK_MSG(c.kv_heads >= 0 && c.kv() >= 1 && c.heads % c.kv() == 0 && c.kv() % c.tp == 0,
                  absl::StrCat("attention block: kv_heads ", c.kv(), " must divide heads ", c.heads,
                               " and be divisible by tp ", c.tp));
  ANVIL_CHECK_MSG(!c.grouped() || (c.flash && !c.cross),
                  "attention block: grouped-query attention (kv_heads < heads) needs flash "
                  "attention and self-attention");
  ANVIL_CHECK_MSG(c.tp >= 1 && c.heads % c.tp == 0 && c.tp_rank >= 0 && c.tp_rank < c.tp,
                  absl::StrCat("attention block: heads ", c.heads, " over tp ", c.tp, " (rank ",
                               c.tp_rank, ")"));
  ANVIL_CHECK_MSG(x.dim(0) == c.rows() && a.att.dim(0) == c.rows() && a.att.dim(1) == c.inner(),
                  absl::StrCat("attention block: x rows ", x.dim(0), " or att [", a.att.dim(0),
                               ", ", a.att.dim(1), "] unlike batch * q_len ", c.rows(),
                               ", heads / tp * head_dim ", c.inner()));
  ANVIL_CHECK_MSG(c.cross || c.kv_len == c.q_len,
                  absl::StrCat("attention block: self-attention with kv_len ", c.kv_len,
                               " != q_len ", c.q_len));
  ANVIL_CHECK_MSG(!c.cross || (memory.dim(0) == c.kv_rows() && !a.kv.empty()),
                  absl::StrCat("attention block: cross-attention needs a memory of batch * "
                               "kv_len = ",
                               c.kv_rows(), " rows and saved kv"));
  ANVIL_CHECK_MSG(c.flash || (c.causal && !c.cross && c.position != AttentionPosition::kAlibi &&
                              c.position != AttentionPosition::kRelativeBuckets),
                  "attention block: the unfused op is causal self-attention without a bias "
                  "(ALiBi and relative buckets need flash)");
  ANVIL_CHECK_MSG(c.position != AttentionPosition::kRotary || !c.cross,
                  "attention block: rotary positions need self-attention");
}

ops::FlashAttentionArgs flash_args(const AttentionConfig& c, float dropout,
                                   const AttentionDropoutSite& site) {
  ops::FlashAttentionArgs fa;
  fa.batch = c.batch, fa.q_len = c.q_len, fa.kv_len = c.kv_len, fa.heads = c.local_heads();
  fa.head_dim = c.head_dim, fa.causal = c.causal, fa.scale = c.scale;
  if (c.position == AttentionPosition::kAlibi) fa.bias = ops::AttentionBias::kAlibi;
  if (c.position == AttentionPosition::kRelativeBuckets) {
    fa.bias = ops::AttentionBias::kRelativeBuckets;
  }
  fa.dropout_p = dropout, fa.seed = site.seed, fa.offset = site.offset;
  fa.total_heads = c.heads, fa.head_offset = c.head_offset();
  // The Hopper forward, where asked for, except causal attention at head 64 over at most 1024
  // keys: there it measured slower than mma.sync (attention_bench, H100, 2026-12-07: 155 vs 171
  // forward TFLOP/s at 16 x 1024, 32 heads of 64; faster from 2048 keys and at head 128).
  const bool slower = c.causal && c.head_dim == 64 && c.kv_len <= 1024;
  fa.kernel = slower ? ops::AttentionKernel::kMmaSync : c.kernel;
  return fa;
}

ops::AttentionArgs unfused_args(const AttentionConfig& c, float dropout,
                                const AttentionDropoutSite& site, const AttentionInputs& in) {
  ops::AttentionArgs aa{c.batch, c.q_len, c.local_heads(), c.head_dim,
                        c.scale, dropout, site.seed,       site.offset};
  aa.total_heads = c.heads;
  aa.head_offset = c.head_offset();
  aa.prefix_end = in.masks.prefix_end;
  return aa;
}

ops::RotaryArgs rotary_args(const AttentionConfig& c, int64_t heads = 0) {
  return {c.rows(),      heads == 0 ? c.local_heads() : heads,
          c.head_dim,    c.rotary_dim,
          c.rotary_base, c.rotary_scaling};
}

// Local group g of a grouped qkv (or dqkv) [rows, qkv_cols]: its G query heads, k and v, and
// the G + 1 rotated heads q | k (consecutive columns).
struct Group {
  TensorView q, k, v, qk;
};
Group group_views(const AttentionConfig& c, TensorView qkv, int64_t g) {
  const int64_t hd = c.head_dim, G = c.group(), at = g * (G + 2) * hd;
  return {engine::slice_cols(qkv, at, at + G * hd),
          engine::slice_cols(qkv, at + G * hd, at + (G + 1) * hd),
          engine::slice_cols(qkv, at + (G + 1) * hd, at + (G + 2) * hd),
          engine::slice_cols(qkv, at, at + (G + 1) * hd)};
}

// Group g's flash arguments: G query heads on one kv head, model heads from
// head_offset + g * G (dropout numbering and ALiBi as with all heads in one call).
ops::FlashAttentionArgs group_args(const AttentionConfig& c, float dropout,
                                   const AttentionDropoutSite& site, int64_t g) {
  ops::FlashAttentionArgs fa = flash_args(c, dropout, site);
  fa.heads = c.group();
  fa.kv_heads = 1;
  fa.head_offset = c.head_offset() + g * c.group();
  return fa;
}

// Group g's columns of att [rows, I] and its lse block [B, G, Tq] of the saved lse.
TensorView group_att(const AttentionConfig& c, TensorView att, int64_t g) {
  const int64_t w = c.group() * c.head_dim;
  return engine::slice_cols(att, g * w, (g + 1) * w);
}
TensorView group_lse(const AttentionConfig& c, TensorView lse, int64_t g) {
  const int64_t n = c.batch * c.group() * c.q_len;
  return engine::make_view(lse.as<float>() + g * n, engine::DType::kF32, lse.device,
                           {c.batch, c.group(), c.q_len});
}

// The core's masks: the inputs' plus the saved dropout bits (whole, or group g's block).
ops::AttentionMasks core_masks(const AttentionConfig& c, const AttentionInputs& in, TensorView keep,
                               int64_t g = -1) {
  ops::AttentionMasks m = in.masks;
  if (keep.empty()) return m;
  if (g < 0) {
    m.dropout_keep = keep;
  } else {
    const int64_t n = dropout_keep_words(c.batch, c.group(), c.q_len, c.kv_len);
    m.dropout_keep =
        engine::make_view(keep.as<int32_t>() + g * n, engine::DType::kI32, keep.device, {n});
  }
  return m;
}

}  // namespace

void attention_forward(const AttentionConfig& c, TensorView out, const AttentionActs& acts,
                       ConstTensorView x, ConstTensorView memory, const AttentionWeights& w,
                       const AttentionInputs& in, bool train, const AttentionDropoutSite& site,
                       engine::Workspace ws, engine::Stream& s) {
  check(c, x, memory, acts);
  linear(acts.qkv, x, w.qkv_w, w.qkv_b, s);
  const float p = train ? c.dropout : 0.0f;
  if (c.grouped()) {
    for (int64_t g = 0; g < c.local_kv_heads(); ++g) {
      const Group v = group_views(c, acts.qkv, g);
      if (c.position == AttentionPosition::kRotary) {  // q | k of the group rotated in place
        ops::rotary_forward(rotary_args(c, c.group() + 1), v.qk, in.positions, s);
      }
      ops::flash_attention_forward(group_args(c, p, site, g), group_att(c, acts.att, g),
                                   group_lse(c, acts.lse, g), v.q, v.k, v.v,
                                   core_masks(c, in, acts.keep, g), s);
    }
    row_linear(out, acts.att, w.out_w, w.out_b, c.tp_rank == 0, s);
    return;
  }
  if (c.cross) linear(acts.kv, memory, w.kv_w, w.kv_b, s);
  const auto [q, k, v] = qkv_views(c, acts.qkv, acts.kv);
  if (c.position == AttentionPosition::kRotary) {  // q, k rotated in place
    ops::rotary_forward(rotary_args(c), q, in.positions, s);
    ops::rotary_forward(rotary_args(c), k, in.positions, s);
  }
  if (c.flash) {
    ops::flash_attention_forward(flash_args(c, p, site), acts.att, acts.lse, q, k, v,
                                 core_masks(c, in, acts.keep), s);
  } else {
    ops::attention_forward(unfused_args(c, p, site, in), acts.att, acts.probs, acts.qkv,
                           in.masks.seg_q, ws, s);
  }
  row_linear(out, acts.att, w.out_w, w.out_b, c.tp_rank == 0, s);
}

void attention_backward(const AttentionConfig& c, TensorView dx, TensorView dmemory,
                        const AttentionWeights& grads, TensorView d_rel_table, ConstTensorView dout,
                        ConstTensorView x, ConstTensorView memory, const AttentionActs& acts,
                        const AttentionWeights& w, const AttentionInputs& in,
                        const AttentionDropoutSite& site, const AttentionScratch& scratch,
                        engine::Workspace ws, engine::Stream& s) {
  check(c, x, memory, acts);
  linear_backward(scratch.datt, grads.out_w, grads.out_b, dout, acts.att, w.out_w, s);
  if (c.grouped()) {
    for (int64_t g = 0; g < c.local_kv_heads(); ++g) {
      const Group v = group_views(c, acts.qkv, g), d = group_views(c, scratch.dqkv, g);
      ops::flash_attention_backward(group_args(c, c.dropout, site, g), d.q, d.k, d.v, {},
                                    group_att(c, scratch.datt, g), v.q, v.k, v.v,
                                    group_att(c, acts.att, g), group_lse(c, acts.lse, g),
                                    core_masks(c, in, acts.keep, g), ws, s);
      if (c.position == AttentionPosition::kRotary) {
        ops::rotary_backward(rotary_args(c, c.group() + 1), d.qk, in.positions, s);
      }
    }
    linear_backward(dx, grads.qkv_w, grads.qkv_b, scratch.dqkv, x, w.qkv_w, s);
    return;
  }
  const auto [q, k, v] = qkv_views(c, acts.qkv, acts.kv);
  const auto [dq, dk, dv] = qkv_views(c, scratch.dqkv, scratch.dkv);
  if (c.flash) {
    ops::flash_attention_backward(flash_args(c, c.dropout, site), dq, dk, dv, d_rel_table,
                                  scratch.datt, q, k, v, acts.att, acts.lse,
                                  core_masks(c, in, acts.keep), ws, s);
  } else {
    const ops::AttentionArgs aa = unfused_args(c, c.dropout, site, in);
    // The probabilities were not kept: recompute them (att is rewritten with equal values).
    if (c.recompute_probs) {
      ops::attention_forward(aa, acts.att, acts.probs, acts.qkv, in.masks.seg_q, ws, s);
    }
    ops::attention_backward(aa, scratch.dqkv, scratch.datt, acts.qkv, acts.probs, in.masks.seg_q,
                            ws, s);
  }
  if (c.position == AttentionPosition::kRotary) {  // d(q, k before the rotation)
    ops::rotary_backward(rotary_args(c), dq, in.positions, s);
    ops::rotary_backward(rotary_args(c), dk, in.positions, s);
  }
  if (c.cross) {  // d memory += dkv W_kv (partial over TP)
    weight_bias_grad(grads.kv_w, grads.kv_b, scratch.dkv, memory, s);
    input_grad(dmemory, scratch.dkv, w.kv_w, s, 1.0f, 1.0f);
  }
  linear_backward(dx, grads.qkv_w, grads.qkv_b, scratch.dqkv, x, w.qkv_w, s);
}

AttentionActs attention_saved_acts(const AttentionConfig& c, engine::DType dtype,
                                   const std::string& prefix, const TakeView& take) {
  const int64_t I = c.inner();
  AttentionActs a;
  a.qkv = take(prefix + "qkv", dtype, {c.rows(), c.cross ? I : c.qkv_cols()});
  if (c.cross) a.kv = take(prefix + "kv", dtype, {c.kv_rows(), 2 * I});
  if (c.flash) {
    a.lse = take(prefix + "attn.lse", engine::DType::kF32, {c.batch, c.local_heads(), c.q_len});
  } else {
    a.probs = take(prefix + "probs", dtype, {c.batch, c.local_heads(), c.q_len, c.kv_len});
  }
  a.att = take(prefix + "att", dtype, {c.rows(), I});
  if (c.saves_keep()) {
    a.keep = take(prefix + "attn.keep", engine::DType::kI32,
                  {dropout_keep_words(c.batch, c.local_heads(), c.q_len, c.kv_len)});
  }
  return a;
}

int64_t dropout_keep_words(int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len) {
  ops::FlashAttentionArgs a;
  a.batch = batch, a.heads = heads, a.q_len = q_len, a.kv_len = kv_len;
  return ops::flash_attention_keep_words(a);
}

}  // namespace anvil::model::blocks
