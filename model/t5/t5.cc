// T5Model creation (arenas from the plan, HF T5 initialization, relative buckets), the public
// forward/backward entry points, gradient norm and AdamW (model/t5/t5.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda_check.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/param_init.h"
#include "model/sync_layout.h"
#include "model/t5/t5_impl.h"
#include "ops/adamw.h"
#include "ops/grad_norm.h"
#include "ops/init_normal.h"
#include "parallel/comm.h"
#include "parallel/zero.h"

namespace anvil::model {

namespace {

using engine::DType;
using engine::TensorView;

// HF T5PreTrainedModel._init_weights: (row block, sigma) pieces of this rank's parameter p
// (i: the local inner width); norms are 1.
std::vector<std::pair<int64_t, double>> init_sigmas(const T5Config& cfg, const Param& p,
                                                    int64_t i) {
  const double f = cfg.init_factor, d = static_cast<double>(cfg.d_model);
  const double q = f / std::sqrt(d * static_cast<double>(cfg.d_kv));
  const double kv = f / std::sqrt(d);
  const double o = f / std::sqrt(static_cast<double>(cfg.inner()));
  const std::string& n = p.name;
  if (n == "shared.weight" || n == "lm_head.weight") return {{p.shape[0], f}};
  if (absl::EndsWith(n, "SelfAttention.qkv.weight")) return {{i, q}, {i, kv}, {i, kv}};
  if (absl::EndsWith(n, "EncDecAttention.q.weight")) return {{i, q}};
  if (absl::EndsWith(n, "EncDecAttention.kv.weight")) return {{2 * i, kv}};
  if (absl::EndsWith(n, ".o.weight")) return {{p.shape[0], o}};
  if (absl::EndsWith(n, "relative_attention_bias.weight")) return {{p.shape[0], kv}};
  if (absl::EndsWith(n, "DenseReluDense.wi.weight")) return {{p.shape[0], kv}};
  if (absl::EndsWith(n, "DenseReluDense.wo.weight")) {
    return {{p.shape[0], f / std::sqrt(static_cast<double>(cfg.d_ff))}};
  }
  return {};  // a norm
}

// Every element from (seed, its offset in the whole single-rank model), so a TP shard holds the
// single-rank values at its global elements (model/param_init.h).
void init_params(const T5Config& cfg, const T5Shard& shard, const ParamTable& t,
                 const InitTarget& target, uint64_t seed, engine::Stream& s) {
  const ParamTable whole = t5_detail::make_t5_param_table(cfg);
  for (const Param& p : t.all()) {
    const std::vector<std::pair<int64_t, double>> pieces =
        init_sigmas(cfg, p, cfg.inner() / shard.tp);
    const int64_t cols = p.shape.size() == 2 ? p.shape[1] : 1;
    ops::InitNormalArgs a;
    a.tp = tp_split(p, shard.tp, shard.tp_rank);
    if (pieces.empty()) {
      a.kind = ops::InitKind::kConstant;
      a.value = 1.0f;
      init_range(target, p, 0, p.numel(), a, s);
      continue;
    }
    a.kind = ops::InitKind::kNormal;
    a.seed = seed;
    a.offset = static_cast<uint64_t>(whole.find(p.name)->offset);
    // Padded vocabulary rows stay 0: no token uses them and their logits are ignored.
    if (p.vocab_rows) a.valid = cfg.loss_vocab() * cfg.d_model;  // padding: 0 unless in the loss
    int64_t row = 0;
    for (const auto& [rows, sigma] : pieces) {
      a.sigma = sigma;
      init_range(target, p, row * cols, rows * cols, a, s);
      row += rows;
    }
  }
}

}  // namespace

T5Model::T5Model() = default;
T5Model::~T5Model() = default;

absl::StatusOr<engine::MemoryPlan> T5Model::plan(const T5Config& cfg, const T5RunShape& shape,
                                                 const Precision& prec, const T5Shard& shard) {
  ANVIL_RETURN_IF_ERROR(t5_detail::check_t5_run(cfg, shape, prec, shard));
  engine::MemoryPlan plan;
  Carver carver(&plan);
  t5_detail::t5_layout(cfg, shape, prec, shard, carver);
  return plan;
}

absl::StatusOr<size_t> T5Model::offload_host_bytes(const T5Config& cfg, const T5RunShape& shape,
                                                   const Precision& prec, const T5Shard& shard) {
  if (!shard.offload_optimizer) return size_t{0};
  ANVIL_RETURN_IF_ERROR(t5_detail::check_t5_run(cfg, shape, prec, shard));
  engine::MemoryPlan plan;
  Carver carver(&plan);
  const t5_detail::Buffers b = t5_detail::t5_layout(cfg, shape, prec, shard, carver);
  return parallel::OffloadOptimizer::host_bytes(b.sync_layout.state_numel, prec.act);
}

absl::StatusOr<std::unique_ptr<T5Model>> T5Model::create(const T5Config& cfg,
                                                         const T5RunShape& shape,
                                                         const Precision& prec, uint64_t seed,
                                                         const T5Shard& shard) {
  ANVIL_ASSIGN_OR_RETURN(engine::MemoryPlan plan, T5Model::plan(cfg, shape, prec, shard));
  if (shard.tp > 1 && shard.tp_comm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("T5Model::create: tp ", shard.tp, " needs the TP group's Comm"));
  }
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->shape = shape;
  impl->prec = prec;
  impl->shard = shard;
  impl->seed = seed;
  impl->layers = shard.layers(cfg);
  if (shard.pp > 1) impl->shared = t5_detail::pipeline_shared_params(cfg, shard);
  ANVIL_ASSIGN_OR_RETURN(impl->arenas, allocate_arenas(plan, prec.device, "t5"));
  Carver carver(&impl->arenas);
  impl->buf = t5_detail::t5_layout(cfg, shape, prec, shard, carver);
  ANVIL_RETURN_IF_ERROR(carver.status());
  impl->tp = {shard.tp_comm, shard.tp, shard.tp_rank, shard.sequence_parallel, impl->buf.gathered};
  // Largest dropout site: attention probabilities [B, H, Tq, Tk] or a hidden [rows, max(d, ff)].
  const uint64_t B = static_cast<uint64_t>(shape.micro_batch);
  const uint64_t T = static_cast<uint64_t>(std::max(shape.enc_len, shape.dec_len));
  const uint64_t biggest = std::max(B * static_cast<uint64_t>(cfg.n_heads) * T * T,
                                    B * T * static_cast<uint64_t>(std::max(cfg.d_model, cfg.d_ff)));
  impl->site_stride = biggest / 4 + 1;  // Philox yields 4 values per counter

  engine::Stream stream = engine::Stream::cpu();
  if (prec.device == engine::Device::kCuda) {
    int device = 0;
    ANVIL_CUDA_CHECK(cudaGetDevice(&device));
    ANVIL_ASSIGN_OR_RETURN(stream, engine::Stream::cuda(device));
  }
  t5_detail::Buffers& b = impl->buf;
  const parallel::SyncBuffers& f = b.flat;
  if (shard.offload_optimizer) {
    // The optimizer state of this rank in host memory; the device keeps no master / m / v.
    ANVIL_ASSIGN_OR_RETURN(
        impl->offload, attach_offload(b.table, b.flat, b.sync_layout, prec, shard.offload_threads));
  }
  for (TensorView v :
       {f.value, f.master, f.grad, f.m, f.v, f.grad_shard, f.persist_grad, f.persist_value}) {
    if (!v.empty()) engine::fill_zero(v, stream);
  }
  ANVIL_RETURN_IF_ERROR(impl->setup_grad_sync());
  // Into every buffer of values: at flat positions, or a shard's own pieces.
  const int64_t n = b.table.flat_numel();
  auto target = [&](TensorView v) {
    return InitTarget{v, v.numel() == n ? nullptr : impl->sync->partition()};
  };
  init_params(cfg, shard, b.table, target(f.value), seed, stream);
  if (impl->offload) {
    // The host master drawn by the CPU twin (the same Philox values as the device's).
    engine::Stream host = engine::Stream::cpu();
    init_params(cfg, shard, b.table, target(f.master), seed, host);
  } else if (f.master.data != f.value.data) {
    init_params(cfg, shard, b.table, target(f.master), seed, stream);
  }
  impl->sync->params_loaded(stream);  // ZeRO-3: gathers the buckets that stay whole
  // Relative buckets of distances j - i, at j - i + Tq - 1 (ops/flash_attention.h).
  for (const auto& [dst, len, bidirectional] :
       {std::tuple<TensorView, int64_t, bool>{b.rel_buckets_enc, shape.enc_len, true},
        {b.rel_buckets_dec, shape.dec_len, false}}) {
    std::vector<int32_t> host(static_cast<size_t>(2 * len - 1));
    for (int64_t k = 0; k < 2 * len - 1; ++k) {
      host[static_cast<size_t>(k)] =
          t5_relative_bucket(k - (len - 1), bidirectional, cfg.num_buckets, cfg.max_distance);
    }
    engine::copy(dst,
                 engine::make_view(host.data(), DType::kI32, engine::Device::kCpu, {2 * len - 1}),
                 stream);
    stream.synchronize();
  }
  std::unique_ptr<T5Model> model(new T5Model());
  model->impl_ = std::move(impl);
  return model;
}

const T5Config& T5Model::config() const { return impl_->cfg; }
const T5RunShape& T5Model::shape() const { return impl_->shape; }
const T5Shard& T5Model::shard() const { return impl_->shard; }
ParamTable& T5Model::params() { return impl_->buf.table; }
const parallel::ZeroPartition* T5Model::zero_partition() const { return impl_->sync->partition(); }
FlatBuffers T5Model::flat_buffers() {
  const parallel::SyncBuffers& f = impl_->buf.flat;
  return FlatBuffers{f.value, f.master, f.grad, f.m, f.v};
}

void T5Model::forward(const T5Batch& batch, bool train, uint64_t dropout_offset,
                      engine::Stream& stream) {
  set_batch(0, batch, stream);
  forward_stage(0, train, dropout_offset, stream);
}

void T5Model::backward(float grad_scale, engine::Stream& stream) {
  backward_stage(0, grad_scale, stream);
}

double T5Model::loss_sum(engine::Stream& stream) { return loss_sum(0, stream); }

double T5Model::loss_sum(int64_t slot, engine::Stream& stream) {
  if (!impl_->post()) return 0.0;
  double sum = 0.0;
  for (double l : read_back(impl_->use_slot(slot).losses, stream)) sum += l;
  return sum;
}

LossViews T5Model::loss_views(int64_t slot) const {
  if (!impl_->post()) return {};
  LossViews v;
  v.token = impl_->buf.slots[static_cast<size_t>(slot)].losses;
  return v;
}

engine::ConstTensorView T5Model::last_logits() const { return impl_->buf.slots[0].logits; }

void T5Model::set_batch(int64_t slot, const T5Batch& batch, engine::Stream& stream) {
  impl_->use_slot(slot);
  impl_->set_batch(batch, stream);
}

void T5Model::forward_stage(int64_t slot, bool train, uint64_t dropout_offset,
                            engine::Stream& stream) {
  impl_->use_slot(slot).dropout_offset = dropout_offset;
  impl_->dropout_offset = dropout_offset;
  impl_->last_forward = slot;
  impl_->forward(train, stream);
}

void T5Model::backward_stage(int64_t slot, float grad_scale, engine::Stream& stream) {
  impl_->dropout_offset = impl_->use_slot(slot).dropout_offset;  // replays the forward's masks
  impl_->backward(grad_scale, stream);
}

bool T5Model::ends_model() const { return impl_->post(); }

std::vector<TensorView> T5Model::stage_inputs(int64_t slot) {
  const Impl& m = *impl_;
  const t5_detail::SlotActs& a = impl_->use_slot(slot);
  if (m.has_enc()) {
    if (m.embeds_enc()) return {};
    return {a.enc_layers[static_cast<size_t>(m.layers.enc_begin)].x};
  }
  // The encoder output arrives as this rank's rows (decoder_forward gathers them).
  const TensorView enc = m.tp.local_rows(a.enc);
  if (m.embeds_dec()) return {enc};
  return {a.dec_layers[static_cast<size_t>(m.layers.dec_begin)].x, enc};
}

std::vector<TensorView> T5Model::stage_outputs() {
  const Impl& m = *impl_;
  const t5_detail::SlotActs& a = m.buf.slots[static_cast<size_t>(m.last_forward)];
  const TensorView enc = m.tp.local_rows(a.enc);
  if (m.has_enc()) {
    if (m.ends_enc()) return {enc};
    return {m.buf.out};
  }
  if (m.post()) return {};
  return {m.buf.out, enc};
}

std::vector<TensorView> T5Model::stage_output_grads(int64_t slot) {
  const Impl& m = *impl_;
  const t5_detail::SlotActs& a = impl_->use_slot(slot);
  if (m.has_enc()) {
    if (m.ends_enc()) return {a.denc_in};
    return {a.dout};
  }
  if (m.post()) return {};
  return {a.dout, a.denc_in};
}

std::vector<TensorView> T5Model::stage_input_grads() {
  const Impl& m = *impl_;
  const int64_t d = m.cfg.d_model;
  const TensorView denc = m.tp.local_rows(m.buf.denc);
  if (m.has_enc()) {
    if (m.embeds_enc()) return {};
    return {flat_slice(m.buf.dres, 0, {m.enc_rows(), d})};
  }
  if (m.embeds_dec()) return {denc};
  return {flat_slice(m.buf.dres, 0, {m.dec_rows(), d}), denc};
}

void T5Model::zero_grads(engine::Stream& stream) { impl_->sync->zero_grads(stream); }

void T5Model::reduce_gradients(engine::Stream& stream) { impl_->sync->reduce_gradients(stream); }

void T5Model::set_overlap_grad_sync(bool on) { impl_->sync->set_overlap(on); }

void T5Model::params_loaded(engine::Stream& stream) { impl_->sync->params_loaded(stream); }

void T5Model::gather_values(TensorView out, engine::Stream& stream) {
  impl_->sync->gather_values(out, stream);
}

void T5Model::finish_backward(engine::Stream& stream) {
  const t5_detail::Weights& g = impl_->buf.g;
  impl_->tp.sum_row_grads({g.enc_final, g.dec_final}, stream);
  for (const bool decoder : {false, true}) {
    const std::vector<t5_detail::LayerWeights>& stack = decoder ? g.dec : g.enc;
    for (size_t l = 0; l < stack.size(); ++l) {
      // ZeRO 2/3 summed a sharded block's right after its backward (after_layer_backward).
      if (impl_->reduced_per_layer(decoder, static_cast<int64_t>(l))) continue;
      impl_->tp.sum_row_grads({stack[l].ln1, stack[l].ln2, stack[l].ln_ff}, stream);
    }
  }
}

void T5Model::sum_shared_grads(parallel::Comm* pp, engine::Stream& stream) {
  if (pp == nullptr) return;
  for (const t5_detail::SharedParam& sp : impl_->shared) {
    const Param* p = impl_->buf.table.find(sp.name);
    TensorView g =
        p ? flat_slice(p->grad, 0, {p->numel()}) : flat_slice(impl_->buf.shared_sum, 0, {sp.numel});
    if (p == nullptr) engine::fill_zero(g, stream);
    pp->all_reduce(g, parallel::ReduceOp::kSum, stream);
  }
}

double T5Model::grad_sum_squares(engine::Stream& stream) {
  return read_back(grad_sum_squares_device(stream), stream)[0];
}

engine::ConstTensorView T5Model::grad_sum_squares_device(engine::Stream& stream) {
  const t5_detail::Buffers& b = impl_->buf;
  const T5Shard& sh = impl_->shard;
  engine::fill_zero(b.norm_out, stream);
  // Flat elements [lo, hi): of the whole gradient, or (ZeRO) the own pieces of the reduced one.
  auto add = [&](int64_t lo, int64_t hi) {
    impl_->sync->add_grad_squares(b.norm_out, lo, hi, b.op_ws, stream);
  };
  if (sh.tp == 1 && impl_->shared.empty()) {
    // Padding between parameters holds zero gradients: one sum over the whole buffer.
    add(0, b.table.flat_numel());
  } else {
    // Split parameters on every TP rank, the replicated ones (equal over TP) on rank 0 only;
    // a copy of a shared parameter on the first stage holding one.
    for (const Param& p : b.table.all()) {
      if ((p.tp_split_dim >= 0 || sh.tp_rank == 0) && first_copy(p))
        add(p.offset, p.offset + p.numel());
    }
    impl_->tp.all_reduce(b.norm_out, stream);
  }
  return b.norm_out;
}

bool T5Model::first_copy(const Param& p) const {
  for (const t5_detail::SharedParam& sp : impl_->shared) {
    if (sp.name == p.name) return sp.stages.front() == impl_->shard.pp_rank;
  }
  return true;
}

double T5Model::grad_norm(engine::Stream& stream) { return std::sqrt(grad_sum_squares(stream)); }

void T5Model::optimizer_step(const OptimizerStep& s, engine::Stream& stream) {
  impl_->sync->optimizer_step(adamw_args(s), stream);
}

absl::Status T5Model::Impl::setup_grad_sync() {
  std::vector<int64_t> layer_bucket;
  for (const auto& [decoder, buckets] :
       {std::pair<bool, const std::vector<int64_t>*>{false, &buf.enc_bucket},
        {true, &buf.dec_bucket}}) {
    for (size_t l = 0; l < buckets->size(); ++l) {
      if ((*buckets)[l] < 0) continue;
      sync_layers.push_back({decoder, static_cast<int64_t>(l)});
      layer_bucket.push_back((*buckets)[l]);
    }
  }
  parallel::GradSyncOptions o;
  o.stage = shard.zero_stage;
  o.dp = shard.dp_comm;
  o.dp_bucket_elems = shard.dp_bucket_elems;
  o.offload = offload.get();
  if (prec.device == engine::Device::kCuda) ANVIL_CUDA_CHECK(cudaGetDevice(&o.cuda_device));
  auto bind = [this](int64_t k, parallel::LayerPart part, TensorView bucket) {
    const auto [decoder, l] = sync_layers[static_cast<size_t>(k)];
    t5_detail::Weights& w = part == parallel::LayerPart::kValues ? buf.w : buf.g;
    const std::vector<int64_t>& buckets = decoder ? buf.dec_bucket : buf.enc_bucket;
    (decoder ? w.dec : w.enc)[static_cast<size_t>(l)] = t5_detail::bucket_layer_views(
        buf.table, decoder, l, buckets[static_cast<size_t>(l)], bucket);
  };
  // One chain: the blocks run encoder then decoder forward, and in reverse backward.
  const std::vector<int64_t> chain(layer_bucket.size(), 0);
  ANVIL_ASSIGN_OR_RETURN(
      sync, parallel::GradSync::create(buf.sync_buckets, layer_bucket, chain, buf.flat, o, bind));
  return absl::OkStatus();
}

int64_t T5Model::Impl::sync_layer(bool decoder, int64_t l) const {
  for (size_t k = 0; k < sync_layers.size(); ++k) {
    if (sync_layers[k] == std::pair<bool, int64_t>{decoder, l}) return static_cast<int64_t>(k);
  }
  return -1;
}

void T5Model::Impl::before_layer_forward(bool decoder, int64_t l, engine::Stream& s) {
  const int64_t k = sync_layer(decoder, l);
  if (k >= 0) sync->gather_layer(k, s);
}

void T5Model::Impl::before_layer_backward(bool decoder, int64_t l, engine::Stream& s) {
  const int64_t k = sync_layer(decoder, l);
  if (k < 0) return;
  sync->gather_layer(k, s);
  sync->zero_layer_grads(k, s);
}

void T5Model::Impl::after_layer_backward(bool decoder, int64_t l, engine::Stream& s) {
  const int64_t k = sync_layer(decoder, l);
  if (k < 0) return;
  // ZeRO 2/3 reduce this micro-batch's scratch now: with sequence parallelism its norms'
  // gradients are summed over TP first (finish_backward does the others once per step).
  if (reduced_per_layer(decoder, l)) {
    const t5_detail::LayerWeights& g = (decoder ? buf.g.dec : buf.g.enc)[static_cast<size_t>(l)];
    tp.sum_row_grads({g.ln1, g.ln2, g.ln_ff}, s);
  }
  sync->layer_grads_done(k, s);
}

size_t T5Model::arena_bytes() const {
  size_t n = 0;
  for (const auto& [cat, a] : impl_->arenas) n += a.capacity();
  return n;
}

size_t T5Model::arena_bytes(const std::string& category) const {
  for (const auto& [cat, a] : impl_->arenas) {
    if (cat == category) return a.capacity();
  }
  return 0;
}

uint64_t T5Model::dropout_offset_span() const {
  return impl_->site_stride * static_cast<uint64_t>(impl_->n_sites());
}

}  // namespace anvil::model
