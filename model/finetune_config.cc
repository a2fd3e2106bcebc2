// bin/finetune's [finetune] section (see finetune_config.h): schema and validation.
#include "model/finetune_config.h"

#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anvil::model {

void add_finetune_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("finetune", "train_data", ConfigType::kString, "",
        "bin/finetune's training examples: JSONL, one {\"text\": ..., \"label\": k} per line "
        "(docs/eval.md#classification-finetuning); empty = none. bin/train ignores [finetune].");
  s.add("finetune", "dev_data", ConfigType::kString, "",
        "bin/finetune's dev examples (same format), whose accuracy is logged every [train] "
        "eval_interval steps and at the end; empty = none.");
  s.add("finetune", "labels", ConfigType::kString, "",
        "Comma-separated label words, class k = the k-th; each must be one token of the "
        "[tokenizer] (e.g. old,new for GPT-2 BPE; O,N for Byte). The model predicts the label "
        "word after the text.");
}

absl::StatusOr<FinetuneConfig> parse_finetune_config(const engine::Config& c,
                                                     const std::string& tokenizer_type) {
  FinetuneConfig f;
  f.train_data = c.get_string("finetune", "train_data");
  f.dev_data = c.get_string("finetune", "dev_data");
  for (absl::string_view w : absl::StrSplit(c.get_string("finetune", "labels"), ',')) {
    w = absl::StripAsciiWhitespace(w);
    if (!w.empty()) f.labels.emplace_back(w);
  }
  if (f.train_data.empty()) return f;
  const std::set<std::string> distinct(f.labels.begin(), f.labels.end());
  if (f.labels.size() < 2 || distinct.size() != f.labels.size()) {
    return c.error("finetune", "labels",
                   absl::StrFormat("needs at least two distinct comma-separated label words, got "
                                   "%d (%d distinct)",
                                   f.labels.size(), distinct.size()));
  }
  if (tokenizer_type.empty()) {
    return c.error("finetune", "train_data",
                   "needs a [tokenizer] (type, vocab_file) to tokenize the examples");
  }
  return f;
}

}  // namespace anvil::model
