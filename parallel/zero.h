// ZeRO stage 1 (Megatron's distributed optimizer) over flat parameter buffers: the AdamW update
// and its state are split over the DP group, each rank owning one contiguous shard of the flat
// buffers, which ignores parameter boundaries.
//
// Shards: the prefix P = floor(n / (dp * 64)) * dp * 64 of the n flat elements splits evenly,
// S = P / dp elements per rank (a multiple of 64: 256-byte aligned); the tail [P, n), shorter
// than dp * 64, belongs to the last rank. One step:
//   reduce_grads:  grad[own shard] = sum over DP (reduce-scatter of the prefix in place,
//                  all-reduce of the tail); the rest of this rank's grad buffer is left as its
//                  local partial sum and is not read again.
//   grad_norm:     sqrt(sum over DP of sum_squares(grad[own shard])): the norm of the reduced
//                  gradient, equal on every rank.
//   step:          AdamW on the own shard (the decay range [0, decay_end) with the weight decay,
//                  the rest without), then the updated compute copy is all-gathered (prefix,
//                  in place) and the tail broadcast from the last rank, so every rank holds all
//                  parameters again.
// With a separate f32 master (CUDA: bf16 compute copy) the master is valid only on the own
// shard afterwards: nothing but the owner's update reads it. When master and compute copy are
// the same memory (CPU f32) both are complete.
// Memory: m, v and a separate f32 master may be whole [n] buffers (only the own shard is used) or
// hold just the own shard [shard.numel()] (the model plans them so under ZeRO-1: 12 bytes per
// parameter become 12 / dp).
// Bucketing: the reduce-scatter is one call over the prefix (a contiguous shard per rank cannot
// be cut into per-bucket reduce-scatters of contiguous buffers).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "ops/adamw.h"
#include "parallel/comm.h"

namespace anvil::parallel {

struct ZeroShard {
  int64_t begin = 0, end = 0;
  int64_t numel() const { return end - begin; }
};

inline constexpr int64_t kZeroAlign = 64;  // elements: shard boundaries stay 256-byte aligned

// Rank `rank`'s shard of [0, numel) over `dp` ranks (see the file comment).
ZeroShard zero_shard(int64_t numel, int dp, int rank);
// The evenly split prefix P.
int64_t zero_prefix(int64_t numel, int dp);

struct ZeroBuffers {
  engine::TensorView value;   // [n] compute copy (act dtype)
  engine::TensorView master;  // [n] or [own shard] f32 (or the same memory as value)
  engine::TensorView grad;    // [n] f32
  engine::TensorView m, v;    // [n] or [own shard] f32 AdamW moments
  int64_t decay_end = 0;      // [0, decay_end) gets weight decay
};

class Zero1Optimizer {
 public:
  // dp: the DP group's Comm (not owned). The buffers live on dp->device().
  static absl::StatusOr<std::unique_ptr<Zero1Optimizer>> create(const ZeroBuffers& buffers,
                                                                Comm* dp);

  const ZeroShard& shard() const { return shard_; }
  void reduce_grads(engine::Stream& s);
  double grad_norm(engine::Stream& s);  // syncs
  // args.weight_decay applies to the decay range; args.step, lr, grad_scale as in AdamW.
  void step(const ops::AdamWArgs& args, engine::Stream& s);

 private:
  Zero1Optimizer() = default;
  ZeroBuffers b_;
  Comm* comm_ = nullptr;
  ZeroShard shard_;
  int64_t prefix_ = 0;
  engine::Arena scratch_;        // norm output and sum_squares workspace
  engine::TensorView norm_out_;  // [1] grad dtype
  engine::Workspace norm_ws_;
};

}  // namespace anvil::parallel
