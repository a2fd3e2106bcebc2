// Classification through the last token (see finetune_cls.h): micro-batch packing, the training
// step (accumulate, clip, AdamW) and evaluation by the label tokens' logits at the last position.
#include "model/finetune_cls.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/dtype.h"
#include "engine/memory.h"

namespace anvil::model {
namespace {

std::vector<int32_t> positions(const GptRunShape& shape) {
  std::vector<int32_t> p(static_cast<size_t>(shape.micro_batch * shape.seq_len));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(i % shape.seq_len);
  return p;
}

// logits[row, col] of the last forward, as float (the view is on the model's device).
std::vector<float> read_logits(engine::ConstTensorView logits,
                               const std::vector<std::pair<int64_t, int32_t>>& at,
                               engine::Stream& s) {
  const int64_t ld = logits.shape[1];
  const size_t es = engine::dtype_size(logits.dtype);
  std::vector<uint64_t> raw(at.size(), 0);  // room for the bits of one element of any dtype
  for (size_t i = 0; i < at.size(); ++i) {
    const auto* p = static_cast<const char*>(logits.data) +
                    static_cast<size_t>(at[i].first * ld + at[i].second) * es;
    engine::copy(engine::make_view(&raw[i], logits.dtype, engine::Device::kCpu, {1}),
                 engine::make_view(p, logits.dtype, logits.device, {1}), s);
  }
  s.synchronize();
  std::vector<float> out(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    if (logits.dtype == engine::DType::kBF16) {
      out[i] = engine::bf16_to_f32(static_cast<uint16_t>(raw[i]));  // little-endian low bits
    } else if (logits.dtype == engine::DType::kF16) {
      out[i] = engine::f16_to_f32(static_cast<uint16_t>(raw[i]));
    } else if (logits.dtype == engine::DType::kF64) {
      double d;
      std::memcpy(&d, &raw[i], 8);
      out[i] = static_cast<float>(d);
    } else {
      std::memcpy(&out[i], &raw[i], 4);
    }
  }
  return out;
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
  return ClsTask(std::move(label_tokens), vocab, pad);
}

absl::Status ClsTask::check(absl::Span<const ClsExample> examples, int64_t first) const {
  const int64_t k = static_cast<int64_t>(labels_.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    const ClsExample& e = examples[i];
    const int64_t n = first + static_cast<int64_t>(i);
    if (e.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("example %d has no tokens", n));
    }
    if (e.label < 0 || e.label >= k) {
      return absl::InvalidArgumentError(
          absl::StrFormat("example %d: label %d outside 0 .. %d", n, e.label, k - 1));
    }
    for (int32_t t : e.tokens) {
      if (t < 0 || t >= vocab_) {
        return absl::InvalidArgumentError(
            absl::StrFormat("example %d: token id %d outside [model] vocab_size %d", n, t, vocab_));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> ClsTask::fill(const GptRunShape& shape, absl::Span<const ClsExample> ex,
                                   std::vector<int32_t>& tokens,
                                   std::vector<int32_t>& targets) const {
  const int64_t T = shape.seq_len;
  std::fill(tokens.begin(), tokens.end(), pad_);
  std::fill(targets.begin(), targets.end(), -1);
  std::vector<int64_t> last;
  for (size_t b = 0; b < ex.size(); ++b) {
    const std::vector<int32_t>& t = ex[b].tokens;
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(t.size()), T);  // the last n kept
    std::copy(t.end() - n, t.end(), tokens.begin() + static_cast<int64_t>(b) * T);
    const int64_t p = static_cast<int64_t>(b) * T + n - 1;
    targets[static_cast<size_t>(p)] = labels_[static_cast<size_t>(ex[b].label)];
    last.push_back(p);
  }
  return last;
}

double ClsTask::train_step(GptModel& model, const GptRunShape& shape,
                           absl::Span<const ClsExample> batch, GptModel::OptimizerStep opt,
                           double clip, engine::Stream& stream, double* grad_norm) const {
  const int64_t B = shape.micro_batch;
  std::vector<int32_t> tokens(static_cast<size_t>(B * shape.seq_len)), targets(tokens.size());
  const std::vector<int32_t> pos = positions(shape);
  const float scale = 1.0f / static_cast<float>(batch.size());  // d(mean)/d(example loss)
  double loss = 0.0;
  // Dropout: forward number (step - 1) * micro-batches per step + m, distinct over the run.
  const uint64_t micro = (batch.size() + static_cast<size_t>(B) - 1) / static_cast<size_t>(B);
  model.zero_grads(stream);
  for (size_t first = 0, m = 0; first < batch.size(); first += static_cast<size_t>(B), ++m) {
    const size_t rows = std::min(batch.size() - first, static_cast<size_t>(B));
    fill(shape, batch.subspan(first, rows), tokens, targets);
    model.forward(tokens.data(), pos.data(), targets.data(), /*train=*/true,
                  static_cast<uint64_t>(opt.step - 1) * micro + m, stream);
    loss += model.loss_sum(stream);
    model.backward(scale, stream);
  }
  const double norm = model.grad_norm(stream);
  if (grad_norm != nullptr) *grad_norm = norm;
  if (!std::isfinite(norm)) return loss * scale;
  opt.grad_scale = clip > 0.0 ? static_cast<float>(std::min(1.0, clip / (norm + 1e-6))) : 1.0f;
  model.optimizer_step(opt, stream);
  return loss * scale;
}

ClsResult ClsTask::evaluate(GptModel& model, const GptRunShape& shape,
                            absl::Span<const ClsExample> examples, engine::Stream& stream) const {
  const int64_t B = shape.micro_batch;
  std::vector<int32_t> tokens(static_cast<size_t>(B * shape.seq_len)), targets(tokens.size());
  const std::vector<int32_t> pos = positions(shape);
  ClsResult r;
  for (size_t first = 0; first < examples.size(); first += static_cast<size_t>(B)) {
    const size_t rows = std::min(examples.size() - first, static_cast<size_t>(B));
    const absl::Span<const ClsExample> ex = examples.subspan(first, rows);
    const std::vector<int64_t> last = fill(shape, ex, tokens, targets);
    model.forward(tokens.data(), pos.data(), targets.data(), /*train=*/false, 0, stream);
    r.loss_sum += model.loss_sum(stream);
    std::vector<std::pair<int64_t, int32_t>> at;
    for (int64_t p : last) {
      for (int32_t t : labels_) at.emplace_back(p, t);
    }
    const std::vector<float> v = read_logits(model.last_logits(), at, stream);
    const size_t k = labels_.size();
    for (size_t b = 0; b < rows; ++b) {
      const auto row = v.begin() + static_cast<std::ptrdiff_t>(b * k);
      const int64_t pred = std::max_element(row, row + static_cast<std::ptrdiff_t>(k)) - row;
      r.correct += pred == ex[b].label;
    }
    r.total += static_cast<int64_t>(rows);
  }
  return r;
}

}  // namespace anvil::model
