// Zero-shot evaluation of an encoder-decoder (T5) on token ids: the [eval] tasks of
// model/tasks/eval_tasks.h defined for a model whose encoder reads the context and whose decoder
// predicts the continuation (as lm-evaluation-harness scores seq2seq models: context -> encoder,
// continuation -> decoder labels, teacher forcing from the decoder start token):
//
// Language modelling over a stream of N tokens: the N - 1 targets tokens[1 .. N) are counted
// once each, as the causal definition counts them (so loss, ppl and the adjusted ppl's
// token_ratio compare). Window w (w = 0 .. count-1, count = ceil((N - 1) / stride)) predicts
// the `stride` new tokens tokens[a, b), a = 1 + w * stride, b = min(a + stride, N), given the
// up to enc_len tokens before them, tokens[max(0, a - enc_len), a), as the encoder input:
//   encoder = tokens[max(0, a - enc_len), a)   (length >= 1; the rest is padding)
//   decoder = [decoder_start] tokens[a, b - 1)  labels = tokens[a, b)   (the rest -1)
// so stride <= dec_len (the decoder's window); each counted token sees min(a, enc_len) tokens
// of context on the encoder plus the window's earlier targets on the decoder. Example N = 10,
// stride 4: windows predict tokens 1-4, 5-8 and 9.
//
// Cloze (LAMBADA): encoder = the context (its last enc_len tokens when longer: `truncated`),
// decoder = [decoder_start] target[0, n - 1), labels = target; correct when the greedy
// prediction (argmax over the real vocabulary, teacher forcing) equals every target token.
// The target must fit the decoder: 1 <= n <= dec_len.
//
// Both run the trainer's Model (model/model.h) on records of the seq2seq layout
// (model/t5/t5_train_model.h: enc[Te] | dec[Td] | labels[Td] | enc_length[1]) with
// load_micro_batch and run_pipeline_forward (train = false, no dropout), micro_batch rows at a
// time; the loss sums come from the stage that ends the model (summed over the pipeline), the
// greedy tokens from its last_logits() (tensor parallelism is not supported: one vocabulary
// slice). Micro-batch k runs on DP rank k % dp and the results are summed over DP, every rank
// running the same number of forwards (EvalParallel, model/tasks/eval_tasks.h).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/stream.h"
#include "model/model.h"
#include "model/tasks/eval_tasks.h"

namespace anvil::model {

// The model's shape and the special tokens of its decoder.
struct Seq2SeqEvalShape {
  int64_t micro_batch = 0, enc_len = 0, dec_len = 0;
  int64_t vocab_size = 0;      // real vocabulary (the greedy argmax's range)
  int32_t decoder_start = -1;  // first decoder input (Megatron's T5 samples: [BOS])
  int32_t pad = 0;             // padding of encoder and decoder inputs (never attended / counted)
};

// Megatron-style LM windows for an encoder-decoder (see the file comment).
class Seq2SeqLmWindows {
 public:
  // InvalidArgument naming the numbers unless num_tokens >= 2, enc_len >= 1 and
  // 1 <= stride <= dec_len.
  static absl::StatusOr<Seq2SeqLmWindows> create(int64_t num_tokens, int64_t enc_len,
                                                 int64_t dec_len, int64_t stride);
  int64_t count() const { return (num_tokens_ - 1 + stride_ - 1) / stride_; }
  // The record of window w (enc[Te] | dec[Td] | labels[Td] | enc_length) into out.
  void fill(int64_t w, absl::Span<const int32_t> tokens, int32_t decoder_start, int32_t pad,
            int32_t* out) const;

 private:
  Seq2SeqLmWindows(int64_t n, int64_t te, int64_t td, int64_t s)
      : num_tokens_(n), enc_len_(te), dec_len_(td), stride_(s) {}
  int64_t num_tokens_, enc_len_, dec_len_, stride_;
};

// As evaluate_lm (eval_tasks.h) for an encoder-decoder `model` (every rank of `par` calls with
// the same arguments). InvalidArgument for an id outside the vocabulary, a bad stride or shape;
// FailedPrecondition when `par` lacks a communicator its groups need.
absl::StatusOr<LmEvalResult> evaluate_lm_seq2seq(Model& model, const Seq2SeqEvalShape& shape,
                                                 absl::Span<const int32_t> tokens, int64_t stride,
                                                 engine::Stream& stream,
                                                 const EvalParallel& par = {});

// As evaluate_cloze (eval_tasks.h); InvalidArgument naming the example for an empty context or
// target, a target longer than dec_len, or an id outside the vocabulary; FailedPrecondition
// when the model does not expose its logits.
absl::StatusOr<ClozeResult> evaluate_cloze_seq2seq(Model& model, const Seq2SeqEvalShape& shape,
                                                   const std::vector<ClozeExample>& examples,
                                                   engine::Stream& stream,
                                                   const EvalParallel& par = {});

}  // namespace anvil::model
