// bin/finetune's [finetune] section (see finetune_config.h): schema and validation.
#include "model/train/finetune_config.h"

#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anvil::model {
namespace {

std::vector<std::string> list(const engine::Config& c, const char* key) {
  std::vector<std::string> out;
  for (absl::string_view w : absl::StrSplit(c.get_string("finetune", key), ',')) {
    w = absl::StripAsciiWhitespace(w);
    if (!w.empty()) out.emplace_back(w);
  }
  return out;
}

}  // namespace

int64_t FinetuneConfig::classes() const {
  switch (format) {
    case FinetuneFormat::kMnli:
      return 3;
    case FinetuneFormat::kQqp:
      return 2;
    case FinetuneFormat::kRace:
      return 4;
    case FinetuneFormat::kJsonl:
      break;
  }
  return static_cast<int64_t>(labels.size());
}

void add_finetune_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("finetune", "train_data", ConfigType::kString, "",
        "bin/finetune's training examples, comma-separated paths in `format` "
        "(docs/eval.md#classification-finetuning); empty = none. bin/train ignores [finetune].");
  s.add("finetune", "dev_data", ConfigType::kString, "",
        "bin/finetune's dev sets (same format, comma-separated: e.g. MNLI dev_matched.tsv,"
        "dev_mismatched.tsv), each one's accuracy logged every [train] eval_interval steps and "
        "at the end; empty = none.");
  s.add("finetune", "format", ConfigType::kString, "jsonl",
        "Data format: jsonl ({\"text\": ..., \"label\": k} per line), mnli or qqp (GLUE TSV as "
        "Megatron reads them), race (directories of RACE JSON files).",
        {"jsonl", "mnli", "qqp", "race"});
  s.add("finetune", "task", ConfigType::kString, "classification",
        "classification (one sequence per example) or multiple_choice (one sequence per "
        "choice, softmax over the choices: RACE).",
        {"classification", "multiple_choice"});
  s.add("finetune", "head", ConfigType::kString, "label_words",
        "label_words: the LM head's logits of the label words at the last token (no new "
        "parameters; GPT only); linear: classifier.weight [K, d] and classifier.bias [K] on the "
        "final hidden state at the last token (GPT) or, through the tanh pooler "
        "(pooler.dense.*), at [CLS] (BERT): Megatron's Classification / MultipleChoice heads.",
        {"label_words", "linear"});
  s.add("finetune", "labels", ConfigType::kString, "",
        "Comma-separated class names, class k = the k-th (jsonl). With head label_words each "
        "must be one token of the [tokenizer] (e.g. old,new for GPT-2 BPE; O,N for Byte): the "
        "model predicts the label word after the text. mnli / qqp / race: empty (their labels "
        "are fixed).");
  s.add("finetune", "max_qa_length", ConfigType::kInt, "128",
        "race: tokens of question + option kept per choice (Megatron's MAX_QA_LENGTH).");
}

absl::StatusOr<FinetuneConfig> parse_finetune_config(const engine::Config& c,
                                                     const std::string& tokenizer_type) {
  FinetuneConfig f;
  f.train_data = list(c, "train_data");
  f.dev_data = list(c, "dev_data");
  f.labels = list(c, "labels");
  const std::string format = c.get_string("finetune", "format");
  f.format = format == "mnli"   ? FinetuneFormat::kMnli
             : format == "qqp"  ? FinetuneFormat::kQqp
             : format == "race" ? FinetuneFormat::kRace
                                : FinetuneFormat::kJsonl;
  f.task = c.get_string("finetune", "task") == "multiple_choice" ? FinetuneTask::kMultipleChoice
                                                                 : FinetuneTask::kClassification;
  f.head = c.get_string("finetune", "head") == "linear" ? FinetuneHead::kLinear
                                                        : FinetuneHead::kLabelWords;
  f.max_qa_length = c.get_int("finetune", "max_qa_length");
  if (f.train_data.empty() && f.dev_data.empty()) return f;
  if (f.max_qa_length < 1) return c.error("finetune", "max_qa_length", "must be >= 1");
  const bool race = f.format == FinetuneFormat::kRace;
  if (race != (f.task == FinetuneTask::kMultipleChoice)) {
    return c.error("finetune", "task",
                   absl::StrFormat("%s does not fit format %s (race is multiple_choice, the "
                                   "other formats classification)",
                                   c.get_string("finetune", "task"), format));
  }
  if (f.task == FinetuneTask::kMultipleChoice && f.head != FinetuneHead::kLinear) {
    return c.error("finetune", "head", "multiple_choice needs head = linear");
  }
  if (f.format != FinetuneFormat::kJsonl) {
    if (!f.labels.empty()) {
      return c.error("finetune", "labels",
                     absl::StrFormat("format %s has fixed labels: leave labels empty", format));
    }
    if (f.head == FinetuneHead::kLabelWords) {
      return c.error("finetune", "head", absl::StrFormat("format %s needs head = linear", format));
    }
  }
  const std::set<std::string> distinct(f.labels.begin(), f.labels.end());
  if (f.format == FinetuneFormat::kJsonl &&
      (f.labels.size() < 2 || distinct.size() != f.labels.size())) {
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
