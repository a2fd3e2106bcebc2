// Zero-shot language-modelling and cloze evaluation over token ids (see eval_tasks.h): window
// and example packing into micro-batches, forward with train = false through the pipeline
// runner, loss sums read back, greedy predictions from the LM-head logits of the target rows
// (combined over the vocabulary slices of TP), sums over PP and DP.
#include "model/tasks/eval_tasks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/tasks/device_rows.h"
#include "model/train/pipeline_runner.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/scalar_reduce.h"

namespace anvil::model {
namespace {

// Megatron's exp(min(20, x)): a perplexity that saturates instead of overflowing (NaN stays).
double capped_exp(double x) { return std::isnan(x) ? x : std::exp(std::min(20.0, x)); }

// Every communicator the model's shard needs is in `par`.
absl::Status check_layout(const GptModel& model, const EvalParallel& par) {
  const GptShard& s = model.shard();
  const bool whole = s.pre && s.post;
  std::string missing;
  if (s.tp > 1 && par.tp_host == nullptr) missing = "tp_host (the TP group's CPU communicator)";
  if (!whole && (par.pp < 2 || par.pp_comm == nullptr || par.pp_host == nullptr)) {
    missing = "pp, pp_comm and pp_host (this rank is a pipeline stage)";
  }
  if (par.dp > 1 && par.dp_host == nullptr) missing = "dp_host (the DP group's CPU communicator)";
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrFormat("zero-shot evaluation on a model of tp %d%s: EvalParallel lacks %s", s.tp,
                      whole ? "" : ", a pipeline stage", missing));
}

// Micro-batch k of `batches` runs on DP rank k % dp, in rounds of dp micro-batches; every rank
// runs every round (-1: past the end, an empty micro-batch).
int64_t rounds(int64_t batches, const EvalParallel& par) { return (batches + par.dp - 1) / par.dp; }
int64_t batch_of_round(int64_t round, int64_t batches, const EvalParallel& par) {
  const int64_t k = round * par.dp + par.dp_rank;
  return k < batches ? k : -1;
}

// Whether v replaces the best value so far: larger, or NaN (NaN beats every number and the first
// NaN stays: torch.argmax's rule).
bool beats(double v, double best) { return !std::isnan(best) && (std::isnan(v) || v > best); }

// The greedy candidates of this rank's vocabulary slice for rows `rows` of the last forward's
// logits: [rows.size(), 2] as (value, vocabulary index); index -1 where the slice has no real
// column (a TP rank's slice may be all padding).
std::vector<double> slice_best(const GptModel& model, const std::vector<int64_t>& rows,
                               engine::Stream& s) {
  const engine::ConstTensorView logits = model.last_logits();  // [B*T, padded / tp]
  const int64_t ld = logits.shape[1];
  const int64_t first = model.shard().tp_rank * ld;
  const int64_t real = std::clamp<int64_t>(model.config().vocab_size - first, 0, ld);
  const std::vector<double> x = read_rows(logits, rows, s);  // [rows, ld]
  std::vector<double> best(2 * rows.size(), -1.0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const double* row = x.data() + r * static_cast<size_t>(ld);
    int64_t at = -1;
    for (int64_t c = 0; c < real; ++c) {
      if (at < 0 || beats(row[c], row[at])) at = c;
    }
    if (at >= 0) {
      best[2 * r] = row[at];
      best[2 * r + 1] = static_cast<double>(first + at);
    }
  }
  return best;
}

// The greedy tokens of rows `rows` over the whole vocabulary: the TP ranks' candidates in
// vocabulary order, the first best kept.
std::vector<int32_t> greedy_tokens(const GptModel& model, const std::vector<int64_t>& rows,
                                   parallel::Comm* tp_host, engine::Stream& s) {
  std::vector<double> mine = slice_best(model, rows, s);
  const int tp = static_cast<int>(model.shard().tp);
  std::vector<double> all = mine;  // [tp, rows, 2]
  if (tp > 1) {
    all.assign(mine.size() * static_cast<size_t>(tp), 0.0);
    engine::Stream cpu = engine::Stream::cpu();
    const int64_t n = static_cast<int64_t>(mine.size());
    tp_host->all_gather(
        engine::make_view(all.data(), engine::DType::kF64, engine::Device::kCpu, {tp * n}),
        engine::make_view(mine.data(), engine::DType::kF64, engine::Device::kCpu, {n}), cpu);
  }
  std::vector<int32_t> out(rows.size(), -1);
  for (size_t r = 0; r < rows.size(); ++r) {
    double value = 0.0;
    for (int k = 0; k < tp; ++k) {
      const double v = all[(static_cast<size_t>(k) * rows.size() + r) * 2];
      const double i = all[(static_cast<size_t>(k) * rows.size() + r) * 2 + 1];
      if (i < 0) continue;
      if (out[r] < 0 || beats(v, value)) {
        value = v;
        out[r] = static_cast<int32_t>(i);
      }
    }
  }
  return out;
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

EvalParallel eval_parallel(const parallel::ProcessGrid& grid, parallel::GroupComms& cpu,
                           parallel::Comm* pp_device) {
  EvalParallel p;
  if (grid.pp_size() > 1) {
    p.pp = grid.pp_size();
    p.stage = grid.pp_rank();
    p.pp_comm = pp_device;
    p.pp_host = cpu.pp.get();
  }
  if (grid.tp_size() > 1) p.tp_host = cpu.tp.get();
  if (grid.dp_size() > 1) {
    p.dp = grid.dp_size();
    p.dp_rank = grid.dp_rank();
    p.dp_host = cpu.dp.get();
  }
  return p;
}

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
                                         const EvalParallel& par, const EvalProgress& progress) {
  ANVIL_RETURN_IF_ERROR(check_layout(model, par));
  const int64_t vocab = model.config().vocab_size;
  ANVIL_RETURN_IF_ERROR(check_ids(tokens, vocab, "evaluation text"));
  ANVIL_RETURN_IF_ERROR(check_ids({&pad, 1}, vocab, "padding token"));
  ANVIL_ASSIGN_OR_RETURN(
      LmWindows win, LmWindows::create(static_cast<int64_t>(tokens.size()), shape.seq_len, stride));
  const int64_t B = shape.micro_batch, T = shape.seq_len, n = win.count();
  const int64_t batches = (n + B - 1) / B;
  HostBatch hb(shape, pad);
  // This rank's loss sum (last stage), counted targets and windows.
  std::vector<double> sums(3, 0.0);
  for (int64_t round = 0; round < rounds(batches, par); ++round) {
    hb.clear(pad);
    const int64_t k = batch_of_round(round, batches, par);
    for (int64_t b = 0; k >= 0 && b < B && k * B + b < n; ++b) {
      win.fill(k * B + b, tokens, pad, hb.tokens.data() + b * T, hb.targets.data() + b * T);
      sums[2] += 1.0;
    }
    for (int32_t t : hb.targets) sums[1] += t >= 0;
    const GptBatch batch{hb.tokens.data(), hb.positions.data(), hb.targets.data()};
    sums[0] += run_pipeline_forward(model, par.pp, par.stage, par.pp_comm, batch, stream);
    if (progress) progress(std::min((round + 1) * par.dp * B, n), n);
  }
  parallel::sum_host_values(par.pp_host, absl::MakeSpan(sums).subspan(0, 1));
  parallel::sum_host_values(par.dp_host, absl::MakeSpan(sums));
  LmEvalResult r;
  r.loss_sum = sums[0];
  r.counted = static_cast<int64_t>(sums[1]);
  r.windows = static_cast<int64_t>(sums[2]);
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
                                           engine::Stream& stream, const EvalParallel& par,
                                           const EvalProgress& progress) {
  ANVIL_RETURN_IF_ERROR(check_layout(model, par));
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
  const bool post = model.shard().post;
  HostBatch hb(shape, pad);
  const int64_t n = static_cast<int64_t>(examples.size()), batches = (n + B - 1) / B;
  // This rank's correct examples and target loss sum (last stage), then its examples,
  // truncated examples and target tokens.
  std::vector<double> sums(5, 0.0);
  for (int64_t round = 0; round < rounds(batches, par); ++round) {
    hb.clear(pad);
    const int64_t k = batch_of_round(round, batches, par);
    const int64_t first = k * B, rows = k < 0 ? 0 : std::min(B, n - first);
    std::vector<int64_t> target_rows;  // row * T + p of every counted target
    for (int64_t b = 0; b < rows; ++b) {
      const ClozeExample& e = examples[static_cast<size_t>(first + b)];
      std::vector<int32_t> seq = e.context;
      seq.insert(seq.end(), e.target.begin(), e.target.end());
      const int64_t excess = static_cast<int64_t>(seq.size()) - (T + 1);
      if (excess > 0) {
        seq.erase(seq.begin(), seq.begin() + excess);
        sums[3] += 1.0;
      }
      const int64_t len = static_cast<int64_t>(seq.size());
      const int64_t tl = static_cast<int64_t>(e.target.size());
      int32_t* in = hb.tokens.data() + b * T;
      int32_t* tg = hb.targets.data() + b * T;
      std::copy(seq.begin(), seq.end() - 1, in);
      // Input position p predicts seq[p + 1]; the target tokens are the last tl of seq.
      for (int64_t p = len - 1 - tl; p < len - 1; ++p) {
        tg[p] = seq[static_cast<size_t>(p + 1)];
        target_rows.push_back(b * T + p);
      }
      sums[4] += static_cast<double>(tl);
    }
    sums[2] += static_cast<double>(rows);
    const GptBatch batch{hb.tokens.data(), hb.positions.data(), hb.targets.data()};
    sums[1] += run_pipeline_forward(model, par.pp, par.stage, par.pp_comm, batch, stream);
    if (post) {
      const std::vector<int32_t> pred = greedy_tokens(model, target_rows, par.tp_host, stream);
      size_t at = 0;  // target_rows are in example order
      for (int64_t b = 0; b < rows; ++b) {
        bool all = true;
        for (; at < target_rows.size() && target_rows[at] < (b + 1) * T; ++at) {
          if (pred[at] != hb.targets[static_cast<size_t>(target_rows[at])]) all = false;
        }
        sums[0] += all;
      }
    }
    if (progress) progress(std::min((round + 1) * par.dp * B, n), n);
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
