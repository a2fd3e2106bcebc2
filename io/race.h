// RACE multiple-choice reading comprehension, read as Megatron-DeepSpeed's tasks/race/data.py
// reads it: a data path is a directory (e.g. RACE/train/middle) whose *.txt files (in name
// order here; Megatron's glob order is the file system's) hold one JSON document per line:
//   {"article": str, "questions": [str], "options": [[4 x str]], "answers": ["A".."D"], ...}
// Each question becomes one example of 4 choices: the context is clean_text(article); choice c
// is qa_c = question with every "_" replaced by option c when the question has a blank "_",
// else question + " " + option c, then clean_text(qa_c); the label is answer - 'A'.
// Where Megatron asserts (questions, options and answers of different lengths, not 4 options,
// an answer outside A-D) the reader returns DataLoss naming the file and line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

inline constexpr int kRaceChoices = 4;

struct ChoiceExample {
  std::string context;          // the article
  std::vector<std::string> qa;  // [kRaceChoices] question merged with each option
  int32_t label = 0;            // the right choice
};

// Every example of the directory's *.txt files. NotFound / DataLoss naming the directory, file
// and line; InvalidArgument when there are no examples.
absl::StatusOr<std::vector<ChoiceExample>> read_race_dir(const std::string& dir);

// The qa text of one choice (see above, before clean_text).
std::string race_merge(const std::string& question, const std::string& option);

}  // namespace anvil::io
