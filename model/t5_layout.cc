// T5 memory layout (model/t5_impl.h): the parameter table and every buffer carved from the
// arenas, walked once for planning and once for creation, so the plan equals what create()
// allocates by construction.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/checked_math.h"
#include "engine/status.h"
#include "model/t5_impl.h"
#include "ops/flash_attention.h"
#include "ops/grad_norm.h"
#include "ops/rmsnorm.h"
#include "parallel/zero.h"

namespace anvil::model::t5_detail {

namespace {

std::string enc_name(int64_t l, const std::string& rest) {
  return absl::StrCat("encoder.block.", l, ".", rest);
}
std::string dec_name(int64_t l, const std::string& rest) {
  return absl::StrCat("decoder.block.", l, ".", rest);
}
constexpr const char* kRelName = "layer.0.SelfAttention.relative_attention_bias.weight";

// Self-attention sub-layer 0 of a block (encoder or decoder); i: this rank's inner width.
void add_self_attention(const T5Config& cfg, ParamTableBuilder& t, const std::string& prefix,
                        bool rel, int64_t i) {
  const int64_t d = cfg.d_model;
  t.add(prefix + "layer.0.SelfAttention.qkv.weight", {3 * i, d}, true, 0, 3);  // column-parallel
  t.add(prefix + "layer.0.SelfAttention.o.weight", {d, i}, true, 1);           // row-parallel
  if (rel) t.add(prefix + kRelName, {cfg.num_buckets, cfg.n_heads}, false);    // all heads
  t.add(prefix + "layer.0.layer_norm.weight", {d}, false);
}

void add_ffn(const T5Config& cfg, ParamTableBuilder& t, const std::string& prefix, int sub,
             int tp) {
  const std::string p = absl::StrCat(prefix, "layer.", sub, ".");
  t.add(p + "DenseReluDense.wi.weight", {cfg.wi_out() / tp, cfg.d_model}, true, 0,
        cfg.gated() ? 2 : 1);
  t.add(p + "DenseReluDense.wo.weight", {cfg.d_model, cfg.d_ff / tp}, true, 1);
  t.add(p + "layer_norm.weight", {cfg.d_model}, false);
}

TensorView find_view(const ParamTable& t, const std::string& name, TensorView Param::*field) {
  const Param* p = t.find(name);
  ANVIL_CHECK_MSG(p != nullptr, "T5: no parameter " + name);
  return p->*field;
}

LayerWeights layer_of(const T5Config& cfg, const ParamTable& t, TensorView Param::*field,
                      bool decoder, int64_t l) {
  const std::string pre = decoder ? dec_name(l, "") : enc_name(l, "");
  auto v = [&](const std::string& rest) { return find_view(t, pre + rest, field); };
  LayerWeights w;
  w.ln1 = v("layer.0.layer_norm.weight");
  w.qkv = v("layer.0.SelfAttention.qkv.weight");
  w.o = v("layer.0.SelfAttention.o.weight");
  const std::string ff = decoder ? "layer.2." : "layer.1.";
  if (decoder) {
    w.ln2 = v("layer.1.layer_norm.weight");
    w.cq = v("layer.1.EncDecAttention.q.weight");
    w.ckv = v("layer.1.EncDecAttention.kv.weight");
    w.co = v("layer.1.EncDecAttention.o.weight");
  }
  w.ln_ff = v(ff + "layer_norm.weight");
  w.wi = v(ff + "DenseReluDense.wi.weight");
  w.wo = v(ff + "DenseReluDense.wo.weight");
  (void)cfg;
  return w;
}

Weights weights_of(const T5Config& cfg, const ParamTable& t, TensorView Param::*field) {
  Weights w;
  w.shared = find_view(t, "shared.weight", field);
  w.lm_head = cfg.tied() ? w.shared : find_view(t, "lm_head.weight", field);
  w.rel_enc = find_view(t, enc_name(0, kRelName), field);
  w.rel_dec = find_view(t, dec_name(0, kRelName), field);
  w.enc_final = find_view(t, "encoder.final_layer_norm.weight", field);
  w.dec_final = find_view(t, "decoder.final_layer_norm.weight", field);
  for (int64_t l = 0; l < cfg.n_encoder_layers; ++l) {
    w.enc.push_back(layer_of(cfg, t, field, false, l));
  }
  for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
    w.dec.push_back(layer_of(cfg, t, field, true, l));
  }
  return w;
}

}  // namespace

ParamTable make_t5_param_table(const T5Config& cfg, const T5Shard& shard) {
  const int tp = shard.tp;
  const int64_t d = cfg.d_model, i = cfg.inner() / tp, v = cfg.padded() / tp;
  ParamTableBuilder t;
  t.begin_bucket("embeddings");
  Param& shared = t.add("shared.weight", {v, d}, true, 0);  // vocab-parallel
  shared.vocab_rows = true;
  shared.tied = cfg.tied();
  for (int64_t l = 0; l < cfg.n_encoder_layers; ++l) {
    t.begin_bucket(enc_name(l, ""));
    add_self_attention(cfg, t, enc_name(l, ""), l == 0, i);
    add_ffn(cfg, t, enc_name(l, ""), 1, tp);
  }
  for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
    const std::string pre = dec_name(l, "");
    t.begin_bucket(pre);
    add_self_attention(cfg, t, pre, l == 0, i);
    t.add(pre + "layer.1.EncDecAttention.q.weight", {i, d}, true, 0);
    t.add(pre + "layer.1.EncDecAttention.kv.weight", {2 * i, d}, true, 0, 2);
    t.add(pre + "layer.1.EncDecAttention.o.weight", {d, i}, true, 1);
    t.add(pre + "layer.1.layer_norm.weight", {d}, false);
    add_ffn(cfg, t, pre, 2, tp);
  }
  t.begin_bucket("final");
  t.add("encoder.final_layer_norm.weight", {d}, false);
  t.add("decoder.final_layer_norm.weight", {d}, false);
  if (!cfg.tied()) t.add("lm_head.weight", {v, d}, true, 0).vocab_rows = true;
  return t.build(shard.zero_stage > 0 ? parallel::zero_bucket_align(1, shard.zero_dp)
                                      : ParamTable::kAlignElements);
}

absl::Status check_t5_run(const T5Config& cfg, const T5RunShape& shape, const GptPrecision& prec,
                          const T5Shard& shard) {
  ANVIL_RETURN_IF_ERROR(cfg.validate());
  ANVIL_RETURN_IF_ERROR(shard.validate(cfg));
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("T5 run: ", parts...));
  };
  if (shape.micro_batch < 1 || shape.enc_len < 1 || shape.dec_len < 1 ||
      shape.enc_len > engine::kMaxDimension || shape.dec_len > engine::kMaxDimension) {
    return bad("need micro_batch, enc_len, dec_len >= 1 (and < 2^31), got ", shape.micro_batch,
               ", ", shape.enc_len, ", ", shape.dec_len);
  }
  const int64_t widest = std::max({cfg.padded(), 3 * cfg.inner(), cfg.wi_out(), cfg.d_model});
  const int64_t longest = std::max(shape.enc_len, shape.dec_len);
  if (!engine::product_within({shape.micro_batch, longest, widest}, engine::kMaxElements)) {
    return bad("micro_batch ", shape.micro_batch, " x sequence ", longest, " x width ", widest,
               " exceeds 2^44 elements of one tensor");
  }
  const std::string act(engine::dtype_name(prec.act)), grad(engine::dtype_name(prec.grad));
  if (prec.device == engine::Device::kCpu) {
    if (!((prec.act == DType::kF32 || prec.act == DType::kF64) && prec.grad == prec.act)) {
      return bad("on the CPU act and grad must both be f32 or both f64, got act ", act, ", grad ",
                 grad);
    }
  } else if (!(prec.act == DType::kBF16 && prec.grad == DType::kF32 &&
               (cfg.d_kv == 64 || cfg.d_kv == 128))) {
    // T5's attention (relative bias, cross-attention, no scaling) is flash attention only.
    return bad(
        "on CUDA act must be bf16 and grad f32 with d_kv 64 or 128 (flash attention), "
        "got act ",
        act, ", grad ", grad, ", d_kv ", cfg.d_kv);
  }
  return absl::OkStatus();
}

Buffers t5_layout(const T5Config& cfg, const T5RunShape& shape, const GptPrecision& prec,
                  const T5Shard& shard, gpt_detail::Carver& carver) {
  const int64_t B = shape.micro_batch, Te = shape.enc_len, Td = shape.dec_len;
  const int64_t re = B * Te, rd = B * Td, rmax = std::max(re, rd);
  // Local widths: this rank's heads, inner, d_ff and wi outputs.
  const int tp = shard.tp;
  const int64_t d = cfg.d_model, I = cfg.inner() / tp, H = cfg.n_heads / tp, f = cfg.d_ff / tp;
  const int64_t wi = cfg.wi_out() / tp;
  const DType act = prec.act, gdt = prec.grad, st = gpt_detail::stat_dtype(prec);
  const bool cuda = prec.device == engine::Device::kCuda;
  Buffers b;
  b.table = make_t5_param_table(cfg, shard);
  const int64_t n = b.table.flat_numel();
  const int64_t no = shard.zero_stage > 0 ? n / shard.zero_dp : n;  // optimizer-state elements
  b.value = carver.take("params", "params (compute copy)", act, {n});
  b.master = act == gdt ? b.value : carver.take("master", "master weights", gdt, {no});
  b.m = carver.take("optimizer", "adamw m", gdt, {no});
  b.v = carver.take("optimizer", "adamw v", gdt, {no});
  b.grad = carver.take("grads", "gradients", gdt, {n});

  auto A = [&](const std::string& name, DType dt, const std::vector<int64_t>& s) {
    return carver.take("activations", name, dt, s);
  };
  auto layer = [&](const std::string& p, bool decoder) {
    const int64_t r = decoder ? rd : re, T = decoder ? Td : Te;
    LayerActs a;
    a.x = A(p + "x", act, {r, d});
    a.ln1 = A(p + "ln1", act, {r, d});
    a.rstd1 = A(p + "ln1.rstd", st, {r});
    a.qkv = A(p + "qkv", act, {r, 3 * I});
    a.lse = A(p + "attn.lse", DType::kF32, {B, H, T});
    a.att = A(p + "attn", act, {r, I});
    a.h = A(p + "h", act, {r, d});
    if (decoder) {
      a.ln2 = A(p + "ln2", act, {r, d});
      a.rstd2 = A(p + "ln2.rstd", st, {r});
      a.cq = A(p + "cross.q", act, {r, I});
      a.ckv = A(p + "cross.kv", act, {re, 2 * I});
      a.clse = A(p + "cross.lse", DType::kF32, {B, H, T});
      a.catt = A(p + "cross.attn", act, {r, I});
      a.h2 = A(p + "h2", act, {r, d});
    }
    a.ln_ff = A(p + "ln_ff", act, {r, d});
    a.rstd_ff = A(p + "ln_ff.rstd", st, {r});
    a.pre = A(p + "ffn.pre", act, {r, wi});
    a.act = A(p + "ffn.act", act, {r, f});
    return a;
  };
  for (int64_t l = 0; l < cfg.n_encoder_layers; ++l) {
    b.enc_layers.push_back(layer(absl::StrCat("encoder.", l, "."), false));
  }
  for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
    b.dec_layers.push_back(layer(absl::StrCat("decoder.", l, "."), true));
  }
  b.enc_tokens = A("encoder tokens", DType::kI32, {re});
  b.dec_tokens = A("decoder tokens", DType::kI32, {rd});
  b.labels = A("labels", DType::kI32, {rd});
  b.enc_lengths = A("encoder lengths", DType::kI32, {B});
  b.rel_buckets_enc = A("encoder relative buckets", DType::kI32, {2 * Te - 1});
  b.rel_buckets_dec = A("decoder relative buckets", DType::kI32, {2 * Td - 1});
  b.x_enc = A("encoder output sum", act, {re, d});
  b.enc_norm = A("encoder final norm", act, {re, d});
  b.enc_rstd = A("encoder final norm rstd", st, {re});
  b.enc = A("encoder output", act, {re, d});
  b.x_dec = A("decoder output sum", act, {rd, d});
  b.dec_norm = A("decoder final norm", act, {rd, d});
  b.dec_rstd = A("decoder final norm rstd", st, {rd});
  b.dec = A("decoder output", act, {rd, d});
  b.logits = A("logits", act, {rd, cfg.padded() / tp});
  b.losses = A("losses", st, {rd});
  b.proj = A("proj / dproj", act, {rmax, d});
  b.dres = A("grad residual", act, {rmax, d});
  b.dln = A("grad norm input", act, {rmax, std::max(d, I)});
  b.dbig = A("grad qkv / ffn hidden", act, {rmax, std::max(3 * I, wi)});
  b.dact = A("grad ffn activation", act, {rmax, f});
  b.denc = A("grad encoder output", act, {re, d});
  // The relative tables hold every head (flash attention reads this rank's at head_offset).
  const int64_t nh = cfg.num_buckets * cfg.n_heads;
  b.rel_f32 = A("relative tables (f32)", DType::kF32, {2, cfg.num_buckets, cfg.n_heads});
  b.drel_f32 = A("relative table grads (f32)", DType::kF32, {2, cfg.num_buckets, cfg.n_heads});
  b.rel_grad = A("relative table grad (grad dtype)", gdt, {nh});
  if (tp > 1) b.ce = A("vocab-parallel ce stats", st, {3, rd});

  size_t op_bytes = 0;
  if (cuda) {
    // Encoder self-, decoder self- and cross-attention (queries, keys).
    for (const auto& [tq, tk] : {std::pair<int64_t, int64_t>{Te, Te}, {Td, Td}, {Td, Te}}) {
      ops::FlashAttentionArgs fa;
      fa.batch = B, fa.q_len = tq, fa.kv_len = tk, fa.heads = H, fa.head_dim = cfg.d_kv;
      fa.total_heads = cfg.n_heads;
      fa.bias = ops::AttentionBias::kRelativeBuckets;  // its partial sums need the most
      op_bytes =
          std::max(op_bytes, ops::cuda::flash_attention_workspace_bytes(fa, cfg.num_buckets));
    }
    op_bytes = std::max({op_bytes, ops::cuda::rmsnorm_backward_workspace_bytes({rmax, d, cfg.eps}),
                         ops::cuda::sum_squares_workspace_bytes(n)});
  }
  b.op_ws = carver.take_workspace("workspace", "op scratch", op_bytes);
  b.gemm_ws =
      carver.take_workspace("workspace", "cublaslt", cuda ? gpt_detail::kGemmWorkspaceBytes : 0);
  b.norm_out = carver.take("workspace", "grad norm", gdt, {1});

  if (!carver.planning() && carver.status().ok()) {
    // Views into the buffers that hold every element (the ZeRO shards hold pieces only).
    auto whole = [n](TensorView t) { return t.numel() == n ? t : TensorView{}; };
    b.table.bind(b.value, whole(b.master), b.grad, whole(b.m), whole(b.v));
    b.w = weights_of(cfg, b.table, &Param::value);
    b.g = weights_of(cfg, b.table, &Param::grad);
  }
  return b;
}

}  // namespace anvil::model::t5_detail
