// Tokenized examples of one fine-tuning data path (bin/finetune's [finetune] train_data /
// dev_data), by format:
//   jsonl:     {"text": ..., "label": k} per line: the text's tokens (load_labeled_texts)
//   mnli, qqp: GLUE TSV (io/glue_tsv.h): pair_tokens(tok(text_a), tok(text_b), seq_len, sep)
//   race:      a RACE directory (io/race.h): per choice c,
//              pair_tokens(tok(qa_c) cut to max_qa_length, tok(article), seq_len, sep)
// i.e. Megatron's tasks/ sequences with the GPT-style layout of io/task_text.h (`sep`: the
// tokenizer's end-of-document token). With a BERT layout every sequence is Megatron's own:
// bert_pair_tokens (jsonl: the text as a lone a) with the tokenizer's [CLS] and [SEP], and the
// token types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/tokenizer.h"

namespace anvil::io {

struct TaskExample {
  std::vector<int32_t> tokens, types;              // one sequence (jsonl, mnli, qqp); types: BERT
  std::vector<std::vector<int32_t>> choices;       // race: one sequence per choice
  std::vector<std::vector<int32_t>> choice_types;  // BERT: the token types of each choice
  int32_t label = 0;
};

// GPT: pair_tokens with `sep` (jsonl texts as they are); BERT: bert_pair_tokens.
struct SequenceLayout {
  bool bert = false;
  int32_t sep = 0, cls = 0;
};

struct TaskData {
  std::vector<TaskExample> examples;
  std::vector<std::string> warnings;  // rows skipped as Megatron skips them (QQP)
};

// format: jsonl | mnli | qqp | race. The readers' errors (naming file and line);
// InvalidArgument for another format.
absl::StatusOr<TaskData> load_task_data(const std::string& format, const std::string& path,
                                        const Tokenizer& tokenizer, int64_t seq_len,
                                        int64_t max_qa_length, const SequenceLayout& layout);

}  // namespace anvil::io
