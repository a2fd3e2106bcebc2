// GLUE TSV files of MNLI and QQP, read as Megatron-DeepSpeed's tasks/glue/{mnli,qqp}.py read
// them. Each line is str.strip()ped and split at tabs; the first line is a header.
//   MNLI (train.tsv 12 columns, dev_matched/dev_mismatched.tsv 16, test_*.tsv 10): uid =
//     column 0, text_a = clean_text(column 8), text_b = clean_text(column 9), label = the last
//     column: contradiction 0, entailment 1, neutral 2. A 10-column header marks a test file
//     without labels: every label is `test_label` (Megatron's default contradiction = 0).
//   QQP (train/dev.tsv: id qid1 qid2 question1 question2 is_duplicate; test.tsv: id question1
//     question2): a 6-column file takes uid, text_a, text_b, label (0 | 1) from columns 0, 3,
//     4, 5 and skips (with a warning, as Megatron does) a row without 6 columns or with an
//     empty question; a 3-column header marks a test file (uid, text_a, text_b; label
//     `test_label`, default 0) whose rows must have 3 columns. Any other header is an error.
// Where Megatron asserts (empty MNLI text, unknown label, negative or non-integer uid, a short
// row), the reader returns DataLoss naming the file and line. Blank lines are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

enum class GlueTask { kMnli, kQqp };

struct TextPair {
  std::string text_a, text_b;
  int32_t label = 0;
  int64_t uid = 0;
};

struct GlueFile {
  std::vector<TextPair> examples;
  std::vector<std::string> warnings;  // "path:line: skipped: ..." for each skipped QQP row
  bool is_test = false;               // labels are test_label, not read
};

// Number of classes: MNLI 3, QQP 2.
int glue_num_classes(GlueTask task);
// "mnli" | "qqp"; InvalidArgument naming the accepted names otherwise.
absl::StatusOr<GlueTask> parse_glue_task(const std::string& name);

// test_label: the class given to every example of a test file (0 .. classes - 1).
// NotFound / DataLoss naming the file (and line); InvalidArgument when it holds no examples.
absl::StatusOr<GlueFile> read_glue_tsv(GlueTask task, const std::string& path,
                                       int32_t test_label = 0);

}  // namespace anvil::io
