// GptModel: configuration checks, memory plan, creation and initialization, and the
// per-step bookkeeping (loss readout, gradient zeroing and norm, AdamW over the two flat
// parameter groups). Forward and backward are in gpt_pass.cc.
#include "model/stack/gpt.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/checked_math.h"
#include "engine/cuda_check.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/stack/gpt_impl.h"
#include "model/stack/gpt_init.h"
#include "model/sync_layout.h"
#include "ops/adamw.h"
#include "ops/grad_norm.h"
#include "parallel/parallel_config.h"

namespace anvil::model {

namespace {

using engine::DType;

// Parameters of one transformer layer (two norms, c_attn, attn c_proj, c_fc, mlp c_proj).
int64_t layer_params(const GptConfig& c) {
  const int64_t d = c.d_model, f = c.ffn(), fc = c.fc_out(), b = c.bias ? 1 : 0;
  const int64_t bq = c.has_qkv_bias() ? 1 : 0;
  const int64_t norms = (c.layernorm() ? 4 : 2) * d;
  return norms + c.qkv_rows() * d + bq * c.qkv_rows() + d * d + b * d + fc * d + b * fc + d * f +
         b * d;
}

// Parameters outside the layers: wte, wpe, wte_ln, lm_head, ln_f (pre-LN), the token types and
// the MLM and binary heads (mlm_head.cc).
int64_t non_layer_params(const GptConfig& c) {
  const int64_t d = c.d_model;
  int64_t n = c.padded() * d * (c.tie_embeddings ? 1 : 2) +
              (c.learned_positions() ? c.max_seq_len : 0) * d + (c.embed_layernorm ? 2 * d : 0) +
              (c.post_ln() ? 0 : (c.layernorm() ? 2 : 1) * d) + c.type_vocab_size * d;
  if (c.mlm_head()) {
    // MLM dense + LayerNorm + output bias; pooler + binary head.
    n += d * d + 3 * d + c.padded();
    if (c.binary_head) n += d * d + d + 2 * d + 2;
  }
  return n;
}

}  // namespace

absl::Status GptConfig::validate() const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (vocab_size < 1 || d_model < 1 || n_heads < 1 || n_layers < 1 || max_seq_len < 1) {
    return bad("GPT config: vocab_size, d_model, n_heads, n_layers, max_seq_len must be >= 1, got ",
               vocab_size, ", ", d_model, ", ", n_heads, ", ", n_layers, ", ", max_seq_len);
  }
  if (ffn_hidden < 0) return bad("GPT config: ffn_hidden must be >= 0 (0: 4 d), got ", ffn_hidden);
  // Bounds first (engine/checked_math.h), so that no size product below or in planning wraps.
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"vocab_size", vocab_size},
                               {"padded_vocab", padded_vocab},
                               {"max_seq_len", max_seq_len},
                               {"d_model", d_model},
                               {"ffn_hidden", ffn_hidden}}) {
    if (v > engine::kMaxDimension) {
      return bad("GPT config: ", key, " ", v,
                 " exceeds the limit 2^31 - 1 = ", engine::kMaxDimension,
                 " (token ids, positions and dimensions are int32)");
    }
  }
  if (vocab_multiple < 1 || vocab_multiple > engine::kMaxDimension) {
    return bad("GPT config: vocab_multiple ", vocab_multiple, " is outside [1, 2^31 - 1]");
  }
  if (n_layers > kMaxLayers) {
    return bad("GPT config: n_layers ", n_layers, " exceeds the limit ", kMaxLayers);
  }
  if (n_kv_heads < 0 || (n_heads >= 1 && n_heads % kv_heads() != 0)) {
    return bad("GPT config: n_kv_heads (", n_kv_heads, ") must divide n_heads (", n_heads,
               "); 0 means n_heads");
  }
  if (d_model % n_heads != 0) {
    return bad("GPT config: d_model (", d_model, ") must be divisible by n_heads (", n_heads,
               "), remainder ", d_model % n_heads);
  }
  if (padded() < vocab_size) {
    return bad("GPT config: padded_vocab (", padded(), ") must be >= vocab_size (", vocab_size,
               ")");
  }
  const int64_t d = d_model, f = ffn();
  if (padded() > engine::kMaxDimension || fc_out() > engine::kMaxDimension) {
    return bad("GPT config: the padded vocabulary ", padded(), " and c_fc's outputs ", fc_out(),
               " (ffn_hidden, 0: 4 * d_model; twice that with a gated activation) must not exceed "
               "the limit 2^31 - 1 = ",
               engine::kMaxDimension);
  }
  for (const auto& [what, n] : {std::pair<const char*, int64_t>{"padded vocabulary", padded()},
                                {"max_seq_len", max_seq_len},
                                {"3 * d_model", 3 * d},
                                {"c_fc's outputs", fc_out()}}) {
    if (!engine::product_within({n, d}, engine::kMaxElements)) {
      return bad("GPT config: a weight of ", what, " ", n, " x d_model ", d,
                 " elements exceeds the limit 2^44 = ", engine::kMaxElements, " elements");
    }
  }
  // Each term is now <= 2^44, so only the product with n_layers can overflow.
  const std::optional<int64_t> layers = engine::checked_mul(n_layers, layer_params(*this));
  if (!layers || *layers > engine::kMaxElements - non_layer_params(*this)) {
    return bad("GPT config: n_layers ", n_layers, " x d_model ", d, " (ffn_hidden ", f,
               ", padded vocabulary ", padded(), ", max_seq_len ", max_seq_len,
               ") has more than the limit 2^44 = ", engine::kMaxElements, " parameters");
  }
  if (!(hidden_dropout >= 0.0f && hidden_dropout < 1.0f && attention_dropout >= 0.0f &&
        attention_dropout < 1.0f)) {
    return bad("GPT config: dropout probabilities must lie in [0, 1), got hidden ", hidden_dropout,
               ", attention ", attention_dropout);
  }
  if (!(ln_eps > 0.0f) || !(init_std > 0.0f)) {
    return bad("GPT config: ln_eps and init_std must be > 0, got ", ln_eps, ", ", init_std);
  }
  if (position_embedding == PositionEmbedding::kRotary &&
      (!(rotary_percent > 0.0f && rotary_percent <= 1.0f) || rotary_dim() < 2 ||
       rotary_dim() % 2 != 0 || !(rotary_base > 0.0f))) {
    return bad("GPT config: rotary needs rotary_percent in (0, 1] with rotary_percent * head_dim ",
               "even and >= 2, and rotary_base > 0; got rotary_percent ", rotary_percent,
               " (head_dim ", head_dim(), ", rot_dim ", rotary_dim(), "), rotary_base ",
               rotary_base);
  }
  const ops::RotaryScaling& rs = rope_scaling;
  if (rs.type != ops::RotaryScalingType::kNone &&
      (position_embedding != PositionEmbedding::kRotary || !(rs.factor > 0.0f) ||
       (rs.type == ops::RotaryScalingType::kLlama3 &&
        !(rs.low_freq_factor > 0.0f && rs.high_freq_factor > rs.low_freq_factor &&
          rs.original_max_position > 0)))) {
    return bad(
        "GPT config: rope_scaling needs position_embedding rotary and "
        "rope_scaling_factor > 0 (llama3 also 0 < rope_low_freq_factor < "
        "rope_high_freq_factor and rope_original_max_position > 0); got factor ",
        rs.factor, ", low ", rs.low_freq_factor, ", high ", rs.high_freq_factor,
        ", original_max_position ", rs.original_max_position);
  }
  if (sliding_window < 0) {
    return bad("GPT config: sliding_window must be >= 0 (0: none), got ", sliding_window);
  }
  // The features' own bounds; which family may use which feature is the family's rule
  // (model/gpt/gpt_family.cc, model/bert/bert_family.cc).
  if (type_vocab_size < 0 || type_vocab_size > engine::kMaxDimension) {
    return bad("GPT config: type_vocab_size must be in [0, 2^31 - 1] (0: no token types), got ",
               type_vocab_size);
  }
  if (binary_head && !mlm_head()) {
    return bad("GPT config: the binary head (pooler on the [CLS] rows) comes with the MLM head");
  }
  return absl::OkStatus();
}

std::vector<std::vector<int64_t>> GptShard::layer_chunks(const GptConfig& cfg) const {
  if (!chunks.empty()) return chunks;
  std::vector<int64_t> all(static_cast<size_t>(cfg.n_layers));
  for (int64_t l = 0; l < cfg.n_layers; ++l) all[static_cast<size_t>(l)] = l;
  return {all};
}

absl::Status GptShard::validate(const GptConfig& cfg) const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (tp < 1 || tp_rank < 0 || tp_rank >= tp) {
    return bad("GPT shard: tp rank ", tp_rank, " outside a TP group of ", tp);
  }
  for (const auto& [what, n] : {std::pair<const char*, int64_t>{"[model] n_heads", cfg.n_heads},
                                {"[model] n_kv_heads", cfg.kv_heads()},
                                {"[model] ffn_hidden", cfg.ffn()},
                                {"[model] padded_vocab", cfg.padded()}}) {
    if (absl::Status s = parallel::check_tp_split(what, n, tp); !s.ok()) {
      return bad("tensor parallelism: ", s.message(),
                 std::string_view(what) == "[model] padded_vocab"
                     ? "; set [model] vocab_multiple to 128 * tp"
                     : "");
    }
  }
  if (act_slots < 1) return bad("GPT shard: act_slots must be >= 1, got ", act_slots);
  if (zero_dp < 1 || zero_rank < 0 || zero_rank >= zero_dp) {
    return bad("GPT shard: ZeRO rank ", zero_rank, " outside a DP group of ", zero_dp);
  }
  if (offload_optimizer && zero_stage == 3) {
    return bad("optimizer offload is not implemented with ZeRO stage 3 (stages 0, 1, 2)");
  }
  for (const std::vector<int64_t>& c : layer_chunks(cfg)) {
    if (c.empty()) return bad("GPT shard: a model chunk without layers");
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] < 0 || c[i] >= cfg.n_layers || (i > 0 && c[i] != c[i - 1] + 1)) {
        return bad("GPT shard: chunk layers must be consecutive in [0, ", cfg.n_layers,
                   "), got layer ", c[i]);
      }
    }
  }
  return absl::OkStatus();
}

int64_t GptConfig::matmul_params() const {
  const int64_t d = d_model, f = ffn();
  // Per layer: c_attn 3d*d, attn c_proj d*d, c_fc (f or 2f)*d, mlp c_proj d*f; plus the LM head
  // over the padded vocabulary (the GEMM actually run, tied or not).
  // The MLM head's dense d*d (the pooler runs on one row per sample: not counted).
  return n_layers * (4 * d * d + d * f + d * fc_out()) + padded() * d + (mlm_head() ? d * d : 0);
}

int64_t GptConfig::total_params() const {
  return non_layer_params(*this) + n_layers * layer_params(*this);
}

GptModel::GptModel() = default;
GptModel::~GptModel() = default;

absl::StatusOr<engine::MemoryPlan> GptModel::plan(const GptConfig& cfg, const GptRunShape& shape,
                                                  const Precision& prec, const GptShard& shard) {
  ANVIL_RETURN_IF_ERROR(gpt_detail::check_run(cfg, shape, prec, shard));
  engine::MemoryPlan plan;
  Carver carver(&plan);
  gpt_detail::gpt_layout(cfg, shape, prec, shard, carver);
  return plan;
}

absl::StatusOr<size_t> GptModel::offload_host_bytes(const GptConfig& cfg, const GptRunShape& shape,
                                                    const Precision& prec, const GptShard& shard) {
  if (!shard.offload_optimizer) return size_t{0};
  ANVIL_RETURN_IF_ERROR(gpt_detail::check_run(cfg, shape, prec, shard));
  engine::MemoryPlan plan;
  Carver carver(&plan);
  const gpt_detail::Buffers b = gpt_detail::gpt_layout(cfg, shape, prec, shard, carver);
  return parallel::OffloadOptimizer::host_bytes(b.sync_layout.state_numel, prec.act);
}

absl::StatusOr<std::unique_ptr<GptModel>> GptModel::create(const GptConfig& cfg,
                                                           const GptRunShape& shape,
                                                           const Precision& prec, uint64_t seed,
                                                           const GptShard& shard) {
  ANVIL_ASSIGN_OR_RETURN(engine::MemoryPlan plan, GptModel::plan(cfg, shape, prec, shard));
  if (shard.tp > 1 && shard.tp_comm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptModel::create: tp ", shard.tp, " needs the TP group's Comm"));
  }
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->shape = shape;
  impl->prec = prec;
  impl->shard = shard;
  impl->seed = seed;
  ANVIL_ASSIGN_OR_RETURN(impl->arenas, allocate_arenas(plan, prec.device, "gpt"));
  Carver carver(&impl->arenas);
  impl->buf = gpt_detail::gpt_layout(cfg, shape, prec, shard, carver);
  impl->tp = {shard.tp_comm, shard.tp, shard.tp_rank, shard.sequence_parallel, impl->buf.gathered};
  impl->ready_for_backward.assign(static_cast<size_t>(impl->n_chunks() * shard.act_slots), false);
  ANVIL_RETURN_IF_ERROR(carver.status());
  for (const auto& [cat, a] : impl->arenas) {
    if (a.used() != a.capacity()) {
      return absl::InternalError(absl::StrCat("GPT arena '", cat, "': plan says ", a.capacity(),
                                              " bytes, layout used ", a.used()));
    }
  }
  // Largest dropout site: the attention probabilities or a [B*T, d] hidden state.
  const uint64_t bt = static_cast<uint64_t>(shape.micro_batch * shape.seq_len);
  const uint64_t biggest = std::max(bt * static_cast<uint64_t>(cfg.n_heads * shape.seq_len),
                                    bt * static_cast<uint64_t>(cfg.d_model));
  impl->site_stride = biggest / 4 + 1;  // Philox yields 4 values per counter

  engine::Stream stream = engine::Stream::cpu();
  if (prec.device == engine::Device::kCuda) {
    int device = 0;
    ANVIL_CUDA_CHECK(cudaGetDevice(&device));
    ANVIL_ASSIGN_OR_RETURN(stream, engine::Stream::cuda(device));
  }
  gpt_detail::Buffers& b = impl->buf;
  const parallel::SyncBuffers& f = b.flat;
  if (shard.offload_optimizer) {
    // The optimizer state of this rank in host memory; the device keeps no master / m / v.
    ANVIL_ASSIGN_OR_RETURN(
        impl->offload, attach_offload(b.table, b.flat, b.sync_layout, prec, shard.offload_threads));
  }
  for (engine::TensorView v :
       {f.value, f.master, f.grad, f.m, f.v, f.grad_shard, f.persist_grad, f.persist_value}) {
    if (!v.empty()) engine::fill_zero(v, stream);
  }
  ANVIL_RETURN_IF_ERROR(impl->setup_grad_sync(prec.device));
  const parallel::ZeroPartition* part = impl->sync->partition();
  const int64_t n = b.table.flat_numel();
  auto target = [&](engine::TensorView v) {
    return InitTarget{v, v.numel() == n ? nullptr : part};
  };
  std::vector<InitTarget> targets{target(f.value)};
  if (f.master.data != f.value.data && !impl->offload) targets.push_back(target(f.master));
  gpt_detail::init_params(cfg, shard, b.table, targets, seed, stream);
  if (impl->offload) {
    // The host master drawn by the CPU twin (the same Philox values as the device's).
    engine::Stream host = engine::Stream::cpu();
    gpt_detail::init_params(cfg, shard, b.table, {target(f.master)}, seed, host);
  }
  mlm_head_setup(cfg, shape, b, stream);
  impl->sync->params_loaded(stream);  // ZeRO-3: gathers the embedding and final-LN buckets
  stream.synchronize();

  std::unique_ptr<GptModel> model(new GptModel());
  model->impl_ = std::move(impl);
  return model;
}

void GptModel::params_loaded(engine::Stream& stream) { impl_->sync->params_loaded(stream); }

absl::Status GptModel::Impl::setup_grad_sync(engine::Device device) {
  // Prefetch stays inside a chunk: the next layer of the pass may belong to another stage.
  std::vector<int64_t> chain(buf.layer_ids.size(), 0);
  for (size_t c = 0; c < buf.chunk_layers.size(); ++c) {
    for (int64_t l : buf.chunk_layers[c]) chain[static_cast<size_t>(l)] = static_cast<int64_t>(c);
  }
  parallel::GradSyncOptions o;
  o.stage = shard.zero_stage;
  o.dp = shard.dp_comm;
  o.dp_bucket_elems = shard.dp_bucket_elems;
  o.offload = offload.get();
  if (device == engine::Device::kCuda) ANVIL_CUDA_CHECK(cudaGetDevice(&o.cuda_device));
  auto bind = [this](int64_t local, parallel::LayerPart part, engine::TensorView bucket) {
    gpt_detail::Weights& w = part == parallel::LayerPart::kValues ? buf.w : buf.g;
    w.layers[static_cast<size_t>(local)] = gpt_detail::layer_views(buf, local, bucket);
  };
  ANVIL_ASSIGN_OR_RETURN(sync, parallel::GradSync::create(buf.sync_buckets, buf.layer_bucket,
                                                          std::move(chain), buf.flat, o, bind));
  return absl::OkStatus();
}

const GptConfig& GptModel::config() const { return impl_->cfg; }
const GptShard& GptModel::shard() const { return impl_->shard; }
ParamTable& GptModel::params() { return impl_->buf.table; }
const parallel::ZeroPartition* GptModel::zero_partition() const { return impl_->sync->partition(); }
FlatBuffers GptModel::flat_buffers() {
  const parallel::SyncBuffers& f = impl_->buf.flat;
  return FlatBuffers{f.value, f.master, f.grad, f.m, f.v};
}

void GptModel::forward(const int32_t* tokens, const int32_t* positions, const int32_t* targets,
                       bool train, uint64_t dropout_offset, engine::Stream& stream) {
  ANVIL_CHECK_MSG(impl_->shard.pre && impl_->shard.post && impl_->n_chunks() == 1,
                  "GptModel::forward runs the whole model: a pipeline stage uses forward_chunk");
  impl_->set_batch(0, 0, GptBatch{tokens, positions, targets, nullptr}, stream);
  impl_->forward_chunk(0, 0, train, dropout_offset, stream);
}

void GptModel::forward(const GptBatch& batch, bool train, uint64_t dropout_offset,
                       engine::Stream& stream) {
  ANVIL_CHECK_MSG(impl_->shard.pre && impl_->shard.post && impl_->n_chunks() == 1,
                  "GptModel::forward runs the whole model: a pipeline stage uses forward_chunk");
  impl_->set_batch(0, 0, batch, stream);
  impl_->forward_chunk(0, 0, train, dropout_offset, stream);
}

void GptModel::backward(float grad_scale, engine::Stream& stream) {
  impl_->backward_chunk(0, 0, grad_scale, stream);
}

double GptModel::loss_sum(engine::Stream& stream) { return loss_sum(0, stream); }

double GptModel::loss_sum(int64_t slot, engine::Stream& stream) {
  if (!impl_->shard.post) return 0.0;
  const gpt_detail::HeadActs& hd = impl_->buf.head[static_cast<size_t>(slot)];
  double sum = 0.0;
  for (double l : read_back(hd.losses, stream)) sum += l;
  if (!hd.mlm.bin_losses.empty()) {  // + (counted / B) * binary loss sum (mlm_head.cc)
    const int64_t counted = impl_->buf.slot_data(impl_->n_chunks() - 1, slot).counted;
    sum += binary_loss_sum(slot, stream) * static_cast<double>(counted) /
           static_cast<double>(impl_->shape.micro_batch);
  }
  return sum;
}

LossViews GptModel::loss_views(int64_t slot) const {
  if (!impl_->shard.post) return {};
  const gpt_detail::HeadActs& hd = impl_->buf.head[static_cast<size_t>(slot)];
  LossViews v;
  v.token = hd.losses;
  if (!hd.mlm.bin_losses.empty()) {  // as loss_sum: (counted / B) * binary loss sum
    v.binary = hd.mlm.bin_losses;
    const int64_t counted = impl_->buf.slot_data(impl_->n_chunks() - 1, slot).counted;
    v.binary_weight = static_cast<double>(counted) / static_cast<double>(impl_->shape.micro_batch);
  }
  return v;
}

double GptModel::binary_loss_sum(int64_t slot, engine::Stream& stream) {
  if (!impl_->shard.post) return 0.0;
  const gpt_detail::HeadActs& hd = impl_->buf.head[static_cast<size_t>(slot)];
  double sum = 0.0;
  if (!hd.mlm.bin_losses.empty()) {
    for (double l : read_back(hd.mlm.bin_losses, stream)) sum += l;
  }
  return sum;
}

engine::ConstTensorView GptModel::last_logits() const {
  ANVIL_CHECK_MSG(impl_->shard.post, "GptModel::last_logits: this rank holds no LM head");
  return impl_->buf.head[0].logits;
}

void GptModel::set_hidden_head(bool on) {
  ANVIL_CHECK_MSG(impl_->shard.post, "GptModel::set_hidden_head: this rank holds no ln_f");
  impl_->hidden_head = on;
}

engine::ConstTensorView GptModel::final_hidden(int64_t slot) const {
  ANVIL_CHECK_MSG(impl_->shard.post, "GptModel::final_hidden: this rank holds no ln_f");
  return impl_->buf.head.at(static_cast<size_t>(slot)).lnf;
}

engine::TensorView GptModel::final_hidden_grad() {
  ANVIL_CHECK_MSG(impl_->shard.post, "GptModel::final_hidden_grad: this rank holds no ln_f");
  return impl_->buf.dln;
}

void GptModel::set_overlap_grad_sync(bool on) { impl_->sync->set_overlap(on); }

void GptModel::set_batch(int64_t chunk, int64_t slot, const GptBatch& batch,
                         engine::Stream& stream) {
  impl_->set_batch(chunk, slot, batch, stream);
}

void GptModel::forward_chunk(int64_t chunk, int64_t slot, bool train, uint64_t dropout_offset,
                             engine::Stream& stream) {
  impl_->forward_chunk(chunk, slot, train, dropout_offset, stream);
}

void GptModel::backward_chunk(int64_t chunk, int64_t slot, float grad_scale,
                              engine::Stream& stream) {
  impl_->backward_chunk(chunk, slot, grad_scale, stream);
}

engine::TensorView GptModel::chunk_input(int64_t chunk, int64_t slot) {
  const std::vector<int64_t>& layers = impl_->buf.chunk_layers.at(static_cast<size_t>(chunk));
  return impl_->buf.act(slot, layers.front()).x;
}

engine::TensorView GptModel::chunk_output() { return impl_->buf.send_act; }

engine::TensorView GptModel::chunk_output_grad(int64_t chunk, int64_t slot) {
  return impl_->buf.out_grad.at(static_cast<size_t>(chunk * impl_->buf.slots + slot));
}

engine::TensorView GptModel::chunk_input_grad() { return impl_->last_input_grad; }

void GptModel::zero_grads(engine::Stream& stream) { impl_->sync->zero_grads(stream); }

void GptModel::finish_backward(engine::Stream& stream) {
  if (!impl_->tp.sp()) return;
  const gpt_detail::Buffers& b = impl_->buf;
  // ZeRO 2/3 summed each layer's scratch already (the layer buckets are not whole here).
  if (impl_->shard.zero_stage < 2) {
    for (const gpt_detail::LayerWeights& g : b.g.layers) impl_->sync_layernorm_grads(g, stream);
  }
  for (engine::TensorView v : {b.g.lnf_g, b.g.lnf_b, b.g.wte_ln_g, b.g.wte_ln_b}) {
    if (!v.empty()) impl_->tp.all_reduce(v, stream);
  }
}

void GptModel::gather_values(engine::TensorView out, engine::Stream& stream) {
  impl_->sync->gather_values(out, stream);
}

void GptModel::reduce_gradients(engine::Stream& stream) { impl_->sync->reduce_gradients(stream); }

double GptModel::grad_norm(engine::Stream& stream) { return std::sqrt(grad_sum_squares(stream)); }

double GptModel::grad_sum_squares(engine::Stream& stream) {
  return read_back(grad_sum_squares_device(stream), stream)[0];
}

engine::ConstTensorView GptModel::grad_sum_squares_device(engine::Stream& stream) {
  const gpt_detail::Buffers& b = impl_->buf;
  const GptShard& sh = impl_->shard;
  engine::fill_zero(b.norm_out, stream);
  // The flat elements [lo, hi) of a counted parameter: in the whole gradient, or in the own
  // pieces of the reduced shard.
  auto add = [&](int64_t lo, int64_t hi) {
    impl_->sync->add_grad_squares(b.norm_out, lo, hi, b.op_ws, stream);
  };
  // Runs of counted parameters in flat order, one sum_squares each (one for a whole single-rank
  // model): the alignment padding between parameters holds zero gradients (zero_grads clears the
  // whole buffer and nothing writes there), so it can be summed along.
  std::vector<const Param*> by_offset;
  for (const Param& p : b.table.all()) by_offset.push_back(&p);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Param* x, const Param* y) { return x->offset < y->offset; });
  int64_t run_lo = -1, run_hi = -1;
  for (const Param* p : by_offset) {
    const bool tp_replica = p->tp_split_dim < 0 && sh.tp_rank > 0;
    const bool head_copy = p->tied && sh.post && !sh.pre;
    if (tp_replica || head_copy) {
      if (run_lo >= 0) add(run_lo, run_hi);
      run_lo = -1;
      continue;
    }
    if (run_lo < 0) run_lo = p->offset;
    run_hi = p->offset + p->numel();
  }
  if (run_lo >= 0) add(run_lo, run_hi);
  return b.norm_out;
}

void GptModel::optimizer_step(const OptimizerStep& s, engine::Stream& stream) {
  impl_->sync->optimizer_step(adamw_args(s), stream);
}

size_t GptModel::arena_bytes() const {
  size_t n = 0;
  for (const auto& [cat, a] : impl_->arenas) n += a.capacity();
  return n;
}

size_t GptModel::arena_bytes(const std::string& category) const {
  for (const auto& [cat, a] : impl_->arenas) {
    if (cat == category) return a.capacity();
  }
  return 0;
}

uint64_t GptModel::dropout_offset_span() const {
  return impl_->site_stride * static_cast<uint64_t>(impl_->n_sites());
}

}  // namespace anvil::model
