// GradSync: plain DP and ZeRO 1-3 over the buckets of a model's flat buffers (see
// grad_sync.h): the layer hooks, the per-step reduction, the sharded AdamW and the gathers.
#include "parallel/grad_sync.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "ops/axpy.h"
#include "ops/grad_norm.h"

namespace anvil::parallel {

using engine::TensorView;

namespace {

// Elements [begin, end) of a contiguous buffer of any shape, as a flat view.
TensorView span(TensorView buf, int64_t begin, int64_t end) {
  return engine::slice_rows(engine::reshape(buf, {buf.numel()}), begin, end);
}

}  // namespace

SyncLayout sync_layout(const std::vector<SyncBucket>& buckets, int stage, int dp) {
  SyncLayout l;
  l.stage = stage;
  l.dp = dp;
  l.numel = buckets.empty() ? 0 : buckets.back().end;
  l.state_numel = stage > 0 ? l.numel / dp : l.numel;
  l.persist_offset.assign(buckets.size(), -1);
  for (size_t i = 0; i < buckets.size(); ++i) {
    const int64_t len = buckets[i].end - buckets[i].begin;
    if (buckets[i].layer) {
      l.layer_max = std::max(l.layer_max, len);
    } else {
      l.persist_offset[i] = l.persist_numel;
      l.persist_numel += len;
    }
  }
  return l;
}

absl::StatusOr<std::unique_ptr<GradSync>> GradSync::create(std::vector<SyncBucket> buckets,
                                                           std::vector<int64_t> layer_bucket,
                                                           std::vector<int64_t> layer_chain,
                                                           const SyncBuffers& buffers,
                                                           const GradSyncOptions& options,
                                                           BindLayer bind) {
  if (options.stage < 0 || options.stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("GradSync: stage ", options.stage));
  }
  if (layer_chain.size() != layer_bucket.size()) {
    return absl::InvalidArgumentError("GradSync: one chain per layer");
  }
  for (int64_t b : layer_bucket) {
    if (b < 0 || b >= static_cast<int64_t>(buckets.size()) ||
        !buckets[static_cast<size_t>(b)].layer) {
      return absl::InvalidArgumentError(absl::StrCat("GradSync: layer bucket ", b));
    }
  }
  std::unique_ptr<GradSync> g(new GradSync());
  g->layout_ = sync_layout(buckets, options.stage, options.dp ? options.dp->size() : 1);
  g->buckets_ = std::move(buckets);
  g->layer_bucket_ = std::move(layer_bucket);
  g->layer_chain_ = std::move(layer_chain);
  g->buf_ = buffers;
  g->options_ = options;
  g->bind_ = std::move(bind);
  // The model carved its buffers for the same stage and DP size.
  if (buffers.m.numel() != g->layout_.state_numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GradSync: optimizer state of ", buffers.m.numel(), " elements, stage ", options.stage,
        " over ", g->layout_.dp, " ranks needs ", g->layout_.state_numel));
  }
  if (options.offload != nullptr &&
      (options.stage == 3 || buffers.master.data == buffers.value.data ||
       buffers.master.numel() != g->layout_.state_numel)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradSync: optimizer offload needs stage 0-2 (got ", options.stage,
                     ") and the offload's own master of ", g->layout_.state_numel, " elements"));
  }
  if (options.stage == 0) {
    if (options.dp != nullptr) {
      DataParallelOptions dopt;
      dopt.bucket_elems = options.dp_bucket_elems;
      dopt.cuda_device = options.cuda_device;
      ANVIL_ASSIGN_OR_RETURN(g->plain_, DataParallel::create(buffers.grad, options.dp, dopt));
    }
    return g;
  }
  if (options.dp == nullptr) {
    return absl::InvalidArgumentError("GradSync: ZeRO needs the DP group's Comm");
  }
  std::vector<ZeroBucket> zb;
  for (const SyncBucket& b : g->buckets_) zb.push_back({b.begin, b.decay_end, b.end});
  ANVIL_ASSIGN_OR_RETURN(
      ZeroPartition part,
      ZeroPartition::create(std::move(zb), options.dp->size(), options.dp->index()));
  g->zero_ = std::move(part);
  if (options.stage == 3) ANVIL_RETURN_IF_ERROR(g->setup_prefetch());
  return g;
}

GradSync::~GradSync() {
  // A prefetch still writing a gather buffer: let it finish before the buffers go.
  if (side_) side_->synchronize();
}

absl::Status GradSync::setup_prefetch() {
  if (buf_.gather.device != engine::Device::kCuda) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(engine::Stream st, engine::Stream::cuda(options_.cuda_device));
  side_ = std::make_unique<engine::Stream>(std::move(st));
  for (int i = 0; i < 2; ++i) {
    ANVIL_ASSIGN_OR_RETURN(engine::Event e, engine::Event::create());
    slot_ready_.push_back(std::move(e));
  }
  ANVIL_ASSIGN_OR_RETURN(engine::Event m, engine::Event::create());
  compute_mark_ = std::make_unique<engine::Event>(std::move(m));
  return absl::OkStatus();
}

TensorView GradSync::gather_slot(int slot, int64_t layer) const {
  const int64_t at = slot * layout_.layer_max;
  return span(buf_.gather, at, at + zero_->buckets()[bucket_of(layer)].numel());
}

void GradSync::gather_into(int slot, int64_t layer, engine::Stream& on) {
  const size_t bucket = bucket_of(layer);
  zero_all_gather(*options_.dp, *zero_, bucket, gather_slot(slot, layer),
                  zero_piece_view(*zero_, bucket, buf_.value), on);
  slot_layer_[slot] = layer;
}

void GradSync::gather_layer(int64_t layer, engine::Stream& s) {
  if (stage() != 3) return;
  const bool cuda = side_ != nullptr;
  int slot = slot_layer_[0] == layer ? 0 : slot_layer_[1] == layer ? 1 : -1;
  if (slot >= 0) {
    if (cuda && slot_pending_[slot]) slot_ready_[static_cast<size_t>(slot)].wait(s);
  } else {
    // Not prefetched: gather now, into a buffer no prefetch is still writing.
    slot = slot_layer_[0] == -1 || slot_layer_[1] != -1 ? 0 : 1;
    if (cuda && slot_pending_[slot]) slot_ready_[static_cast<size_t>(slot)].wait(s);
    gather_into(slot, layer, s);
  }
  slot_pending_[slot] = false;
  bind_(layer, LayerPart::kValues, gather_slot(slot, layer));
  // Prefetch the pass's next layer of this chain into the other buffer, once the work queued so
  // far (the previous layer's reads of that buffer included) is done.
  const int64_t next = layer + dir_;
  const int other = 1 - slot;
  if (next < 0 || next >= static_cast<int64_t>(layer_chain_.size()) ||
      layer_chain_[static_cast<size_t>(next)] != layer_chain_[static_cast<size_t>(layer)]) {
    return;
  }
  if (slot_layer_[other] == next) return;
  if (!cuda) {
    gather_into(other, next, s);
    return;
  }
  if (slot_pending_[other]) slot_ready_[static_cast<size_t>(other)].wait(s);
  compute_mark_->record(s);
  compute_mark_->wait(*side_);
  gather_into(other, next, *side_);
  slot_ready_[static_cast<size_t>(other)].record(*side_);
  slot_pending_[other] = true;
}

void GradSync::zero_layer_grads(int64_t layer, engine::Stream& s) {
  if (stage() < 2) return;
  const SyncBucket& b = buckets_[bucket_of(layer)];
  const TensorView scratch = span(buf_.grad_scratch, 0, b.end - b.begin);
  engine::fill_zero(scratch, s);
  bind_(layer, LayerPart::kGrads, scratch);
}

void GradSync::layer_grads_done(int64_t layer, engine::Stream& s) {
  const SyncBucket& b = buckets_[bucket_of(layer)];
  if (stage() == 0) {
    if (overlap_ && plain_) plain_->reduce_early(b.begin, b.end, s);
    return;
  }
  if (stage() < 2) return;
  // The layer's gradient of this micro-batch, summed over DP onto its owners, added to theirs.
  const int64_t len = b.end - b.begin;
  const TensorView piece = span(buf_.grad_piece, 0, len / zero_->dp());
  options_.dp->reduce_scatter(piece, span(buf_.grad_scratch, 0, len), ReduceOp::kSum, s);
  ops::axpy(1.0f, zero_piece_view(*zero_, bucket_of(layer), buf_.grad_shard), piece, s);
}

void GradSync::zero_grads(engine::Stream& s) {
  for (TensorView v : {buf_.grad, buf_.grad_shard, buf_.persist_grad}) {
    if (!v.empty()) engine::fill_zero(v, s);
  }
}

void GradSync::reduce_gradients(engine::Stream& s) {
  if (plain_) {
    plain_->start_grad_sync(s);
    plain_->finish_grad_sync(s);
    return;
  }
  if (!zero_) return;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const int64_t len = buckets_[i].end - buckets_[i].begin;
    TensorView whole;
    if (!buf_.grad.empty()) {
      whole = span(buf_.grad, buckets_[i].begin, buckets_[i].end);
    } else if (layout_.persist_offset[i] >= 0) {
      const int64_t at = layout_.persist_offset[i];
      whole = span(buf_.persist_grad, at, at + len);
    } else {
      continue;  // a layer bucket: reduced during the backward
    }
    zero_reduce_scatter(*options_.dp, *zero_, i, buf_.grad_shard, whole, s);
  }
}

void GradSync::add_grad_squares(TensorView out, int64_t lo, int64_t hi, engine::Workspace ws,
                                engine::Stream& s) const {
  if (!zero_) {
    ops::sum_squares(out, span(buf_.grad, lo, hi), ws, s);
    return;
  }
  for (size_t i = 0; i < zero_->buckets().size(); ++i) {
    const ZeroPiece p = zero_->piece(i);
    const int64_t a = std::max(lo, p.begin), e = std::min(hi, p.end);
    if (e <= a) continue;
    const int64_t at = p.shard_offset + a - p.begin;
    ops::sum_squares(out, span(buf_.grad_shard, at, at + e - a), ws, s);
  }
}

void GradSync::optimizer_step(const ops::AdamWArgs& args, engine::Stream& s) {
  if (options_.offload) {
    ANVIL_CHECK_MSG(args.device_scale.empty(),
                    "GradSync::optimizer_step: the offloaded optimizer runs on the host and needs "
                    "the gradient scale as a host value, not a device_scale");
    // The same ranges as below, in the offload's state coordinates (flat positions, or shard
    // offsets under ZeRO) and the compute copy's (flat positions).
    std::vector<OffloadRange> ranges;
    if (!zero_) {
      for (const SyncBucket& k : buckets_) {
        ranges.push_back({k.begin, k.begin, k.decay_end - k.begin, true});
        ranges.push_back({k.decay_end, k.decay_end, k.end - k.decay_end, false});
      }
    } else {
      for (size_t i = 0; i < zero_->buckets().size(); ++i) {
        const ZeroPiece p = zero_->piece(i);
        ranges.push_back({p.shard_offset, p.begin, p.decay_end - p.begin, true});
        ranges.push_back(
            {p.shard_offset + p.decay_end - p.begin, p.decay_end, p.end - p.decay_end, false});
      }
    }
    options_.offload->step(args, ranges, zero_ ? buf_.grad_shard : buf_.grad, buf_.value, s);
    for (size_t i = 0; zero_ && i < buckets_.size(); ++i) {  // stages 1, 2: as below
      zero_all_gather(*options_.dp, *zero_, i, span(buf_.value, buckets_[i].begin, buckets_[i].end),
                      zero_piece_view(*zero_, i, buf_.value), s);
    }
    return;
  }
  const bool shared = buf_.master.data == buf_.value.data;  // no separate compute copy
  const TensorView value = shared ? TensorView{} : buf_.value;
  if (!zero_) {
    // Per bucket: [begin, decay_end) with weight decay, the rest without.
    auto range = [&](int64_t begin, int64_t end, float weight_decay) {
      if (end <= begin) return;
      ops::AdamWArgs r = args;
      r.weight_decay = weight_decay;
      auto sl = [&](TensorView flat) { return flat.empty() ? flat : span(flat, begin, end); };
      ops::adamw_update(r, sl(buf_.master), sl(buf_.m), sl(buf_.v), sl(value), sl(buf_.grad), s);
    };
    for (const SyncBucket& k : buckets_) {
      range(k.begin, k.decay_end, args.weight_decay);
      range(k.decay_end, k.end, 0.0f);
    }
    return;
  }
  zero_adamw(*zero_, args, buf_.master, buf_.m, buf_.v, value, buf_.grad_shard, s);
  if (stage() == 3) {
    forget_gathered(s);
    gather_persistent(s);
    return;
  }
  // Stages 1, 2: every rank gets every updated parameter back, bucket by bucket, in place.
  for (size_t i = 0; i < buckets_.size(); ++i) {
    zero_all_gather(*options_.dp, *zero_, i, span(buf_.value, buckets_[i].begin, buckets_[i].end),
                    zero_piece_view(*zero_, i, buf_.value), s);
  }
}

void GradSync::forget_gathered(engine::Stream& s) {
  // The gathered layers are stale now: forget them (after any prefetch still writing).
  for (int k = 0; k < 2; ++k) {
    if (side_ && slot_pending_[k]) slot_ready_[static_cast<size_t>(k)].wait(s);
    slot_pending_[k] = false;
    slot_layer_[k] = -1;
  }
}

void GradSync::gather_persistent(engine::Stream& s) {
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const int64_t at = layout_.persist_offset[i];
    if (at < 0) continue;
    zero_all_gather(*options_.dp, *zero_, i,
                    span(buf_.persist_value, at, at + buckets_[i].end - buckets_[i].begin),
                    zero_piece_view(*zero_, i, buf_.value), s);
  }
}

void GradSync::params_loaded(engine::Stream& s) {
  if (stage() != 3) return;
  forget_gathered(s);
  gather_persistent(s);
}

void GradSync::gather_values(TensorView out, engine::Stream& s) {
  ANVIL_CHECK_MSG(out.numel() == layout_.numel && out.dtype == buf_.value.dtype,
                  "GradSync::gather_values: out must be [numel] of the compute dtype, got " +
                      engine::describe(out));
  if (stage() < 3) {
    engine::copy(out, buf_.value, s);
    return;
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    zero_all_gather(*options_.dp, *zero_, i, span(out, buckets_[i].begin, buckets_[i].end),
                    zero_piece_view(*zero_, i, buf_.value), s);
  }
}

}  // namespace anvil::parallel
