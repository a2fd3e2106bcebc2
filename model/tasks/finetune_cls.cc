// Classification at the last token (see finetune_cls.h): micro-batch packing, the linear head
// between the last stage's forward and backward, the training step through the pipeline runner
// (accumulate, sum the tied embedding and over DP, clip, AdamW) and evaluation.
#include "model/tasks/finetune_cls.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/tasks/device_rows.h"
#include "model/train/pipeline_runner.h"
#include "parallel/comm.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/scalar_reduce.h"

namespace anvil::model {
namespace {

// The sequences of an example: its choices (multiple choice) or its tokens; with their token
// types (empty: all 0).
std::vector<std::vector<int32_t>> sequences(const ClsExample& e, bool multiple_choice) {
  return multiple_choice ? e.choices : std::vector<std::vector<int32_t>>{e.tokens};
}
std::vector<std::vector<int32_t>> sequence_types(const ClsExample& e, bool multiple_choice) {
  if (!multiple_choice) return {e.types};
  return e.choice_types.empty() ? std::vector<std::vector<int32_t>>(e.choices.size())
                                : e.choice_types;
}

// This rank's part [first, end) of n items split over dp ranks (the first n % dp get one more).
std::pair<size_t, size_t> rank_range(size_t n, const ClsParallel& par) {
  const size_t dp = static_cast<size_t>(par.dp), r = static_cast<size_t>(par.rank);
  const size_t base = n / dp, extra = n % dp;
  const size_t first = r * base + std::min(r, extra);
  return {first, first + base + (r < extra ? 1 : 0)};
}

}  // namespace

absl::StatusOr<ClsTask> ClsTask::create(std::vector<int32_t> label_tokens, int64_t vocab,
                                        int32_t pad) {
  const std::set<int32_t> distinct(label_tokens.begin(), label_tokens.end());
  if (label_tokens.size() < 2 || distinct.size() != label_tokens.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "classification needs at least 2 distinct label tokens, got %d (%d distinct)",
        label_tokens.size(), distinct.size()));
  }
  for (int32_t t : label_tokens) {
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrFormat("label token %d is outside [model] vocab_size %d", t, vocab));
    }
  }
  if (pad < 0 || pad >= vocab) {
    return absl::InvalidArgumentError(
        absl::StrFormat("padding token %d outside the vocabulary", pad));
  }
  return ClsTask(std::move(label_tokens), std::nullopt, vocab, pad);
}

absl::StatusOr<ClsTask> ClsTask::create_linear(blocks::LinearHead head, int64_t vocab,
                                               int32_t pad) {
  if (pad < 0 || pad >= vocab) {
    return absl::InvalidArgumentError(
        absl::StrFormat("padding token %d outside the vocabulary", pad));
  }
  if (head.classes() < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a linear head needs at least 2 classes, got %d", head.classes()));
  }
  return ClsTask({}, std::move(head), vocab, pad);
}

int64_t ClsTask::classes() const {
  return head_ ? head_->classes() : static_cast<int64_t>(labels_.size());
}

absl::Status ClsTask::check(absl::Span<const ClsExample> examples, int64_t first) const {
  const int64_t k = classes();
  const bool mc = rows_per_example() > 1;
  for (size_t i = 0; i < examples.size(); ++i) {
    const ClsExample& e = examples[i];
    const int64_t n = first + static_cast<int64_t>(i);
    if (e.label < 0 || e.label >= k) {
      return absl::InvalidArgumentError(
          absl::StrFormat("example %d: label %d outside 0 .. %d", n, e.label, k - 1));
    }
    if (mc && static_cast<int64_t>(e.choices.size()) != k) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "example %d has %d choices, the multiple-choice head %d", n, e.choices.size(), k));
    }
    const std::vector<std::vector<int32_t>> seqs = sequences(e, mc), types = sequence_types(e, mc);
    if (types.size() != seqs.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("example %d: token types of %d sequences, expected %d", n, types.size(),
                          sequences(e, mc).size()));
    }
    for (size_t q = 0; q < types.size(); ++q) {
      const std::vector<int32_t>& seq = seqs[q];
      if (seq.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat("example %d has no tokens", n));
      }
      if (!types[q].empty() && types[q].size() != seq.size()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "example %d: %d token types for %d tokens", n, types[q].size(), seq.size()));
      }
      for (int32_t t : seq) {
        if (t < 0 || t >= vocab_) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "example %d: token id %d outside [model] vocab_size %d", n, t, vocab_));
        }
      }
    }
  }
  return absl::OkStatus();
}

ClsTask::HostBatch ClsTask::fill(const GptRunShape& shape, absl::Span<const ClsExample> ex,
                                 bool encoder) const {
  const int64_t T = shape.seq_len, rows = shape.micro_batch;
  HostBatch h;
  h.tokens.assign(static_cast<size_t>(rows * T), pad_);
  h.targets.assign(h.tokens.size(), -1);
  h.positions.resize(h.tokens.size());
  for (size_t i = 0; i < h.positions.size(); ++i) h.positions[i] = static_cast<int32_t>(i % T);
  h.types.assign(h.tokens.size(), 0);
  h.lengths.assign(static_cast<size_t>(rows), 1);  // padding rows: one (pad) token
  const bool mc = rows_per_example() > 1;
  for (const ClsExample& e : ex) {
    const std::vector<std::vector<int32_t>> seqs = sequences(e, mc), types = sequence_types(e, mc);
    for (size_t k = 0; k < seqs.size(); ++k) {
      const std::vector<int32_t>& t = seqs[k];
      const int64_t row = static_cast<int64_t>(h.at.size());
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(t.size()), T);
      // An encoder (BERT): the first n tokens, classified at [CLS] (position 0); a causal LM
      // (GPT): the last n, at the last.
      const int64_t from = encoder ? 0 : static_cast<int64_t>(t.size()) - n;
      std::copy(t.begin() + from, t.begin() + from + n, h.tokens.begin() + row * T);
      if (!types[k].empty()) {
        std::copy(types[k].begin() + from, types[k].begin() + from + n, h.types.begin() + row * T);
      }
      h.lengths[static_cast<size_t>(row)] = static_cast<int32_t>(n);
      const int64_t p = row * T + (encoder ? 0 : n - 1);
      if (!head_) h.targets[static_cast<size_t>(p)] = labels_[static_cast<size_t>(e.label)];
      h.at.push_back(p);
    }
  }
  return h;
}

GptBatch ClsTask::HostBatch::batch(bool encoder) const {
  GptBatch b{tokens.data(), positions.data(), targets.data()};
  if (encoder) {
    b.token_types = types.data();
    b.lengths = lengths.data();
  }
  return b;
}

ClsResult ClsTask::classify(GptModel& model, const HostBatch& h, absl::Span<const ClsExample> ex,
                            int64_t slot, bool train, uint64_t dropout_offset, double scale,
                            engine::Stream& s) {
  ClsResult r;
  r.total = static_cast<int64_t>(ex.size());
  std::vector<int32_t> labels;
  for (const ClsExample& e : ex) labels.push_back(e.label);
  // hidden: [sequences, d] at the classification positions (replicated over TP).
  const std::vector<double> hidden = read_rows(model.final_hidden(slot), h.at, s);
  const float p = train ? model.config().hidden_dropout : 0.0f;
  // The head's dropout: counters [rows * d] per forward, on the head's own key.
  const blocks::HeadDropout drop{p, dropout_offset * static_cast<uint64_t>(hidden.size())};
  const std::vector<double> logits = head_->forward(hidden, r.total, drop);
  if (train) {
    std::vector<double> dhidden(hidden.size());
    head_->backward(hidden, logits, labels, scale, drop, absl::MakeSpan(dhidden));
    write_rows(model.final_hidden_grad(), h.at, dhidden, s);
  }
  r.loss_sum = blocks::cls_loss_sum(logits, labels);
  r.correct = blocks::cls_correct(logits, labels);
  return r;
}

void ClsTask::label_logits(GptModel& model, const HostBatch& h, engine::Stream& s,
                           std::vector<double>* out) const {
  // rows: [sequences, padded / tp], this TP rank's slice of the vocabulary from `first`.
  const std::vector<double> rows = read_rows(model.last_logits(), h.at, s);
  const int64_t width = static_cast<int64_t>(rows.size() / h.at.size());
  const int64_t first = model.shard().tp_rank * width;
  for (size_t b = 0; b < h.at.size(); ++b) {
    for (int32_t t : labels_) {
      const int64_t c = t - first;
      out->push_back(c >= 0 && c < width ? rows[b * static_cast<size_t>(width) + c] : 0.0);
    }
  }
}

double ClsTask::grad_sum_squares(GptModel& model, const ClsParallel& par, engine::Stream& s) const {
  // The head: trained on the last stage, the same on every TP rank there (counted on rank 0).
  const bool head = head_ && model.shard().post && model.shard().tp_rank == 0;
  std::vector<double> sq{model.grad_sum_squares(s) + (head ? head_->grad_sum_squares() : 0.0)};
  parallel::sum_host_values(par.tp_host, absl::MakeSpan(sq));
  parallel::sum_host_values(par.pp_host, absl::MakeSpan(sq));
  return sq[0];
}

void ClsTask::reduce_gradients(GptModel& model, const ClsParallel& par, engine::Stream& stream) {
  model.finish_backward(stream);
  // The tied embedding: the first stage's copy and the last stage's LM-head copy get the sum.
  if (par.embedding != nullptr) {
    for (const Param& p : model.params().all()) {
      if (p.tied) par.embedding->all_reduce(p.grad, parallel::ReduceOp::kSum, stream);
    }
  }
  if (par.grads != nullptr) {
    const engine::TensorView g = model.flat_buffers().grad;
    par.grads->all_reduce(g, g, parallel::ReduceOp::kSum, stream);
  }
  if (head_ && par.host != nullptr) {
    std::vector<float>& hg = head_->grads();
    engine::Stream cpu = engine::Stream::cpu();
    const engine::TensorView t = engine::make_view(
        hg.data(), engine::DType::kF32, engine::Device::kCpu, {static_cast<int64_t>(hg.size())});
    par.host->all_reduce(t, t, parallel::ReduceOp::kSum, cpu);
  }
}

double ClsTask::train_step(GptModel& model, const GptRunShape& shape,
                           absl::Span<const ClsExample> batch, OptimizerStep opt, double clip,
                           engine::Stream& stream, double* grad_norm, const ClsParallel& par) {
  const size_t per = static_cast<size_t>(shape.micro_batch / rows_per_example());
  const auto [first, end] = rank_range(batch.size(), par);
  const absl::Span<const ClsExample> mine = batch.subspan(first, end - first);
  const double scale = 1.0 / static_cast<double>(batch.size());  // d(mean)/d(example loss)
  // A bidirectional encoder (BERT) classifies at [CLS] and reads token types and lengths.
  const bool encoder = !model.config().causal, post = model.shard().post;
  std::vector<absl::Span<const ClsExample>> parts;  // this rank's micro-batches
  std::vector<HostBatch> hosts;
  for (size_t at = 0; at < mine.size(); at += per) {
    parts.push_back(mine.subspan(at, std::min(mine.size() - at, per)));
    hosts.push_back(fill(shape, parts.back(), encoder));
  }
  // Dropout: forward number (step - 1) * micro-batches per step + the global micro-batch
  // index of this rank's first example (ranks take consecutive ranges), distinct over the run.
  const uint64_t micro = (batch.size() + per - 1) / per;
  auto dropout_offset = [&](int64_t m) {
    return static_cast<uint64_t>(opt.step - 1) * micro +
           (first + static_cast<size_t>(m) * per) / per;
  };
  model.zero_grads(stream);
  if (head_) head_->zero_grads();
  std::vector<double> sums(1, 0.0);  // loss sum (on the last stage)
  const int64_t micro_batches = static_cast<int64_t>(parts.size());
  if (micro_batches > 0) {
    absl::StatusOr<parallel::PipelinePlan> plan =
        parallel::plan_pipeline(par.pp, par.stage, 1, static_cast<int>(micro_batches));
    ANVIL_CHECK_MSG(plan.ok(), std::string(plan.status().message()));
    MicroBatchFns fns;
    fns.batch = [&](int64_t m) { return hosts[static_cast<size_t>(m)].batch(encoder); };
    fns.grad_scale = [&](int64_t) { return static_cast<float>(scale); };
    fns.dropout_offset = dropout_offset;
    // The linear head between the last stage's forward and backward of each micro-batch.
    if (head_ && post) {
      fns.before_backward = [&](int64_t m) {
        const size_t i = static_cast<size_t>(m);
        sums[0] += classify(model, hosts[i], parts[i], m % model.shard().act_slots, true,
                            dropout_offset(m), scale, stream)
                       .loss_sum;
      };
    }
    const std::vector<double> losses =
        run_pipeline_step(model, *plan, par.pp, par.stage, par.pp_comm, fns, stream);
    if (!head_) {
      for (double l : losses) sums[0] += l;
    }
  }
  reduce_gradients(model, par, stream);
  parallel::sum_host_values(par.pp_host, absl::MakeSpan(sums));
  parallel::sum_host_values(par.host, absl::MakeSpan(sums));
  const double norm = std::sqrt(grad_sum_squares(model, par, stream));
  if (grad_norm != nullptr) *grad_norm = norm;
  if (!std::isfinite(norm)) return sums[0] * scale;
  opt.grad_scale = clip > 0.0 ? static_cast<float>(std::min(1.0, clip / (norm + 1e-6))) : 1.0f;
  model.optimizer_step(opt, stream);
  if (head_ && post) head_->optimizer_step(opt);
  return sums[0] * scale;
}

ClsResult ClsTask::evaluate(GptModel& model, const GptRunShape& shape,
                            absl::Span<const ClsExample> examples, engine::Stream& stream,
                            const ClsParallel& par) {
  const size_t per = static_cast<size_t>(shape.micro_batch / rows_per_example());
  const auto [first, end] = rank_range(examples.size(), par);
  const absl::Span<const ClsExample> mine = examples.subspan(first, end - first);
  // A bidirectional encoder (BERT) classifies at [CLS] and reads token types and lengths.
  const bool encoder = !model.config().causal, post = model.shard().post;
  std::vector<double> sums(3, 0.0);  // correct, total, loss sum (on the last stage)
  std::vector<double> words;         // label words: [examples, K] logits, summed over TP below
  std::vector<int32_t> labels;
  for (size_t at = 0; at < mine.size(); at += per) {
    const absl::Span<const ClsExample> part = mine.subspan(at, std::min(mine.size() - at, per));
    const HostBatch h = fill(shape, part, encoder);
    const double loss =
        run_pipeline_forward(model, par.pp, par.stage, par.pp_comm, h.batch(encoder), stream);
    if (!post) continue;
    sums[1] += static_cast<double>(part.size());
    if (head_) {
      const ClsResult r = classify(model, h, part, 0, false, 0, 0.0, stream);
      sums[0] += static_cast<double>(r.correct);
      sums[2] += r.loss_sum;
    } else {
      sums[2] += loss;
      label_logits(model, h, stream, &words);
      for (const ClsExample& e : part) labels.push_back(e.label);
    }
  }
  if (!labels.empty()) {  // every TP rank of the last stage holds examples alike
    parallel::sum_host_values(par.tp_host, absl::MakeSpan(words));
    sums[0] += static_cast<double>(blocks::cls_correct(words, labels));
  }
  parallel::sum_host_values(par.pp_host, absl::MakeSpan(sums));
  parallel::sum_host_values(par.host, absl::MakeSpan(sums));
  return ClsResult{static_cast<int64_t>(sums[0]), static_cast<int64_t>(sums[1]), sums[2]};
}

absl::StatusOr<int64_t> cls_activation_slots(int stages, int stage, int64_t global_batch,
                                             int64_t micro_batch, int dp) {
  // The most micro-batches a rank runs per step: its share of the batch rounded up.
  const int64_t share = (global_batch + dp - 1) / dp;
  const int64_t micro = std::max<int64_t>((share + micro_batch - 1) / micro_batch, 1);
  ANVIL_ASSIGN_OR_RETURN(parallel::PipelinePlan plan,
                         parallel::plan_pipeline(stages, stage, 1, static_cast<int>(micro)));
  return pipeline_slots(plan, stages, stage);
}

}  // namespace anvil::model
