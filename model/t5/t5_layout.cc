// T5 memory layout (model/t5/t5_impl.h): the parameter table and every buffer carved from the
// arenas, walked once for planning and once for creation, so the plan equals what create()
// allocates by construction.
#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/checked_math.h"
#include "engine/status.h"
#include "model/blocks/attention.h"
#include "model/sync_layout.h"
#include "model/t5/t5_impl.h"
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

// Block l's views, each parameter's from view(p).
LayerWeights layer_of(const ParamTable& t, bool decoder, int64_t l,
                      const std::function<TensorView(const Param&)>& view) {
  const std::string pre = decoder ? dec_name(l, "") : enc_name(l, "");
  auto v = [&](const std::string& rest) {
    const Param* p = t.find(pre + rest);
    ANVIL_CHECK_MSG(p != nullptr, "T5: no parameter " + pre + rest);
    return view(*p);
  };
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
  return w;
}

// The view of `name`, or empty where this stage does not hold it.
TensorView view_if(const ParamTable& t, const std::string& name, TensorView Param::*field) {
  const Param* p = t.find(name);
  return p ? p->*field : TensorView{};
}

// Views of this stage's parameters (layers outside its ranges stay empty).
Weights weights_of(const T5Config& cfg, const T5StageLayers& st, const ParamTable& t,
                   TensorView Param::*field) {
  Weights w;
  w.shared = view_if(t, "shared.weight", field);
  w.lm_head = cfg.tied() ? w.shared : view_if(t, "lm_head.weight", field);
  w.rel_enc = view_if(t, enc_name(0, kRelName), field);
  w.rel_dec = view_if(t, dec_name(0, kRelName), field);
  w.enc_final = view_if(t, "encoder.final_layer_norm.weight", field);
  w.dec_final = view_if(t, "decoder.final_layer_norm.weight", field);
  auto of_field = [field](const Param& p) { return p.*field; };
  w.enc.resize(static_cast<size_t>(cfg.n_encoder_layers));
  w.dec.resize(static_cast<size_t>(cfg.n_decoder_layers));
  for (int64_t l = st.enc_begin; l < st.enc_end; ++l) {
    w.enc[static_cast<size_t>(l)] = layer_of(t, false, l, of_field);
  }
  for (int64_t l = st.dec_begin; l < st.dec_end; ++l) {
    w.dec[static_cast<size_t>(l)] = layer_of(t, true, l, of_field);
  }
  return w;
}

// Elements of the largest shared parameter this stage has no copy of (at least 1).
int64_t shared_stand_in(const T5Config& cfg, const T5Shard& shard) {
  int64_t most = 1;
  for (const SharedParam& p : pipeline_shared_params(cfg, shard)) {
    if (std::find(p.stages.begin(), p.stages.end(), shard.pp_rank) == p.stages.end()) {
      most = std::max(most, p.numel);
    }
  }
  return most;
}

// The parameter buffers for the ZeRO stage (model/sync_layout.h) and each block's layer bucket.
void carve_params(const T5Config& cfg, const T5Shard& shard, const Precision& prec, Carver& carver,
                  Buffers& b) {
  // A block's bucket is a layer's but for block 0, whose relative table every block reads.
  auto is_layer = [](const std::string& name) {
    return (absl::StartsWith(name, "encoder.block.") || absl::StartsWith(name, "decoder.block.")) &&
           !absl::EndsWith(name, ".block.0.");
  };
  b.sync_buckets = sync_buckets(b.table, is_layer);
  b.enc_bucket.assign(static_cast<size_t>(cfg.n_encoder_layers), -1);
  b.dec_bucket.assign(static_cast<size_t>(cfg.n_decoder_layers), -1);
  const std::vector<ParamTable::Bucket>& buckets = b.table.buckets();
  for (size_t k = 0; k < buckets.size(); ++k) {
    if (!b.sync_buckets[k].layer) continue;
    for (int64_t l = 0; l < cfg.n_encoder_layers; ++l) {
      if (buckets[k].name == enc_name(l, ""))
        b.enc_bucket[static_cast<size_t>(l)] = static_cast<int64_t>(k);
    }
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
      if (buckets[k].name == dec_name(l, ""))
        b.dec_bucket[static_cast<size_t>(l)] = static_cast<int64_t>(k);
    }
  }
  b.sync_layout = parallel::sync_layout(b.sync_buckets, shard.zero_stage, shard.zero_dp);
  b.flat = carve_sync_buffers(b.sync_layout, prec.act, prec.grad, carver, shard.offload_optimizer);
}

}  // namespace

LayerWeights bucket_layer_views(const ParamTable& t, bool decoder, int64_t l, int64_t bucket,
                                TensorView base) {
  const int64_t begin = t.buckets()[static_cast<size_t>(bucket)].begin;
  return layer_of(t, decoder, l,
                  [&](const Param& p) { return flat_slice(base, p.offset - begin, p.shape); });
}

std::vector<SharedParam> pipeline_shared_params(const T5Config& cfg, const T5Shard& shard) {
  std::vector<SharedParam> out;
  const std::string names[] = {"shared.weight", enc_name(0, kRelName), dec_name(0, kRelName)};
  for (const std::string& name : names) {
    SharedParam p{name, 0, {}};
    for (int s = 0; s < shard.pp; ++s) {
      T5Shard other = shard;
      other.pp_rank = s;
      const ParamTable t = make_t5_param_table(cfg, other);
      if (const Param* q = t.find(name)) {
        p.numel = q->numel();
        p.stages.push_back(s);
      }
    }
    if (p.stages.size() > 1) out.push_back(std::move(p));
  }
  return out;
}

blocks::MlpConfig ffn_config(const T5Config& cfg, const T5Shard& shard) {
  blocks::MlpConfig c;
  c.d_model = cfg.d_model;
  c.ffn = cfg.d_ff;
  c.activation = cfg.gated() ? blocks::MlpActivation::kGegluTanh : blocks::MlpActivation::kRelu;
  c.act_dropout = cfg.dropout;
  c.tp = shard.tp;
  c.tp_rank = shard.tp_rank;
  return c;
}

ParamTable make_t5_param_table(const T5Config& cfg, const T5Shard& shard) {
  const int tp = shard.tp;
  const int64_t d = cfg.d_model, i = cfg.inner() / tp, v = cfg.padded() / tp;
  const T5StageLayers st = shard.layers(cfg);
  const bool post = st.dec_end > st.dec_begin && st.dec_end == cfg.n_decoder_layers;
  ParamTableBuilder t;
  // The shared embedding where a stack starts, and under the tied LM head.
  if ((st.enc_end > st.enc_begin && st.enc_begin == 0) ||
      (st.dec_end > st.dec_begin && st.dec_begin == 0) || (post && cfg.tied())) {
    t.begin_bucket("embeddings");
    Param& shared = t.add("shared.weight", {v, d}, true, 0);  // vocab-parallel
    shared.vocab_rows = true;
    shared.tied = cfg.tied();
  }
  // A stage whose layers start past block 0 holds a copy of block 0's relative table.
  if (st.enc_begin > 0) {
    t.begin_bucket("encoder.relative_attention_bias");
    t.add(enc_name(0, kRelName), {cfg.num_buckets, cfg.n_heads}, false);
  }
  for (int64_t l = st.enc_begin; l < st.enc_end; ++l) {
    t.begin_bucket(enc_name(l, ""));
    add_self_attention(cfg, t, enc_name(l, ""), l == 0, i);
    add_ffn(cfg, t, enc_name(l, ""), 1, tp);
  }
  if (st.dec_begin > 0) {
    t.begin_bucket("decoder.relative_attention_bias");
    t.add(dec_name(0, kRelName), {cfg.num_buckets, cfg.n_heads}, false);
  }
  for (int64_t l = st.dec_begin; l < st.dec_end; ++l) {
    const std::string pre = dec_name(l, "");
    t.begin_bucket(pre);
    add_self_attention(cfg, t, pre, l == 0, i);
    t.add(pre + "layer.1.EncDecAttention.q.weight", {i, d}, true, 0);
    t.add(pre + "layer.1.EncDecAttention.kv.weight", {2 * i, d}, true, 0, 2);
    t.add(pre + "layer.1.EncDecAttention.o.weight", {d, i}, true, 1);
    t.add(pre + "layer.1.layer_norm.weight", {d}, false);
    add_ffn(cfg, t, pre, 2, tp);
  }
  const bool ends_enc = st.enc_end > st.enc_begin && st.enc_end == cfg.n_encoder_layers;
  if (ends_enc || post) t.begin_bucket("final");
  if (ends_enc) t.add("encoder.final_layer_norm.weight", {d}, false);
  if (post) {
    t.add("decoder.final_layer_norm.weight", {d}, false);
    if (!cfg.tied()) t.add("lm_head.weight", {v, d}, true, 0).vocab_rows = true;
  }
  return t.build(shard.zero_stage > 0 ? parallel::zero_bucket_align(1, shard.zero_dp)
                                      : ParamTable::kAlignElements);
}

}  // namespace anvil::model::t5_detail

namespace anvil::model {

absl::Status check_t5_row_split(const T5Config& cfg, const T5RunShape& shape, int tp) {
  for (const auto& [what, len] : {std::pair<const char*, int64_t>{"seq_len", shape.enc_len},
                                  {"decoder_seq_len", shape.dec_len}}) {
    const int64_t rows = shape.micro_batch * len;
    if (rows % tp != 0 || rows / tp * cfg.d_model % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "T5 sequence parallelism: micro_batch * ", what, " (", rows,
          ") must be divisible by tp (", tp,
          ") into row blocks of a multiple of 4 elements (d_model ", cfg.d_model, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace anvil::model

namespace anvil::model::t5_detail {

absl::Status check_t5_run(const T5Config& cfg, const T5RunShape& shape, const Precision& prec,
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
  if (shard.sequence_parallel && shard.tp > 1) {
    ANVIL_RETURN_IF_ERROR(check_t5_row_split(cfg, shape, shard.tp));
  }
  const std::string act(engine::dtype_name(prec.act)), grad(engine::dtype_name(prec.grad));
  const bool half = prec.act == DType::kBF16 || prec.act == DType::kF16;
  if (prec.device == engine::Device::kCpu) {
    // CPU ops take f32 or f64 with one dtype throughout, or 16-bit storage (emulated: the twins
    // widen it) with f32 gradients, as GPT's.
    if (!((prec.act == DType::kF32 || prec.act == DType::kF64) && prec.grad == prec.act) &&
        !(half && prec.grad == DType::kF32)) {
      return bad(
          "on the CPU act and grad must both be f32 or both f64, or act bf16/f16 with "
          "grad f32, got act ",
          act, ", grad ", grad);
    }
    if (half && shard.tp > 1) {
      return bad("on the CPU ", act,
                 " activations need tp = 1 (MPI has no 16-bit sum for the tensor-parallel "
                 "all-reduce), got tp ",
                 shard.tp);
    }
  } else if (!(half && prec.grad == DType::kF32 && (cfg.d_kv == 64 || cfg.d_kv == 128) &&
               ops::flash_attention_cuda_supports(prec.act, cfg.d_kv))) {
    // T5's attention (relative bias, cross-attention, no scaling) is flash attention only,
    // whose CUDA kernels take bf16 or f16.
    return bad(
        "on CUDA act must be bf16 or f16 and grad f32 with d_kv 64 or 128 (flash attention), "
        "got act ",
        act, ", grad ", grad, ", d_kv ", cfg.d_kv);
  }
  return absl::OkStatus();
}

Buffers t5_layout(const T5Config& cfg, const T5RunShape& shape, const Precision& prec,
                  const T5Shard& shard, Carver& carver) {
  const int64_t B = shape.micro_batch, Te = shape.enc_len, Td = shape.dec_len;
  const int64_t re = B * Te, rd = B * Td, rmax = std::max(re, rd);
  // Rows of the residual streams this rank holds (sequence parallelism: a 1/tp share).
  const bool sp = shard.sequence_parallel && shard.tp > 1;
  const int64_t re_l = sp ? re / shard.tp : re, rd_l = sp ? rd / shard.tp : rd;
  // Local widths: this rank's heads, inner, d_ff and wi outputs.
  const int tp = shard.tp;
  const int64_t d = cfg.d_model, I = cfg.inner() / tp, H = cfg.n_heads / tp, f = cfg.d_ff / tp;
  const int64_t wi = cfg.wi_out() / tp;
  const DType act = prec.act, gdt = prec.grad, st_dt = stat_dtype(prec);
  const bool cuda = prec.device == engine::Device::kCuda;
  Buffers b;
  b.table = make_t5_param_table(cfg, shard);
  const int64_t n = b.table.flat_numel();
  carve_params(cfg, shard, prec, carver, b);

  auto A = [&](const std::string& name, DType dt, const std::vector<int64_t>& s) {
    return carver.take("activations", name, dt, s);
  };
  // One layer's activations; with `shared` (full recomputation) only x, the rest from shared.
  auto layer = [&](const std::string& p, bool decoder, const LayerActs* shared) {
    const int64_t r = decoder ? rd : re, T = decoder ? Td : Te, rl = decoder ? rd_l : re_l;
    LayerActs a;
    a.x = A(p + "x", act, {rl, d});
    if (shared != nullptr) {
      const TensorView x = a.x;
      a = *shared;
      a.x = x;
      return a;
    }
    a.ln1 = A(p + "ln1", act, {r, d});
    a.rstd1 = A(p + "ln1.rstd", st_dt, {rl});
    a.qkv = A(p + "qkv", act, {r, 3 * I});
    a.lse = A(p + "attn.lse", DType::kF32, {B, H, T});
    const bool keep = cfg.dropout > 0.0f && prec.save_dropout_mask;
    if (keep) a.keep = A(p + "attn.keep", DType::kI32, {blocks::dropout_keep_words(B, H, T, T)});
    a.att = A(p + "attn", act, {r, I});
    a.h = A(p + "h", act, {rl, d});
    if (decoder) {
      a.ln2 = A(p + "ln2", act, {r, d});
      a.rstd2 = A(p + "ln2.rstd", st_dt, {rl});
      a.cq = A(p + "cross.q", act, {r, I});
      a.ckv = A(p + "cross.kv", act, {re, 2 * I});
      a.clse = A(p + "cross.lse", DType::kF32, {B, H, T});
      if (keep) {
        a.ckeep = A(p + "cross.keep", DType::kI32, {blocks::dropout_keep_words(B, H, T, Te)});
      }
      a.catt = A(p + "cross.attn", act, {r, I});
      a.h2 = A(p + "h2", act, {rl, d});
    }
    a.ln_ff = A(p + "ln_ff", act, {r, d});
    a.rstd_ff = A(p + "ln_ff.rstd", st_dt, {rl});
    a.ffn = blocks::mlp_saved_acts(ffn_config(cfg, shard), r, act, p + "ffn.", A);
    return a;
  };
  const T5StageLayers st = shard.layers(cfg);
  const bool has_enc = st.enc_end > st.enc_begin, has_dec = st.dec_end > st.dec_begin;
  const bool ends_enc = has_enc && st.enc_end == cfg.n_encoder_layers;
  const bool post = has_dec && st.dec_end == cfg.n_decoder_layers;
  const bool pipelined = shard.pp > 1;
  const int64_t rows = has_dec ? rd_l : re_l;  // of the stage's hidden, this rank's
  // Full recomputation: one set of each stack's recomputed activations serves every layer and
  // slot (selective: flash attention keeps only lse, so there is nothing to drop).
  const bool full = shard.recompute == Recompute::kFull;
  LayerActs shared_enc, shared_dec;
  if (full && has_enc) shared_enc = layer("recompute.encoder.", false, nullptr);
  if (full && has_dec) shared_dec = layer("recompute.decoder.", true, nullptr);
  const LayerActs* enc_set = full ? &shared_enc : nullptr;
  const LayerActs* dec_set = full ? &shared_dec : nullptr;
  for (int64_t k = 0; k < shard.act_slots; ++k) {
    SlotActs sa;
    const std::string p = shard.act_slots > 1 ? absl::StrCat("slot ", k, " ") : "";
    sa.enc_layers.resize(static_cast<size_t>(cfg.n_encoder_layers));
    sa.dec_layers.resize(static_cast<size_t>(cfg.n_decoder_layers));
    for (int64_t l = st.enc_begin; l < st.enc_end; ++l) {
      sa.enc_layers[static_cast<size_t>(l)] =
          layer(absl::StrCat(p, "encoder.", l, "."), false, enc_set);
    }
    for (int64_t l = st.dec_begin; l < st.dec_end; ++l) {
      sa.dec_layers[static_cast<size_t>(l)] =
          layer(absl::StrCat(p, "decoder.", l, "."), true, dec_set);
    }
    sa.enc_tokens = A(p + "encoder tokens", DType::kI32, {re});
    sa.dec_tokens = A(p + "decoder tokens", DType::kI32, {rd});
    sa.labels = A(p + "labels", DType::kI32, {rd});
    sa.enc_lengths = A(p + "encoder lengths", DType::kI32, {B});
    if (ends_enc) {
      sa.x_enc = A(p + "encoder output sum", act, {re_l, d});
      sa.enc_norm = A(p + "encoder final norm", act, {re_l, d});
      sa.enc_rstd = A(p + "encoder final norm rstd", st_dt, {re_l});
    }
    if (ends_enc || has_dec) sa.enc = A(p + "encoder output", act, {re, d});
    if (post) {
      sa.x_dec = A(p + "decoder output sum", act, {rd_l, d});
      sa.dec_norm = A(p + "decoder final norm", act, {rd_l, d});
      sa.dec_rstd = A(p + "decoder final norm rstd", st_dt, {rd_l});
      sa.dec = A(p + "decoder output", act, {rd, d});
      sa.logits = A(p + "logits", act, {rd, cfg.padded() / tp});
      sa.losses = A(p + "losses", st_dt, {rd});
    }
    // Received gradients: of the stage's output hidden, and of the encoder output.
    if (pipelined && !post && !ends_enc) sa.dout = A(p + "grad stage output", act, {rows, d});
    if (pipelined && (ends_enc || (has_dec && !post))) {
      sa.denc_in = A(p + "grad encoder output (received)", act, {re_l, d});
    }
    b.slots.push_back(std::move(sa));
  }
  b.rel_buckets_enc = A("encoder relative buckets", DType::kI32, {2 * Te - 1});
  b.rel_buckets_dec = A("decoder relative buckets", DType::kI32, {2 * Td - 1});
  if (pipelined && !post && !ends_enc) b.out = A("stage output", act, {rows, d});
  b.proj = A("proj / dproj", act, {rmax, d});
  b.dres = A("grad residual", act, {std::max(re_l, rd_l), d});
  b.dln = A("grad norm input", act, {rmax, std::max(d, I)});
  b.dbig = A("grad qkv / ffn hidden", act, {rmax, std::max(3 * I, wi)});
  if (ffn_config(cfg, shard).needs_dact()) b.dact = A("grad ffn activation", act, {rmax, f});
  b.denc = A("grad encoder output", act, {re, d});
  if (sp) b.gathered = A("gathered rows (sequence parallel)", act, {rmax, d});
  // The relative tables hold every head (flash attention reads this rank's at head_offset).
  const int64_t nh = cfg.num_buckets * cfg.n_heads;
  b.rel_f32 = A("relative tables (f32)", DType::kF32, {2, cfg.num_buckets, cfg.n_heads});
  b.drel_f32 = A("relative table grads (f32)", DType::kF32, {2, cfg.num_buckets, cfg.n_heads});
  b.rel_grad = A("relative table grad (grad dtype)", gdt, {nh});
  if (tp > 1 && post) b.ce = A("vocab-parallel ce stats", st_dt, {3, rd});
  // Zeros for the largest shared parameter this stage has no copy of (sum_shared_grads).
  if (pipelined) b.shared_sum = A("shared grad stand-in", gdt, {shared_stand_in(cfg, shard)});

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
  b.gemm_ws = carver.take_workspace("workspace", "cublaslt", cuda ? kGemmWorkspaceBytes : 0);
  b.norm_out = carver.take("workspace", "grad norm", gdt, {1});

  if (!carver.planning() && carver.status().ok()) {
    bind_sync_buffers(b.table, b.flat, b.sync_layout);
    b.w = weights_of(cfg, st, b.table, &Param::value);
    b.g = weights_of(cfg, st, b.table, &Param::grad);
  }
  return b;
}

}  // namespace anvil::model::t5_detail
