// ZeRO over bucketed flat parameter buffers (DESIGN.md §5; Megatron's distributed optimizer and
// DeepSpeed's stages 1-3). The flat buffers of n elements are a sequence of buckets (one per
// layer, plus the embeddings and the final LayerNorm), each a multiple of dp * kZeroAlign
// elements long. Every bucket is split evenly over the DP group: rank r owns elements
//   [b.begin + r * L/dp, b.begin + (r+1) * L/dp)   of bucket b (L = b.end - b.begin),
// and keeps them contiguously in its shard buffers ([n/dp] each) at offset b.begin / dp. Per
// bucket, then, one reduce-scatter sums a bucket's gradients onto the owners and one
// all-gather hands the owners' parameters to everyone, both as single NCCL calls of equal parts.
// The stages differ in what stays whole on every rank (the model holds the buffers):
//   1: parameters and gradients whole, f32 master / m / v sharded (12/dp bytes per parameter);
//   2: + gradients reduce-scattered bucket by bucket during the backward, accumulated in the
//      shard (4/dp bytes per parameter instead of 4);
//   3: + parameters sharded too, gathered bucket by bucket before use and released after.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "ops/adamw.h"
#include "parallel/comm.h"

namespace anvil::parallel {

inline constexpr int64_t kZeroAlign = 64;  // elements: shard boundaries stay 256-byte aligned

// A flat range [begin, end) whose [begin, decay_end) takes weight decay.
struct ZeroBucket {
  int64_t begin = 0, decay_end = 0, end = 0;
  int64_t numel() const { return end - begin; }
};

// This rank's part of one bucket: flat [begin, end), of which [begin, decay_end) decays, stored
// at shard_offset in the shard buffers.
struct ZeroPiece {
  int64_t begin = 0, decay_end = 0, end = 0, shard_offset = 0;
  int64_t numel() const { return end - begin; }
};

class ZeroPartition {
 public:
  // InvalidArgument unless the buckets tile [0, n) in order and each length is a multiple of
  // dp * kZeroAlign, and 0 <= rank < dp.
  static absl::StatusOr<ZeroPartition> create(std::vector<ZeroBucket> buckets, int dp, int rank);

  int dp() const { return dp_; }
  int rank() const { return rank_; }
  int64_t numel() const { return numel_; }
  int64_t shard_numel() const { return numel_ / dp_; }
  const std::vector<ZeroBucket>& buckets() const { return buckets_; }
  ZeroPiece piece(size_t bucket) const;

 private:
  std::vector<ZeroBucket> buckets_;
  int dp_ = 1, rank_ = 0;
  int64_t numel_ = 0;
};

// Elements rounded up to a multiple of dp * kZeroAlign (the bucket padding).
int64_t zero_bucket_align(int64_t numel, int dp);

// shard[piece] (=) sum over the DP group of grad [bucket numel] (the whole bucket's local
// gradient); shard: the partition's [n/dp] shard buffer. One reduce-scatter.
void zero_reduce_scatter(Comm& dp, const ZeroPartition& part, size_t bucket, TensorView shard,
                         ConstTensorView grad, engine::Stream& s);

// full [bucket numel] (=) every rank's piece of the bucket; own: this rank's piece
// [piece numel], copied into its slot of full first unless it is that slot. One all-gather.
void zero_all_gather(Comm& dp, const ZeroPartition& part, size_t bucket, TensorView full,
                     ConstTensorView own, engine::Stream& s);

// This rank's piece of `bucket` in `buf`: a whole [n] buffer (flat positions) or a shard
// [n/dp] buffer (shard offsets).
TensorView zero_piece_view(const ZeroPartition& part, size_t bucket, TensorView buf);

// AdamW on this rank's pieces of every bucket (decay ranges with args.weight_decay, the rest
// without). Each buffer is whole [n] or a shard [n/dp] (see zero_piece_view): master, m, v and
// grad f32; value the compute copy (act dtype), or empty when master is the compute copy.
void zero_adamw(const ZeroPartition& part, const ops::AdamWArgs& args, TensorView master,
                TensorView m, TensorView v, TensorView value, TensorView grad, engine::Stream& s);

}  // namespace anvil::parallel
