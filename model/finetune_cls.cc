// Classification at the last token (see finetune_cls.h): micro-batch packing, the label-word
// and linear heads' forward/backward per micro-batch, the training step (accumulate, sum over
// DP, clip, AdamW) and evaluation.
#include "model/finetune_cls.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/memory.h"
#include "model/device_rows.h"
#include "parallel/comm.h"

namespace anvil::model {
namespace {

// Sum of `v` over the host communicator (in place; no-op without one).
void sum_over(parallel::Comm* host, std::vector<double>& v) {
  if (host == nullptr || v.empty()) return;
  engine::Stream cpu = engine::Stream::cpu();
  const engine::TensorView t = engine::make_view(
      v.data(), engine::DType::kF64, engine::Device::kCpu, {static_cast<int64_t>(v.size())});
  host->all_reduce(t, t, parallel::ReduceOp::kSum, cpu);
}

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

absl::StatusOr<ClsTask> ClsTask::create_linear(LinearHead head, int64_t vocab, int32_t pad) {
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
                                 bool bert) const {
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
      // BERT: the first n tokens, classified at [CLS] (position 0); GPT: the last n, at the last.
      const int64_t from = bert ? 0 : static_cast<int64_t>(t.size()) - n;
      std::copy(t.begin() + from, t.begin() + from + n, h.tokens.begin() + row * T);
      if (!types[k].empty()) {
        std::copy(types[k].begin() + from, types[k].begin() + from + n, h.types.begin() + row * T);
      }
      h.lengths[static_cast<size_t>(row)] = static_cast<int32_t>(n);
      const int64_t p = row * T + (bert ? 0 : n - 1);
      if (!head_) h.targets[static_cast<size_t>(p)] = labels_[static_cast<size_t>(e.label)];
      h.at.push_back(p);
    }
  }
  return h;
}

ClsResult ClsTask::micro_batch(GptModel& model, const GptRunShape& shape,
                               absl::Span<const ClsExample> ex, bool train, uint64_t dropout_offset,
                               double scale, engine::Stream& s) {
  const bool bert = model.config().bert();
  const HostBatch h = fill(shape, ex, bert);
  const std::vector<int64_t>& last = h.at;
  GptBatch batch{h.tokens.data(), h.positions.data(), h.targets.data()};
  if (bert) {
    batch.token_types = h.types.data();
    batch.lengths = h.lengths.data();
  }
  model.set_batch(0, 0, batch, s);
  model.forward_chunk(0, 0, train, dropout_offset, s);
  ClsResult r;
  r.total = static_cast<int64_t>(ex.size());
  std::vector<int32_t> labels;
  for (const ClsExample& e : ex) labels.push_back(e.label);
  std::vector<double> logits;  // [examples, k]
  if (head_) {
    const std::vector<double> hidden = read_rows(model.final_hidden(), last, s);
    const float p = train ? model.config().hidden_dropout : 0.0f;
    // The head's dropout: counters [rows * d] per forward, on the head's own key.
    const HeadDropout drop{p, dropout_offset * static_cast<uint64_t>(hidden.size())};
    logits = head_->forward(hidden, r.total, drop);
    if (train) {
      std::vector<double> dhidden(hidden.size());
      head_->backward(hidden, logits, labels, scale, drop, absl::MakeSpan(dhidden));
      write_rows(model.final_hidden_grad(), last, dhidden, s);
    }
  } else {
    r.loss_sum = model.loss_sum(s);
    if (!train) {
      const std::vector<double> rows = read_rows(model.last_logits(), last, s);
      const size_t width = rows.size() / last.size();
      for (size_t b = 0; b < last.size(); ++b) {
        for (int32_t t : labels_) logits.push_back(rows[b * width + static_cast<size_t>(t)]);
      }
    }
  }
  if (train) model.backward_chunk(0, 0, static_cast<float>(scale), s);
  if (head_) r.loss_sum = cls_loss_sum(logits, labels);
  r.correct = logits.empty() ? 0 : cls_correct(logits, labels);
  return r;
}

double ClsTask::train_step(GptModel& model, const GptRunShape& shape,
                           absl::Span<const ClsExample> batch, GptModel::OptimizerStep opt,
                           double clip, engine::Stream& stream, double* grad_norm,
                           const ClsParallel& par) {
  const int64_t per = shape.micro_batch / rows_per_example();  // examples per forward
  const auto [first, end] = rank_range(batch.size(), par);
  const absl::Span<const ClsExample> mine = batch.subspan(first, end - first);
  const double scale = 1.0 / static_cast<double>(batch.size());  // d(mean)/d(example loss)
  // Dropout: forward number (step - 1) * micro-batches per step + the global micro-batch
  // index of this rank's first example (ranks take consecutive ranges), distinct over the run.
  const uint64_t micro = (batch.size() + static_cast<size_t>(per) - 1) / static_cast<size_t>(per);
  model.zero_grads(stream);
  if (head_) head_->zero_grads();
  std::vector<double> sums(1, 0.0);  // loss sum
  for (size_t at = 0; at < mine.size(); at += static_cast<size_t>(per)) {
    const size_t rows = std::min(mine.size() - at, static_cast<size_t>(per));
    const uint64_t m = (first + at) / static_cast<size_t>(per);
    sums[0] += micro_batch(model, shape, mine.subspan(at, rows), /*train=*/true,
                           static_cast<uint64_t>(opt.step - 1) * micro + m, scale, stream)
                   .loss_sum;
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
  sum_over(par.host, sums);
  const double sq = model.grad_sum_squares(stream) + (head_ ? head_->grad_sum_squares() : 0.0);
  const double norm = std::sqrt(sq);
  if (grad_norm != nullptr) *grad_norm = norm;
  if (!std::isfinite(norm)) return sums[0] * scale;
  opt.grad_scale = clip > 0.0 ? static_cast<float>(std::min(1.0, clip / (norm + 1e-6))) : 1.0f;
  model.optimizer_step(opt, stream);
  if (head_) head_->optimizer_step(opt);
  return sums[0] * scale;
}

ClsResult ClsTask::evaluate(GptModel& model, const GptRunShape& shape,
                            absl::Span<const ClsExample> examples, engine::Stream& stream,
                            const ClsParallel& par) {
  const int64_t per = shape.micro_batch / rows_per_example();
  const auto [first, end] = rank_range(examples.size(), par);
  const absl::Span<const ClsExample> mine = examples.subspan(first, end - first);
  std::vector<double> sums(3, 0.0);  // correct, total, loss sum
  for (size_t at = 0; at < mine.size(); at += static_cast<size_t>(per)) {
    const size_t rows = std::min(mine.size() - at, static_cast<size_t>(per));
    const ClsResult r = micro_batch(model, shape, mine.subspan(at, rows), false, 0, 0.0, stream);
    sums[0] += static_cast<double>(r.correct);
    sums[1] += static_cast<double>(r.total);
    sums[2] += r.loss_sum;
  }
  sum_over(par.host, sums);
  return ClsResult{static_cast<int64_t>(sums[0]), static_cast<int64_t>(sums[1]), sums[2]};
}

}  // namespace anvil::model
