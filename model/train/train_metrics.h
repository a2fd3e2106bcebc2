// The scalars of a training run for a metrics file (bin/train's TensorBoard events), under the
// names Megatron-DeepSpeed (BigScience fork, megatron/training.py training_log and
// evaluate_and_print_results) gives them, so anvil's and Megatron's runs overlay in one
// TensorBoard. Each value goes against the step and, as Megatron, under "<tag> vs samples" and
// "<tag> vs tokens" against the consumed samples (step * global_batch) and tokens (* seq_len):
//   every [log] tensorboard_log_interval steps: lm-loss-training/lm loss (the step's loss),
//     learning-rate/learning-rate, grad-norm/grad-norm, loss-scale/loss-scale (after the step's
//     scaler update, as Megatron; 1 without loss scaling), batch-size/batch-size (no vs tokens),
//     steps-vs-samples/... and steps-vs-tokens/... (steps against samples or tokens and back);
//   every [train] log_interval steps (the interval's means, as the text log): iteration-time/
//     iteration-time (seconds per step), iteration-time/samples per second, tokens per second
//     (each also per replica: / dp), iteration-time/TFLOPs per gpu (estimated) (the text log's
//     TFLOP/s/GPU, step only), and Megatron-LM's mem-allocated-bytes (the memory plan's arenas)
//     and, on CUDA, mem-reserved-bytes (the GPU's used memory);
//   after every evaluation: lm-loss-validation/lm loss validation and ... validation ppl
//     (exp(min(20, loss)), Megatron's cap).
// BERT, as Megatron's pretrain_bert.py names its loss_dict: "lm loss" is the masked-LM part
// only and "sop loss" (with the binary head) the binary head's, in lm-loss-training/ and (with
// " validation" and its ppl) in lm-loss-validation/; the optimized total, their sum, which
// Megatron does not log, goes under "total loss" there.
// Not written: Megatron's "vs gigaflos (without embeddings)" axes, timers, params-norm and
// num-zeros (not computed by anvil).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>

namespace anvil::model {

// Where scalars go: scalar(tag, value, x) with x a step, sample or token count as the tag says;
// flush() after each log interval's and each evaluation's scalars (a crash loses at most one
// interval).
struct MetricsSink {
  std::function<void(std::string_view tag, double value, int64_t x)> scalar;
  std::function<void()> flush;
  explicit operator bool() const { return static_cast<bool>(scalar); }
};

// The x axes after `step` steps of global_batch samples of seq_len tokens.
struct MetricsAxes {
  int64_t step = 0, samples = 0, tokens = 0;
};
MetricsAxes metrics_axes(int64_t step, int64_t global_batch, int64_t seq_len);

// BERT's parts of a loss, as Megatron's pretrain_bert.py logs them: lm = the masked-LM loss
// ("lm loss"), sop = the binary head's ("sop loss"; NaN without a binary head); the loss is
// lm + sop. Both NaN for other models.
struct LossParts {
  double lm = std::numeric_limits<double>::quiet_NaN();
  double sop = std::numeric_limits<double>::quiet_NaN();
  bool present() const { return !std::isnan(lm); }
};

// One training step as the trainer reports it (its log line, the metrics, the step hook).
struct StepStats {
  int64_t step = 0;             // 1-based number of this step
  double loss = 0.0;            // mean token loss over the step's global batch
  double lr = 0.0;              // learning rate used (or that would have been used when skipped)
  double grad_norm = 0.0;       // global L2 norm before clipping
  bool skipped = false;         // non-finite grad norm: no optimizer update
  double loss_scale = 1.0;      // after this step's scaler update (as Megatron logs it); 1: none
  bool scale_overflow = false;  // skipped by a dynamic loss scale above its floor (backs off)
  bool data_only = false;       // a [train] skip_iterations step: data consumed, nothing trained
  int64_t global_batch = 0;     // samples of this step (rampup_batch_size)
  LossParts parts;              // BERT: loss = lm loss + sop loss
  int64_t seq_len = 0;          // tokens per sample trained ([curriculum]: the step's length)
};

// One log interval, as the text log line reports it.
struct IntervalMetrics {
  double seconds_per_step = 0.0;
  double samples_per_second = 0.0, tokens_per_second = 0.0;  // over all DP replicas
  int dp = 1;
  double tflops_per_gpu = 0.0;
  double allocated_bytes = 0.0;
  double reserved_bytes = -1.0;  // < 0: not known (CPU), not written
};

void write_step_metrics(const MetricsSink& sink, const StepStats& st, int64_t global_batch,
                        const MetricsAxes& at);
void write_interval_metrics(const MetricsSink& sink, const IntervalMetrics& m,
                            const MetricsAxes& at);
// One validation set's evaluation under Megatron-DeepSpeed's per-group prefix
// "lm-loss-validation/<group>/" (the fork names an unnamed set "valid").
void write_validation_metrics(const MetricsSink& sink, const std::string& group, double loss,
                              const MetricsAxes& at, const LossParts& parts = {});

}  // namespace anvil::model
