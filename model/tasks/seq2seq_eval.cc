// Zero-shot evaluation of an encoder-decoder (see seq2seq_eval.h): windows and examples written
// as seq2seq records, micro_batch at a time, run through the trainer's Model with
// load_micro_batch and run_pipeline_forward; loss sums and greedy tokens read back on the last
// stage, summed over PP and DP.
#include "model/tasks/seq2seq_eval.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "model/tasks/device_rows.h"
#include "model/train/pipeline_runner.h"
#include "parallel/scalar_reduce.h"

namespace anvil::model {
namespace {

absl::Status check_ids(absl::Span<const int32_t> ids, int64_t vocab, const std::string& what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: token %d is id %d, outside [model] vocab_size %d", what, i, ids[i], vocab));
    }
  }
  return absl::OkStatus();
}

absl::Status check_shape(const Seq2SeqEvalShape& s, const EvalParallel& par) {
  if (s.micro_batch < 1 || s.enc_len < 1 || s.dec_len < 1 || s.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "seq2seq evaluation: micro_batch %d, enc_len %d, dec_len %d, vocab_size %d must be >= 1",
        s.micro_batch, s.enc_len, s.dec_len, s.vocab_size));
  }
  ANVIL_RETURN_IF_ERROR(check_ids({&s.decoder_start, 1}, s.vocab_size, "decoder start token"));
  ANVIL_RETURN_IF_ERROR(check_ids({&s.pad, 1}, s.vocab_size, "padding token"));
  if (par.tp_host != nullptr) {
    return absl::FailedPreconditionError(
        "seq2seq evaluation runs with tp = 1 only (the greedy tokens read one vocabulary slice)");
  }
  if ((par.pp > 1 && (par.pp_comm == nullptr || par.pp_host == nullptr)) ||
      (par.dp > 1 && par.dp_host == nullptr)) {
    return absl::FailedPreconditionError(
        "seq2seq evaluation: EvalParallel lacks the pipeline or DP group's communicators");
  }
  return absl::OkStatus();
}

// One micro-batch of seq2seq records, every row valid (an unused row: one padding encoder
// token, no counted label).
class Records {
 public:
  explicit Records(const Seq2SeqEvalShape& s)
      : s_(s),
        width_(s.enc_len + 2 * s.dec_len + 1),
        data_(static_cast<size_t>(s.micro_batch * width_)) {
    clear();
  }
  void clear() {
    for (int64_t b = 0; b < s_.micro_batch; ++b) {
      int32_t* r = row(b);
      std::fill(r, r + s_.enc_len + s_.dec_len, s_.pad);
      std::fill(r + s_.enc_len + s_.dec_len, r + width_ - 1, -1);
      r[width_ - 1] = 1;
    }
  }
  int32_t* row(int64_t b) { return data_.data() + b * width_; }
  // Loads the micro-batch into the model's host micro-batch 0; returns the counted labels.
  int64_t load(Model& model) {
    return model.load_micro_batch(
        [this](int64_t i, int32_t* out) { std::copy(row(i), row(i) + width_, out); }, 0, 0);
  }

 private:
  Seq2SeqEvalShape s_;
  int64_t width_;
  std::vector<int32_t> data_;
};

int64_t rounds(int64_t batches, const EvalParallel& par) { return (batches + par.dp - 1) / par.dp; }
int64_t batch_of_round(int64_t round, int64_t batches, const EvalParallel& par) {
  const int64_t k = round * par.dp + par.dp_rank;
  return k < batches ? k : -1;
}

// Whether v replaces the best so far: larger, or NaN (the first NaN stays, as torch.argmax).
bool beats(double v, double best) { return !std::isnan(best) && (std::isnan(v) || v > best); }

// Greedy tokens (argmax over [0, vocab)) of logits rows `rows`.
std::vector<int32_t> greedy_tokens(engine::ConstTensorView logits, const std::vector<int64_t>& rows,
                                   int64_t vocab, engine::Stream& s) {
  const int64_t ld = logits.shape[1];
  const int64_t real = std::min(vocab, ld);
  const std::vector<double> x = read_rows(logits, rows, s);
  std::vector<int32_t> out(rows.size(), -1);
  for (size_t r = 0; r < rows.size(); ++r) {
    const double* row = x.data() + r * static_cast<size_t>(ld);
    int64_t at = 0;
    for (int64_t c = 1; c < real; ++c) {
      if (beats(row[c], row[at])) at = c;
    }
    out[r] = static_cast<int32_t>(at);
  }
  return out;
}

}  // namespace

absl::StatusOr<Seq2SeqLmWindows> Seq2SeqLmWindows::create(int64_t num_tokens, int64_t enc_len,
                                                          int64_t dec_len, int64_t stride) {
  if (num_tokens < 2 || enc_len < 1 || stride < 1 || stride > dec_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "encoder-decoder language-model windows need at least 2 tokens, an encoder of >= 1 "
        "token and 1 <= stride <= the decoder's length; got %d tokens, encoder %d, decoder %d, "
        "stride %d",
        num_tokens, enc_len, dec_len, stride));
  }
  return Seq2SeqLmWindows(num_tokens, enc_len, dec_len, stride);
}

void Seq2SeqLmWindows::fill(int64_t w, absl::Span<const int32_t> tokens, int32_t decoder_start,
                            int32_t pad, int32_t* out) const {
  const int64_t a = 1 + w * stride_, b = std::min(a + stride_, num_tokens_);
  const int64_t c = std::max<int64_t>(0, a - enc_len_);
  int32_t* enc = out;
  int32_t* dec = out + enc_len_;
  int32_t* labels = dec + dec_len_;
  for (int64_t j = 0; j < enc_len_; ++j)
    enc[j] = c + j < a ? tokens[static_cast<size_t>(c + j)] : pad;
  for (int64_t j = 0; j < dec_len_; ++j) {
    const int64_t t = a + j;  // the token label j predicts
    dec[j] = j == 0 ? decoder_start : (t < b ? tokens[static_cast<size_t>(t - 1)] : pad);
    labels[j] = t < b ? tokens[static_cast<size_t>(t)] : -1;
  }
  out[enc_len_ + 2 * dec_len_] = static_cast<int32_t>(a - c);
}

absl::StatusOr<LmEvalResult> evaluate_lm_seq2seq(Model& model, const Seq2SeqEvalShape& shape,
                                                 absl::Span<const int32_t> tokens, int64_t stride,
                                                 engine::Stream& stream, const EvalParallel& par) {
  ANVIL_RETURN_IF_ERROR(check_shape(shape, par));
  ANVIL_RETURN_IF_ERROR(check_ids(tokens, shape.vocab_size, "evaluation text"));
  ANVIL_ASSIGN_OR_RETURN(Seq2SeqLmWindows win,
                         Seq2SeqLmWindows::create(static_cast<int64_t>(tokens.size()),
                                                  shape.enc_len, shape.dec_len, stride));
  const int64_t B = shape.micro_batch, n = win.count(), batches = (n + B - 1) / B;
  Records rec(shape);
  std::vector<double> sums(3, 0.0);  // loss sum (last stage), counted targets, windows
  for (int64_t round = 0; round < rounds(batches, par); ++round) {
    rec.clear();
    const int64_t k = batch_of_round(round, batches, par);
    for (int64_t b = 0; k >= 0 && b < B && k * B + b < n; ++b) {
      win.fill(k * B + b, tokens, shape.decoder_start, shape.pad, rec.row(b));
      sums[2] += 1.0;
    }
    sums[1] += static_cast<double>(rec.load(model));
    sums[0] += run_pipeline_forward(model, par.pp, par.stage, par.pp_comm, stream);
  }
  parallel::sum_host_values(par.pp_host, absl::MakeSpan(sums).subspan(0, 1));
  parallel::sum_host_values(par.dp_host, absl::MakeSpan(sums));
  LmEvalResult r;
  r.loss_sum = sums[0];
  r.counted = static_cast<int64_t>(sums[1]);
  r.windows = static_cast<int64_t>(sums[2]);
  return r;
}

absl::StatusOr<ClozeResult> evaluate_cloze_seq2seq(Model& model, const Seq2SeqEvalShape& shape,
                                                   const std::vector<ClozeExample>& examples,
                                                   engine::Stream& stream,
                                                   const EvalParallel& par) {
  ANVIL_RETURN_IF_ERROR(check_shape(shape, par));
  const int64_t B = shape.micro_batch, Te = shape.enc_len, Td = shape.dec_len;
  for (size_t i = 0; i < examples.size(); ++i) {
    const ClozeExample& e = examples[i];
    const std::string what = absl::StrFormat("cloze example %d", i);
    if (e.context.empty() || e.target.empty() || static_cast<int64_t>(e.target.size()) > Td) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: needs at least one context token and 1 to decoder_seq_len %d target tokens; has "
          "%d context and %d target tokens",
          what, Td, e.context.size(), e.target.size()));
    }
    ANVIL_RETURN_IF_ERROR(check_ids(e.context, shape.vocab_size, what + " (context)"));
    ANVIL_RETURN_IF_ERROR(check_ids(e.target, shape.vocab_size, what + " (target)"));
  }
  if (model.ends_model() && model.last_logits().empty()) {
    return absl::FailedPreconditionError(
        "seq2seq cloze evaluation: the model does not expose its logits");
  }
  Records rec(shape);
  const int64_t n = static_cast<int64_t>(examples.size()), batches = (n + B - 1) / B;
  // Correct examples, target loss sum (last stage); examples, truncated, target tokens.
  std::vector<double> sums(5, 0.0);
  for (int64_t round = 0; round < rounds(batches, par); ++round) {
    rec.clear();
    const int64_t k = batch_of_round(round, batches, par);
    const int64_t first = k * B, rows = k < 0 ? 0 : std::min(B, n - first);
    std::vector<int64_t> target_rows;  // b * Td + j of every label, in example order
    std::vector<int32_t> wanted;
    for (int64_t b = 0; b < rows; ++b) {
      const ClozeExample& e = examples[static_cast<size_t>(first + b)];
      const int64_t len = static_cast<int64_t>(e.context.size());
      const int64_t keep = std::min(len, Te), tl = static_cast<int64_t>(e.target.size());
      if (keep < len) sums[3] += 1.0;
      int32_t* r = rec.row(b);
      std::copy(e.context.end() - keep, e.context.end(), r);
      int32_t* dec = r + Te;
      int32_t* labels = dec + Td;
      dec[0] = shape.decoder_start;
      std::copy(e.target.begin(), e.target.end() - 1, dec + 1);
      std::copy(e.target.begin(), e.target.end(), labels);
      r[Te + 2 * Td] = static_cast<int32_t>(keep);
      for (int64_t j = 0; j < tl; ++j) {
        target_rows.push_back(b * Td + j);
        wanted.push_back(e.target[static_cast<size_t>(j)]);
      }
      sums[4] += static_cast<double>(tl);
    }
    sums[2] += static_cast<double>(rows);
    rec.load(model);
    sums[1] += run_pipeline_forward(model, par.pp, par.stage, par.pp_comm, stream);
    if (model.ends_model()) {
      const std::vector<int32_t> pred =
          greedy_tokens(model.last_logits(), target_rows, shape.vocab_size, stream);
      size_t at = 0;
      for (int64_t b = 0; b < rows; ++b) {
        bool all = true;
        for (; at < target_rows.size() && target_rows[at] < (b + 1) * Td; ++at) {
          if (pred[at] != wanted[at]) all = false;
        }
        sums[0] += all;
      }
    }
  }
  parallel::sum_host_values(par.pp_host, absl::MakeSpan(sums).subspan(0, 2));
  parallel::sum_host_values(par.dp_host, absl::MakeSpan(sums));
  ClozeResult r;
  r.correct = static_cast<int64_t>(sums[0]);
  r.target_loss_sum = sums[1];
  r.total = static_cast<int64_t>(sums[2]);
  r.truncated = static_cast<int64_t>(sums[3]);
  r.target_tokens = static_cast<int64_t>(sums[4]);
  return r;
}

}  // namespace anvil::model
