// bin/train's loop for [model] type = t5 (Megatron's pretrain_t5.py): per step,
// for each of global_batch / micro_batch micro-batches, forward and backward of T5Model
// (model/t5/t5.h) with grad_scale = 1 / (accumulation steps * counted tokens of the micro-batch),
// so the step's loss is Megatron's: the mean over micro-batches of each one's mean over its
// loss-mask tokens; then the global grad norm, the clip factor min(1, clip_grad / (norm +
// 1e-6)) folded into AdamW's grad_scale, one AdamW step at the LrScheduler's lr (no decay on
// norms and relative tables). A step whose norm is not finite is skipped with a warning.
// Logging every log_interval steps (loss, lr, grad norm, tokens/s counting encoder + decoder
// tokens), evaluation before the first step, every eval_interval steps and at the end
// (eval_iters global batches of the validation stream, continuing), a final summary line.
// Tensor parallelism ([parallel] tp: T5Shard, model/t5/t5.h), pipeline parallelism ([parallel] pp,
// pp_split_rank: the encoder on stages [0, split), the decoder on [split, pp), run by the
// pipeline runner's 1F1B plan through T5PipelineStage, model/train/t5_stage.h; the copies of shared
// parameters summed over the stages after the last backward; the loss from the last stage) and
// data parallelism ([parallel] dp: Megatron's sampler, micro-batch m of DP rank r holding samples
// C + (m * dp + r) * B + b, dropout numbered by that global micro-batch, the flat gradient summed
// over DP by the model's gradient sync (parallel/grad_sync.h: bucketed all-reduces, each
// block's started during the last micro-batch's backward), the loss summed over DP); evaluation
// runs the whole global batch on every pipeline (run_pipeline_forward).
// ZeRO ([parallel] zero_stage 1-3, dp > 1; T5Shard): each stage's optimizer state sharded over
// its DP group (1), also its gradients (2: each block's reduce-scattered after its backward),
// also its parameters (3: each block gathered before use); the norm sums the pieces over DP.
// Checkpoints: state() / restore() are the GPT Trainer's TrainerState (step, AdamW updates,
// micro-batches = the dropout counter, consumed samples, the lr scheduler), the model's tensors
// go through model/train/t5_checkpoint.h (each stage its own parameters, a shared parameter's
// copies written by the first stage holding one); a step hook (as the GPT Trainer's) lets bin/train
// save and stop after any step.
// Not yet: batch ramp-up, skip_iterations (train_config rejects them for t5).
//
// Sample record of T5 (what a SampleFn writes for one sample, int32):
//   enc_tokens[Te] | dec_tokens[Td] | labels[Td] | enc_length[1]
// labels < 0 are not counted (io/t5_dataset's loss_mask folded in: -1 where it is 0);
// encoder tokens t >= enc_length are padding (io/t5_dataset pads at the end).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/log.h"
#include "engine/stream.h"
#include "model/t5/t5.h"
#include "model/train/lr_schedule.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"
#include "parallel/pipeline_schedule.h"

namespace anvil::parallel {
class ProcessGrid;
}

namespace anvil::model {

// int32 entries of one T5 record.
inline int64_t t5_record_width(int64_t enc_len, int64_t dec_len) {
  return enc_len + 2 * dec_len + 1;
}

class T5Trainer {
 public:
  // The model's memory plan (cfg.t5, micro_batch x seq_len / decoder_seq_len).
  static absl::StatusOr<engine::MemoryPlan> plan(const TrainConfig& cfg, const GptPrecision& prec,
                                                 const T5Shard& shard = {});
  // This rank's part of the model on the launcher's grid (null: the whole model): its TP slice,
  // pipeline stage, the activation slots of the step's 1F1B plan and its ZeRO rank (dp_comm is
  // create()'s).
  static absl::StatusOr<T5Shard> stage_shard(const TrainConfig& cfg,
                                             const parallel::ProcessGrid* grid);
  // Creates the stream (CUDA device local_rank % device count), the TP / DP communicators
  // (parallel/group_comm.h; par as the GPT Trainer's) and the model (seeded with cfg.train.seed).
  // Evaluation reads the next eval_iters global batches of `valid` (null: no evaluation).
  static absl::StatusOr<std::unique_ptr<T5Trainer>> create(const TrainConfig& cfg,
                                                           const GptPrecision& prec, SampleFn train,
                                                           SampleFn valid,
                                                           engine::LogContext log = {},
                                                           const TrainerParallel& par = {});

  ~T5Trainer();  // (out of line: the owned communicators' type is incomplete here)

  StepStats step();
  // Mean token loss over the next eval_iters global batches of `valid` (NaN without).
  double evaluate();
  // Steps until cfg.train.steps with logging and evaluation, then a summary line.
  TrainSummary run();

  TrainerState state() const {
    TrainerState s;
    s.step = step_;
    s.optimizer_steps = optimizer_steps_;
    s.micro_batches = micro_batches_;
    s.consumed_samples = step_ * cfg_.train.global_batch;
    s.consumed_valid_samples = consumed_valid_;
    s.lr = lr_.state();
    return s;
  }
  // Continues a run from `s` (a checkpoint's; the model's state loaded separately).
  void restore(const TrainerState& s);
  int64_t steps_done() const { return step_; }
  // Called by run() after each step (after its log line and evaluation); true ends the run
  // there, without the final evaluation.
  void set_step_hook(StepHook hook) { step_hook_ = std::move(hook); }

  T5Model& model() { return *model_; }
  engine::Stream& stream() { return *stream_; }

 private:
  T5Trainer() = default;
  // Micro-batch m's host arrays from `fn`'s samples first, first + 1, ...; returns the
  // counted labels. A record with ids outside the vocabulary or a bad length is a fatal CHECK
  // naming the sample.
  int64_t fill_batch(const SampleFn& fn, int64_t first, int64_t m);
  T5Batch host_batch(int64_t m) const;

  // Sum over DP / over the pipeline (no-op without).
  double dp_sum(double v);
  double pp_sum(double v);

  TrainConfig cfg_;
  GptPrecision prec_;
  int dp_ = 1, dp_rank_ = 0, pp_ = 1, pp_rank_ = 0;
  parallel::PipelinePlan plan_;  // this stage's 1F1B rounds over a step's micro-batches
  int64_t slots_ = 1;            // activation slots the plan needs
  // The communicators (null where the size is 1); NcclComms on CUDA are owned here, destroyed
  // before the stream and the model.
  parallel::Comm *tp_comm_ = nullptr, *dp_comm_ = nullptr, *pp_comm_ = nullptr;
  std::vector<std::unique_ptr<parallel::Comm>> owned_comms_;
  engine::Arena scalar_arena_;  // CUDA: [1] f64 for the host-scalar reductions
  engine::TensorView scalar_;
  SampleFn train_, valid_;
  engine::LogContext log_;
  std::unique_ptr<engine::Stream> stream_;
  std::unique_ptr<T5Model> model_;
  LrScheduler lr_;
  // Host micro-batches of one step: [accum * B * Te], [accum * B * Td] x 2, [accum * B].
  std::vector<int32_t> enc_, dec_, labels_, lengths_, record_;
  std::vector<int64_t> counted_;
  int64_t step_ = 0, optimizer_steps_ = 0, consumed_valid_ = 0;
  uint64_t micro_batches_ = 0;  // dropout numbering
  StepHook step_hook_;
};

}  // namespace anvil::model
