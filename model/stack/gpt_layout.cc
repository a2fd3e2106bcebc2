// GPT-2 parameter table, precision checks and the buffer layout shared by plan() and create().
#include "model/stack/gpt_layout.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/checked_math.h"
#include "engine/status.h"
#include "model/blocks/attention.h"
#include "model/sync_layout.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "ops/grad_norm.h"
#include "ops/layernorm.h"
#include "ops/rmsnorm.h"
#include "parallel/zero.h"

namespace anvil::model::gpt_detail {

namespace {

// One parameter of a transformer layer: its name after "h.{l}.", local (TP) shape, weight
// decay, TP split and the LayerWeights field it fills. make_param_table and the views walk
// this one list, so the flat order and the fields agree.
struct LayerParam {
  const char* name;
  std::vector<int64_t> shape;
  bool decay;
  int split, parts;
  TensorView LayerWeights::*field;
};

std::vector<LayerParam> layer_param_list(const GptConfig& cfg, int tp) {
  const int64_t d = cfg.d_model, f = cfg.ffn() / tp, fc = cfg.fc_out() / tp, dl = d / tp;
  const int fc_parts = cfg.glu() ? 2 : 1;  // g | u, each split over TP
  // Grouped-query c_attn: whole query groups per rank, one contiguous row block (Megatron).
  const int64_t qkv = cfg.qkv_rows() / tp;
  const int qkv_parts = cfg.grouped_query() ? 1 : 3;
  using W = LayerWeights;
  // c_attn / c_fc column-parallel (c_attn's q | k | v blocks split separately), the output
  // projections row-parallel; matrices decay, biases and norms do not. RMSNorm has no beta.
  std::vector<LayerParam> all = {
      {"ln_1.weight", {d}, false, -1, 1, &W::ln1_g},
      {"ln_1.bias", {d}, false, -1, 1, &W::ln1_b},
      {"attn.c_attn.weight", {qkv, d}, true, 0, qkv_parts, &W::qkv_w},
      {"attn.c_attn.bias", {qkv}, false, 0, qkv_parts, &W::qkv_b},
      {"attn.c_proj.weight", {d, dl}, true, 1, 1, &W::attn_proj_w},
      {"attn.c_proj.bias", {d}, false, -1, 1, &W::attn_proj_b},
      {"ln_2.weight", {d}, false, -1, 1, &W::ln2_g},
      {"ln_2.bias", {d}, false, -1, 1, &W::ln2_b},
      {"mlp.c_fc.weight", {fc, d}, true, 0, fc_parts, &W::fc_w},
      {"mlp.c_fc.bias", {fc}, false, 0, fc_parts, &W::fc_b},
      {"mlp.c_proj.weight", {d, f}, true, 1, 1, &W::mlp_proj_w},
      {"mlp.c_proj.bias", {d}, false, -1, 1, &W::mlp_proj_b},
  };
  std::vector<LayerParam> out;
  for (LayerParam& p : all) {
    const bool norm = absl::StartsWith(p.name, "ln_");
    const bool qkv = p.field == &W::qkv_b;  // Qwen2: c_attn's bias alone (qkv_bias)
    if (absl::EndsWith(p.name, ".bias") &&
        (norm ? !cfg.layernorm() : !(qkv ? cfg.has_qkv_bias() : cfg.bias))) {
      continue;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// The parameters outside the layers (embeddings, ln_f, LM head) of one flat buffer; the LM head
// is wte where it is tied (or where this rank holds no head).
Weights embedding_weights_of(const ParamTable& t, TensorView Param::*field) {
  Weights w;
  for (const auto& [name, dst] : {std::pair<const char*, TensorView*>{"wte.weight", &w.wte},
                                  {"wpe.weight", &w.wpe},
                                  {"wte_ln.weight", &w.wte_ln_g},
                                  {"wte_ln.bias", &w.wte_ln_b},
                                  {"lm_head.weight", &w.lm_head},
                                  {"ln_f.weight", &w.lnf_g},
                                  {"ln_f.bias", &w.lnf_b},
                                  {"tokentype_embeddings.weight", &w.tte},
                                  {"lm_head.dense.weight", &w.bert.dense_w},
                                  {"lm_head.dense.bias", &w.bert.dense_b},
                                  {"lm_head.layernorm.weight", &w.bert.ln_g},
                                  {"lm_head.layernorm.bias", &w.bert.ln_b},
                                  {"lm_head.bias", &w.bert.out_b},
                                  {"pooler.dense.weight", &w.bert.pool_w},
                                  {"pooler.dense.bias", &w.bert.pool_b},
                                  {"binary_head.weight", &w.bert.bin_w},
                                  {"binary_head.bias", &w.bert.bin_b}}) {
    if (const Param* q = t.find(name)) *dst = q->*field;
  }
  if (w.lm_head.empty()) w.lm_head = w.wte;
  return w;
}

// The parameters of one flat buffer (a Param field) as Weights.
Weights weights_of(const Buffers& b, TensorView Param::*field) {
  const std::vector<Param>& p = b.table.all();
  Weights w = embedding_weights_of(b.table, field);
  for (size_t l = 0; l < b.layer_param.size(); ++l) {
    LayerWeights lw;
    for (size_t k = 0; k < b.layer_fields.size(); ++k) {
      lw.*(b.layer_fields[k]) = p[b.layer_param[l] + k].*field;
    }
    w.layers.push_back(lw);
  }
  return w;
}

}  // namespace

Weights weights_of(const ParamTable& t, TensorView Param::*field, const GptConfig& cfg,
                   const GptShard& shard) {
  Weights w = embedding_weights_of(t, field);
  const std::vector<LayerParam> list = layer_param_list(cfg, shard.tp);
  for (const std::vector<int64_t>& chunk : shard.layer_chunks(cfg)) {
    for (int64_t l : chunk) {
      LayerWeights lw;
      for (const LayerParam& p : list) {
        const Param* q = t.find(absl::StrCat("h.", l, ".", p.name));
        ANVIL_CHECK_MSG(q != nullptr, absl::StrCat("weights_of: no parameter h.", l, ".", p.name));
        lw.*(p.field) = q->*field;
      }
      w.layers.push_back(lw);
    }
  }
  return w;
}

ParamTable make_param_table(const GptConfig& cfg, const GptShard& shard) {
  const int64_t d = cfg.d_model, vocab = cfg.padded() / shard.tp;
  ParamTableBuilder b;
  // Embeddings and matrices take weight decay (Megatron: everything but biases and norms);
  // wte and lm_head are vocab-parallel under TP. Buckets: the embeddings, each layer, the
  // final LayerNorm (with the untied LM head).
  b.begin_bucket("embeddings");
  if (shard.pre || (shard.post && cfg.tie_embeddings)) {
    Param& wte = b.add("wte.weight", {vocab, d}, true, 0);
    wte.vocab_rows = true;
    wte.tied = cfg.tie_embeddings;
  }
  if (shard.pre && cfg.learned_positions()) b.add("wpe.weight", {cfg.max_seq_len, d}, true);
  if (shard.pre && cfg.type_vocab_size > 0) {  // Megatron's name; replicated over TP
    b.add("tokentype_embeddings.weight", {cfg.type_vocab_size, d}, true);
  }
  if (shard.pre && cfg.embed_layernorm) {
    b.add("wte_ln.weight", {d}, false);
    b.add("wte_ln.bias", {d}, false);
  }
  const std::vector<LayerParam> layer = layer_param_list(cfg, shard.tp);
  for (const std::vector<int64_t>& chunk : shard.layer_chunks(cfg)) {
    for (int64_t l : chunk) {
      const std::string h = absl::StrCat("h.", l, ".");
      b.begin_bucket(absl::StrCat("h.", l));
      for (const LayerParam& p : layer) b.add(h + p.name, p.shape, p.decay, p.split, p.parts);
    }
  }
  if (shard.post) {
    b.begin_bucket("ln_f");
    if (!cfg.tie_embeddings) b.add("lm_head.weight", {vocab, d}, true, 0).vocab_rows = true;
    if (!cfg.post_ln()) {
      b.add("ln_f.weight", {d}, false);
      if (cfg.layernorm()) b.add("ln_f.bias", {d}, false);
    }
    if (cfg.mlm_head()) {  // Megatron's BertLMHead and binary head (model/stack/mlm_head.cc)
      b.add("lm_head.dense.weight", {d, d}, true);
      b.add("lm_head.dense.bias", {d}, false);
      b.add("lm_head.layernorm.weight", {d}, false);
      b.add("lm_head.layernorm.bias", {d}, false);
      b.add("lm_head.bias", {vocab}, false, 0).vocab_rows = true;
      if (cfg.binary_head) {
        b.add("pooler.dense.weight", {d, d}, true);
        b.add("pooler.dense.bias", {d}, false);
        b.add("binary_head.weight", {2, d}, true);
        b.add("binary_head.bias", {2}, false);
      }
    }
  }
  return b.build(shard.zero_stage > 0 ? parallel::zero_bucket_align(1, shard.zero_dp)
                                      : ParamTable::kAlignElements);
}

absl::Status check_run(const GptConfig& cfg, const GptRunShape& shape, const Precision& prec,
                       const GptShard& shard) {
  ANVIL_RETURN_IF_ERROR(cfg.validate());
  ANVIL_RETURN_IF_ERROR(shard.validate(cfg));
  if (!cfg.causal && !uses_flash_attention(cfg, prec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "type bert (bidirectional attention with a padding mask) needs flash attention: on CUDA "
        "bf16 or fp16 activations with head_dim a multiple of 8 in [32, 256] (d_model / n_heads = ",
        cfg.head_dim(), ", act ", std::string(engine::dtype_name(prec.act)), "), or the CPU"));
  }
  if (shape.micro_batch < 1 || shape.seq_len < 1 || shape.seq_len > cfg.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT run shape: need micro_batch >= 1 and 1 <= seq_len <= max_seq_len (", cfg.max_seq_len,
        "), got micro_batch ", shape.micro_batch, ", seq_len ", shape.seq_len));
  }
  // The largest activations: [B*T, max(d, ffn, padded vocabulary)] (and without flash
  // attention the probabilities [B, heads, T, T]) must stay within engine::kMaxElements, which
  // bounds every size product of the plan (cfg.validate() bounds the dimensions).
  const int64_t widest = std::max({cfg.d_model, cfg.fc_out(), cfg.padded()});
  if (!engine::product_within({shape.micro_batch, shape.seq_len, widest}, engine::kMaxElements)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT run shape: micro_batch ", shape.micro_batch, " x seq_len ", shape.seq_len,
                     " x the widest activation ", widest,
                     " (d_model, ffn_hidden or the padded vocabulary) exceeds the limit 2^44 = ",
                     engine::kMaxElements, " elements of one tensor"));
  }
  if (!uses_flash_attention(cfg, prec) &&
      !engine::product_within({shape.micro_batch, cfg.n_heads, shape.seq_len, shape.seq_len},
                              engine::kMaxElements)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT run shape: the attention probabilities, micro_batch ", shape.micro_batch,
        " x n_heads ", cfg.n_heads, " x seq_len^2 ", shape.seq_len,
        "^2, exceed the limit 2^44 = ", engine::kMaxElements, " elements of one tensor"));
  }
  if (cfg.grouped_query() && !uses_flash_attention(cfg, prec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[model] n_kv_heads ", cfg.n_kv_heads, " < n_heads ", cfg.n_heads,
        " (grouped-query attention) needs flash attention: on CUDA bf16 or fp16 activations with "
        "head_dim a multiple of 8 in [32, 256], or the CPU; [train] precision fp32 uses the "
        "unfused CUDA attention, which has no grouped-query path"));
  }
  const bool alibi = cfg.position_embedding == PositionEmbedding::kAlibi;
  if ((alibi || cfg.position_embedding == PositionEmbedding::kRotary) &&
      !uses_flash_attention(cfg, prec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "position_embedding ", alibi ? "alibi" : "rotary",
        " needs flash attention: on CUDA bf16 or fp16 activations with head_dim "
        "a multiple of 8 in [32, 256] (d_model / n_heads = ",
        cfg.head_dim(), ", act ", std::string(engine::dtype_name(prec.act)),
        "), or the CPU; [train] precision fp32 uses the unfused CUDA attention, which has "
        "neither"));
  }
  const int64_t bt = shape.micro_batch * shape.seq_len;
  if (shard.sequence_parallel && shard.tp > 1 &&
      (bt % shard.tp != 0 || (bt / shard.tp * cfg.d_model) % 4 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence parallelism: micro_batch * seq_len (", bt, ") must be divisible by tp (",
        shard.tp, ") into row blocks of a multiple of 4 elements (d_model ", cfg.d_model, ")"));
  }
  const std::string act(engine::dtype_name(prec.act)), grad(engine::dtype_name(prec.grad));
  const bool half = prec.act == DType::kBF16 || prec.act == DType::kF16;
  if (prec.device == engine::Device::kCpu) {
    // CPU ops take f32 or f64 with one dtype throughout, or 16-bit storage (emulated: the
    // twins widen it) with f32 gradients.
    if (!((prec.act == DType::kF32 || prec.act == DType::kF64) && prec.grad == prec.act) &&
        !(half && prec.grad == DType::kF32)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPT precision on the CPU: act and grad must both be f32 or both f64, or act bf16/f16 "
          "with grad f32, got act ",
          act, ", grad ", grad));
    }
    if (half && shard.tp > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPT precision on the CPU: ", act,
          " activations need tp = 1 (MPI has no 16-bit sum for the tensor-parallel all-reduce), "
          "got tp ",
          shard.tp));
    }
  } else if (!((half || prec.act == DType::kF32) && prec.grad == DType::kF32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT precision on CUDA: act must be bf16, f16 or f32 and grad f32, got act ",
                     act, ", grad ", grad));
  }
  return absl::OkStatus();
}

bool uses_flash_attention(const GptConfig& cfg, const Precision& prec) {
  if (prec.device == engine::Device::kCpu) return true;
  return ops::flash_attention_cuda_supports(prec.act, cfg.head_dim());
}

namespace {

blocks::MlpActivation mlp_activation(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return blocks::MlpActivation::kGeluTanh;
    case Activation::kGeluErf:
      return blocks::MlpActivation::kGeluErf;
    case Activation::kSwiglu:
      return blocks::MlpActivation::kSwiglu;
    case Activation::kGeglu:
      return blocks::MlpActivation::kGeglu;
    case Activation::kReglu:
      return blocks::MlpActivation::kReglu;
    case Activation::kLiglu:
      break;
  }
  return blocks::MlpActivation::kLiglu;
}

}  // namespace

blocks::MlpConfig mlp_config(const GptConfig& cfg, const GptShard& shard) {
  blocks::MlpConfig c;
  c.d_model = cfg.d_model;
  c.ffn = cfg.ffn();
  c.activation = mlp_activation(cfg.activation);
  c.bias = cfg.bias;
  c.tp = shard.tp;
  c.tp_rank = shard.tp_rank;
  return c;
}

blocks::MlmHeadConfig mlm_head_config(const GptConfig& cfg, const GptRunShape& shape) {
  blocks::MlmHeadConfig c;
  c.rows = shape.micro_batch * shape.seq_len;
  c.batch = shape.micro_batch;
  c.d_model = cfg.d_model;
  c.ln_eps = cfg.ln_eps;
  c.binary = cfg.binary_head;
  return c;
}

int64_t local_rows(const GptRunShape& shape, const GptShard& shard) {
  const int64_t bt = shape.micro_batch * shape.seq_len;
  return shard.sequence_parallel && shard.tp > 1 ? bt / shard.tp : bt;
}

namespace {

// The activations of one layer for one slot; with recomputation some fields come from `shared`.
LayerActs layer_acts(const std::string& h, const GptConfig& cfg, const GptRunShape& shape,
                     const Precision& prec, const GptShard& shard, Carver& carver,
                     const LayerActs* shared) {
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model, tp = shard.tp;
  const int64_t rows = local_rows(shape, shard);
  const DType act = prec.act, st = stat_dtype(prec);
  auto A = [&](const std::string& name, DType dt, const std::vector<int64_t>& s) {
    return carver.take("activations", h + name, dt, s);
  };
  LayerActs a;
  a.x = A("x", act, {rows, d});
  if (shared != nullptr && shard.recompute == Recompute::kFull) {
    const TensorView x = a.x;
    a = *shared;
    a.x = x;
    return a;
  }
  // Post-LN reads x itself unless sequence parallelism must gather it.
  if (!cfg.post_ln() || rows != bt) a.ln1 = A("ln1", act, {bt, d});
  if (cfg.post_ln()) a.post_sum = A("post_sum", act, {rows, d});
  if (cfg.layernorm()) a.ln1_mean = A("ln1.mean", st, {rows});
  a.ln1_rstd = A("ln1.rstd", st, {rows});
  a.qkv = A("qkv", act, {bt, cfg.qkv_rows() / tp});
  if (uses_flash_attention(cfg, prec)) {
    a.lse = A("attn.lse", DType::kF32, {shape.micro_batch, cfg.n_heads / tp, shape.seq_len});
    if (cfg.attention_dropout > 0.0f && prec.save_dropout_mask) {
      a.keep = A("attn.keep", DType::kI32,
                 {blocks::dropout_keep_words(shape.micro_batch, cfg.n_heads / tp, shape.seq_len,
                                             shape.seq_len)});
    }
  } else {
    a.probs =
        shared != nullptr && shard.recompute == Recompute::kSelective
            ? shared->probs
            : A("probs", act, {shape.micro_batch, cfg.n_heads / tp, shape.seq_len, shape.seq_len});
  }
  a.atty = A("atty", act, {bt, d / tp});
  a.h = A("h", act, {rows, d});
  a.ln2 = A("ln2", act, {bt, d});
  if (cfg.layernorm()) a.ln2_mean = A("ln2.mean", st, {rows});
  a.ln2_rstd = A("ln2.rstd", st, {rows});
  a.mlp = blocks::mlp_saved_acts(mlp_config(cfg, shard), bt, act, "mlp.", A);
  return a;
}

}  // namespace

namespace {

// The parameter buffers (see Buffers) for the ZeRO stage, and where each layer's parameters
// start in the table (the first parameter, in definition order, past the previous buckets).
void carve_params(const GptShard& shard, const Precision& prec, Carver& carver, Buffers& b) {
  auto is_layer = [](const std::string& name) { return absl::StartsWith(name, "h."); };
  b.sync_buckets = sync_buckets(b.table, is_layer);
  const std::vector<parallel::SyncBucket>& buckets = b.sync_buckets;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i].layer) b.layer_bucket.push_back(static_cast<int64_t>(i));
  }
  const std::vector<Param>& params = b.table.all();
  size_t param = 0;
  for (int64_t k : b.layer_bucket) {
    while (params[param].offset < buckets[static_cast<size_t>(k)].begin) ++param;
    b.layer_param.push_back(param);
  }
  b.sync_layout = parallel::sync_layout(buckets, shard.zero_stage, shard.zero_dp);
  b.flat = carve_sync_buffers(b.sync_layout, prec.act, prec.grad, carver, shard.offload_optimizer);
}

}  // namespace

LayerWeights layer_views(const Buffers& b, int64_t local, TensorView bucket_base) {
  const ParamTable::Bucket& bucket =
      b.table.buckets()[static_cast<size_t>(b.layer_bucket[static_cast<size_t>(local)])];
  const std::vector<Param>& params = b.table.all();
  size_t i = b.layer_param[static_cast<size_t>(local)];
  LayerWeights lw;
  for (TensorView LayerWeights::*f : b.layer_fields) {
    const Param& p = params[i++];
    lw.*f = flat_slice(bucket_base, p.offset - bucket.begin, p.shape);
  }
  return lw;
}

Buffers gpt_layout(const GptConfig& cfg, const GptRunShape& shape, const Precision& prec,
                   const GptShard& shard, Carver& carver) {
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model;
  const int64_t T = shape.seq_len, tp = shard.tp, H = cfg.n_heads / tp;
  const int64_t rows = local_rows(shape, shard);
  const DType act = prec.act, gdt = prec.grad, st = stat_dtype(prec);
  const bool cuda = prec.device == engine::Device::kCuda;
  Buffers b;
  b.table = make_param_table(cfg, shard);
  for (const LayerParam& p : layer_param_list(cfg, shard.tp)) b.layer_fields.push_back(p.field);
  const int64_t n = b.table.flat_numel();

  carve_params(shard, prec, carver, b);

  auto A = [&](const std::string& name, DType dt, const std::vector<int64_t>& s) {
    return carver.take("activations", name, dt, s);
  };
  for (const std::vector<int64_t>& chunk : shard.layer_chunks(cfg)) {
    std::vector<int64_t> local;
    for (int64_t l : chunk) {
      local.push_back(static_cast<int64_t>(b.layer_ids.size()));
      b.layer_ids.push_back(l);
    }
    b.chunk_layers.push_back(local);
  }
  b.slots = shard.act_slots;
  // Recomputation: one set of the recomputed activations serves every layer and slot.
  LayerActs shared;
  const bool recompute = shard.recompute != Recompute::kNone;
  if (recompute) shared = layer_acts("recompute.", cfg, shape, prec, shard, carver, nullptr);
  for (int64_t s = 0; s < b.slots; ++s) {
    const std::string sl = b.slots > 1 ? absl::StrCat("slot", s, ".") : "";
    for (int64_t l : b.layer_ids) {
      b.acts.push_back(layer_acts(absl::StrCat(sl, "h.", l, "."), cfg, shape, prec, shard, carver,
                                  recompute ? &shared : nullptr));
    }
    if (shard.post) {
      HeadActs hd;
      hd.x_final = A(sl + "x_final", act, {rows, d});
      if (!cfg.post_ln()) {
        hd.lnf = A(sl + "ln_f", act, {bt, d});
        if (cfg.layernorm()) hd.lnf_mean = A(sl + "ln_f.mean", st, {rows});
        hd.lnf_rstd = A(sl + "ln_f.rstd", st, {rows});
      } else {
        hd.lnf = rows != bt ? A(sl + "x_final gathered", act, {bt, d}) : hd.x_final;
      }
      hd.logits = A(sl + "logits", act, {bt, cfg.padded() / tp});
      hd.losses = A(sl + "losses", st, {bt});
      if (cfg.mlm_head()) {
        hd.mlm = blocks::mlm_head_saved_acts(mlm_head_config(cfg, shape), act, st, sl, A);
      }
      b.head.push_back(hd);
    }
    if (shard.pre && cfg.embed_layernorm) {
      EmbedActs e;
      e.sum = A(sl + "wte_ln.input", act, {rows, d});
      e.mean = A(sl + "wte_ln.mean", st, {rows});
      e.rstd = A(sl + "wte_ln.rstd", st, {rows});
      b.embed.push_back(e);
    }
  }
  const int64_t n_chunks = static_cast<int64_t>(b.chunk_layers.size());
  for (int64_t c = 0; c < n_chunks; ++c) {
    for (int64_t s = 0; s < b.slots; ++s) {
      const std::string sl = absl::StrCat("chunk", c, ".slot", s, ".");
      SlotData sd;
      sd.tokens = A(sl + "tokens", DType::kI32, {bt});
      sd.positions = A(sl + "positions", DType::kI32, {bt});
      sd.targets = A(sl + "targets", DType::kI32, {bt});
      sd.segments = A(sl + "segments", DType::kI32, {bt});
      sd.prefix_end = A(sl + "prefix_end", DType::kI32, {bt});
      sd.loss_weights = A(sl + "loss_weights", DType::kF32, {bt});
      // The encoder features' inputs (GptModel::set_batch), in this order for the plan.
      if (cfg.type_vocab_size > 0) sd.token_types = A(sl + "token_types", DType::kI32, {bt});
      if (!cfg.causal) sd.lengths = A(sl + "lengths", DType::kI32, {shape.micro_batch});
      if (cfg.mlm_head()) {
        sd.binary_labels = A(sl + "binary_labels", DType::kI32, {shape.micro_batch});
      }
      b.data.push_back(sd);
    }
  }
  for (int64_t c = 0; c < n_chunks; ++c) {
    for (int64_t s = 0; s < b.slots; ++s) {
      const bool final_chunk = shard.post && c == n_chunks - 1;
      b.out_grad.push_back(
          final_chunk ? TensorView{}
                      : A(absl::StrCat("chunk", c, ".slot", s, ".d_output"), act, {rows, d}));
    }
  }
  if (!(shard.post && n_chunks == 1)) b.send_act = A("chunk output", act, {rows, d});
  b.proj = A("proj / dproj", act, {bt, d});
  b.dres = A("grad residual", act, {rows, d});
  b.dln = A("grad ln input", act, {bt, d});
  b.dbig = A("grad mlp hidden / qkv", act, {bt * std::max(cfg.fc_out(), cfg.qkv_rows()) / tp});
  const blocks::MlpConfig mlp = mlp_config(cfg, shard);
  if (mlp.needs_dact()) b.dglu = A("grad glu output", act, {bt, mlp.local_ffn()});
  if (cfg.layernorm()) b.stat_mean = A("scratch ln mean", st, {rows});
  b.stat_rstd = A("scratch ln rstd", st, {rows});
  if (rows != bt) b.gathered = A("gathered rows (sequence parallel)", act, {bt, d});
  if (shard.post && tp > 1) b.ce = A("vocab-parallel ce stats", st, {3, bt});
  if (shard.post && cfg.mlm_head()) b.bias_sums = A("bias grad sums", gdt, {cfg.padded() / tp});
  if (shard.post && cfg.binary_head) {
    b.cls_rows = A("[CLS] rows", DType::kI32, {shape.micro_batch});
    b.batch_rows = A("batch rows", DType::kI32, {shape.micro_batch});
    b.dcls = A("grad [CLS] rows", act, {shape.micro_batch, d});
    b.dcls_other = A("grad [CLS] rows (sum)", act, {shape.micro_batch, d});
  }

  // One op scratch for attention, layernorm backward and the gradient norm: they never overlap.
  size_t op_bytes = 0;
  if (cuda) {
    ops::AttentionArgs aa{shape.micro_batch, T, H, cfg.head_dim(), 1.0f};
    ops::FlashAttentionArgs fa;
    fa.batch = shape.micro_batch, fa.q_len = fa.kv_len = T, fa.heads = H;
    fa.head_dim = cfg.head_dim();
    const size_t attn_bytes =
        uses_flash_attention(cfg, prec)
            ? ops::cuda::flash_attention_workspace_bytes(fa, 0)
            : ops::cuda::attention_workspace_bytes(aa, engine::dtype_size(act));
    op_bytes =
        std::max({attn_bytes, ops::cuda::layernorm_backward_workspace_bytes({bt, d, cfg.ln_eps}),
                  ops::cuda::rmsnorm_backward_workspace_bytes({rows, d, cfg.ln_eps}),
                  ops::cuda::sum_squares_workspace_bytes(n)});
  }
  b.op_ws = carver.take_workspace("workspace", "op scratch", op_bytes);
  b.gemm_ws = carver.take_workspace("workspace", "cublaslt", cuda ? kGemmWorkspaceBytes : 0);
  b.norm_out = carver.take("workspace", "grad norm", gdt, {1});

  if (!carver.planning() && carver.status().ok()) {
    bind_sync_buffers(b.table, b.flat, b.sync_layout);
    b.w = weights_of(b, &Param::value);
    b.g = weights_of(b, &Param::grad);
  }
  return b;
}

}  // namespace anvil::model::gpt_detail
