// Megatron-DeepSpeed's TensorBoard scalar names for a run's metrics (model/train/train_metrics.h).
#include "model/train/train_metrics.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace anvil::model {
namespace {

// Megatron's pattern: `tag` against the step, then against samples and (with_tokens) tokens.
void by_step_samples_tokens(const MetricsSink& sink, std::string_view tag, double v,
                            const MetricsAxes& at, bool with_tokens = true) {
  sink.scalar(tag, v, at.step);
  sink.scalar(std::string(tag) + " vs samples", v, at.samples);
  if (with_tokens) sink.scalar(std::string(tag) + " vs tokens", v, at.tokens);
}

}  // namespace

MetricsAxes metrics_axes(int64_t step, int64_t global_batch, int64_t seq_len) {
  return MetricsAxes{step, step * global_batch, step * global_batch * seq_len};
}

void write_step_metrics(const MetricsSink& sink, const StepStats& st, int64_t global_batch,
                        const MetricsAxes& at) {
  const double step = static_cast<double>(at.step);
  sink.scalar("steps-vs-samples/y=steps,x=samples", step, at.samples);
  sink.scalar("steps-vs-samples/y=samples,x=steps", static_cast<double>(at.samples), at.step);
  sink.scalar("steps-vs-tokens/y=steps,x=tokens", step, at.tokens);
  sink.scalar("steps-vs-tokens/y=tokens,x=steps", static_cast<double>(at.tokens), at.step);
  by_step_samples_tokens(sink, "learning-rate/learning-rate", st.lr, at);
  by_step_samples_tokens(sink, "batch-size/batch-size", static_cast<double>(global_batch), at,
                         /*with_tokens=*/false);
  if (st.parts.present()) {  // BERT: Megatron's loss_dict keys, then the total
    by_step_samples_tokens(sink, "lm-loss-training/lm loss", st.parts.lm, at);
    if (!std::isnan(st.parts.sop)) {
      by_step_samples_tokens(sink, "lm-loss-training/sop loss", st.parts.sop, at);
    }
    by_step_samples_tokens(sink, "lm-loss-training/total loss", st.loss, at);
  } else {
    by_step_samples_tokens(sink, "lm-loss-training/lm loss", st.loss, at);
  }
  by_step_samples_tokens(sink, "loss-scale/loss-scale", st.loss_scale, at);
  by_step_samples_tokens(sink, "grad-norm/grad-norm", st.grad_norm, at);
}

void write_interval_metrics(const MetricsSink& sink, const IntervalMetrics& m,
                            const MetricsAxes& at) {
  const double dp = static_cast<double>(m.dp);
  by_step_samples_tokens(sink, "iteration-time/iteration-time", m.seconds_per_step, at);
  sink.scalar("iteration-time/samples per second", m.samples_per_second, at.step);
  sink.scalar("iteration-time/samples per second per replica", m.samples_per_second / dp, at.step);
  sink.scalar("iteration-time/tokens per second", m.tokens_per_second, at.step);
  sink.scalar("iteration-time/tokens per second per replica", m.tokens_per_second / dp, at.step);
  sink.scalar("iteration-time/TFLOPs per gpu (estimated)", m.tflops_per_gpu, at.step);
  sink.scalar("mem-allocated-bytes", m.allocated_bytes, at.step);
  if (m.reserved_bytes >= 0.0) sink.scalar("mem-reserved-bytes", m.reserved_bytes, at.step);
  if (sink.flush) sink.flush();
}

void write_validation_metrics(const MetricsSink& sink, const std::string& group, double loss,
                              const MetricsAxes& at, const LossParts& parts) {
  // Megatron-DeepSpeed's evaluate_and_print_results: "<key> validation" and its ppl for each
  // key, under tf_plot_prefix = lm-loss-validation/<data_group_name>. (The fork writes the ppl
  // only with --log-validation-ppl-to-tensorboard; anvil always does.)
  const std::string prefix = "lm-loss-validation/" + group + "/";
  auto key = [&](const std::string& name, double v) {
    by_step_samples_tokens(sink, prefix + name + " validation", v, at);
    by_step_samples_tokens(sink, prefix + name + " validation ppl", std::exp(std::min(20.0, v)),
                           at);
  };
  if (parts.present()) {
    key("lm loss", parts.lm);
    if (!std::isnan(parts.sop)) key("sop loss", parts.sop);
    key("total loss", loss);
  } else {
    key("lm loss", loss);
  }
  if (sink.flush) sink.flush();
}

}  // namespace anvil::model
