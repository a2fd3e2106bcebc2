// The single-rank training loop (see trainer.h): gradient accumulation over micro-batches,
// global-norm clipping folded into AdamW, Megatron's lr schedule, logging and evaluation.
#include "model/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/checked_math.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/pass_support.h"
#include "model/train/batch_schedule.h"
#include "model/train/pipeline_runner.h"
#include "model/train/sample_record.h"
#include "ops/loss_sums.h"
#include "ops/step_scale.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "parallel/nccl_comm.h"
#include "parallel/scalar_reduce.h"
#include "parallel/zero.h"

namespace anvil::model {
namespace {

// "12.3k", "4.56M": compact rates and counts for log lines.
std::string si(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fG", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

// " | lm loss 6.1234 | sop loss 0.6931" for BERT's parts (model/train/train_metrics.h), else "".
std::string parts_string(const LossParts& p) {
  if (!p.present()) return "";
  std::string out = absl::StrFormat(" | lm loss %.4f", p.lm);
  if (!std::isnan(p.sop)) absl::StrAppend(&out, absl::StrFormat(" | sop loss %.4f", p.sop));
  return out;
}

}  // namespace

double flops_per_token(const GptConfig& cfg, int64_t seq_len) {
  const double n = static_cast<double>(cfg.matmul_params());
  const double l = static_cast<double>(cfg.n_layers), d = static_cast<double>(cfg.d_model);
  return 6.0 * n + 12.0 * l * d * static_cast<double>(seq_len);
}

absl::StatusOr<engine::MemoryPlan> Trainer::plan(const TrainConfig& cfg, const Precision& prec,
                                                 const ModelPlace& at) {
  return train_model_plan(cfg, prec, at);
}

absl::Status check_plan_fits(const engine::MemoryPlan& plan, engine::Device device,
                             size_t available_bytes) {
  if (plan.total_bytes() <= available_bytes) return absl::OkStatus();
  std::string largest;
  size_t largest_bytes = 0;
  for (const std::string& c : plan.categories()) {
    if (plan.category_bytes(c) > largest_bytes) {
      largest_bytes = plan.category_bytes(c);
      largest = c;
    }
  }
  // The saved attention dropout masks (activations named "*.keep") can be given back.
  size_t keep_bytes = 0;
  for (const engine::MemoryPlan::Entry& e : plan.entries()) {
    if (absl::EndsWith(e.name, ".keep")) keep_bytes += e.bytes;
  }
  const std::string keep_hint = keep_bytes == 0
                                    ? ""
                                    : absl::StrFormat(
                                          ", set [train] attention_dropout_mask = regenerate (the "
                                          "saved dropout masks take %s)",
                                          engine::format_bytes(static_cast<double>(keep_bytes)));
  const bool cuda = device == engine::Device::kCuda;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the memory plan needs %s (%d bytes) on the %s but only %s (%d bytes) are available (%s; "
      "largest: %s %s); lower [train] micro_batch or [data] seq_len, use a smaller model or more "
      "ranks%s, or set [train] check_memory = false to allocate anyway",
      engine::format_bytes(static_cast<double>(plan.total_bytes())), plan.total_bytes(),
      cuda ? "GPU" : "host", engine::format_bytes(static_cast<double>(available_bytes)),
      available_bytes, cuda ? "free GPU memory" : "MemAvailable of /proc/meminfo", largest,
      engine::format_bytes(static_cast<double>(largest_bytes)), keep_hint));
}

absl::Status check_host_plans_fit(size_t host_plan_bytes, int host_ranks, size_t available_bytes) {
  if (host_plan_bytes <= available_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the memory plans of the %d ranks on this host need %s (%d bytes) together but only %s (%d "
      "bytes) are available (MemAvailable of /proc/meminfo); use fewer ranks per host or a "
      "smaller model or batch, or set [train] check_memory = false to allocate anyway",
      host_ranks, engine::format_bytes(static_cast<double>(host_plan_bytes)), host_plan_bytes,
      engine::format_bytes(static_cast<double>(available_bytes)), available_bytes));
}

absl::Status Trainer::check_fits(const engine::MemoryPlan& plan, const Precision& prec) {
  if (prec.device == engine::Device::kCuda) {
    size_t free_bytes = 0, total_bytes = 0;
    engine::cuda_memory_info(&free_bytes, &total_bytes);
    return check_plan_fits(plan, prec.device, free_bytes);
  }
  const std::optional<size_t> available = engine::host_memory_available();
  if (!available) return absl::OkStatus();  // no /proc/meminfo: nothing to compare with
  return check_plan_fits(plan, prec.device, *available);
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& cfg,
                                                         const Precision& prec, SampleFn train,
                                                         SampleFn valid, engine::LogContext log,
                                                         const TrainerParallel& par) {
  if (!train) return absl::InvalidArgumentError("Trainer::create: no training samples");
  const parallel::ParallelConfig& pc = cfg.parallel;
  const parallel::ProcessGrid* g = par.grid;
  const int tp = g ? g->tp_size() : 1, pp = g ? g->pp_size() : 1, dp = g ? g->dp_size() : 1;
  if (pc.tp != tp || pc.pp != pp || pc.dp != dp) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Trainer: [parallel] tp %d, pp %d, dp %d differ from the process grid's tp %d, pp %d, "
        "dp %d",
        pc.tp, pc.pp, pc.dp, tp, pp, dp));
  }
  if (absl::Status s =
          parallel::check_batch_split(cfg.train.global_batch, cfg.train.micro_batch, dp);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Trainer: [train] global_batch ", s.message()));
  }
  // Every batch of a ramp-up must split into whole micro-batches on each DP rank, and into a
  // multiple of pp of them for the interleaved schedule.
  const BatchRampup& ramp = cfg.train.rampup;
  const int64_t unit = cfg.train.micro_batch * dp * (pc.virtual_stages > 1 ? pp : 1);
  if (ramp.enabled() && (ramp.start % unit != 0 || ramp.increment % unit != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Trainer: [train] rampup_batch_size start %d and increment %d must be multiples of "
        "micro_batch %d * dp %d%s",
        ramp.start, ramp.increment, cfg.train.micro_batch, dp,
        pc.virtual_stages > 1 ? absl::StrFormat(" * pp %d (interleaved schedule)", pp) : ""));
  }
  ModelPlace at;
  at.tp_rank = g ? g->tp_rank() : 0;
  at.pp_rank = g ? g->pp_rank() : 0;
  at.dp_rank = g ? g->dp_rank() : 0;
  ANVIL_ASSIGN_OR_RETURN(engine::MemoryPlan plan, Trainer::plan(cfg, prec, at));
  if (cfg.train.check_memory) ANVIL_RETURN_IF_ERROR(check_fits(plan, prec));

  std::unique_ptr<Trainer> t(new Trainer());
  t->cfg_ = cfg;
  t->prec_ = prec;
  t->train_ = std::move(train);
  if (valid) t->valid_sets_.push_back({"val", std::move(valid)});
  t->log_ = log;
  t->lr_ = LrScheduler(cfg.optim.schedule, cfg.train.global_batch);
  t->scaler_ = LossScaler(loss_scaler_config(cfg.train.precision, prec.act));
  if (cfg.train.precision.loss_scale > 0.0 && !t->scaler_.enabled()) {
    engine::log_warning(log, absl::StrFormat("[train] loss_scale %g is ignored with %s activations "
                                             "(as Megatron's FP32Optimizer: no loss scaling)",
                                             cfg.train.precision.loss_scale,
                                             std::string(engine::dtype_name(prec.act))));
  }
  t->plan_micro_batches_ = cfg.train.accumulation_steps(dp);
  t->eval_global_batch_ = global_batch_at(cfg.train.rampup, cfg.train.global_batch, 0);
  t->dp_size_ = dp;
  t->dp_rank_ = g ? g->dp_rank() : 0;
  t->tp_size_ = tp;
  t->pp_size_ = pp;
  t->pp_rank_ = g ? g->pp_rank() : 0;
  ANVIL_ASSIGN_OR_RETURN(
      t->plan_, parallel::plan_pipeline(pp, t->pp_rank_, pc.virtual_stages,
                                        static_cast<int>(cfg.train.accumulation_steps(dp))));
  const int cuda_device =
      prec.device == engine::Device::kCuda ? par.local_rank % engine::cuda_device_count() : 0;
  if (prec.device == engine::Device::kCuda) {
    ANVIL_ASSIGN_OR_RETURN(engine::Stream s, engine::Stream::cuda(cuda_device));
    t->stream_ = std::make_unique<engine::Stream>(std::move(s));
    // The model attaches its cuBLASLt workspace (planned under "workspace") to the stream.
  } else {
    t->stream_ = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  ANVIL_RETURN_IF_ERROR(t->setup_parallel(par, cuda_device));
  at.tp = t->tp_comm_;
  at.pp = t->pp_comm_;
  at.dp = t->dp_comm_;
  at.embedding = t->embedding_comm_;
  ANVIL_ASSIGN_OR_RETURN(t->model_, create_train_model(cfg, prec, at));
  t->zero_ = t->model_->zero_sharded();
  ANVIL_ASSIGN_OR_RETURN(t->step_arena_, engine::Arena::create(prec.device, 512, "step scalars"));
  ANVIL_ASSIGN_OR_RETURN(t->step_sums_,
                         t->step_arena_.allocate(engine::DType::kF64, {4}, "step sums"));
  ANVIL_ASSIGN_OR_RETURN(t->step_scale_,
                         t->step_arena_.allocate(engine::DType::kF32, {3}, "step scale"));
  t->counted_.assign(static_cast<size_t>(std::max<int64_t>(cfg.train.accumulation_steps(dp), 1)),
                     0);
  return t;
}

Trainer::~Trainer() {
  // Collectives in flight use the model's buffers: finish them before anything is freed.
  if (stream_) stream_->synchronize();
}

void Trainer::restore(const TrainerState& s) {
  step_ = s.step;
  optimizer_steps_ = s.optimizer_steps;
  micro_batches_ = s.micro_batches;
  consumed_samples_ = s.consumed_samples;
  consumed_valid_ = s.consumed_valid_samples;
  consumed_tokens_ =
      s.consumed_tokens >= 0 ? s.consumed_tokens : s.consumed_samples * cfg_.data.seq_len;
  if (s.schedule) {
    lr_ = LrScheduler(*s.schedule, cfg_.train.global_batch);
    schedule_from_checkpoint_ = true;
  }
  lr_.restore(s.lr);
  // As Megatron: a dynamic scaler continues from the checkpoint's state; a checkpoint without
  // one (saved by a bf16/fp32 run) starts it afresh, and a static scale ignores it.
  if (s.loss_scaler && scaler_.dynamic()) scaler_.restore(*s.loss_scaler);
  eval_global_batch_ =
      global_batch_at(cfg_.train.rampup, cfg_.train.global_batch, consumed_samples_);
}

int64_t Trainer::fill_batch(const SampleFn& fn, int64_t first_index, int64_t m) {
  const int64_t counted = model_->load_micro_batch(fn, first_index, m);
  counted_[static_cast<size_t>(m)] = counted;
  return counted;
}

StepStats Trainer::consume_only(int64_t G) {
  StepStats st;
  st.step = ++step_;
  st.data_only = true;
  st.global_batch = G;
  st.loss = st.grad_norm = std::numeric_limits<double>::quiet_NaN();
  st.lr = lr_.lr();
  st.loss_scale = scaler_.scale();
  st.seq_len = step_seq_len(st.step);
  consumed_tokens_ += G * st.seq_len;
  if (!in_step_ranges(cfg_.train.skip_ranges, st.step - 1)) {
    engine::log_info(log_, absl::StrFormat("step %d: [train] skip_iterations: consuming the data "
                                           "of the range's steps without training",
                                           st.step));
  }
  consumed_samples_ += G;
  return st;
}

StepStats Trainer::step() {
  const int64_t B = cfg_.train.micro_batch, T = cfg_.data.seq_len;
  // The global batch of this position (rampup_batch_size), Megatron's update_num_microbatches.
  const int64_t G = global_batch_at(cfg_.train.rampup, cfg_.train.global_batch, consumed_samples_);
  if (in_step_ranges(cfg_.train.skip_ranges, step_ + 1)) return consume_only(G);
  eval_global_batch_ = G;
  engine::Stream& s = *stream_;
  // Every token of the global batch is counted, so d(mean loss)/d(token loss) = 1 / (G * T);
  // times the loss scale S: the backward of loss * S, whose gradients are divided by S below.
  const double loss_scale = scaler_.scale();
  const float grad_scale = static_cast<float>(loss_scale / (static_cast<double>(G) * T));

  model_->zero_grads(s);
  const int dp = dp_size_;
  const int64_t accum = G / (B * dp);      // on this rank
  const int64_t total_micro = accum * dp;  // over all DP ranks
  if (accum != plan_micro_batches_) {      // the ramp-up changed the micro-batches of a step
    absl::StatusOr<parallel::PipelinePlan> p = parallel::plan_pipeline(
        pp_size_, pp_rank_, cfg_.parallel.virtual_stages, static_cast<int>(accum));
    ANVIL_CHECK_MSG(p.ok(), std::string(p.status().message()));
    plan_ = std::move(*p);
    plan_micro_batches_ = accum;
  }
  // Megatron's sampler: this rank's rows of the m-th chunk of micro_batch * dp samples.
  const int64_t seq_len = step_seq_len(step_ + 1);
  model_->set_counted_tokens(seq_len < T ? seq_len : 0);
  for (int64_t m = 0; m < accum; ++m) {
    fill_batch(train_, sampler_index(consumed_samples_, B, dp, dp_rank_, m), m);
  }
  model_->set_counted_tokens(0);
  // With eod_mask_loss, Megatron's loss is the mean over each micro-batch's unmasked tokens
  // (Model::loss_normalizer: prefix-LM's own), averaged over the micro-batches (of all DP ranks).
  auto masked_scale = [&](int64_t m) {
    const int64_t counted = counted_[static_cast<size_t>(m)];
    return counted > 0
               ? 1.0 / (static_cast<double>(total_micro) * model_->loss_normalizer(m, counted))
               : 0.0;
  };
  PipelineStepFns fns;
  fns.grad_scale = [&](int64_t m) {
    return per_micro_batch_mean() ? static_cast<float>(masked_scale(m) * loss_scale) : grad_scale;
  };
  // The dropout offset numbers the micro-batch as the single-rank run would.
  fns.dropout_offset = [&](int64_t m) {
    return micro_batches_ + static_cast<uint64_t>(m * dp + dp_rank_);
  };
  // DP overlap: during each chunk's last micro-batch backward, every finished layer bucket's
  // all-reduce starts at once on the communication stream.
  // (Not with sequence parallelism: its layernorm gradients are summed over TP after the
  // backward, before the DP reduction may read them.)
  // (A family that cannot overlap, e.g. GPT under ZeRO, ignores it.)
  if (dp_comm_ != nullptr && !cfg_.parallel.sequence_parallel) {
    fns.before_backward = [&](int64_t m) { model_->set_overlap_grad_sync(m == accum - 1); };
  }
  // The step's sums stay on the device until its end (ops/loss_sums.h): step_sums_ =
  // {loss sum, masked loss sum, BERT's sop sum, gradient sum of squares}.
  engine::fill_zero(step_sums_, s);
  const engine::TensorView loss_sums = engine::slice_rows(step_sums_, 0, 3);
  fns.add_loss = [&](int64_t m, const LossViews& v) {
    ops::LossSumArgs a;
    a.y_weight = v.binary_weight;
    a.scales = {1.0, masked_scale(m), 0.0, 0.0};
    ops::add_loss_sums(a, loss_sums, v.token, v.binary, s);
    // BERT: the micro-batches' binary losses, each a mean over its samples, for the loss's
    // parts (a micro-batch without masked tokens is left out of the loss, masked_scale).
    if (model_->reports_loss_parts() && !v.binary.empty() && counted_[static_cast<size_t>(m)] > 0) {
      ops::LossSumArgs p;
      p.scales = {0.0, 0.0, 1.0 / static_cast<double>(B), 0.0};
      ops::add_loss_sums(p, loss_sums, v.binary, {}, s);
    }
  };
  run_pipeline_step(*model_, plan_, pp_size_, pp_rank_, pp_comm_, fns, s);
  model_->set_overlap_grad_sync(false);
  model_->finish_backward(s);
  micro_batches_ += static_cast<uint64_t>(total_micro);
  // A parameter several stages hold (GPT's tied embedding on the first and last stage) gets
  // the sum of its copies' gradients (equal to the single-stage gradient of the one matrix).
  model_->sum_shared_grads(s);
  // One gradient reduction per step, after the last backward, of what the backward has not
  // reduced yet (plain DP: all-reduces; ZeRO: reduce-scatters).
  model_->reduce_gradients(s);
  // The loss lives on the last stage: sum over PP (zeros elsewhere), then over DP.
  if (pp_comm_ != nullptr) pp_comm_->all_reduce(loss_sums, parallel::ReduceOp::kSum, s);
  if (dp_comm_ != nullptr) dp_comm_->all_reduce(loss_sums, parallel::ReduceOp::kSum, s);

  // Clipping and the overflow check: the device computes the AdamW scale from the global sum
  // of squares (ops/step_scale.h), AdamW reads it, and the step reads its results once, at its
  // end. (The optimizer offload, and a family without a device sum, read the norm first.)
  const ops::StepScaleArgs scale_args{loss_scale, cfg_.optim.clip_grad};
  const double lr_now = lr_.lr();
  OptimizerStep o;
  o.lr = static_cast<float>(lr_now);
  o.beta1 = static_cast<float>(cfg_.optim.beta1);
  o.beta2 = static_cast<float>(cfg_.optim.beta2);
  o.eps = static_cast<float>(cfg_.optim.eps);
  o.weight_decay = static_cast<float>(cfg_.optim.weight_decay);
  o.step = optimizer_steps_ + 1;
  const bool device_scale = queue_grad_sum_squares();
  if (device_scale) {
    ops::step_scale(scale_args, step_scale_, engine::slice_rows(step_sums_, 3, 4), s);
    o.grad_scale = 1.0f;  // replaced by the device's
    o.device_scale = step_scale_;
    model_->optimizer_step(o, s);  // skipped on the device when the norm is not finite
  }
  const std::vector<double> sums = read_back(step_sums_, s);  // the step's one wait
  const double loss_sum = sums[0], masked_loss = sums[1], sop_sum = sums[2];
  StepStats st;
  st.step = ++step_;
  st.global_batch = G;
  st.seq_len = seq_len;
  st.loss = per_micro_batch_mean() ? masked_loss : loss_sum / (static_cast<double>(G) * T);
  if (model_->reports_loss_parts()) st.parts = bert_parts(st.loss, sop_sum, total_micro);
  // After the reduction: the norm of the global batch's gradient, equal on every rank, and so
  // is whether it is finite: the overflow check over all ranks (Megatron all-reduces found_inf
  // over the model-parallel group; here the norm is reduced over every group). Megatron
  // unscales the gradients before both; dividing the norm is the same to rounding. The device
  // path computes the same formula from the same sum (ops::step_scale_of).
  const ops::StepScale scale =
      ops::step_scale_of(scale_args, device_scale ? sums[3] : grad_sum_squares());
  st.grad_norm = scale.norm;
  const bool found_inf = scale.skip;
  // A dynamic scaler above its floor is expected to overflow now and then: it backs off.
  st.scale_overflow = found_inf && !scaler_.at_floor();
  scaler_.update(found_inf);
  st.loss_scale = scaler_.scale();
  st.lr = lr_now;
  // Megatron's consumed_train_tokens before this step: what its scheduler sees below (with a
  // curriculum, samples * the length of each step).
  const int64_t tokens_before = consumed_tokens_;
  consumed_samples_ += G;
  consumed_tokens_ += G * seq_len;
  if (found_inf) {
    st.skipped = true;
    std::string what = absl::StrFormat("step %d: grad norm is %s, skipping the update", st.step,
                                       std::isnan(st.grad_norm) ? "nan" : "inf");
    if (scaler_.enabled()) {
      absl::StrAppend(&what,
                      absl::StrFormat(" (loss scale %.1f -> %.1f)", loss_scale, st.loss_scale));
    }
    engine::log_warning(log_, what);
    return st;
  }
  if (!device_scale) {
    // Megatron's clip_grad_norm (max_norm / (norm + 1e-6) when below 1) and the unscaling, in
    // one factor.
    o.grad_scale = scale.grad_scale;
    model_->optimizer_step(o, s);
  }
  ++optimizer_steps_;
  lr_.step(G, tokens_before);  // after the applied update, as Megatron's train_step
  return st;
}

bool Trainer::queue_grad_sum_squares() {
  // The offloaded optimizer runs on the host and takes its scale from there.
  if (cfg_.parallel.offload_optimizer) return false;
  engine::Stream& s = *stream_;
  const engine::ConstTensorView local = model_->grad_sum_squares_device(s);
  if (local.empty()) return false;
  // As grad_sum_squares(): ZeRO's own pieces over DP, then TP (unless the family summed it)
  // and PP, in f64 as the host sums.
  const engine::TensorView ss = engine::slice_rows(step_sums_, 3, 4);
  ops::LossSumArgs copy;
  copy.scales = {1.0};
  ops::add_loss_sums(copy, ss, local, {}, s);
  if (zero_) dp_comm_->all_reduce(ss, parallel::ReduceOp::kSum, s);
  if (tp_comm_ && !model_->grad_squares_over_tp()) {
    tp_comm_->all_reduce(ss, parallel::ReduceOp::kSum, s);
  }
  if (pp_comm_) pp_comm_->all_reduce(ss, parallel::ReduceOp::kSum, s);
  return true;
}

int64_t Trainer::step_seq_len(int64_t step) const {
  return cfg_.curriculum.enabled ? curriculum_seqlen(cfg_.curriculum, step, cfg_.data.seq_len)
                                 : model_->tokens_per_sample();
}

LossParts Trainer::bert_parts(double loss, double sop_sum, int64_t micro_batches) {
  LossParts parts;
  if (!model_->has_binary_part()) {
    parts.lm = loss;
    return parts;
  }
  // Megatron's loss = lm_loss + sop_loss per micro-batch, so the means split the same way.
  parts.sop = sop_sum / static_cast<double>(micro_batches);
  parts.lm = loss - parts.sop;
  return parts;
}

double Trainer::evaluate() {
  const std::vector<EvalResult> v = evaluate_sets();
  return v.empty() ? std::nan("") : v.front().loss;
}

std::vector<EvalResult> Trainer::evaluate_sets() {
  std::vector<EvalResult> out;
  int64_t after = consumed_valid_;
  for (const HeldOutSet& set : valid_sets_) {
    after = consumed_valid_;
    out.push_back(evaluate_stream(set.samples, &after));
  }
  consumed_valid_ = after;
  return out;
}

EvalResult Trainer::evaluate_stream(const SampleFn& fn, int64_t* consumed) {
  const int64_t B = cfg_.train.micro_batch, T = cfg_.data.seq_len;
  const int64_t iters = cfg_.train.eval_iters;
  EvalResult r;
  r.loss = std::nan("");
  if (!fn || iters == 0) return r;
  // Megatron's evaluate(): eval_iters iterations of the current global batch (set for the last
  // step), each of micro-batches of the sampler (this DP rank's rows of every chunk of
  // micro_batch * dp).
  const int64_t G = eval_global_batch_;
  const int64_t micro = G / (B * dp_size_);
  double sum = 0.0, masked = 0.0, sop_sum = 0.0;
  for (int64_t i = 0; i < iters; ++i) {
    for (int64_t m = 0; m < micro; ++m) {
      const int64_t counted = fill_batch(fn, sampler_index(*consumed, B, dp_size_, dp_rank_, m), 0);
      const double l = run_pipeline_forward(*model_, pp_size_, pp_rank_, pp_comm_, *stream_);
      sum += l;
      if (counted > 0) masked += l / model_->loss_normalizer(0, counted);
      if (counted > 0 && model_->reports_loss_parts()) {
        sop_sum += model_->binary_loss_sum(0, *stream_) / static_cast<double>(B);
      }
    }
    *consumed += G;
  }
  if (pp_comm_ != nullptr) {
    sum = parallel::all_reduce_scalar(*pp_comm_, sum, parallel::ReduceOp::kSum, scalar_, *stream_);
    masked =
        parallel::all_reduce_scalar(*pp_comm_, masked, parallel::ReduceOp::kSum, scalar_, *stream_);
  }
  if (dp_comm_ != nullptr) {
    sum = parallel::all_reduce_scalar(*dp_comm_, sum, parallel::ReduceOp::kSum, scalar_, *stream_);
    masked =
        parallel::all_reduce_scalar(*dp_comm_, masked, parallel::ReduceOp::kSum, scalar_, *stream_);
  }
  // The mean over the micro-batches (of all DP ranks) of each one's mean token loss.
  const int64_t micro_batches = iters * micro * dp_size_;
  if (!per_micro_batch_mean()) {
    r.loss = sum / (static_cast<double>(iters) * static_cast<double>(G) * T);
    return r;
  }
  r.loss = masked / static_cast<double>(micro_batches);
  if (model_->reports_loss_parts() && model_->has_binary_part()) {
    if (pp_comm_ != nullptr) {
      sop_sum = parallel::all_reduce_scalar(*pp_comm_, sop_sum, parallel::ReduceOp::kSum, scalar_,
                                            *stream_);
    }
    if (dp_comm_ != nullptr) {
      sop_sum = parallel::all_reduce_scalar(*dp_comm_, sop_sum, parallel::ReduceOp::kSum, scalar_,
                                            *stream_);
    }
  }
  if (model_->reports_loss_parts()) r.parts = bert_parts(r.loss, sop_sum, micro_batches);
  return r;
}

std::string Trainer::memory_string() const {
  std::string out = engine::format_bytes(static_cast<double>(model_->arena_bytes()));
  if (prec_.device == engine::Device::kCuda) {
    size_t free_bytes = 0, total_bytes = 0;
    engine::cuda_memory_info(&free_bytes, &total_bytes);
    absl::StrAppend(&out, " (GPU used ",
                    engine::format_bytes(static_cast<double>(total_bytes - free_bytes)), " of ",
                    engine::format_bytes(static_cast<double>(total_bytes)), ")");
  }
  return out;
}

TrainSummary Trainer::run() {
  const LoopConfig& L = cfg_.train;
  const double fpt = model_->flops_per_token();
  const bool cuda = prec_.device == engine::Device::kCuda;
  const int width = static_cast<int>(std::to_string(L.steps).size());
  const bool validation = !valid_sets_.empty() && L.eval_iters > 0;
  const bool eval_enabled = validation || eval_hook_;

  TrainSummary sum;
  engine::Timer wall, interval;
  // interval_train_s: training seconds of the current log interval before an evaluation.
  double interval_loss = 0.0, interval_train_s = 0.0;
  LossParts interval_parts{0.0, 0.0};  // BERT: sums over the interval's applied steps
  int64_t interval_steps = 0, interval_loss_steps = 0, interval_skipped = 0;
  int64_t interval_samples = 0, run_samples = 0;  // trained (data-only steps excluded)
  int64_t interval_tokens = 0, run_tokens = 0;    // their tokens ([curriculum]: truncated)
  // Mean loss of the interval's applied steps (NaN when every one was skipped).
  auto mean_loss = [&] {
    return interval_loss_steps > 0 ? interval_loss / static_cast<double>(interval_loss_steps)
                                   : std::numeric_limits<double>::quiet_NaN();
  };
  const double gpus = static_cast<double>(dp_size_ * tp_size_ * pp_size_);
  auto axes = [&](int64_t step) {
    MetricsAxes a = metrics_axes(step, L.global_batch, cfg_.data.seq_len);
    if (cfg_.curriculum.enabled) a.tokens = consumed_tokens_;  // the fork's consumed_train_tokens
    return a;
  };
  int64_t consecutive_skipped = 0;

  auto run_eval = [&] {
    if (validation) {
      engine::Timer t;
      std::vector<EvalResult> v = evaluate_sets();
      sum.val_losses.emplace_back(step_, v.front().loss);
      std::string line = absl::StrFormat("step %*d/%d", width, step_, L.steps);
      for (size_t i = 0; i < v.size(); ++i) {
        v[i].step = step_;
        v[i].set = valid_sets_[i].name;
        sum.evals.push_back(v[i]);
        absl::StrAppend(
            &line,
            absl::StrFormat(" | %s loss %.4f (ppl %.2f)", v[i].set, v[i].loss, std::exp(v[i].loss)),
            parts_string(v[i].parts));
      }
      engine::log_info(log_, absl::StrCat(line, " | ", engine::format_duration(t.seconds())));
      for (size_t i = 0; metrics_ && i < v.size(); ++i) {
        // The fork names the validation set of the [data] split "valid" (anvil's log: "val").
        const std::string& name = valid_sets_[i].name;
        write_validation_metrics(metrics_, name == "val" ? "valid" : name, v[i].loss, axes(step_),
                                 v[i].parts);
      }
    }
    if (eval_hook_) eval_hook_(step_);
  };

  // A first evaluation before any update shows where the loss starts (about ln(vocab)). Megatron
  // has none: it reads the first periodic evaluation's samples without consuming them.
  if (eval_enabled && step_ == 0) {
    const int64_t at = consumed_valid_;
    run_eval();
    consumed_valid_ = at;
  }
  bool stopped = false;  // by the step hook or max_skipped_steps
  while (step_ < L.steps) {
    const StepStats st = step();
    sum.steps++;
    sum.losses.push_back(st.loss);
    if (!st.data_only) {
      if (run_samples == 0) sum.first_loss = st.loss;
      interval_samples += st.global_batch;
      run_samples += st.global_batch;
      interval_tokens += st.global_batch * st.seq_len;
      run_tokens += st.global_batch * st.seq_len;
    }
    if (st.skipped) {
      sum.skipped_steps++;
      interval_skipped++;
    }
    // Overflows of a dynamic loss scale above its floor are its business, not divergence.
    if (!st.data_only && !st.scale_overflow) {
      consecutive_skipped = st.skipped ? consecutive_skipped + 1 : 0;
    }
    const bool diverged = L.max_skipped_steps > 0 && consecutive_skipped >= L.max_skipped_steps;
    if (diverged) {
      sum.status = absl::AbortedError(absl::StrFormat(
          "the run diverged: %d consecutive steps up to step %d were skipped (the gradient norm is "
          "not finite, the loss is %g) ([train] max_skipped_steps = %d); lower [optim] lr or "
          "raise [optim] warmup_steps, or resume from an earlier checkpoint",
          consecutive_skipped, st.step, st.loss, L.max_skipped_steps));
    }
    // As Megatron: the logged loss averages the steps whose update was applied.
    if (!st.skipped && !st.data_only) {
      interval_loss += st.loss;
      interval_parts.lm += st.parts.lm;
      interval_parts.sop += st.parts.sop;
      interval_loss_steps++;
    }
    interval_steps++;
    if (metrics_ && st.step % cfg_.log.tensorboard_log_interval == 0) {
      write_step_metrics(metrics_, st, L.global_batch, axes(st.step));
      if (cfg_.curriculum.enabled) {
        metrics_.scalar("curriculum_seqlen", static_cast<double>(st.seq_len), st.step);
      }
    }

    if (st.step % L.log_interval == 0 || st.step == L.steps) {
      stream_->synchronize();  // the last optimizer step must be inside the timed interval
      const double secs = interval_train_s + interval.seconds();
      sum.train_seconds += secs;
      const double tok_s = static_cast<double>(interval_tokens) / secs;
      const double tflops = tok_s * fpt / 1e12 / gpus;  // per GPU, as Megatron logs it
      const double per_step = sum.train_seconds / static_cast<double>(sum.steps);
      sum.final_loss = mean_loss();
      // BERT: the interval's means of the loss's parts right after it.
      const double n = static_cast<double>(interval_loss_steps);
      std::string line = absl::StrFormat(
          "step %*d/%d | loss %.4f%s | lr %.3e | grad norm %.3f | %s tok/s | %.3g TFLOP/s/GPU | "
          "MFU %s | mem %s | %s elapsed, ETA %s",
          width, st.step, L.steps, sum.final_loss,
          parts_string({interval_parts.lm / n, interval_parts.sop / n}), st.lr, st.grad_norm,
          si(tok_s), tflops,
          cuda ? absl::StrFormat("%.1f%%", 100.0 * tflops * 1e12 / kPeakFlopsCuda)
               : std::string("-"),
          memory_string(), engine::format_duration(wall.seconds()),
          engine::format_duration(per_step * static_cast<double>(L.steps - st.step)));
      if (scaler_.enabled())
        absl::StrAppend(&line, absl::StrFormat(" | loss scale %.1f", st.loss_scale));
      if (interval_skipped > 0) absl::StrAppend(&line, " | skipped ", interval_skipped);
      if (st.data_only) absl::StrAppend(&line, " | data only ([train] skip_iterations)");
      if (cfg_.curriculum.enabled) absl::StrAppend(&line, " | curriculum seqlen ", st.seq_len);
      engine::log_info(log_, line);
      if (metrics_) {
        IntervalMetrics im;
        im.seconds_per_step = secs / static_cast<double>(interval_steps);
        im.samples_per_second = static_cast<double>(interval_steps * L.global_batch) / secs;
        im.tokens_per_second = tok_s;
        im.dp = dp_size_;
        im.tflops_per_gpu = tflops;
        im.allocated_bytes = static_cast<double>(model_->arena_bytes());
        if (cuda) {
          size_t free_bytes = 0, total_bytes = 0;
          engine::cuda_memory_info(&free_bytes, &total_bytes);
          im.reserved_bytes = static_cast<double>(total_bytes - free_bytes);
        }
        write_interval_metrics(metrics_, im, axes(st.step));
      }
      interval_loss = 0.0;
      interval_parts = {0.0, 0.0};
      interval_steps = interval_loss_steps = interval_skipped = interval_samples = 0;
      interval_tokens = 0;
      interval_train_s = 0.0;
      interval.restart();
    }
    // Megatron evaluates at every multiple of eval_interval, the last step included, and again
    // after the loop: each on the next samples of the validation stream.
    if (!diverged && eval_enabled && L.eval_interval > 0 && st.step % L.eval_interval == 0) {
      // Evaluation time is not training time: keep it out of the tokens/s of the interval.
      interval_train_s += interval.seconds();
      run_eval();
      interval.restart();
    }
    if (diverged || (step_hook_ && step_hook_(st))) {
      stopped = true;
      if (interval_steps > 0) {  // the steps since the last log line count in the summary
        sum.train_seconds += interval_train_s + interval.seconds();
        sum.final_loss = mean_loss();
      }
      break;
    }
  }
  sum.test_loss = std::numeric_limits<double>::quiet_NaN();
  if (eval_enabled && !stopped) run_eval();
  for (size_t i = 0; i < test_sets_.size() && L.eval_iters > 0 && !stopped; ++i) {
    engine::Timer t;
    int64_t consumed = 0;  // Megatron's test iterators start at sample 0
    const HeldOutSet& set = test_sets_[i];
    EvalResult r = evaluate_stream(set.samples, &consumed);
    r.step = step_;
    r.set = set.name;
    if (i == 0) sum.test_loss = r.loss;
    sum.evals.push_back(r);
    engine::log_info(
        log_, absl::StrFormat("step %*d/%d | %s loss %.4f (ppl %.2f)%s | %s", width, step_, L.steps,
                              set.name, r.loss, std::exp(r.loss), parts_string(r.parts),
                              engine::format_duration(t.seconds())));
  }

  sum.tokens_per_second =
      sum.train_seconds > 0 ? static_cast<double>(run_tokens) / sum.train_seconds : 0.0;
  std::string line = absl::StrFormat(
      "done: %d steps (%d skipped), %s tokens in %s (%s tok/s, %.3g TFLOP/s/GPU) | train loss %.4f "
      "-> "
      "%.4f",
      sum.steps, sum.skipped_steps, si(static_cast<double>(run_tokens)),
      engine::format_duration(wall.seconds()), si(sum.tokens_per_second),
      sum.tokens_per_second * fpt / 1e12 / gpus, sum.first_loss, sum.final_loss);
  if (!sum.val_losses.empty()) {
    const double first = sum.val_losses.front().second, last = sum.val_losses.back().second;
    if (sum.val_losses.size() > 1) {
      absl::StrAppend(&line, absl::StrFormat(" | val loss %.4f (step %d) -> %.4f (ppl %.2f)", first,
                                             sum.val_losses.front().first, last, std::exp(last)));
    } else {
      absl::StrAppend(&line, absl::StrFormat(" | val loss %.4f (ppl %.2f)", last, std::exp(last)));
    }
  }
  absl::StrAppend(&line, " | mem ", memory_string());
  engine::log_info(log_, line);
  return sum;
}

}  // namespace anvil::model
