// Zero-shot language-modelling and cloze evaluation over token ids (see eval_tasks.h): window
// and example packing into micro-batches, forward with train = false, loss sums read back,
// greedy predictions by ops::row_argmax over the LM-head logits.
#include "model/eval_tasks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/arena.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "ops/argmax.h"

namespace anvil::model {
namespace {

// Megatron's exp(min(20, x)): a perplexity that saturates instead of overflowing (NaN stays).
double capped_exp(double x) { return std::isnan(x) ? x : std::exp(std::min(20.0, x)); }

// The evaluation runs the whole model on this rank.
absl::Status check_whole_model(const GptModel& model) {
  const GptShard& s = model.shard();
  if (s.tp == 1 && s.pre && s.post && s.layer_chunks(model.config()).size() == 1) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "zero-shot evaluation needs the whole model on one rank (tp 1, one pipeline stage); this "
      "rank has tp %d, %d model chunk(s)%s",
      s.tp, s.layer_chunks(model.config()).size(), s.pre && s.post ? "" : ", a pipeline stage"));
}

absl::Status check_ids(absl::Span<const int32_t> ids, int64_t vocab, const std::string& what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: token %d is id %d, outside [model] vocab_size %d", what, i, ids[i], vocab));
    }
  }
  return absl::OkStatus();
}

// Host micro-batch [B*T] i32 arrays; positions 0 .. T-1 in every row.
struct HostBatch {
  std::vector<int32_t> tokens, targets, positions;
  HostBatch(const GptRunShape& shape, int32_t pad)
      : tokens(static_cast<size_t>(shape.micro_batch * shape.seq_len), pad),
        targets(tokens.size(), -1),
        positions(tokens.size()) {
    for (size_t i = 0; i < positions.size(); ++i) {
      positions[i] = static_cast<int32_t>(static_cast<int64_t>(i) % shape.seq_len);
    }
  }
  void clear(int32_t pad) {
    std::fill(tokens.begin(), tokens.end(), pad);
    std::fill(targets.begin(), targets.end(), -1);
  }
};

}  // namespace

absl::StatusOr<LmWindows> LmWindows::create(int64_t num_tokens, int64_t seq_len, int64_t stride) {
  if (num_tokens < 2 || seq_len < 1 || stride < 1 || stride > seq_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "language-model windows need at least 2 tokens, seq_len >= 1 and 1 <= stride <= seq_len; "
        "got %d tokens, seq_len %d, stride %d",
        num_tokens, seq_len, stride));
  }
  return LmWindows(num_tokens, seq_len, stride);
}

int64_t LmWindows::count() const {
  const int64_t targets = std::max<int64_t>(num_tokens_ - 1 - stride_, 0);
  return std::max<int64_t>((targets + stride_ - 1) / stride_ + 1, 1);
}

void LmWindows::fill(int64_t w, absl::Span<const int32_t> tokens, int32_t pad, int32_t* in,
                     int32_t* targets) const {
  const int64_t start = w * stride_;
  for (int64_t j = 0; j < seq_len_; ++j) {
    const int64_t src = start + j;
    in[j] = src < num_tokens_ ? tokens[static_cast<size_t>(src)] : pad;
    // Window 0 counts every target; a later window its last `stride` (all when stride == T).
    const bool counted = src + 1 < num_tokens_ && (w == 0 || j >= seq_len_ - stride_);
    targets[j] = counted ? tokens[static_cast<size_t>(src + 1)] : -1;
  }
}

absl::StatusOr<LmEvalResult> evaluate_lm(GptModel& model, const GptRunShape& shape,
                                         absl::Span<const int32_t> tokens, int64_t stride,
                                         int32_t pad, engine::Stream& stream,
                                         const EvalProgress& progress) {
  ANVIL_RETURN_IF_ERROR(check_whole_model(model));
  const int64_t vocab = model.config().vocab_size;
  ANVIL_RETURN_IF_ERROR(check_ids(tokens, vocab, "evaluation text"));
  ANVIL_RETURN_IF_ERROR(check_ids({&pad, 1}, vocab, "padding token"));
  ANVIL_ASSIGN_OR_RETURN(
      LmWindows win, LmWindows::create(static_cast<int64_t>(tokens.size()), shape.seq_len, stride));
  const int64_t B = shape.micro_batch, T = shape.seq_len, n = win.count();
  HostBatch hb(shape, pad);
  LmEvalResult r;
  for (int64_t first = 0; first < n; first += B) {
    hb.clear(pad);
    for (int64_t b = 0; b < B && first + b < n; ++b) {
      win.fill(first + b, tokens, pad, hb.tokens.data() + b * T, hb.targets.data() + b * T);
    }
    for (int32_t t : hb.targets) r.counted += t >= 0;
    model.forward(hb.tokens.data(), hb.positions.data(), hb.targets.data(), /*train=*/false, 0,
                  stream);
    r.loss_sum += model.loss_sum(stream);
    r.windows = std::min(first + B, n);
    if (progress) progress(r.windows, n);
  }
  return r;
}

LmReport lm_report(const LmEvalResult& r, int64_t original_words) {
  LmReport out;
  out.tokens = r.counted;
  out.windows = r.windows;
  out.words = original_words;
  out.loss = r.counted > 0 ? r.loss_sum / static_cast<double>(r.counted)
                           : std::numeric_limits<double>::quiet_NaN();
  out.ppl = capped_exp(out.loss);
  out.token_ratio = original_words >= 2
                        ? static_cast<double>(r.counted) / static_cast<double>(original_words - 1)
                        : std::numeric_limits<double>::quiet_NaN();
  out.adjusted_ppl = capped_exp(out.loss * out.token_ratio);
  return out;
}

absl::StatusOr<ClozeResult> evaluate_cloze(GptModel& model, const GptRunShape& shape,
                                           const std::vector<ClozeExample>& examples, int32_t pad,
                                           engine::Stream& stream, const EvalProgress& progress) {
  ANVIL_RETURN_IF_ERROR(check_whole_model(model));
  const int64_t B = shape.micro_batch, T = shape.seq_len;
  const int64_t vocab = model.config().vocab_size;
  ANVIL_RETURN_IF_ERROR(check_ids({&pad, 1}, vocab, "padding token"));
  for (size_t i = 0; i < examples.size(); ++i) {
    const ClozeExample& e = examples[i];
    const std::string what = absl::StrFormat("cloze example %d", i);
    if (e.context.empty() || e.target.empty() || static_cast<int64_t>(e.target.size()) > T) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: needs at least one context token and 1 to seq_len %d target tokens; has %d "
          "context and %d target tokens",
          what, T, e.context.size(), e.target.size()));
    }
    ANVIL_RETURN_IF_ERROR(check_ids(e.context, vocab, what + " (context)"));
    ANVIL_RETURN_IF_ERROR(check_ids(e.target, vocab, what + " (target)"));
  }
  // The greedy predictions, on the model's device: [B*T] i32.
  ANVIL_ASSIGN_OR_RETURN(
      engine::Arena arena,
      engine::Arena::create(stream.device(), engine::arena_bytes(engine::DType::kI32, {B * T}),
                            "cloze predictions"));
  ANVIL_ASSIGN_OR_RETURN(engine::TensorView pred,
                         arena.allocate(engine::DType::kI32, {B * T}, "argmax"));
  std::vector<int32_t> host_pred(static_cast<size_t>(B * T));
  const int64_t padded = model.config().padded();
  HostBatch hb(shape, pad);
  ClozeResult r;
  const int64_t n = static_cast<int64_t>(examples.size());
  for (int64_t first = 0; first < n; first += B) {
    hb.clear(pad);
    const int64_t rows = std::min(B, n - first);
    for (int64_t b = 0; b < rows; ++b) {
      const ClozeExample& e = examples[static_cast<size_t>(first + b)];
      std::vector<int32_t> seq = e.context;
      seq.insert(seq.end(), e.target.begin(), e.target.end());
      const int64_t excess = static_cast<int64_t>(seq.size()) - (T + 1);
      if (excess > 0) {
        seq.erase(seq.begin(), seq.begin() + excess);
        r.truncated++;
      }
      const int64_t len = static_cast<int64_t>(seq.size());
      const int64_t tl = static_cast<int64_t>(e.target.size());
      int32_t* in = hb.tokens.data() + b * T;
      int32_t* tg = hb.targets.data() + b * T;
      std::copy(seq.begin(), seq.end() - 1, in);
      // Input position p predicts seq[p + 1]; the target tokens are the last tl of seq.
      for (int64_t p = len - 1 - tl; p < len - 1; ++p) tg[p] = seq[static_cast<size_t>(p + 1)];
      r.target_tokens += tl;
    }
    model.forward(hb.tokens.data(), hb.positions.data(), hb.targets.data(), /*train=*/false, 0,
                  stream);
    r.target_loss_sum += model.loss_sum(stream);
    ops::row_argmax({B * T, vocab, padded}, pred, model.last_logits(), stream);
    engine::copy(
        engine::make_view(host_pred.data(), engine::DType::kI32, engine::Device::kCpu, {B * T}),
        pred, stream);
    stream.synchronize();
    for (int64_t b = 0; b < rows; ++b) {
      bool all = true;
      for (int64_t j = b * T; j < (b + 1) * T; ++j) {
        if (hb.targets[j] >= 0 && host_pred[j] != hb.targets[j]) all = false;
      }
      r.correct += all;
    }
    r.total += rows;
    if (progress) progress(r.total, n);
  }
  return r;
}

}  // namespace anvil::model
