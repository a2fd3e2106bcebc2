// ZeRO bucket partition, per-bucket reduce-scatter / all-gather and the sharded AdamW (see
// zero.h).
#include "parallel/zero.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"

namespace anvil::parallel {
namespace {

TensorView range(TensorView flat, int64_t begin, int64_t end) {
  return engine::slice_rows(flat, begin, end);
}

}  // namespace

int64_t zero_bucket_align(int64_t numel, int dp) {
  const int64_t unit = static_cast<int64_t>(dp) * kZeroAlign;
  return (numel + unit - 1) / unit * unit;
}

absl::StatusOr<ZeroPartition> ZeroPartition::create(std::vector<ZeroBucket> buckets, int dp,
                                                    int rank) {
  if (dp < 1 || rank < 0 || rank >= dp) {
    return absl::InvalidArgumentError(absl::StrCat("ZeRO: rank ", rank, " outside dp ", dp));
  }
  int64_t next = 0;
  for (const ZeroBucket& b : buckets) {
    if (b.begin != next || b.decay_end < b.begin || b.decay_end > b.end ||
        b.numel() % (dp * kZeroAlign) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ZeRO: bucket [", b.begin, ", ", b.end, ") (decay to ", b.decay_end, ") must start at ",
          next, " and hold a multiple of dp * ", kZeroAlign, " = ", dp * kZeroAlign, " elements"));
    }
    next = b.end;
  }
  ZeroPartition p;
  p.buckets_ = std::move(buckets);
  p.dp_ = dp;
  p.rank_ = rank;
  p.numel_ = next;
  return p;
}

ZeroPiece ZeroPartition::piece(size_t bucket) const {
  const ZeroBucket& b = buckets_.at(bucket);
  const int64_t len = b.numel() / dp_;
  ZeroPiece p;
  p.begin = b.begin + rank_ * len;
  p.end = p.begin + len;
  p.decay_end = std::min(std::max(b.decay_end, p.begin), p.end);
  p.shard_offset = b.begin / dp_;
  return p;
}

void zero_reduce_scatter(Comm& dp, const ZeroPartition& part, size_t bucket, TensorView shard,
                         ConstTensorView grad, engine::Stream& s) {
  const ZeroPiece p = part.piece(bucket);
  dp.reduce_scatter(range(shard, p.shard_offset, p.shard_offset + p.numel()), grad, ReduceOp::kSum,
                    s);
}

void zero_all_gather(Comm& dp, const ZeroPartition& part, size_t bucket, TensorView full,
                     ConstTensorView own, engine::Stream& s) {
  const ZeroPiece p = part.piece(bucket);
  const int64_t at = p.begin - part.buckets()[bucket].begin;
  TensorView mine = range(full, at, at + p.numel());
  // NCCL's in-place convention: send from this rank's slot of the destination.
  if (mine.data != own.data) engine::copy(mine, own, s);
  dp.all_gather(full, mine, s);
}

TensorView zero_piece_view(const ZeroPartition& part, size_t bucket, TensorView buf) {
  const ZeroPiece p = part.piece(bucket);
  const bool whole = buf.numel() == part.numel();
  ANVIL_CHECK_MSG(whole || buf.numel() == part.shard_numel(),
                  absl::StrCat("ZeRO: buffer of ", buf.numel(), " elements is neither whole (",
                               part.numel(), ") nor a shard (", part.shard_numel(), ")"));
  const int64_t lo = whole ? p.begin : p.shard_offset;
  return range(buf, lo, lo + p.numel());
}

void zero_adamw(const ZeroPartition& part, const ops::AdamWArgs& args, TensorView master,
                TensorView m, TensorView v, TensorView value, TensorView grad, engine::Stream& s) {
  for (size_t i = 0; i < part.buckets().size(); ++i) {
    const ZeroPiece p = part.piece(i);
    // [begin, decay_end) with weight decay, [decay_end, end) without.
    auto update = [&](int64_t begin, int64_t end, float weight_decay) {
      if (end <= begin) return;
      auto sub = [&](TensorView buf) {
        return range(zero_piece_view(part, i, buf), begin - p.begin, end - p.begin);
      };
      ops::AdamWArgs a = args;
      a.weight_decay = weight_decay;
      ops::adamw_update(a, sub(master), sub(m), sub(v), value.empty() ? TensorView{} : sub(value),
                        sub(grad), s);
    };
    update(p.begin, p.decay_end, args.weight_decay);
    update(p.decay_end, p.end, 0.0f);
  }
}

}  // namespace anvil::parallel
