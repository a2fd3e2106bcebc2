// The [finetune] section, read by bin/finetune: classification finetuning through the last token
// (model/finetune_cls.h) on JSONL examples {"text": ..., "label": k}. The rest of the run comes
// from the usual sections: [model], [tokenizer], [train] (micro_batch, global_batch = examples
// per step, steps, seed, device, eval_interval, log_interval), [optim], [checkpoint] load (the
// weights to start from) and save (the result), [data] seq_len (tokens kept per example: the
// last ones) and seed (the example order).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config.h"

namespace anvil::model {

struct FinetuneConfig {
  std::string train_data;           // JSONL of the training examples ("" = no finetuning)
  std::string dev_data;             // JSONL of the dev examples ("" = none)
  std::vector<std::string> labels;  // the label word of class k (one token each)
};

// Adds the [finetune] keys to bin/train's schema (bin/finetune reads the same files).
void add_finetune_schema(engine::ConfigSchema& schema);

// Reads [finetune]; InvalidArgument naming the key when train_data is set with fewer than two
// labels, a repeated label, or no [tokenizer] (`tokenizer_type` empty).
absl::StatusOr<FinetuneConfig> parse_finetune_config(const engine::Config& c,
                                                     const std::string& tokenizer_type);

}  // namespace anvil::model
