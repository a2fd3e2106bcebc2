// The T5 training loop on one rank (see t5_train.h).
#include "model/train/t5_train.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/device.h"
#include "engine/log.h"
#include "engine/status.h"
#include "model/train/batch_schedule.h"
#include "model/train/pipeline_runner.h"
#include "model/train/t5_stage.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/group_comm.h"
#include "parallel/group_comms.h"
#include "parallel/scalar_reduce.h"

namespace anvil::model {

absl::StatusOr<engine::MemoryPlan> T5Trainer::plan(const TrainConfig& cfg, const GptPrecision& prec,
                                                   const T5Shard& shard) {
  return T5Model::plan(cfg.t5, {cfg.train.micro_batch, cfg.data.seq_len, cfg.data.decoder_seq_len},
                       prec, shard);
}

namespace {

// 1F1B over the micro-batches of a step on one DP rank (one stage: F(0) B(0) F(1) B(1) ...).
absl::StatusOr<parallel::PipelinePlan> step_plan(const TrainConfig& cfg, int pp_rank) {
  return parallel::plan_pipeline(cfg.parallel.pp, pp_rank, 1,
                                 static_cast<int>(cfg.train.accumulation_steps(cfg.parallel.dp)));
}

}  // namespace

absl::StatusOr<T5Shard> T5Trainer::stage_shard(const TrainConfig& cfg,
                                               const parallel::ProcessGrid* grid) {
  const parallel::ParallelConfig& pc = cfg.parallel;
  T5Shard shard;
  shard.tp = pc.tp;
  shard.tp_rank = grid ? grid->tp_rank() : 0;
  shard.pp = pc.pp;
  shard.pp_rank = grid ? grid->pp_rank() : 0;
  shard.pp_split = pc.pp_split_rank;
  shard.sequence_parallel = pc.sequence_parallel;
  shard.recompute = recompute_from_name(pc.recompute);
  ANVIL_ASSIGN_OR_RETURN(parallel::PipelinePlan plan, step_plan(cfg, shard.pp_rank));
  shard.act_slots = pipeline_slots(plan, pc.pp, shard.pp_rank);
  if (pc.zero_stage > 0 && pc.dp > 1) {  // ZeRO over one rank is plain AdamW
    shard.zero_stage = pc.zero_stage;
    shard.zero_dp = pc.dp;
    shard.zero_rank = grid ? grid->dp_rank() : 0;
  }
  ANVIL_RETURN_IF_ERROR(shard.validate(cfg.t5));
  return shard;
}

absl::StatusOr<std::unique_ptr<T5Trainer>> T5Trainer::create(const TrainConfig& cfg,
                                                             const GptPrecision& prec,
                                                             SampleFn train, SampleFn valid,
                                                             engine::LogContext log,
                                                             const TrainerParallel& par) {
  if (!cfg.model.t5()) return absl::InvalidArgumentError("T5Trainer: [model] type is not t5");
  if (!train) return absl::InvalidArgumentError("T5Trainer: no training samples");
  std::unique_ptr<T5Trainer> t(new T5Trainer());
  t->cfg_ = cfg;
  t->prec_ = prec;
  t->train_ = std::move(train);
  t->valid_ = std::move(valid);
  t->log_ = log;
  const bool cuda = prec.device == engine::Device::kCuda;
  if (cuda) {
    ANVIL_ASSIGN_OR_RETURN(engine::Stream s,
                           engine::Stream::cuda(par.local_rank % engine::cuda_device_count()));
    t->stream_ = std::make_unique<engine::Stream>(std::move(s));
  } else {
    t->stream_ = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  const parallel::ParallelConfig& pc = cfg.parallel;
  const parallel::ProcessGrid* g = par.grid;
  ANVIL_ASSIGN_OR_RETURN(T5Shard shard, stage_shard(cfg, g));
  t->dp_ = pc.dp;
  t->dp_rank_ = g ? g->dp_rank() : 0;
  t->pp_ = pc.pp;
  t->pp_rank_ = g ? g->pp_rank() : 0;
  if (pc.tp > 1 || pc.dp > 1 || pc.pp > 1) {
    if (g == nullptr || par.comms == nullptr) {
      return absl::FailedPreconditionError("T5Trainer: tp, pp or dp > 1 needs the launcher's grid");
    }
    parallel::CommOptions copt;
    copt.timeout_s = pc.timeout_s;
    if (pc.tp > 1) {
      ANVIL_ASSIGN_OR_RETURN(t->tp_comm_,
                             parallel::group_comm(g->tp_group(), par.comms->tp.get(), par.store,
                                                  g->rank(), cuda, copt, "", &t->owned_comms_));
    }
    if (pc.dp > 1) {
      ANVIL_ASSIGN_OR_RETURN(t->dp_comm_,
                             parallel::group_comm(g->dp_group(), par.comms->dp.get(), par.store,
                                                  g->rank(), cuda, copt, "", &t->owned_comms_));
    }
    if (pc.pp > 1) {
      ANVIL_ASSIGN_OR_RETURN(t->pp_comm_,
                             parallel::group_comm(g->pp_group(), par.comms->pp.get(), par.store,
                                                  g->rank(), cuda, copt, "", &t->owned_comms_));
    }
    if (cuda) {
      ANVIL_ASSIGN_OR_RETURN(t->scalar_arena_,
                             engine::Arena::create(prec.device, 256, "t5 trainer scalar"));
      ANVIL_ASSIGN_OR_RETURN(t->scalar_,
                             t->scalar_arena_.allocate(engine::DType::kF64, {1}, "scalar"));
    }
  }
  shard.tp_comm = t->tp_comm_;
  // The model reduces its gradients over DP itself (parallel/grad_sync.h).
  shard.dp_comm = t->dp_comm_;
  shard.dp_bucket_elems = pc.bucket_mb > 0 ? pc.bucket_elems() : 0;
  ANVIL_ASSIGN_OR_RETURN(t->plan_, step_plan(cfg, t->pp_rank_));
  t->slots_ = shard.act_slots;
  const int64_t B = cfg.train.micro_batch, Te = cfg.data.seq_len, Td = cfg.data.decoder_seq_len;
  ANVIL_ASSIGN_OR_RETURN(t->model_,
                         T5Model::create(cfg.t5, {B, Te, Td}, prec, cfg.train.seed, shard));
  t->lr_ = LrScheduler(cfg.optim.schedule, cfg.train.global_batch);
  // The whole global batch fits (evaluation runs all of it on every rank).
  const size_t accum = static_cast<size_t>(cfg.train.accumulation_steps());
  t->enc_.assign(accum * static_cast<size_t>(B * Te), 0);
  t->dec_.assign(accum * static_cast<size_t>(B * Td), 0);
  t->labels_.assign(accum * static_cast<size_t>(B * Td), -1);
  t->lengths_.assign(accum * static_cast<size_t>(B), 0);
  t->record_.assign(static_cast<size_t>(t5_record_width(Te, Td)), 0);
  t->counted_.assign(accum, 0);
  return t;
}

T5Trainer::~T5Trainer() = default;

void T5Trainer::restore(const TrainerState& s) {
  step_ = s.step;
  optimizer_steps_ = s.optimizer_steps;
  micro_batches_ = s.micro_batches;
  consumed_valid_ = s.consumed_valid_samples;
  lr_.restore(s.lr);
}

int64_t T5Trainer::fill_batch(const SampleFn& fn, int64_t first, int64_t m) {
  const int64_t B = cfg_.train.micro_batch, Te = cfg_.data.seq_len, Td = cfg_.data.decoder_seq_len;
  const int64_t vocab = cfg_.t5.vocab_size;
  int64_t counted = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t index = first + b;
    fn(index, record_.data());
    const int32_t* enc = record_.data();
    const int32_t* dec = enc + Te;
    const int32_t* labels = dec + Td;
    const int32_t length = labels[Td];
    ANVIL_CHECK_MSG(length >= 1 && length <= Te,
                    absl::StrFormat("T5 sample %d: encoder length %d outside [1, seq_len %d]",
                                    index, length, Te));
    for (int64_t i = 0; i < Te + 2 * Td; ++i) {
      const int32_t id = record_[static_cast<size_t>(i)];
      const bool label = i >= Te + Td;
      ANVIL_CHECK_MSG(id < vocab && (id >= 0 || (label && id == -1)),
                      absl::StrFormat("T5 sample %d holds id %d at record entry %d, outside "
                                      "[model] vocab_size %d",
                                      index, id, i, vocab));
    }
    const size_t row = static_cast<size_t>(m * B + b);
    std::copy(enc, enc + Te, enc_.begin() + static_cast<std::ptrdiff_t>(row * Te));
    std::copy(dec, dec + Td, dec_.begin() + static_cast<std::ptrdiff_t>(row * Td));
    std::copy(labels, labels + Td, labels_.begin() + static_cast<std::ptrdiff_t>(row * Td));
    lengths_[row] = length;
    counted += std::count_if(labels, labels + Td, [](int32_t x) { return x >= 0; });
  }
  counted_[static_cast<size_t>(m)] = counted;
  return counted;
}

T5Batch T5Trainer::host_batch(int64_t m) const {
  const size_t B = static_cast<size_t>(cfg_.train.micro_batch);
  const size_t Te = static_cast<size_t>(cfg_.data.seq_len);
  const size_t Td = static_cast<size_t>(cfg_.data.decoder_seq_len);
  const size_t r = static_cast<size_t>(m) * B;
  return {enc_.data() + r * Te, dec_.data() + r * Td, labels_.data() + r * Td, lengths_.data() + r};
}

double T5Trainer::dp_sum(double v) {
  if (dp_comm_ == nullptr) return v;
  return parallel::all_reduce_scalar(*dp_comm_, v, parallel::ReduceOp::kSum, scalar_, *stream_);
}

double T5Trainer::pp_sum(double v) {
  if (pp_comm_ == nullptr) return v;
  return parallel::all_reduce_scalar(*pp_comm_, v, parallel::ReduceOp::kSum, scalar_, *stream_);
}

StepStats T5Trainer::step() {
  const int64_t G = cfg_.train.global_batch, B = cfg_.train.micro_batch;
  const int64_t accum = G / (B * dp_), total_micro = accum * dp_;  // on this rank, over DP
  engine::Stream& s = *stream_;
  model_->zero_grads(s);
  for (int64_t m = 0; m < accum; ++m) {
    fill_batch(train_, sampler_index(step_ * G, B, dp_, dp_rank_, m), m);
  }
  // d(step loss) / d(token loss) of micro-batch m: 0 without a counted label.
  auto scale = [&](int64_t m) {
    const int64_t counted = counted_[static_cast<size_t>(m)];
    return counted > 0 ? 1.0 / (static_cast<double>(total_micro) * static_cast<double>(counted))
                       : 0.0;
  };
  PipelineStepFns fns;
  fns.grad_scale = [&](int64_t m) { return static_cast<float>(scale(m)); };
  fns.dropout_offset = [&](int64_t m) {
    return micro_batches_ + static_cast<uint64_t>(m * dp_ + dp_rank_);
  };
  // Plain DP overlap: during the last micro-batch's backward each block's all-reduce starts as
  // soon as its backward is queued (not with sequence parallelism: finish_backward sums the
  // norms' gradients over TP in place, which an all-reduce in flight must not overlap).
  if (dp_comm_ != nullptr && !cfg_.parallel.sequence_parallel) {
    fns.before_backward = [&](int64_t m) { model_->set_overlap_grad_sync(m == accum - 1); };
  }
  T5PipelineStage stage(*model_, slots_, [this](int64_t m) { return host_batch(m); });
  const std::vector<double> losses =
      run_pipeline_step(stage, plan_, pp_, pp_rank_, pp_comm_, fns, s);
  model_->set_overlap_grad_sync(false);
  double loss = 0.0;
  for (int64_t m = 0; m < accum; ++m) loss += losses[static_cast<size_t>(m)] * scale(m);
  micro_batches_ += static_cast<uint64_t>(total_micro);
  model_->finish_backward(s);
  model_->sum_shared_grads(pp_comm_, s);
  model_->reduce_gradients(s);  // over DP: what the backward has not reduced yet
  StepStats st;
  st.step = ++step_;
  st.global_batch = G;
  st.loss = dp_sum(pp_sum(loss));  // the last stage's, over DP
  // ZeRO: each DP rank holds its pieces of the reduced gradient.
  const double squares = model_->grad_sum_squares(s);
  st.grad_norm = std::sqrt(pp_sum(model_->shard().zero_stage > 0 ? dp_sum(squares) : squares));
  st.lr = lr_.lr();
  const int64_t tokens_before = (step_ - 1) * G * cfg_.data.seq_len;
  if (!std::isfinite(st.grad_norm)) {
    st.skipped = true;
    engine::log_warning(log_, absl::StrFormat("step %d: grad norm is %s, skipping the update",
                                              st.step, std::isnan(st.grad_norm) ? "nan" : "inf"));
    return st;
  }
  // Megatron's clip_grad_norm: scale by max_norm / (norm + 1e-6) when that is below 1.
  double clip = 1.0;
  if (cfg_.optim.clip_grad > 0.0)
    clip = std::min(1.0, cfg_.optim.clip_grad / (st.grad_norm + 1e-6));
  GptModel::OptimizerStep o;
  o.lr = static_cast<float>(st.lr);
  o.beta1 = static_cast<float>(cfg_.optim.beta1);
  o.beta2 = static_cast<float>(cfg_.optim.beta2);
  o.eps = static_cast<float>(cfg_.optim.eps);
  o.weight_decay = static_cast<float>(cfg_.optim.weight_decay);
  o.grad_scale = static_cast<float>(clip);
  o.step = ++optimizer_steps_;
  model_->optimizer_step(o, s);
  lr_.step(G, tokens_before);
  return st;
}

double T5Trainer::evaluate() {
  const int64_t iters = cfg_.train.eval_iters;
  if (!valid_ || iters == 0) return std::numeric_limits<double>::quiet_NaN();
  const int64_t G = cfg_.train.global_batch, B = cfg_.train.micro_batch;
  double sum = 0.0;
  int64_t micro = 0;
  T5PipelineStage stage(*model_, slots_, [this](int64_t) { return host_batch(0); });
  for (int64_t i = 0; i < iters; ++i) {
    for (int64_t m = 0; m < G / B; ++m, ++micro) {
      const int64_t counted = fill_batch(valid_, consumed_valid_ + m * B, 0);
      const double l = run_pipeline_forward(stage, pp_, pp_rank_, pp_comm_, *stream_);
      if (counted > 0) sum += l / static_cast<double>(counted);
    }
    consumed_valid_ += G;
  }
  return pp_sum(sum) / static_cast<double>(micro);  // the last stage's
}

TrainSummary T5Trainer::run() {
  const LoopConfig& L = cfg_.train;
  const int width = static_cast<int>(std::to_string(L.steps).size());
  // Encoder and decoder tokens of one step.
  const double step_tokens =
      static_cast<double>(L.global_batch * (cfg_.data.seq_len + cfg_.data.decoder_seq_len));
  const bool validation = valid_ && L.eval_iters > 0;
  TrainSummary sum;
  engine::Timer wall, interval;
  double interval_loss = 0.0, interval_eval_s = 0.0;
  int64_t interval_steps = 0, interval_applied = 0;
  auto run_eval = [&] {
    if (!validation) return;
    engine::Timer t;
    const double v = evaluate();
    sum.val_losses.emplace_back(step_, v);
    sum.evals.push_back({step_, "val", v, {}});
    engine::log_info(
        log_, absl::StrFormat("step %*d/%d | val loss %.4f (ppl %.2f) | %s", width, step_, L.steps,
                              v, std::exp(v), engine::format_duration(t.seconds())));
  };
  // Where the loss starts, without consuming the validation stream.
  const int64_t at = consumed_valid_;
  run_eval();
  consumed_valid_ = at;
  int64_t consecutive_skipped = 0;
  bool stopped = false;  // by the step hook
  while (step_ < L.steps) {
    const StepStats st = step();
    sum.steps++;
    sum.losses.push_back(st.loss);
    if (sum.steps == 1) sum.first_loss = st.loss;
    consecutive_skipped = st.skipped ? consecutive_skipped + 1 : 0;
    if (st.skipped) sum.skipped_steps++;
    if (!st.skipped) {
      interval_loss += st.loss;
      interval_applied++;
    }
    interval_steps++;
    if (L.max_skipped_steps > 0 && consecutive_skipped >= L.max_skipped_steps) {
      sum.status = absl::AbortedError(absl::StrFormat(
          "the run diverged: %d consecutive steps up to step %d were skipped ([train] "
          "max_skipped_steps = %d); lower [optim] lr or raise [optim] warmup_steps",
          consecutive_skipped, st.step, L.max_skipped_steps));
      break;
    }
    if (st.step % L.log_interval == 0 || st.step == L.steps) {
      stream_->synchronize();
      const double secs = interval.seconds() - interval_eval_s;
      sum.train_seconds += secs;
      sum.final_loss = interval_applied > 0 ? interval_loss / static_cast<double>(interval_applied)
                                            : std::numeric_limits<double>::quiet_NaN();
      engine::log_info(
          log_, absl::StrFormat("step %*d/%d | loss %.4f | lr %.3e | grad norm %.3f | %.0f tok/s "
                                "| %s elapsed",
                                width, st.step, L.steps, sum.final_loss, st.lr, st.grad_norm,
                                step_tokens * static_cast<double>(interval_steps) / secs,
                                engine::format_duration(wall.seconds())));
      interval_loss = interval_eval_s = 0.0;
      interval_steps = interval_applied = 0;
      interval.restart();
    }
    if (L.eval_interval > 0 && st.step % L.eval_interval == 0) {
      engine::Timer t;
      run_eval();
      interval_eval_s += t.seconds();
    }
    if (step_hook_ && step_hook_(st)) {
      stopped = true;
      break;
    }
  }
  if (sum.status.ok() && !stopped) run_eval();
  sum.test_loss = std::numeric_limits<double>::quiet_NaN();
  sum.tokens_per_second = sum.train_seconds > 0
                              ? step_tokens * static_cast<double>(sum.steps) / sum.train_seconds
                              : 0.0;
  std::string line = absl::StrFormat(
      "done: %d steps (%d skipped) in %s (%.0f tok/s) | train loss "
      "%.4f -> %.4f",
      sum.steps, sum.skipped_steps, engine::format_duration(wall.seconds()), sum.tokens_per_second,
      sum.first_loss, sum.final_loss);
  if (!sum.val_losses.empty()) {
    absl::StrAppend(&line,
                    absl::StrFormat(" | val loss %.4f -> %.4f", sum.val_losses.front().second,
                                    sum.val_losses.back().second));
  }
  engine::log_info(log_, line);
  return sum;
}

}  // namespace anvil::model
