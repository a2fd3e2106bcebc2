// The [finetune] section, read by bin/finetune: classification and multiple-choice finetuning
// at the last token (model/tasks/finetune_cls.h) with a label-word or a linear head, on JSONL
// examples {"text": ..., "label": k}, GLUE MNLI / QQP TSV files or RACE directories
// (io/glue_tsv.h, io/race.h). The rest of the run comes from the usual sections: [model],
// [tokenizer], [train] (micro_batch = examples per forward, global_batch = examples per step,
// steps, seed, device, eval_interval, log_interval), [optim], [checkpoint] load (the weights
// to start from) and save (the result), [data] seq_len (tokens per sequence) and seed (the
// example order), [parallel] dp (data parallel ranks).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config.h"

namespace anvil::model {

enum class FinetuneHead { kLabelWords, kLinear };
enum class FinetuneTask { kClassification, kMultipleChoice };
enum class FinetuneFormat { kJsonl, kMnli, kQqp, kRace };

struct FinetuneConfig {
  std::vector<std::string> train_data;  // files or RACE directories (empty: no finetuning)
  std::vector<std::string> dev_data;    // each evaluated and reported on its own
  std::vector<std::string> labels;      // class names (label words: one token each)
  FinetuneHead head = FinetuneHead::kLabelWords;
  FinetuneTask task = FinetuneTask::kClassification;
  FinetuneFormat format = FinetuneFormat::kJsonl;
  int64_t max_qa_length = 128;  // RACE: tokens of question + option kept (Megatron's)

  // Classes of the task: labels given, or MNLI 3, QQP 2, RACE 4 choices.
  int64_t classes() const;
};

// Adds the [finetune] keys to bin/train's schema (bin/finetune reads the same files).
void add_finetune_schema(engine::ConfigSchema& schema);

// Reads [finetune]; InvalidArgument naming the key when train_data is set and: a label-word
// head has fewer than two labels or a repeated one; jsonl has fewer than two labels; a format
// does not fit the task (race is multiple_choice, the others classification) or the head
// (multiple_choice needs linear; mnli / qqp fix their labels); no [tokenizer].
absl::StatusOr<FinetuneConfig> parse_finetune_config(const engine::Config& c,
                                                     const std::string& tokenizer_type);

}  // namespace anvil::model
