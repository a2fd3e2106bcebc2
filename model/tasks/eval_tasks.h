// Zero-shot evaluation of a GPT model on token ids, with Megatron-DeepSpeed's semantics
// (tasks/zeroshot_gpt: evaluate.py, datasets.py); the text side (reading files, the wikitext
// detokenizer, tokenization, LAMBADA's context / last-word split) is io/eval_text's.
//
// Language modelling (WIKITEXT103's "loss" metric, _LMDataset): over a stream of N tokens,
// window w (w = 0 .. count-1) starts at w * stride and feeds tokens [start, start + T) to
// predict [start + 1, start + T]; positions past the stream are padding, never counted. Window 0
// counts all its T targets; a later one only its last `stride` (Megatron's --overlapping-eval:
// each counted token sees at least T - stride tokens of context); stride = T: disjoint windows.
// count = max(ceil(max(N - 1 - stride, 0) / stride) + 1, 1), Megatron's total_sequences, so each
// of the N - 1 targets is counted exactly once. Example N = 10, T = 4, stride = 2: window 0
// counts targets 1-4, window 1 (start 2) 5-6, window 2 (start 4) 7-8, window 3 (start 6) 9,
// window 4 (start 8) nothing (Megatron runs it too). Reported (evaluate_and_print_results):
//   loss = loss_sum / (N - 1);  ppl = exp(min(20, loss));
//   adjusted ppl = exp(min(20, loss * token_ratio)),  token_ratio = (N - 1) / (W - 1)
// with W the words of the original text (len(text.strip().split(" "))): a per-word perplexity
// that compares across tokenizers.
//
// Cloze (LAMBADA's "accuracy" metric, _LambadaDataset): an example is context + target tokens;
// it is correct when the greedy prediction (argmax over the real vocabulary, teacher forcing)
// equals every target token. An example longer than T + 1 tokens loses context from its front
// (Megatron would fail; counted in `truncated`). The loss of the target tokens is summed too.
//
// Both run the model's forward with train = false (no dropout) over micro-batches of the
// model's shape, on one rank or on the model's parallel layout (EvalParallel):
//   - pipeline: each micro-batch runs through the stages (run_pipeline_forward); the last stage
//     holds the losses and predictions, summed over the pipeline group so every rank returns
//     the same result;
//   - tensor: the loss is the vocab-parallel cross-entropy (the same on every TP rank); the
//     greedy prediction is each TP rank's best (value, index) over its vocabulary slice,
//     all-gathered and combined in vocabulary order (ties: the smaller index; NaN: larger than
//     any number, as ops::row_argmax);
//   - data: micro-batch k runs on DP rank k % dp and the results are summed over DP. Every
//     rank runs the same number of forwards (an empty micro-batch past the end), so the
//     collectives inside the model (a ZeRO-3 gather over DP) stay in step.
// A result is the same for every layout (to rounding of the parallel sums).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/stream.h"
#include "model/stack/gpt.h"

namespace anvil::parallel {
class Comm;
class ProcessGrid;
struct GroupComms;
}  // namespace anvil::parallel

namespace anvil::model {

// The model's parallel layout for an evaluation (default: one rank with the whole model). The
// host communicators are CPU ones (MPI or TCP); pp_comm carries activations on the model's
// device. Each is null where its group has one rank.
struct EvalParallel {
  int pp = 1, stage = 0;
  parallel::Comm* pp_comm = nullptr;  // activations between the stages
  parallel::Comm* pp_host = nullptr;  // the last stage's sums to every stage
  parallel::Comm* tp_host = nullptr;  // the greedy candidates of the vocabulary slices
  int dp = 1, dp_rank = 0;
  parallel::Comm* dp_host = nullptr;  // the DP ranks' shares summed
};

// The layout of a rank of `grid`: its groups' CPU communicators from `cpu` and `pp_device`, the
// pipeline group's communicator on the model's device (null with one stage).
EvalParallel eval_parallel(const parallel::ProcessGrid& grid, parallel::GroupComms& cpu,
                           parallel::Comm* pp_device);

// Megatron's _LMDataset windows over a stream of num_tokens tokens.
class LmWindows {
 public:
  // InvalidArgument naming the numbers unless num_tokens >= 2, seq_len >= 1 and
  // 1 <= stride <= seq_len.
  static absl::StatusOr<LmWindows> create(int64_t num_tokens, int64_t seq_len, int64_t stride);

  int64_t count() const;  // windows
  int64_t seq_len() const { return seq_len_; }
  // Inputs in[0..T) and targets t[0..T) of window w: in[j] = tokens[start + j], t[j] =
  // tokens[start + j + 1] where that target is counted by this window, else -1; inputs past the
  // stream are `pad`.
  void fill(int64_t w, absl::Span<const int32_t> tokens, int32_t pad, int32_t* in,
            int32_t* targets) const;

 private:
  LmWindows(int64_t n, int64_t t, int64_t s) : num_tokens_(n), seq_len_(t), stride_(s) {}
  int64_t num_tokens_, seq_len_, stride_;
};

// Called after each micro-batch with the items (windows, examples) done and their total.
using EvalProgress = std::function<void(int64_t done, int64_t total)>;

struct LmEvalResult {
  double loss_sum = 0.0;  // summed token losses (nats) of the counted targets
  int64_t counted = 0;    // targets counted (= num_tokens - 1)
  int64_t windows = 0;    // windows run
};

// `shape`: the (micro_batch, seq_len) the model was created with; `pad`: the padding token
// (Megatron's eod); `par`: the model's layout (every rank of it calls, with the same
// arguments). FailedPrecondition when `par` lacks a communicator the model's shard needs;
// InvalidArgument for a token id outside the vocabulary. `progress` counts every DP rank's
// windows.
absl::StatusOr<LmEvalResult> evaluate_lm(GptModel& model, const GptRunShape& shape,
                                         absl::Span<const int32_t> tokens, int64_t stride,
                                         int32_t pad, engine::Stream& stream,
                                         const EvalParallel& par = {},
                                         const EvalProgress& progress = {});

struct LmReport {
  double loss = 0.0;          // loss_sum / counted
  double ppl = 0.0;           // exp(min(20, loss))
  double adjusted_ppl = 0.0;  // exp(min(20, loss * token_ratio)); NaN without words (W < 2)
  double token_ratio = 0.0;   // counted / (W - 1); NaN without words
  int64_t tokens = 0;         // counted targets
  int64_t windows = 0;
  int64_t words = 0;  // W (0: unknown, e.g. token ids from a dataset)
};
LmReport lm_report(const LmEvalResult& r, int64_t original_words);

struct ClozeExample {
  std::vector<int32_t> context;  // >= 1 token
  std::vector<int32_t> target;   // >= 1 token (LAMBADA: the last word's, or the last token)
};

struct ClozeResult {
  int64_t correct = 0;
  int64_t total = 0;
  int64_t truncated = 0;         // examples that lost context tokens to fit T + 1
  double target_loss_sum = 0.0;  // summed losses of every target token
  int64_t target_tokens = 0;
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / total : 0.0; }
};

// As evaluate_lm; InvalidArgument for an example with an empty context or target, a target
// longer than seq_len, or an id outside the vocabulary (naming the example).
absl::StatusOr<ClozeResult> evaluate_cloze(GptModel& model, const GptRunShape& shape,
                                           const std::vector<ClozeExample>& examples, int32_t pad,
                                           engine::Stream& stream, const EvalParallel& par = {},
                                           const EvalProgress& progress = {});

}  // namespace anvil::model
