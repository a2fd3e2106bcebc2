// bin/train's [eval] section: zero-shot tasks (model/tasks/eval_tasks.h; encoder-decoder families:
// model/tasks/seq2seq_eval.h) run at every evaluation of the training loop (before the first
// step, every [train] eval_interval steps, at the end) and logged like the validation loss. The
// files are read and tokenized by bin/train (io/eval_text) with the run's [tokenizer]. They run
// on the training layout (TP, PP, DP, ZeRO; T5: tp = 1).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/config.h"

namespace anvil::model {

struct EvalConfig {
  std::string text;                           // WikiText-style file: perplexity ("" = none)
  std::string text_detokenizer = "wikitext";  // wikitext | none
  int64_t text_stride = 32;                   // Megatron's --overlapping-eval (<= [data] seq_len)
  std::string lambada;                        // LAMBADA JSONL: accuracy ("" = none)
  bool strict_lambada = false;                // Megatron's --strict-lambada

  bool any() const { return !text.empty() || !lambada.empty(); }
};

// Adds the [eval] keys to bin/train's schema.
void add_eval_schema(engine::ConfigSchema& schema);

// Reads and validates [eval] of a loaded config: the detokenizer's name, 1 <= text_stride <=
// seq_len (with a text) and a [tokenizer] (`tokenizer_type` non-empty) when a task is set.
absl::StatusOr<EvalConfig> parse_eval_config(const engine::Config& c, int64_t seq_len,
                                             const std::string& tokenizer_type);

}  // namespace anvil::model
