// GptInference (gpt_inference.h): memory layout, weight loading, prefill and decode.
// One pass over n sequences of `rows` token rows (prefill: n*T, decode: max_batch):
//   x = wte[tok] + wpe[pos]   (TP: each rank's vocabulary rows, wpe on rank 0; summed over TP)
//   per layer: ln = LN1(x) (l > 0: x = h + mlp fused with LN1); qkv = ln Wqkv^T + b;
//     cache rows <- qkv's k | v columns (copy_rows); atty = attention(q, k, v);
//     proj = atty Wo^T + bo; h = x + proj fused with ln = LN2(h);
//     gelu = gelu_tanh(ln Wfc^T + bfc); mlp = gelu Wp^T + bp (in proj)
//     (TP: qkv, atty, gelu hold this rank's heads / units; proj and mlp are partial sums,
//     all-reduced, the biases added by TP rank 0)
//   x = h + mlp fused with ln = LNf(x); last = ln[last row of each sequence] (copy_rows);
//   logits = last wte^T (f32; TP: this rank's vocabulary columns, all-gathered)
// which is gpt_pass.cc's evaluation forward op for op (dropout off).
#include "model/infer/gpt_inference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/checked_math.h"
#include "engine/cuda_check.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/blocks/linear.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "model/stack/gpt_layout.h"
#include "ops/cast.h"
#include "ops/copy_rows.h"
#include "ops/embedding.h"
#include "ops/flash_attention.h"
#include "ops/gemm.h"
#include "ops/layernorm.h"
#include "ops/rotary.h"
#include "parallel/comm.h"

namespace anvil::model {

namespace {

using engine::DType;
using engine::TensorView;

// i32 inputs of one pass, in this order: tokens [R], positions [R], cache_dst [R], cache_src [R]
// (k | v rows to store), last_dst [B], last_src [B] (rows before the LM head), kv_lengths [B].
int64_t input_len(int64_t rows, int64_t batch) { return 4 * rows + 3 * batch; }

struct Buffers {
  ParamTable table;
  TensorView flat;        // [flat_numel] act
  gpt_detail::Weights w;  // views of flat
  // [layers, B * L, 2 * kv_heads / tp * head_dim] act: per row k | v of every local head, or
  // with grouped-query attention k_g | v_g of each local kv head g.
  TensorView cache;
  TensorView x, h, ln, proj;  // [R, d] act, R = B * L
  TensorView qkv;             // [R, qkv_rows / tp] act (grouped: Megatron-core's group order)
  TensorView atty;            // [R, d / tp] act
  blocks::MlpActs mlp;        // pre [R, fc_out / tp] (GLU: [g | u]), act [R, ffn / tp]
  TensorView mean, rstd;      // [R] f32
  TensorView lse;             // [B, H / tp, L] f32
  TensorView last;            // [B, d] act
  TensorView logits;          // [B, padded / tp] f32
  TensorView gathered;        // [tp, B, padded / tp] f32 (tp > 1)
  TensorView inputs;          // [input_len(R, B)] i32
  engine::Workspace gemm_ws;  // cuBLASLt, CUDA only
};

// Columns of k (and of v) per cache row: this rank's kv heads.
int64_t kv_width(const GptConfig& cfg, const GptShard& shard) {
  return cfg.kv_heads() / shard.tp * cfg.head_dim();
}

// Grouped-query attention: this rank's kv head g (of G = heads / kv_heads query heads) in qkv's
// columns [g (G + 2) hd, (g + 1)(G + 2) hd) = [q heads | k | v]; its k | v in cache columns
// [2 g hd, 2 (g + 1) hd).
struct GroupCols {
  int64_t q, k, v, width;  // first columns of q, k, v in qkv; width = G * hd
};
GroupCols group_cols(const GptConfig& cfg, int64_t g) {
  const int64_t hd = cfg.head_dim(), G = cfg.n_heads / cfg.kv_heads(), at = g * (G + 2) * hd;
  return {at, at + G * hd, at + (G + 1) * hd, G * hd};
}

Buffers layout(const GptConfig& cfg, const InferenceShape& shape, const Precision& prec,
               const GptShard& shard, Carver& c) {
  const DType act = prec.act, f32 = DType::kF32;
  const int64_t B = shape.max_batch, L = shape.max_len, R = B * L, d = cfg.d_model;
  const int64_t tp = shard.tp, dl = d / tp, cols = cfg.padded() / tp;
  Buffers b;
  b.table = gpt_detail::make_param_table(cfg, shard);
  b.flat = c.take("params", "parameters", act, {b.table.flat_numel()});
  if (!c.planning()) {
    b.table.bind(b.flat, {}, {}, {}, {});
    b.w = gpt_detail::weights_of(b.table, &Param::value, cfg, shard);
  }
  b.cache = c.take("kv_cache", "keys and values", act, {cfg.n_layers, R, 2 * kv_width(cfg, shard)});
  for (auto [v, name] : {std::pair<TensorView*, const char*>{&b.x, "x"},
                         {&b.h, "h"},
                         {&b.ln, "ln"},
                         {&b.proj, "proj"}}) {
    *v = c.take("activations", name, act, {R, d});
  }
  b.qkv = c.take("activations", "qkv", act, {R, cfg.qkv_rows() / tp});
  b.atty = c.take("activations", "atty", act, {R, dl});
  b.mlp = blocks::mlp_saved_acts(
      gpt_detail::mlp_config(cfg, shard), R, act, "mlp.",
      [&](const std::string& name, DType dt, const std::vector<int64_t>& shape) {
        return c.take("activations", name, dt, shape);
      });
  b.mean = c.take("activations", "ln mean", f32, {R});
  b.rstd = c.take("activations", "ln rstd", f32, {R});
  b.lse = c.take("activations", "attention lse", f32, {B, cfg.n_heads / tp, L});
  b.last = c.take("activations", "last positions", act, {B, d});
  b.logits = c.take("activations", "logits", f32, {B, cols});
  if (tp > 1) b.gathered = c.take("activations", "gathered logits", f32, {tp, B, cols});
  b.inputs = c.take("activations", "inputs", DType::kI32, {input_len(R, B)});
  if (prec.device == engine::Device::kCuda) {
    b.gemm_ws = c.take_workspace("workspace", "cublaslt", kGemmWorkspaceBytes);
  }
  return b;
}

absl::Status check(const GptConfig& cfg, const InferenceShape& shape, const Precision& prec,
                   const GptShard& shard) {
  ANVIL_RETURN_IF_ERROR(cfg.validate());
  ANVIL_RETURN_IF_ERROR(shard.validate(cfg));
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!cfg.causal) {
    return bad(
        "inference (generation, serving, evaluation) needs a causal LM; this model is "
        "type bert");
  }
  const GptShard plain;
  if (!shard.chunks.empty() || !shard.pre || !shard.post || shard.act_slots != 1 ||
      shard.sequence_parallel || shard.zero_stage != 0 || shard.recompute != plain.recompute) {
    return bad("inference: only tensor parallelism (tp, tp_rank, tp_comm) is supported");
  }
  if (shape.max_batch < 1 || shape.max_len < 1 || shape.max_len > cfg.max_seq_len) {
    return bad("inference: need max_batch >= 1 and 1 <= max_len <= max_seq_len (", cfg.max_seq_len,
               "), got max_batch ", shape.max_batch, ", max_len ", shape.max_len);
  }
  if (cfg.sliding_window > 0 && shape.max_len > cfg.sliding_window) {
    return bad("inference: max_len ", shape.max_len, " exceeds [model] sliding_window ",
               cfg.sliding_window,
               ": sliding-window attention is not implemented (full causal attention equals it "
               "only up to sliding_window positions); pass a max_len <= sliding_window");
  }
  const int64_t widest = std::max({3 * cfg.d_model, cfg.ffn(), cfg.padded()});
  if (!engine::product_within({shape.max_batch, shape.max_len, widest}, engine::kMaxElements) ||
      !engine::product_within({cfg.n_layers, shape.max_batch, shape.max_len, 2 * cfg.d_model},
                              engine::kMaxElements)) {
    return bad("inference: max_batch ", shape.max_batch, " x max_len ", shape.max_len,
               " makes a buffer larger than the limit 2^44 elements");
  }
  if (prec.device == engine::Device::kCuda) {
    if (prec.act != DType::kBF16 || !gpt_detail::uses_flash_attention(cfg, prec)) {
      return bad("inference on CUDA runs bf16 with head_dim 64 or 128 (flash attention), got ",
                 std::string(engine::dtype_name(prec.act)), " with head_dim ", cfg.head_dim());
    }
  } else if (prec.act != DType::kF32) {
    return bad("inference on the CPU runs f32, got ", std::string(engine::dtype_name(prec.act)));
  }
  return absl::OkStatus();
}

}  // namespace

struct GptInference::Impl {
  GptConfig cfg;
  InferenceShape shape;
  Precision prec;
  GptShard shard;
  std::vector<std::pair<std::string, engine::Arena>> arenas;
  Buffers buf;
  std::vector<int64_t> lengths;  // [max_batch] positions held per slot
  std::vector<int32_t> host_in;  // staging of buf.inputs

  // A pass over `rows` token rows whose inputs are in host_in (n_cache rows to store in the
  // cache); attend(layer, atty, qkv) writes atty (=) from the layer's qkv and cache. The final
  // hidden rows `readout` go through the LM head in chunks of up to max_batch rows, and
  // sink(k, logits) sees readout[k]'s [vocab_size] f32 host logits, in order. Syncs.
  using RowSink = std::function<void(int64_t k, const float* logits)>;
  template <typename Attend>
  void pass(int64_t rows, int64_t n_cache, const std::vector<int32_t>& readout, Attend&& attend,
            const RowSink& sink, engine::Stream& s);
  // Writes last_dst = 0 .. k-1 and last_src = readout[first, first + k) into host_in.
  void stage_readout(const std::vector<int32_t>& readout, int64_t first, int64_t k);
  // The LM head on rows readout[first, first + k) (k <= max_batch) of `ln` into
  // sink(first + i, logits); `staged`: their indices already reached the device with the
  // pass's inputs (the first chunk: a decode step copies its inputs once).
  void head(TensorView ln, const std::vector<int32_t>& readout, int64_t first, int64_t k,
            bool staged, const RowSink& sink, engine::Stream& s);
  TensorView cache_layer(int64_t l) const {  // [B * L, 2 kv_width]
    const int64_t r = shape.max_batch * shape.max_len, w = 2 * kv_width(cfg, shard);
    return flat_slice(engine::reshape(buf.cache, {buf.cache.numel()}), l * r * w, {r, w});
  }
  TensorView in(int64_t at, int64_t n) const { return flat_slice(buf.inputs, at, {n}); }
  // ALiBi (BLOOM): Megatron's slopes of this rank's heads, computed in the kernel.
  void set_alibi(ops::FlashAttentionArgs* fa) const {
    if (cfg.position_embedding != PositionEmbedding::kAlibi) return;
    fa->bias = ops::AttentionBias::kAlibi;
    fa->total_heads = cfg.n_heads;
    fa->head_offset = shard.tp_rank * (cfg.n_heads / shard.tp);
  }
  // The local kv heads: 1 (all heads in one call) or, grouped, kv_heads / tp.
  int64_t local_groups() const { return cfg.grouped_query() ? cfg.kv_heads() / shard.tp : 1; }
  // attention(q, k, v) into atty for local group g (all local heads when not grouped): q from
  // qkv, k and v from `kv` (qkv itself or a cache layer); fa has the batch and lengths set.
  void attend_groups(ops::FlashAttentionArgs fa, TensorView atty, TensorView qkv, TensorView kv,
                     bool kv_is_cache, const ops::AttentionMasks& masks, engine::Stream& s) {
    const int64_t hd = cfg.head_dim(), d = cfg.d_model / shard.tp, kvw = kv_width(cfg, shard);
    set_alibi(&fa);
    const int64_t first_head = fa.head_offset;
    for (int64_t g = 0; g < local_groups(); ++g) {
      TensorView q, k, v, out = atty;
      if (!cfg.grouped_query()) {  // q | k | v of all local heads
        q = engine::slice_cols(qkv, 0, d);
        k = engine::slice_cols(kv, kv_is_cache ? 0 : d, kv_is_cache ? kvw : 2 * d);
        v = engine::slice_cols(kv, kv_is_cache ? kvw : 2 * d, kv_is_cache ? 2 * kvw : 3 * d);
      } else {
        const GroupCols c = group_cols(cfg, g);
        q = engine::slice_cols(qkv, c.q, c.q + c.width);
        out = engine::slice_cols(atty, g * c.width, (g + 1) * c.width);
        if (kv_is_cache) {
          k = engine::slice_cols(kv, 2 * g * hd, (2 * g + 1) * hd);
          v = engine::slice_cols(kv, (2 * g + 1) * hd, (2 * g + 2) * hd);
        } else {
          k = engine::slice_cols(kv, c.k, c.k + hd), v = engine::slice_cols(kv, c.v, c.v + hd);
        }
        fa.heads = c.width / hd;
        fa.kv_heads = 1;
        if (fa.total_heads > 0) fa.head_offset = first_head + g * fa.heads;  // ALiBi's slopes
      }
      ops::flash_attention_forward(fa, out, flat_slice(buf.lse, 0, {fa.batch, fa.heads, fa.q_len}),
                                   q, k, v, masks, s);
    }
  }
  void tp_sum(TensorView x, engine::Stream& s) {  // in place over TP (no-op without)
    if (shard.tp > 1) shard.tp_comm->all_reduce(x, parallel::ReduceOp::kSum, s);
  }
};

template <typename Attend>
void GptInference::Impl::pass(int64_t rows, int64_t n_cache, const std::vector<int32_t>& readout,
                              Attend&& attend, const RowSink& sink, engine::Stream& s) {
  const int64_t R = shape.max_batch * shape.max_len, B = shape.max_batch, d = cfg.d_model;
  const int64_t tp = shard.tp, dl = d / tp, cols = cfg.padded() / tp;
  const bool rank0 = shard.tp_rank == 0;
  const blocks::MlpConfig mlp = gpt_detail::mlp_config(cfg, shard);
  GemmWorkspaceScope gemm_ws(s, buf.gemm_ws);
  const int64_t total = static_cast<int64_t>(readout.size());
  stage_readout(readout, 0, std::min(B, total));
  engine::copy(buf.inputs,
               engine::make_view(host_in.data(), DType::kI32, engine::Device::kCpu,
                                 {static_cast<int64_t>(host_in.size())}),
               s);
  auto rows_of = [&](TensorView v) { return engine::slice_rows(v, 0, rows); };
  const TensorView x = rows_of(buf.x), h = rows_of(buf.h), ln = rows_of(buf.ln);
  const TensorView qkv = rows_of(buf.qkv), atty = rows_of(buf.atty), proj = rows_of(buf.proj);
  const TensorView mean = rows_of(buf.mean), rstd = rows_of(buf.rstd);
  const blocks::NormArgs na = gpt_detail::norm_args(cfg, rows);
  ops::EmbeddingArgs ea{rows, d, cols, cfg.learned_positions() ? cfg.max_seq_len : 0};
  ea.vocab_start = shard.tp_rank * cols;
  const TensorView positions = in(R, rows);
  const bool with_wpe = rank0 && !buf.w.wpe.empty();
  // BLOOM's embedding LayerNorm normalizes the summed embedding (in h) into x.
  const TensorView embed = buf.w.wte_ln_g.empty() ? x : h;
  ops::embedding_forward(ea, embed, in(0, rows), with_wpe ? positions : TensorView{}, buf.w.wte,
                         with_wpe ? buf.w.wpe : TensorView{}, s);
  tp_sum(embed, s);
  if (!buf.w.wte_ln_g.empty()) {
    ops::layernorm_forward({rows, d, cfg.ln_eps}, x, mean, rstd, h, buf.w.wte_ln_g, buf.w.wte_ln_b,
                           s);
  }
  const ops::RotaryArgs ra{
      rows, cfg.n_heads / tp, cfg.head_dim(), cfg.rotary_dim(), cfg.rotary_base, cfg.rope_scaling};
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const gpt_detail::LayerWeights& w = buf.w.layers[static_cast<size_t>(l)];
    if (l == 0) {
      blocks::norm_forward(na, ln, mean, rstd, x, w.ln1_g, w.ln1_b, s);
    } else {
      blocks::residual_norm_forward(na, x, ln, mean, rstd, h, proj, w.ln1_g, w.ln1_b, s);
    }
    blocks::linear(qkv, ln, w.qkv_w, w.qkv_b, s);
    if (cfg.grouped_query()) {  // per local kv head g: q heads | k rotated, k | v cached
      const int64_t hd = cfg.head_dim();
      for (int64_t g = 0; g < local_groups(); ++g) {
        const GroupCols c = group_cols(cfg, g);
        if (cfg.position_embedding == PositionEmbedding::kRotary) {
          ops::RotaryArgs gr = ra;
          gr.heads = c.width / hd + 1;
          ops::rotary_forward(gr, engine::slice_cols(qkv, c.q, c.v), positions, s);
        }
        ops::copy_rows(engine::slice_cols(cache_layer(l), 2 * g * hd, 2 * (g + 1) * hd),
                       engine::slice_cols(qkv, c.k, c.v + hd), in(2 * R, n_cache),
                       in(3 * R, n_cache), s);
      }
    } else {
      if (cfg.position_embedding == PositionEmbedding::kRotary) {  // q, k before the cache
        ops::rotary_forward(ra, engine::slice_cols(qkv, 0, dl), positions, s);
        ops::rotary_forward(ra, engine::slice_cols(qkv, dl, 2 * dl), positions, s);
      }
      ops::copy_rows(cache_layer(l), engine::slice_cols(qkv, dl, 3 * dl), in(2 * R, n_cache),
                     in(3 * R, n_cache), s);
    }
    attend(l, atty, qkv);
    blocks::row_linear(proj, atty, w.attn_proj_w, w.attn_proj_b, rank0, s);
    tp_sum(proj, s);
    blocks::residual_norm_forward(na, h, ln, mean, rstd, x, proj, w.ln2_g, w.ln2_b, s);
    blocks::mlp_forward(mlp, proj, {rows_of(buf.mlp.pre), rows_of(buf.mlp.act)}, ln,
                        gpt_detail::mlp_weights(w), /*train=*/false, {}, s);
    tp_sum(proj, s);
  }
  blocks::residual_norm_forward(na, x, ln, mean, rstd, h, proj, buf.w.lnf_g, buf.w.lnf_b, s);
  for (int64_t at = 0; at < total; at += B) {
    head(ln, readout, at, std::min(B, total - at), /*staged=*/at == 0, sink, s);
  }
}

void GptInference::Impl::stage_readout(const std::vector<int32_t>& readout, int64_t first,
                                       int64_t k) {
  const int64_t R = shape.max_batch * shape.max_len, B = shape.max_batch;
  for (int64_t i = 0; i < k; ++i) {
    host_in[static_cast<size_t>(4 * R + i)] = static_cast<int32_t>(i);
    host_in[static_cast<size_t>(4 * R + B + i)] = readout[static_cast<size_t>(first + i)];
  }
}

void GptInference::Impl::head(TensorView ln, const std::vector<int32_t>& readout, int64_t first,
                              int64_t k, bool staged, const RowSink& sink, engine::Stream& s) {
  const int64_t R = shape.max_batch * shape.max_len, B = shape.max_batch, d = cfg.d_model;
  const int64_t tp = shard.tp, cols = cfg.padded() / tp, v = cfg.vocab_size;
  if (!staged) {  // a later chunk of a scored prefill (the layers no longer read these inputs)
    stage_readout(readout, first, k);
    engine::copy(
        in(4 * R, 2 * B),
        engine::make_view(host_in.data() + 4 * R, DType::kI32, engine::Device::kCpu, {2 * B}), s);
  }
  const TensorView last = engine::slice_rows(buf.last, 0, k);
  ops::copy_rows(last, ln, in(4 * R, k), in(4 * R + B, k), s);
  TensorView out = engine::slice_rows(buf.logits, 0, k);  // [k, padded / tp] f32
  ops::GemmArgs lm{k, cols, d};
  lm.trans_b = true;
  ops::gemm(lm, out, last, buf.w.lm_head, {}, {}, s);
  if (tp > 1) {  // [tp, k, cols]: rank r's vocabulary columns [r * cols, (r + 1) * cols)
    const TensorView all = flat_slice(buf.gathered, 0, {tp * k * cols});
    shard.tp_comm->all_gather(all, engine::reshape(out, {k * cols}), s);
    out = all;
  }
  std::vector<float> host(static_cast<size_t>(out.numel())), row(static_cast<size_t>(v));
  engine::copy(engine::make_view(host.data(), DType::kF32, engine::Device::kCpu, {out.numel()}),
               engine::reshape(out, {out.numel()}), s);
  s.synchronize();
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t r = 0; r < tp && r * cols < v; ++r) {
      const auto from = host.begin() + (r * k + i) * cols;
      std::copy(from, from + std::min(cols, v - r * cols), row.begin() + r * cols);
    }
    sink(first + i, row.data());
  }
}

GptInference::GptInference() = default;
GptInference::~GptInference() = default;

absl::StatusOr<engine::MemoryPlan> GptInference::plan(const GptConfig& cfg,
                                                      const InferenceShape& shape,
                                                      const Precision& prec,
                                                      const GptShard& shard) {
  InferenceShape sh = shape;
  if (sh.max_len == 0) sh.max_len = cfg.max_seq_len;
  ANVIL_RETURN_IF_ERROR(check(cfg, sh, prec, shard));
  engine::MemoryPlan plan;
  Carver carver(&plan);
  layout(cfg, sh, prec, shard, carver);
  return plan;
}

absl::StatusOr<std::unique_ptr<GptInference>> GptInference::create(const GptConfig& cfg,
                                                                   const InferenceShape& shape,
                                                                   const Precision& prec,
                                                                   const GptShard& shard) {
  ANVIL_ASSIGN_OR_RETURN(engine::MemoryPlan plan, GptInference::plan(cfg, shape, prec, shard));
  if (shard.tp > 1 && shard.tp_comm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptInference::create: tp ", shard.tp, " needs the TP group's Comm"));
  }
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->shape = shape;
  if (impl->shape.max_len == 0) impl->shape.max_len = cfg.max_seq_len;
  impl->prec = prec;
  impl->shard = shard;
  for (const std::string& cat : plan.categories()) {
    const size_t bytes = plan.category_bytes(cat);
    if (bytes == 0) continue;
    ANVIL_ASSIGN_OR_RETURN(engine::Arena a,
                           engine::Arena::create(prec.device, bytes, "inference " + cat));
    impl->arenas.emplace_back(cat, std::move(a));
  }
  Carver carver(&impl->arenas);
  impl->buf = layout(cfg, impl->shape, prec, shard, carver);
  ANVIL_RETURN_IF_ERROR(carver.status());
  impl->lengths.assign(static_cast<size_t>(impl->shape.max_batch), 0);
  const int64_t R = impl->shape.max_batch * impl->shape.max_len;
  impl->host_in.assign(static_cast<size_t>(input_len(R, impl->shape.max_batch)), 0);
  engine::Stream stream = engine::Stream::cpu();
  if (prec.device == engine::Device::kCuda) {
    int device = 0;
    ANVIL_CUDA_CHECK(cudaGetDevice(&device));
    ANVIL_ASSIGN_OR_RETURN(stream, engine::Stream::cuda(device));
  }
  engine::fill_zero(impl->buf.flat, stream);
  stream.synchronize();
  std::unique_ptr<GptInference> m(new GptInference());
  m->impl_ = std::move(impl);
  return m;
}

const GptConfig& GptInference::config() const { return impl_->cfg; }
const InferenceShape& GptInference::shape() const { return impl_->shape; }
int64_t GptInference::length(int64_t slot) const {
  return impl_->lengths.at(static_cast<size_t>(slot));
}

absl::Status GptInference::load(const TensorLookup& lookup, engine::Stream& stream) {
  const GptConfig& cfg = impl_->cfg;
  engine::Stream host = engine::Stream::cpu();
  for (const Param& p : impl_->buf.table.all()) {
    const std::string name = absl::StrCat(kMasterState, p.name);
    ANVIL_ASSIGN_OR_RETURN(engine::HostSlice t, lookup(name));
    const GptShard& sh = impl_->shard;
    const std::vector<int64_t> shape = logical_shape(p, cfg, sh.tp);
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    if (t.shape != shape || static_cast<int64_t>(t.data.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor ", name, " has shape [", absl::StrJoin(t.shape, ", "),
                       "], the model needs [", absl::StrJoin(shape, ", "), "]"));
    }
    // This rank's elements of the whole tensor; wte's padding rows (past vocab_size) are 0.
    const int64_t C = shape.size() == 2 ? shape[1] : 1;
    std::vector<float> h(static_cast<size_t>(p.numel()), 0.0f);
    for (int64_t i = 0; i < p.numel(); ++i) {
      const int64_t g = tp_global_index(p, i, sh.tp, sh.tp_rank);
      if (g / C < shape[0]) h[static_cast<size_t>(i)] = t.data[static_cast<size_t>(g)];
    }
    const engine::Device cpu = engine::Device::kCpu;
    std::vector<char> staged(p.value.bytes());
    const TensorView src = engine::make_view(staged.data(), p.value.dtype, cpu, {p.numel()});
    ops::cast(src, engine::make_view(h.data(), DType::kF32, cpu, {p.numel()}), host);
    engine::copy(engine::reshape(p.value, {p.numel()}), src, stream);
    stream.synchronize();  // staged is freed next
  }
  return absl::OkStatus();
}

absl::Status GptInference::prefill(const std::vector<int64_t>& slots,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   std::vector<float>* logits, engine::Stream& stream,
                                   const std::vector<bool>& score,
                                   const PositionLogits& on_position) {
  Impl& m = *impl_;
  const int64_t B = m.shape.max_batch, L = m.shape.max_len, R = B * L;
  const int64_t n = static_cast<int64_t>(slots.size());
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (n < 1 || n > B || prompts.size() != slots.size()) {
    return bad("prefill: need 1 to max_batch (", B, ") prompts with one slot each, got ",
               prompts.size(), " prompts for ", n, " slots");
  }
  std::set<int64_t> seen;
  int64_t T = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = static_cast<int64_t>(prompts[static_cast<size_t>(i)].size());
    if (slots[i] < 0 || slots[i] >= B || !seen.insert(slots[i]).second) {
      return bad("prefill: slot ", slots[i], " is outside [0, ", B, ") or given twice");
    }
    if (len < 1 || len > L) {
      return bad("prefill: prompt ", i, " has ", len, " tokens; it needs 1 to max_len (", L, ")");
    }
    for (int32_t id : prompts[static_cast<size_t>(i)]) {
      if (id < 0 || id >= m.cfg.vocab_size) {
        return bad("prefill: prompt ", i, " holds token id ", id, " outside the vocabulary [0, ",
                   m.cfg.vocab_size, ")");
      }
    }
    T = std::max(T, len);
  }
  if (std::find(score.begin(), score.end(), true) != score.end() && !on_position) {
    return bad("prefill: scored prompts need on_position");
  }
  // Prompt i occupies rows [i*T, i*T + T), right-padded with token 0.
  std::vector<int32_t>& in = m.host_in;
  std::fill(in.begin(), in.end(), 0);
  int64_t stored = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& p = prompts[static_cast<size_t>(i)];
    const int64_t len = static_cast<int64_t>(p.size());
    for (int64_t t = 0; t < T; ++t) {
      in[i * T + t] = t < len ? p[t] : 0;
      in[R + i * T + t] = static_cast<int32_t>(t);
    }
    for (int64_t t = 0; t < len; ++t, ++stored) {
      in[2 * R + stored] = static_cast<int32_t>(slots[i] * L + t);
      in[3 * R + stored] = static_cast<int32_t>(i * T + t);
    }
  }
  // Read out: each prompt's last position, then every earlier position of the scored prompts.
  std::vector<int32_t> readout;
  std::vector<std::pair<int64_t, int64_t>> scored;  // (prompt, position) of readout[n + j]
  for (int64_t i = 0; i < n; ++i) {
    readout.push_back(static_cast<int32_t>(i * T + prompts[i].size() - 1));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<size_t>(i) >= score.size() || !score[i]) continue;
    for (int64_t p = 0; p + 1 < static_cast<int64_t>(prompts[i].size()); ++p) {
      readout.push_back(static_cast<int32_t>(i * T + p));
      scored.emplace_back(i, p);
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(m.cfg.head_dim()));
  const int64_t heads = m.cfg.n_heads / m.shard.tp;
  auto attend = [&](int64_t /*layer*/, TensorView atty, TensorView qkv) {
    ops::FlashAttentionArgs fa;
    fa.batch = n, fa.q_len = fa.kv_len = T, fa.heads = heads;
    fa.head_dim = m.cfg.head_dim(), fa.causal = true, fa.scale = scale;
    m.attend_groups(fa, atty, qkv, qkv, /*kv_is_cache=*/false, {}, stream);
  };
  const size_t v = static_cast<size_t>(m.cfg.vocab_size);
  logits->resize(static_cast<size_t>(n) * v);
  m.pass(
      n * T, stored, readout, attend,
      [&](int64_t k, const float* row) {
        if (k < n) {
          std::copy(row, row + v, logits->begin() + static_cast<std::ptrdiff_t>(k * v));
        } else {
          const auto [i, p] = scored[static_cast<size_t>(k - n)];
          on_position(i, p, row);
        }
      },
      stream);
  for (int64_t i = 0; i < n; ++i) {
    m.lengths[static_cast<size_t>(slots[i])] = static_cast<int64_t>(prompts[i].size());
  }
  return absl::OkStatus();
}

absl::Status GptInference::decode(const std::vector<int64_t>& slots,
                                  const std::vector<int32_t>& tokens, std::vector<float>* logits,
                                  engine::Stream& stream) {
  Impl& m = *impl_;
  const int64_t B = m.shape.max_batch, L = m.shape.max_len, R = B * L;
  const int64_t n = static_cast<int64_t>(slots.size());
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (n < 1 || n > B || tokens.size() != slots.size()) {
    return bad("decode: need 1 to max_batch (", B, ") tokens with one slot each, got ",
               tokens.size(), " tokens for ", n, " slots");
  }
  std::set<int64_t> seen;
  for (int64_t i = 0; i < n; ++i) {
    if (slots[i] < 0 || slots[i] >= B || !seen.insert(slots[i]).second) {
      return bad("decode: slot ", slots[i], " is outside [0, ", B, ") or given twice");
    }
    const int64_t len = m.lengths[static_cast<size_t>(slots[i])];
    if (len < 1 || len >= L) {
      return bad("decode: slot ", slots[i], " holds ", len,
                 " positions; decoding needs a prefilled slot with fewer than max_len (", L, ")");
    }
    if (tokens[i] < 0 || tokens[i] >= m.cfg.vocab_size) {
      return bad("decode: token id ", tokens[i], " outside the vocabulary [0, ", m.cfg.vocab_size,
                 ")");
    }
  }
  // Row b is slot b; slots not decoded now run token 0 at position 0 with no visible key.
  std::vector<int32_t>& in = m.host_in;
  std::fill(in.begin(), in.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = slots[i], len = m.lengths[static_cast<size_t>(b)];
    in[b] = tokens[i];
    in[R + b] = static_cast<int32_t>(len);
    in[2 * R + i] = static_cast<int32_t>(b * L + len);
    in[3 * R + i] = static_cast<int32_t>(b);
    in[4 * R + 2 * B + b] = static_cast<int32_t>(len + 1);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(m.cfg.head_dim()));
  const int64_t heads = m.cfg.n_heads / m.shard.tp;
  auto attend = [&](int64_t layer, TensorView atty, TensorView qkv) {
    ops::FlashAttentionArgs fa;
    fa.batch = B, fa.q_len = 1, fa.kv_len = L, fa.heads = heads;
    fa.head_dim = m.cfg.head_dim(), fa.causal = false, fa.scale = scale;
    // ALiBi: slope * key position, the same softmax as slope * (j - i).
    ops::AttentionMasks masks;
    masks.kv_lengths = m.in(4 * R + 2 * B, B);
    m.attend_groups(fa, atty, qkv, m.cache_layer(layer), /*kv_is_cache=*/true, masks, stream);
  };
  std::vector<int32_t> readout(slots.begin(), slots.end());  // row b is slot b
  const size_t v = static_cast<size_t>(m.cfg.vocab_size);
  logits->resize(static_cast<size_t>(n) * v);
  m.pass(
      B, n, readout, attend,
      [&](int64_t k, const float* row) {
        std::copy(row, row + v, logits->begin() + static_cast<std::ptrdiff_t>(k * v));
      },
      stream);
  for (int64_t i = 0; i < n; ++i) ++m.lengths[static_cast<size_t>(slots[i])];
  return absl::OkStatus();
}

}  // namespace anvil::model
