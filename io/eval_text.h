// Text side of zero-shot evaluation (and of classification finetuning's JSONL), as
// Megatron-DeepSpeed's tasks/zeroshot_gpt (datasets.py, detokenizer.py) prepares it;
// model/eval_tasks runs the model over the token ids.
//
// Language-modelling text (_build_wikitext103_dataset): the file is read whole as UTF-8
// (invalid UTF-8 is an error, as Python's decode), its words counted on the raw text as
//   W = len(text.strip().split(" "))          (Megatron's num_original_tokens)
// then detokenized (wikitext: Megatron's wikitext_detokenizer, step for step; none: as is) and
// tokenized whole, without an end-of-document token. Megatron picks the detokenizer from the
// file name ("wiki" in the path); here it is an explicit choice.
//
// LAMBADA (_LambadaDataset): a JSONL file, one {"text": ...} per line (blank lines skipped).
//   non-strict (Megatron's default): tokens = tokenize(text); target = its last token,
//     context = the others;
//   strict (--strict-lambada): last = text.split()[-1] (the last whitespace-separated word),
//     context = tokenize(text[:text.rfind(last)].strip()), target = tokenize(" " + last).
// Whitespace is Python's str.isspace() (Unicode White_Space plus U+001C-001F).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tokenizer.h"

namespace anvil::io {

enum class Detokenizer { kNone, kWikitext };

// "none" | "wikitext"; InvalidArgument naming the choices otherwise.
absl::StatusOr<Detokenizer> parse_detokenizer(absl::string_view name);

// Megatron's wikitext_detokenizer (valid UTF-8 in, out).
std::string wikitext_detokenize(absl::string_view text);

// len(text.strip().split(" ")) in Python: 1 + the spaces (U+0020) left after stripping
// whitespace at both ends (an empty or all-whitespace text gives 1).
int64_t megatron_word_count(absl::string_view text);

struct EvalText {
  std::vector<int32_t> tokens;
  int64_t words = 0;  // W above
};

// NotFound / DataLoss naming the file (unreadable, invalid UTF-8 with its byte offset).
absl::StatusOr<EvalText> load_eval_text(const std::string& path, const Tokenizer& tokenizer,
                                        Detokenizer detokenizer);

struct LambadaExample {
  std::vector<int32_t> context, target;
};

// One text split as above; InvalidArgument when the text has no word (strict) or fewer than
// two tokens (non-strict).
absl::StatusOr<LambadaExample> lambada_split(absl::string_view text, const Tokenizer& tokenizer,
                                             bool strict);

// DataLoss naming the file and line for a line that is not a JSON object with a string "text",
// or whose text cannot be split; NotFound for a missing file; InvalidArgument for no examples.
absl::StatusOr<std::vector<LambadaExample>> load_lambada(const std::string& path,
                                                         const Tokenizer& tokenizer, bool strict);

// A classification example (bin/finetune): the tokens of its text and its class.
struct LabeledText {
  std::vector<int32_t> tokens;
  int32_t label = 0;
};

// JSONL, one {"text": string, "label": integer >= 0} per line (blank lines skipped). DataLoss
// naming the file and line for a bad line or a text without tokens; InvalidArgument for none.
absl::StatusOr<std::vector<LabeledText>> load_labeled_texts(const std::string& path,
                                                            const Tokenizer& tokenizer);

// Every token of a Megatron .bin/.idx dataset, documents in order (their sequences
// concatenated as stored; bin/preprocess's --append-eod leaves the eod in each). Errors of
// IndexedDataset::open.
absl::StatusOr<std::vector<int32_t>> read_all_tokens(const std::string& prefix);

}  // namespace anvil::io
