// The interface every model family implements for the shared trainer (model/train/trainer.h):
// one rank's part of the model as a pipeline stage (model/pipeline_stage.h: forward and backward
// of one micro-batch per activation slot, the tensors it sends and receives), plus
//   - its parameter table and the bytes its arenas hold;
//   - its inputs: the fixed-width int32 sample records of the family (model/train/
//     sample_record.h), decoded into the host micro-batch m that forward(.., m, ..) reads;
//   - the loss it reports: the token mean of the step, or the mean over micro-batches of each
//     one's mean over its counted targets, and its parts (BERT: lm + sop);
//   - the step's hooks in the trainer's order: zero_grads, the pipeline's forward/backward,
//     finish_backward, sum_shared_grads (copies of a parameter held by several stages),
//     reduce_gradients (over DP), grad_sum_squares (the norm), optimizer_step;
//   - its checkpoint tensors (names and boxes, model/train/checkpoint.h's format).
// Memory plans and creation are per family (static, before a model exists): the trainer asks
// the family's entry of the model-family registry (model/train/family.h, through
// model/train/train_model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/host_slice.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "model/param_table.h"
#include "model/pipeline_stage.h"
#include "ops/adamw.h"

namespace anvil::model {

// Writes the record of sample `index` into out[0, record width) (the family's fixed-width int32
// record, model/train/sample_record.h; GPT: seq_len + 1 token ids < vocab_size).
using SampleFn = std::function<void(int64_t index, int32_t* out)>;

// A whole logical tensor by name (offset 0, extent = shape), e.g. read from a checkpoint;
// NotFound when the checkpoint lacks it.
using TensorLookup = std::function<absl::StatusOr<engine::HostSlice>(const std::string& name)>;

// One AdamW step's arguments (the trainer's lr schedule, clipping and loss scale folded into
// grad_scale; step counts the applied updates, for the bias correction).
struct OptimizerStep {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  int64_t step;
  // Empty, or ops::step_scale's [3] f32 on the model's device: replaces grad_scale, and its skip
  // flag skips the update (ops/adamw.h).
  engine::ConstTensorView device_scale = {};
};

// The AdamW op's arguments of one step.
inline ops::AdamWArgs adamw_args(const OptimizerStep& s) {
  ops::AdamWArgs a;
  a.lr = s.lr;
  a.beta1 = s.beta1;
  a.beta2 = s.beta2;
  a.eps = s.eps;
  a.weight_decay = s.weight_decay;
  a.step = s.step;
  a.grad_scale = s.grad_scale;
  a.device_scale = s.device_scale;
  return a;
}

// A model's flat buffers [params().flat_numel()] each: compute copy (act dtype), f32 master
// (the same memory as value when act == grad dtype), f32 gradients, AdamW moments. Under ZeRO
// some are this rank's shard [flat_numel / zero_dp] instead (master, m, v from stage 1, value
// from stage 3) or absent (grad from stage 2). Data parallelism all-reduces `grad` in place;
// ZeRO updates and gathers shards of them.
struct FlatBuffers {
  engine::TensorView value, master, grad, m, v;
};

class Model : public PipelineStage {
 public:
  // Parameters this rank holds (names, shapes, TP split; model/param_table.h).
  virtual ParamTable& params() = 0;
  // Bytes held by the model's arenas.
  virtual size_t arena_bytes() const = 0;

  // Reads micro_batch samples first_index, first_index + 1, ... of `samples` into host
  // micro-batch m (valid until the step ends); returns the targets that count (>= 0). A record
  // that does not fit the model (ids outside the vocabulary, bad lengths) is a fatal CHECK
  // naming the sample.
  virtual int64_t load_micro_batch(const SampleFn& samples, int64_t first_index, int64_t m) = 0;
  // [curriculum]: load_micro_batch keeps the targets of the first n tokens of each sample and
  // leaves the rest out of the loss (the fork truncates them away); 0: every token counts. A
  // family without a curriculum refuses n > 0 (the config check refuses it before).
  virtual void set_counted_tokens(int64_t n) = 0;
  // The step's loss is the mean over micro-batches of each one's mean over its counted targets
  // (true), or the mean over every token of the step (false).
  virtual bool per_micro_batch_mean() const = 0;
  // With per_micro_batch_mean: what the loss sum of host micro-batch m, of `counted` targets
  // (load_micro_batch's return), is divided by; by default `counted` (prefix-LM: the fork's
  // normalizers, model/train/train_config.h PrefixLmNormalizer).
  virtual double loss_normalizer(int64_t /*m*/, int64_t counted) const {
    return static_cast<double>(counted);
  }
  // Tokens of one sample (throughput) and model FLOPs per such token (forward + backward).
  virtual int64_t tokens_per_sample() const = 0;
  virtual double flops_per_token() const = 0;
  // Loss parts (BERT: lm loss + sop loss = loss): whether the family reports them, whether the
  // binary (sop) part exists, and the sum over the samples of the slot's last forward of the
  // binary loss (a part of loss_sum; 0 where the stage does not end the model). Syncs.
  virtual bool reports_loss_parts() const { return false; }
  virtual bool has_binary_part() const { return false; }
  virtual double binary_loss_sum(int64_t /*slot*/, engine::Stream& /*s*/) { return 0.0; }

  virtual void zero_grads(engine::Stream& s) = 0;
  // Plain DP: while on, gradient reductions start during the backward (the trainer sets it for
  // a step's last micro-batch); a family ignores it where it cannot overlap.
  virtual void set_overlap_grad_sync(bool on) = 0;
  // After a step's last backward (sequence parallelism's norm gradients summed over TP).
  virtual void finish_backward(engine::Stream& s) = 0;
  // Each parameter several pipeline stages hold gets the sum of its copies' gradients (GPT:
  // the tied embedding over the embedding group; T5: the shared embedding and relative
  // tables over the pipeline). No-op with one stage.
  virtual void sum_shared_grads(engine::Stream& s) = 0;
  // Over DP, what the backward has not reduced yet (all-reduce, or ZeRO's reduce-scatter).
  virtual void reduce_gradients(engine::Stream& s) = 0;
  // Sum of squared gradients this rank holds, counting each parameter once; summed over TP
  // already when grad_squares_over_tp(); under ZeRO (zero_sharded) the own pieces only, which
  // the trainer sums over DP. The trainer sums over the pipeline. Syncs.
  virtual double grad_sum_squares(engine::Stream& s) = 0;
  // The same sum left on the device ([1] f32/f64, valid once the stream passes it; no sync), or
  // an empty view where a family offers only the host value.
  virtual engine::ConstTensorView grad_sum_squares_device(engine::Stream& /*s*/) { return {}; }
  virtual bool grad_squares_over_tp() const = 0;
  virtual bool zero_sharded() const = 0;
  virtual void optimizer_step(const OptimizerStep& o, engine::Stream& s) = 0;

  // Zero-shot evaluation (model/tasks/seq2seq_eval.h): the [rows, padded vocabulary] logits of
  // slot 0's last forward with train = false, on the stage that ends the model (the greedy
  // predictions); an empty view where the family does not expose them.
  virtual engine::ConstTensorView last_logits() const { return {}; }

  // Checkpoints: the boxes of master weights and AdamW moments this rank writes, and the load
  // of them (weights_only: without the moments). Syncs.
  virtual std::vector<engine::HostSlice> checkpoint_slices(int dp_rank, engine::Stream& s) = 0;
  virtual absl::Status load_checkpoint(const TensorLookup& lookup, bool weights_only,
                                       engine::Stream& s) = 0;
};

}  // namespace anvil::model
