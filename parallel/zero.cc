// ZeRO-1: shard arithmetic, reduce-scatter of gradients, sharded AdamW, all-gather of the
// updated parameters (see zero.h).
#include "parallel/zero.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "ops/grad_norm.h"

namespace anvil::parallel {
namespace {

using engine::DType;
using engine::TensorView;

TensorView range(TensorView flat, int64_t begin, int64_t end) {
  return engine::slice_rows(flat, begin, end);
}

}  // namespace

int64_t zero_prefix(int64_t numel, int dp) {
  const int64_t unit = static_cast<int64_t>(dp) * kZeroAlign;
  return numel / unit * unit;
}

ZeroShard zero_shard(int64_t numel, int dp, int rank) {
  ANVIL_CHECK_MSG(dp >= 1 && rank >= 0 && rank < dp && numel >= 0,
                  absl::StrCat("zero_shard: numel ", numel, ", dp ", dp, ", rank ", rank));
  const int64_t s = zero_prefix(numel, dp) / dp;
  ZeroShard z{rank * s, (rank + 1) * s};
  if (rank == dp - 1) z.end = numel;  // the tail
  return z;
}

absl::StatusOr<std::unique_ptr<Zero1Optimizer>> Zero1Optimizer::create(const ZeroBuffers& b,
                                                                       Comm* dp) {
  if (dp == nullptr) return absl::InvalidArgumentError("Zero1Optimizer: no DP communicator");
  const int64_t n = b.grad.numel();
  const ZeroShard own = zero_shard(n, dp->size(), dp->index());
  for (const TensorView* v : {&b.value, &b.master, &b.grad, &b.m, &b.v}) {
    const bool whole_only = v == &b.value || v == &b.grad;
    const bool size_ok = v->numel() == n || (!whole_only && v->numel() == own.numel());
    if (v->empty() || !size_ok || !v->is_contiguous() || v->device != dp->device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Zero1Optimizer: every flat buffer must be contiguous [", n,
          "] (master, m, v: or this rank's shard [", own.numel(), "]) on ",
          std::string(engine::device_name(dp->device())), ", got ", engine::describe(*v)));
    }
  }
  if (b.decay_end < 0 || b.decay_end > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("Zero1Optimizer: decay_end ", b.decay_end, " outside [0, ", n, "]"));
  }
  std::unique_ptr<Zero1Optimizer> z(new Zero1Optimizer());
  z->b_ = b;
  z->comm_ = dp;
  z->shard_ = zero_shard(n, dp->size(), dp->index());
  z->prefix_ = zero_prefix(n, dp->size());
  const DType dt = b.grad.dtype;
  size_t ws_bytes = 0;
  if (dp->device() == engine::Device::kCuda) {
    ws_bytes = ops::sum_squares_workspace_bytes(std::max<int64_t>(z->shard_.numel(), 1));
  }
  ANVIL_ASSIGN_OR_RETURN(
      z->scratch_,
      engine::Arena::create(dp->device(), engine::kArenaAlignment + engine::align_up(ws_bytes),
                            "zero-1 grad norm"));
  ANVIL_ASSIGN_OR_RETURN(z->norm_out_, z->scratch_.allocate(dt, {1}, "zero-1 norm"));
  if (ws_bytes > 0) {
    ANVIL_ASSIGN_OR_RETURN(z->norm_ws_,
                           z->scratch_.allocate_workspace(ws_bytes, "zero-1 norm workspace"));
  }
  return z;
}

void Zero1Optimizer::reduce_grads(engine::Stream& s) {
  const int64_t n = b_.grad.numel();
  const int dp = comm_->size();
  if (prefix_ > 0) {
    // In place: this rank's slice of the prefix receives the sum of everyone's slice.
    const int64_t per = prefix_ / dp;
    const int me = comm_->index();
    comm_->reduce_scatter(range(b_.grad, me * per, (me + 1) * per), range(b_.grad, 0, prefix_),
                          ReduceOp::kSum, s);
  }
  if (n > prefix_) comm_->all_reduce(range(b_.grad, prefix_, n), ReduceOp::kSum, s);
}

double Zero1Optimizer::grad_norm(engine::Stream& s) {
  engine::fill_zero(norm_out_, s);
  ops::sum_squares(norm_out_, range(b_.grad, shard_.begin, shard_.end), norm_ws_, s);
  comm_->all_reduce(norm_out_, ReduceOp::kSum, s);
  if (norm_out_.dtype == DType::kF64) {
    double h = 0.0;
    engine::copy(engine::make_view(&h, DType::kF64, engine::Device::kCpu, {1}), norm_out_, s);
    s.synchronize();
    return std::sqrt(h);
  }
  float h = 0.0f;
  engine::copy(engine::make_view(&h, DType::kF32, engine::Device::kCpu, {1}), norm_out_, s);
  s.synchronize();
  return std::sqrt(static_cast<double>(h));
}

void Zero1Optimizer::step(const ops::AdamWArgs& args, engine::Stream& s) {
  const bool shared = b_.master.data == b_.value.data;
  // The own shard intersected with the decay and no-decay ranges.
  auto update = [&](int64_t begin, int64_t end, float weight_decay) {
    begin = std::max(begin, shard_.begin);
    end = std::min(end, shard_.end);
    if (end <= begin) return;
    ops::AdamWArgs a = args;
    a.weight_decay = weight_decay;
    // A shard-sized buffer starts at the shard's first element.
    auto own = [&](TensorView buf) {
      const int64_t at = buf.numel() == b_.grad.numel() ? 0 : shard_.begin;
      return range(buf, begin - at, end - at);
    };
    ops::adamw_update(a, own(b_.master), own(b_.m), own(b_.v),
                      shared ? TensorView{} : range(b_.value, begin, end),
                      range(b_.grad, begin, end), s);
  };
  const int64_t n = b_.grad.numel();
  update(0, b_.decay_end, args.weight_decay);
  update(b_.decay_end, n, 0.0f);

  // Every rank gets every updated parameter back.
  const int dp = comm_->size();
  if (prefix_ > 0) {
    const int64_t per = prefix_ / dp;
    const int me = comm_->index();
    comm_->all_gather(range(b_.value, 0, prefix_), range(b_.value, me * per, (me + 1) * per), s);
  }
  if (n > prefix_) comm_->broadcast(range(b_.value, prefix_, n), dp - 1, s);
}

}  // namespace anvil::parallel
