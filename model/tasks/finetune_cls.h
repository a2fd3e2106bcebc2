// Classification finetuning of a GPT (at each sequence's last token) or a BERT (at [CLS]), with
// one of two heads:
//   label words (ClsTask::create): class c is a verbalizer token label_tokens[c] (" old" /
//     " new"); the only counted target of an example is label_tokens[label] at its last text
//     position, so training minimizes the tied LM head's cross-entropy there (over the whole
//     vocabulary) and the prediction is the class whose label token has the largest logit
//     (argmax over the K label tokens; ties to the smaller class). No new parameters: the
//     result is an ordinary GPT checkpoint.
//       loss(example) = -log softmax(logits[last])[label_tokens[label]]
//   linear (ClsTask::create_linear): a LinearHead (model/blocks/cls_head.h) on the final hidden
//   state
//     (GPT: after ln_f) at each sequence's classification position: K classes, or multiple choice
//     with C sequences per example (RACE) scored by linear(d, 1) and a softmax over the choices.
//     The model runs with GptModel::set_hidden_head (no LM head).
// An example's tokens are a row of the micro-batch, padded with `pad`; multiple-choice examples
// fill `choices` consecutive rows each. GPT keeps a sequence's last seq_len tokens and
// classifies at its last token; a bidirectional encoder (BERT, linear head with a pooler) keeps the
// first seq_len, with their token types and the sequence's length as the padding mask, and
// classifies at [CLS], the first token (Megatron's Classification).
// Parallelism (ClsParallel): the model is the GptShard of the rank's grid coordinates, as in
// pretraining. Data parallelism: each of dp ranks runs its dp-th of every batch (and of the
// evaluation set); gradients of the model and head are summed over the ranks (each backward
// scales by 1 / global batch), so dp ranks compute what one rank computes. Tensor parallelism:
// the model is split as in pretraining; the label-word head reads the vocab-parallel LM head
// (its loss is the vocab-parallel cross-entropy, the label tokens' logits are gathered over TP
// for the prediction); the linear head is replicated on the TP ranks and reads the final
// hidden state, which is replicated after the final norm, so every TP rank computes the same
// head gradient (no reduction; counted once, on TP rank 0, in the gradient norm), as Megatron
// treats its replicated layernorms. Pipeline parallelism: a training step's micro-batches run
// through the pipeline runner (model/train/pipeline_runner.h, 1F1B); the head works on the last
// stage right before each micro-batch's backward there (the only stage whose head is trained
// and saved); loss and accuracy are computed there and summed over the pipeline group, so every
// rank returns the same numbers. The tied embedding's gradient is summed between the first and
// last stage, as in pretraining.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/stream.h"
#include "model/blocks/cls_head.h"
#include "model/stack/gpt.h"

namespace anvil::parallel {
class Comm;
}

namespace anvil::model {

struct ClsExample {
  std::vector<int32_t> tokens;                     // >= 1 token (one sequence per example)
  std::vector<int32_t> types;                      // BERT token types of `tokens` (empty: all 0)
  std::vector<std::vector<int32_t>> choices;       // multiple choice: one sequence per choice
  std::vector<std::vector<int32_t>> choice_types;  // BERT: their token types (empty: all 0)
  int32_t label = 0;                               // 0 .. K-1
};

struct ClsResult {
  int64_t correct = 0, total = 0;
  double loss_sum = 0.0;  // nats
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / total : 0.0; }
  double loss() const { return total > 0 ? loss_sum / static_cast<double>(total) : 0.0; }
};

// The parallel layout (default: one rank). Data parallelism: `grads` reduces the model's flat
// gradient buffer (on its device: NCCL on CUDA), `host` the head's gradients and the counters
// (CPU buffers); on the CPU both may be the same communicator. Tensor parallelism lives in the
// model (GptShard::tp_comm); `tp_host` is the TP group's CPU communicator (the gradient norm's
// parts, the label-word logits). Pipeline parallelism: `pp` stages of one model chunk each
// (1F1B), this rank's `stage`; `pp_comm` carries activations (the model's device), `pp_host`
// is the pipeline group's CPU communicator (loss, counters, norm), `embedding` sums the tied
// embedding's gradient between the first and the last stage (the model's device; null on the
// other stages and without pipeline parallelism).
struct ClsParallel {
  parallel::Comm* grads = nullptr;
  parallel::Comm* host = nullptr;
  int dp = 1, rank = 0;
  parallel::Comm* tp_host = nullptr;
  int pp = 1, stage = 0;
  parallel::Comm* pp_comm = nullptr;
  parallel::Comm* pp_host = nullptr;
  parallel::Comm* embedding = nullptr;
};

// Activation slots the model of pipeline `stage` of `stages` needs (GptShard::act_slots) for
// steps of `global_batch` examples, `micro_batch` examples per forward, over `dp` ranks.
absl::StatusOr<int64_t> cls_activation_slots(int stages, int stage, int64_t global_batch,
                                             int64_t micro_batch, int dp);

class ClsTask {
 public:
  // InvalidArgument unless there are >= 2 distinct label tokens inside [0, vocab) and pad is.
  static absl::StatusOr<ClsTask> create(std::vector<int32_t> label_tokens, int64_t vocab,
                                        int32_t pad);
  // InvalidArgument unless pad is inside [0, vocab). The head's classes (or choices) are K.
  static absl::StatusOr<ClsTask> create_linear(blocks::LinearHead head, int64_t vocab, int32_t pad);

  int64_t classes() const;
  // Sequences per example (choices of a multiple-choice head, else 1): the model's micro-batch
  // rows are micro_batch examples times this.
  int64_t rows_per_example() const { return head_ ? head_->rows_per_example() : 1; }
  blocks::LinearHead* head() { return head_ ? &*head_ : nullptr; }

  // InvalidArgument naming the example (index `first` + i) for empty tokens, a label outside
  // 0 .. K-1, a token id outside the vocabulary or (multiple choice) not K choices.
  absl::Status check(absl::Span<const ClsExample> examples, int64_t first = 0) const;

  // One optimizer step on `batch` (the global batch: this rank takes its dp-th; checked; split
  // into micro-batches of the model's shape run through the pipeline, the gradient of the mean
  // loss accumulated), the gradient clipped to global norm `clip` (0: no clipping; Megatron's
  // clip_grad rule), AdamW with `opt` (its grad_scale is overwritten by the clip factor).
  // Returns the batch's mean loss and sets *grad_norm (before clipping). A non-finite norm
  // skips the update (the loss is still returned). `model` must have been given
  // set_hidden_head(true) for a linear head (on the last stage). The model's act_slots must
  // cover the 1F1B plan of this rank's micro-batches (cls_activation_slots).
  double train_step(GptModel& model, const GptRunShape& shape, absl::Span<const ClsExample> batch,
                    OptimizerStep opt, double clip, engine::Stream& stream, double* grad_norm,
                    const ClsParallel& par = {});

  // Accuracy and loss sum over `examples` (forward with train = false), over all ranks.
  ClsResult evaluate(GptModel& model, const GptRunShape& shape,
                     absl::Span<const ClsExample> examples, engine::Stream& stream,
                     const ClsParallel& par = {});

 private:
  ClsTask(std::vector<int32_t> labels, std::optional<blocks::LinearHead> head, int64_t vocab,
          int32_t pad)
      : labels_(std::move(labels)), head_(std::move(head)), vocab_(vocab), pad_(pad) {}
  // One micro-batch's host inputs (GptBatch) and each sequence's classification position.
  struct HostBatch {
    std::vector<int32_t> tokens, positions, targets, types;  // [B*T]
    std::vector<int32_t> lengths;                            // [B]
    std::vector<int64_t> at;                                 // row * T + p, per sequence
    GptBatch batch(bool encoder) const;                      // encoder: + token types and lengths
  };
  // encoder (bidirectional, BERT): the first seq_len tokens, classified at [CLS]; else the last.
  HostBatch fill(const GptRunShape& shape, absl::Span<const ClsExample> ex, bool encoder) const;
  // The linear head on micro-batch `ex` (inputs `h`) after its forward into `slot` (last stage
  // only): its loss sum and correct predictions; with `train`, also the head's backward
  // (scaled by `scale`: gradients +=) and d(final hidden) written for the model's backward.
  ClsResult classify(GptModel& model, const HostBatch& h, absl::Span<const ClsExample> ex,
                     int64_t slot, bool train, uint64_t dropout_offset, double scale,
                     engine::Stream& s);
  // Label words after an evaluation forward (last stage): the label tokens' logits of each
  // sequence of `h` appended to *out ([sequences, K]; 0 for label tokens outside this TP
  // rank's vocabulary slice: the caller sums over TP).
  void label_logits(GptModel& model, const HostBatch& h, engine::Stream& s,
                    std::vector<double>* out) const;
  // After the last backward of a step: sequence parallelism's layernorm sums, the tied
  // embedding between the first and last stage, the model's and the head's gradients over DP.
  void reduce_gradients(GptModel& model, const ClsParallel& par, engine::Stream& stream);
  // The summed squares of this rank's gradients, counting every parameter once over the
  // model-parallel ranks, summed over TP and PP.
  double grad_sum_squares(GptModel& model, const ClsParallel& par, engine::Stream& s) const;

  std::vector<int32_t> labels_;  // label words: their tokens
  std::optional<blocks::LinearHead> head_;
  int64_t vocab_;
  int32_t pad_;
};

}  // namespace anvil::model
