// The training loop of bin/train on one rank (DESIGN.md §2, Megatron's train_step):
//   per step: zero grads; for each of global_batch / micro_batch micro-batches fetch samples
//   (inputs = tokens[0..T), targets = tokens[1..T], positions 0..T-1), forward, backward with
//   grad_scale = 1 / (global_batch * T) so the gradient is that of the mean token loss (with
//   [data] eod_mask_loss: targets where the input is eod are -1 and each micro-batch's loss is
//   the mean over its counted tokens, as Megatron; with reset_position_ids positions restart
//   after each eod); then the
//   global grad norm, the clip factor min(1, clip_grad / (norm + 1e-6)) folded into the
//   optimizer's grad_scale, and one AdamW step at the LrScheduler's lr (model/train/lr_schedule.h:
//   Megatron's order, the first step at lr(0)). A step whose norm is not finite is skipped
//   with a warning (the gradients are dropped; the step counter and the data position move on,
//   the lr schedule and AdamW's step count do not: Megatron's fp16 skip); after [train]
//   max_skipped_steps consecutive skipped steps run() stops (TrainSummary::status).
// Loss scaling (fp16, or a static [train] loss_scale; model/train/loss_scaler.h): grad_scale is
//   multiplied by the scale S (the backward of loss * S), the norm divided by S, AdamW's
//   grad_scale is clip / S, and after every trained step the scaler is updated with whether
//   the norm was finite (Megatron's DynamicGradScaler). Skips of a dynamic scale above its
//   floor do not count towards max_skipped_steps. The scaler's state is in TrainerState.
// Megatron's batch arithmetic (model/train/batch_schedule.h): each step trains the global batch of
// its position (rampup_batch_size) from consumed_samples on; a step in [train] skip_iterations
// only consumes its batch.
// Logging every log_interval steps (loss, lr, grad norm, tokens/s, TFLOP/s, MFU, memory, ETA;
// BERT: Megatron's "lm loss" and "sop loss" parts next to the loss, in evaluations too),
// evaluation every eval_interval steps and at the end (eval_iters global batches each, the
// validation stream continuing from evaluation to evaluation), the test split once at the end,
// a final summary.
// model/ must not read data formats: samples come from callbacks that bin/train wires to io/.
//
// Data parallelism ([parallel] dp > 1, parallel/grad_sync.h): DP rank r runs
// global_batch / (micro_batch * dp) micro-batches per step, micro-batch m holding samples
// C + (m * dp + r) * B + b (Megatron's sampler, C the samples consumed before the step) with
// dropout offset of that global micro-batch number, so the step equals the single-rank step.
// After the last backward the model sums its flat gradient buffer over DP (bucketed all-reduce,
// each layer's started during the last micro-batch's backward); with ZeRO (zero_stage 1-3,
// parallel/zero.h) it reduce-scatters bucket by bucket,
// updates its own pieces and gathers the parameters back; loss and grad norm are those of the
// global batch on every rank. Evaluation reads its global batches by the same sampler.
//
// Tensor and pipeline parallelism ([parallel] tp, pp, virtual_stages): each rank holds the
// GptShard of its grid coordinates (model/stack/gpt.h) and runs the step's micro-batches by the
// pipeline round plan (model/train/pipeline_runner.h; one stage: F B F B ...). After the last
// backward: the tied embedding's gradient is summed between the first and last stage (the
// embedding group), then over DP as above. The gradient norm counts every parameter once
// (TP replicas and the LM head's embedding copy excluded) and sums over TP and PP; the loss
// comes from the last stage. Every rank then applies the same AdamW to what it holds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/log.h"
#include "engine/stream.h"
#include "model/model.h"
#include "model/stack/gpt.h"
#include "model/train/loss_scaler.h"
#include "model/train/lr_schedule.h"
#include "model/train/train_config.h"
#include "model/train/train_metrics.h"
#include "model/train/train_model.h"
#include "parallel/pipeline_schedule.h"

namespace anvil::parallel {
class Comm;
struct GroupComms;
class ProcessGrid;
class TcpStore;
}  // namespace anvil::parallel

namespace anvil::model {

// The parallel layout a Trainer runs in; bin/train fills it from parallel::ParallelRuntime.
struct TrainerParallel {
  const parallel::ProcessGrid* grid = nullptr;  // null: a single rank
  // Every group's CPU communicator (MPI, or TCP under torchrun): the CPU path's collectives and,
  // under MPI, NCCL's bootstrap; null without a launcher.
  parallel::GroupComms* comms = nullptr;
  // torchrun: the rendezvous store, NCCL's bootstrap; null under MPI and without a launcher.
  parallel::TcpStore* store = nullptr;
  int local_rank = 0;  // CUDA device = local_rank % device count
};

// SampleFn: one sample's record (model/model.h).

// A held-out set: the name its losses are logged and reported under, and its samples.
struct HeldOutSet {
  std::string name;
  SampleFn samples;
};

// One evaluation of one held-out set.
struct EvalResult {
  int64_t step = 0;  // steps done when it ran
  std::string set;   // HeldOutSet::name
  double loss = 0.0;
  LossParts parts;  // BERT: lm loss + sop loss = loss
};

// Dense bf16 peak of one H200/H100 SXM, the MFU denominator (DESIGN.md §8).
inline constexpr double kPeakFlopsCuda = 989e12;

// Model FLOPs per trained token (forward + backward): 6 * matmul params + 12 * L * d * T.
double flops_per_token(const GptConfig& cfg, int64_t seq_len);

// ResourceExhausted when `plan` needs more than `available_bytes` of `device` memory, naming the
// planned and available bytes and the plan's largest category; OK otherwise.
absl::Status check_plan_fits(const engine::MemoryPlan& plan, engine::Device device,
                             size_t available_bytes);

// The CPU ranks of one host share its memory: ResourceExhausted when their plans together
// (`host_plan_bytes` over `host_ranks` ranks) exceed the host's `available_bytes`, naming both.
absl::Status check_host_plans_fit(size_t host_plan_bytes, int host_ranks, size_t available_bytes);

struct TrainSummary {
  // Aborted when the run stopped because [train] max_skipped_steps consecutive steps were
  // skipped (it diverged); OK otherwise.
  absl::Status status;
  int64_t steps = 0;  // steps run by run()
  int64_t skipped_steps = 0;
  double first_loss = 0.0;     // loss of the first step run
  double final_loss = 0.0;     // mean over the last log interval's applied steps
  std::vector<double> losses;  // per step
  std::vector<std::pair<int64_t, double>> val_losses;  // (step, loss) of the first valid set
  double test_loss = 0.0;         // the first test set's at the end (NaN: none evaluated)
  std::vector<EvalResult> evals;  // every evaluation of every set, validation and test
  double train_seconds = 0.0;     // excluding evaluation
  double tokens_per_second = 0.0;
};

// Where a run stands, as checkpoints keep it: steps done, AdamW updates applied (skipped
// steps excluded: the bias correction's count), micro-batches trained over all DP ranks (the
// dropout counter), the training and validation streams' positions and the lr scheduler's.
struct TrainerState {
  int64_t step = 0;
  int64_t optimizer_steps = 0;
  uint64_t micro_batches = 0;
  int64_t consumed_samples = 0;        // Megatron's consumed_train_samples
  int64_t consumed_valid_samples = 0;  // Megatron's consumed_valid_samples
  LrSchedulerState lr;
  std::optional<LossScalerState> loss_scaler;  // fp16's dynamic scaler (none without one)
  // Megatron's consumed_train_tokens (samples * the curriculum's length of each step); < 0:
  // not recorded, consumed_samples * seq_len.
  int64_t consumed_tokens = -1;
  // The lr schedule in use where it is not the config's: the checkpoint's, kept with
  // [checkpoint] use_checkpoint_lr_scheduler (model/train/checkpoint.h resume_lr_schedule).
  std::optional<LrSchedule> schedule;
};

// Called by run() after each step (after its log line and evaluation); returning true ends the
// run after that step, without the final evaluation (checkpoint saves, exit signals, limits).
using StepHook = std::function<bool(const StepStats&)>;
// Called by run() at every evaluation (before the first step, every eval_interval steps, at the
// end), after the validation loss, with the steps done (bin/train's [eval] zero-shot tasks).
// With a hook, run() evaluates even without validation data.
using EvalHook = std::function<void(int64_t step)>;

class Trainer {
 public:
  // Everything the run allocates, by category: the model's plan, cuBLASLt workspace included,
  // and on the CPU (where they share the model's memory) the step's host micro-batches
  // ("batch": tokens, targets, positions, segments); the data index is not counted.
  // The family's plan (model/train/train_model.h) at grid coordinates `at`.
  static absl::StatusOr<engine::MemoryPlan> plan(const TrainConfig& cfg, const Precision& prec,
                                                 const ModelPlace& at = {});
  // ResourceExhausted, before anything is allocated, when `plan` exceeds the free memory of the
  // CUDA device, or on the CPU the host's MemAvailable (OK when /proc/meminfo is unreadable):
  // see check_plan_fits. create() checks it unless cfg.train.check_memory is false.
  static absl::Status check_fits(const engine::MemoryPlan& plan, const Precision& prec);

  // Creates the stream (CUDA device local_rank % device count, or the CPU) and the model
  // (initialized with cfg.train.seed, identical on every rank). Train sample for (micro-batch m,
  // row b) of a step is index C + m * micro_batch + b of `train` on one rank, C the samples
  // consumed before the step (s * global_batch at a constant batch; see the file comment for
  // DP, batch_schedule.h for ramp-up and skipped ranges); evaluation reads the next eval_iters
  // global batches of `valid` (the set "val") each time (empty `valid`: no evaluation).
  // With cfg.parallel.dp > 1 (or reduce_single_rank) `par` must hold the grid, and on the CPU
  // the DP group's CPU communicator; on CUDA the trainer creates an NcclComm for the DP group.
  static absl::StatusOr<std::unique_ptr<Trainer>> create(const TrainConfig& cfg,
                                                         const Precision& prec, SampleFn train,
                                                         SampleFn valid,
                                                         engine::LogContext log = {},
                                                         const TrainerParallel& par = {});
  ~Trainer();

  // One optimizer step (no logging).
  StepStats step();
  // Mean token loss over the next eval_iters global batches of the (first) validation set's
  // stream, which every set's evaluation consumes (NaN without validation data).
  double evaluate();
  // Replaces the validation set of create() ("val") by named sets, each evaluated at every
  // evaluation from the same stream position (Megatron's per-group validation iterators), and
  // sets the test sets, evaluated once at the end of run() (eval_iters global batches from 0).
  void set_held_out_sets(std::vector<HeldOutSet> valid, std::vector<HeldOutSet> test) {
    valid_sets_ = std::move(valid);
    test_sets_ = std::move(test);
  }
  // Steps until cfg.train.steps with logging, evaluation (before the first step, every
  // eval_interval steps and at the end) and a summary line.
  TrainSummary run();

  TrainerState state() const {
    TrainerState s;
    s.step = step_;
    s.optimizer_steps = optimizer_steps_;
    s.micro_batches = micro_batches_;
    s.consumed_samples = consumed_samples_;
    s.consumed_valid_samples = consumed_valid_;
    s.lr = lr_.state();
    s.consumed_tokens = consumed_tokens_;
    if (scaler_.dynamic()) s.loss_scaler = scaler_.state();
    if (schedule_from_checkpoint_) s.schedule = lr_.schedule();
    return s;
  }
  // Continues a run from `s` (a checkpoint's; the model's state loaded separately).
  void restore(const TrainerState& s);
  void set_step_hook(StepHook hook) { step_hook_ = std::move(hook); }
  // run() writes its scalars there too (model/train/train_metrics.h); none without.
  void set_metrics_sink(MetricsSink sink) { metrics_ = std::move(sink); }
  void set_eval_hook(EvalHook hook) { eval_hook_ = std::move(hook); }

  // The family's model (model/model.h; GPT, BERT: gpt_model(), T5: t5_model()).
  Model& model() { return *model_; }
  engine::Stream& stream() { return *stream_; }
  // The pipeline group's communicator on the model's device (null with one stage).
  parallel::Comm* pipeline_comm() const { return pp_comm_; }
  int64_t steps_done() const { return step_; }

 private:
  Trainer() = default;
  // Host micro-batch m from micro_batch samples of `fn` from first_index on (the model decodes
  // the records); returns the number of targets that count (>= 0).
  int64_t fill_batch(const SampleFn& fn, int64_t first_index, int64_t m);
  // A skip_iterations step: its global batch G of samples is consumed, nothing is trained.
  StepStats consume_only(int64_t G);
  // Mean loss (BERT: and its parts) of eval_iters global batches of `fn` from *consumed on
  // (advanced); step and set left empty.
  EvalResult evaluate_stream(const SampleFn& fn, int64_t* consumed);
  // One result per validation set, all from consumed_valid_, which then advances once.
  std::vector<EvalResult> evaluate_sets();
  // BERT: the parts of `loss`, the mean over `micro_batches` (of all ranks) of the micro-batch
  // losses, from the sum over every rank of their binary losses each divided by micro_batch.
  LossParts bert_parts(double loss, double sop_sum, int64_t micro_batches);
  absl::Status setup_parallel(const TrainerParallel& par, int cuda_device);
  double model_parallel_sum(double v);  // over TP and PP
  // The global batch's sum of squared gradients, read and summed over the ranks (syncs).
  double grad_sum_squares();
  // Queues the global sum of squared gradients into step_sums_[3] (summed over the ranks on
  // the device); false where the family has no device sum or the optimizer runs on the host.
  bool queue_grad_sum_squares();
  std::string memory_string() const;
  // The loss is the mean over micro-batches of each one's mean over its counted targets
  // (eod_mask_loss, BERT's masked-LM loss as Megatron's pretrain_bert, T5), rather than the
  // mean over every token of the step.
  // A curriculum step counts seqlen of T targets: the same mean as the fork's over its
  // truncated loss mask.
  bool per_micro_batch_mean() const {
    return model_->per_micro_batch_mean() || cfg_.curriculum.enabled;
  }
  // Tokens per sample trained at step `step` (1-based): the curriculum's length, else the
  // family's tokens per sample (T5: encoder + decoder).
  int64_t step_seq_len(int64_t step) const;

  TrainConfig cfg_;
  Precision prec_;
  SampleFn train_;
  std::vector<HeldOutSet> valid_sets_, test_sets_;
  engine::LogContext log_;
  std::unique_ptr<engine::Stream> stream_;
  std::unique_ptr<Model> model_;
  std::vector<int64_t> counted_;  // targets that count, per micro-batch
  StepHook step_hook_;
  MetricsSink metrics_;
  EvalHook eval_hook_;
  int64_t step_ = 0;             // steps done
  int64_t optimizer_steps_ = 0;  // AdamW updates applied (skipped steps excluded)
  uint64_t micro_batches_ = 0;   // micro-batches trained so far over all DP ranks (dropout)
  int64_t consumed_samples_ = 0, consumed_valid_ = 0;  // the data streams' positions
  int64_t consumed_tokens_ = 0;  // Megatron's consumed_train_tokens (the lr decay's count)
  LrScheduler lr_;
  bool schedule_from_checkpoint_ = false;  // lr_ runs a checkpoint's schedule, not the config's
  LossScaler scaler_;                      // loss scaling of fp16 (or a static [train] loss_scale)
  int64_t plan_micro_batches_ = 0;         // the micro-batches per rank plan_ was made for
  int64_t eval_global_batch_ = 0;          // the global batch evaluations use: the last step's
  int dp_size_ = 1, dp_rank_ = 0, tp_size_ = 1, pp_size_ = 1, pp_rank_ = 0;
  parallel::PipelinePlan plan_;
  // Groups (null where the size is 1, or without MPI); NcclComms on CUDA are owned here.
  // Destroyed before the stream and the model, whose buffers they use.
  parallel::Comm *tp_comm_ = nullptr, *pp_comm_ = nullptr, *embedding_comm_ = nullptr;
  parallel::Comm* dp_comm_ = nullptr;
  std::vector<std::unique_ptr<parallel::Comm>> owned_comms_;
  engine::Arena scalar_arena_;  // [1] f64 on the device for host-scalar reductions
  engine::TensorView scalar_;
  // The step's device scalars (no host read while a step runs):
  engine::Arena step_arena_;
  engine::TensorView step_sums_;   // [4] f64 {loss sum, masked loss, sop sum, grad sum squares}
  engine::TensorView step_scale_;  // [3] f32 ops::step_scale's {grad scale, skip, norm}
  // The model reduces its gradients over dp_comm_ itself (GptShard::dp_comm, parallel/
  // grad_sync.h); with ZeRO its gradient norm covers its own pieces only (summed over DP).
  bool zero_ = false;
};

}  // namespace anvil::model
