// Classification finetuning of a GPT through its last token (the LM as classifier, GPT-style):
// class c is a verbalizer token label_tokens[c] (e.g. " old" / " new"). An example's text tokens
// (its last seq_len kept) are the inputs and its only counted target is label_tokens[label] at
// the last text position, so training minimizes the tied LM head's cross-entropy at the last
// token (over the whole vocabulary), and the prediction is the class whose label token has the
// largest logit there (argmax over the K label tokens only; ties to the smaller class).
//   loss(example) = -log softmax(logits[last])[label_tokens[label]]
// No new parameters: the "head" is the tied LM head at the last token, so any GPT checkpoint
// (bin/convert import included) finetunes and the result is an ordinary GPT checkpoint.
// One rank holds the whole model (tp = 1, one pipeline stage), as model/eval_tasks.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/stream.h"
#include "model/gpt.h"

namespace anvil::model {

struct ClsExample {
  std::vector<int32_t> tokens;  // >= 1 token
  int32_t label = 0;            // 0 .. K-1
};

struct ClsResult {
  int64_t correct = 0, total = 0;
  double loss_sum = 0.0;  // of the label tokens (nats)
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / total : 0.0; }
  double loss() const { return total > 0 ? loss_sum / static_cast<double>(total) : 0.0; }
};

class ClsTask {
 public:
  // InvalidArgument unless there are >= 2 distinct label tokens inside [0, vocab) and pad is.
  static absl::StatusOr<ClsTask> create(std::vector<int32_t> label_tokens, int64_t vocab,
                                        int32_t pad);

  // InvalidArgument naming the example (index `first` + i) for empty tokens, a label outside
  // 0 .. K-1 or a token id outside the vocabulary.
  absl::Status check(absl::Span<const ClsExample> examples, int64_t first = 0) const;

  // One optimizer step on `batch` (checked; split into micro-batches of the model's shape, the
  // gradient of the mean loss accumulated), the gradient clipped to global norm `clip` (0: no
  // clipping; Megatron's clip_grad rule), AdamW with `opt` (its grad_scale is overwritten by the
  // clip factor). Returns the batch's mean loss and sets *grad_norm (before clipping). A
  // non-finite norm skips the update (the loss is still returned).
  double train_step(GptModel& model, const GptRunShape& shape, absl::Span<const ClsExample> batch,
                    GptModel::OptimizerStep opt, double clip, engine::Stream& stream,
                    double* grad_norm) const;

  // Accuracy and mean loss over `examples` (forward with train = false).
  ClsResult evaluate(GptModel& model, const GptRunShape& shape,
                     absl::Span<const ClsExample> examples, engine::Stream& stream) const;

 private:
  ClsTask(std::vector<int32_t> labels, int64_t vocab, int32_t pad)
      : labels_(std::move(labels)), vocab_(vocab), pad_(pad) {}
  // Fills the host micro-batch with examples [first, first + rows); returns each row's last
  // text position (b * T + p).
  std::vector<int64_t> fill(const GptRunShape& shape, absl::Span<const ClsExample> ex,
                            std::vector<int32_t>& tokens, std::vector<int32_t>& targets) const;

  std::vector<int32_t> labels_;
  int64_t vocab_;
  int32_t pad_;
};

}  // namespace anvil::model
