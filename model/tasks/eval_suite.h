// The [eval] zero-shot tasks of a training run (model/train/eval_config.h), tokenized by bin/train,
// run on the trainer's model at each evaluation and logged like the validation loss:
//   step  100/1000 | eval text wiki.txt: loss 3.2100 | ppl 24.78 | adjusted ppl 40.12 | 1.2s
//   step  100/1000 | eval lambada lambada.jsonl: accuracy 0.3120 (1608/5153) | 4.5s
// A causal LM (GptModel) runs model/tasks/eval_tasks.h; an encoder-decoder (T5, any Model
// exposing last_logits) model/tasks/seq2seq_eval.h, with the same log lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/log.h"
#include "engine/stream.h"
#include "model/model.h"
#include "model/stack/gpt.h"
#include "model/tasks/eval_tasks.h"
#include "model/tasks/seq2seq_eval.h"

namespace anvil::model {

struct EvalSuite {
  std::string text_name;  // "" = no text task
  std::vector<int32_t> text_tokens;
  int64_t text_words = 0;  // Megatron's original word count (adjusted perplexity)
  int64_t text_stride = 32;
  std::string lambada_name;  // "" = no LAMBADA task
  std::vector<ClozeExample> lambada;
  int32_t pad = 0;  // padding token (eod)
  // Encoder-decoder families: the first decoder input (Megatron's T5 samples: [BOS]).
  int32_t decoder_start = -1;
};

// Runs the suite's tasks on `model` (created with `shape`, laid out as `par`: every rank of the
// run calls) and logs a line per task for `step` of `steps`. Errors of evaluate_lm /
// evaluate_cloze.
absl::Status run_eval_suite(const EvalSuite& suite, GptModel& model, const GptRunShape& shape,
                            const EvalParallel& par, engine::Stream& stream,
                            const engine::LogContext& log, int64_t step, int64_t steps);

// The same for an encoder-decoder `model` of `shape` (its pad and decoder_start are the
// suite's): errors of evaluate_lm_seq2seq / evaluate_cloze_seq2seq.
absl::Status run_seq2seq_eval_suite(const EvalSuite& suite, Model& model,
                                    const Seq2SeqEvalShape& shape, const EvalParallel& par,
                                    engine::Stream& stream, const engine::LogContext& log,
                                    int64_t step, int64_t steps);

}  // namespace anvil::model
