// Fine-tuning data paths to token sequences (see task_data.h).
#include "io/task_data.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/eval_text.h"
#include "io/glue_tsv.h"
#include "io/race.h"
#include "io/task_text.h"

namespace anvil::io {
namespace {

// The sequence of a, b (has_b false: a alone) in `layout`: ids and (BERT) token types.
TokenTypes sequence(const std::vector<int32_t>& a, const std::vector<int32_t>& b, bool has_b,
                    int64_t seq_len, const SequenceLayout& layout) {
  if (layout.bert) return bert_pair_tokens(a, b, has_b, seq_len, layout.cls, layout.sep);
  if (!has_b) return {a, {}};  // a GPT text: the model keeps its last seq_len tokens
  return {pair_tokens(a, b, seq_len, layout.sep), {}};
}

}  // namespace

absl::StatusOr<TaskData> load_task_data(const std::string& format, const std::string& path,
                                        const Tokenizer& tokenizer, int64_t seq_len,
                                        int64_t max_qa_length, const SequenceLayout& layout) {
  TaskData out;
  if (format == "jsonl") {
    ANVIL_ASSIGN_OR_RETURN(std::vector<LabeledText> texts, load_labeled_texts(path, tokenizer));
    for (LabeledText& t : texts) {
      TokenTypes s = sequence(t.tokens, {}, false, seq_len, layout);
      out.examples.push_back({std::move(s.ids), std::move(s.types), {}, {}, t.label});
    }
    return out;
  }
  if (format == "race") {
    ANVIL_ASSIGN_OR_RETURN(std::vector<ChoiceExample> race, read_race_dir(path));
    for (const ChoiceExample& r : race) {
      TaskExample e;
      e.label = r.label;
      const std::vector<int32_t> context = tokenizer.encode(r.context);
      for (const std::string& qa : r.qa) {
        std::vector<int32_t> q = tokenizer.encode(qa);
        if (static_cast<int64_t>(q.size()) > max_qa_length) {
          q.resize(static_cast<size_t>(max_qa_length));
        }
        TokenTypes s = sequence(q, context, true, seq_len, layout);
        e.choices.push_back(std::move(s.ids));
        e.choice_types.push_back(std::move(s.types));
      }
      out.examples.push_back(std::move(e));
    }
    return out;
  }
  absl::StatusOr<GlueTask> task = parse_glue_task(format);
  if (!task.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("format \"", format, "\": expected jsonl, mnli, qqp or race"));
  }
  ANVIL_ASSIGN_OR_RETURN(GlueFile glue, read_glue_tsv(*task, path));
  for (const TextPair& p : glue.examples) {
    TokenTypes s =
        sequence(tokenizer.encode(p.text_a), tokenizer.encode(p.text_b), true, seq_len, layout);
    out.examples.push_back({std::move(s.ids), std::move(s.types), {}, {}, p.label});
  }
  out.warnings = std::move(glue.warnings);
  return out;
}

}  // namespace anvil::io
