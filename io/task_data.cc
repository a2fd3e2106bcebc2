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

absl::StatusOr<TaskData> load_task_data(const std::string& format, const std::string& path,
                                        const Tokenizer& tokenizer, int64_t seq_len,
                                        int64_t max_qa_length, int32_t sep) {
  TaskData out;
  if (format == "jsonl") {
    ANVIL_ASSIGN_OR_RETURN(std::vector<LabeledText> texts, load_labeled_texts(path, tokenizer));
    for (LabeledText& t : texts) out.examples.push_back({std::move(t.tokens), {}, t.label});
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
        if (static_cast<int64_t>(q.size()) > max_qa_length)
          q.resize(static_cast<size_t>(max_qa_length));
        e.choices.push_back(pair_tokens(q, context, seq_len, sep));
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
    out.examples.push_back(
        {pair_tokens(tokenizer.encode(p.text_a), tokenizer.encode(p.text_b), seq_len, sep),
         {},
         p.label});
  }
  out.warnings = std::move(glue.warnings);
  return out;
}

}  // namespace anvil::io
