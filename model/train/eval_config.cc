// bin/train's [eval] section (see eval_config.h): schema and validation.
#include "model/train/eval_config.h"

#include "absl/strings/str_format.h"

namespace anvil::model {

void add_eval_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("eval", "text", ConfigType::kString, "",
        "A WikiText-style text file whose perplexity is logged at every evaluation (loss, "
        "per-token and per-word adjusted perplexity, Megatron's zero-shot WIKITEXT103 task; "
        "docs/eval.md); empty = none. Needs [tokenizer]; runs on the training layout (TP, PP, DP). "
        "[model] type t5: each window's new tokens are scored by the decoder given the tokens "
        "before them on the encoder (tp = 1).");
  s.add("eval", "text_detokenizer", ConfigType::kString, "wikitext",
        "Detokenizer applied to [eval] text before tokenizing: wikitext (Megatron's) | none.");
  s.add("eval", "text_stride", ConfigType::kInt, "32",
        "Tokens counted per window after the first (--overlapping-eval); 1 .. [data] seq_len "
        "(seq_len = disjoint windows). [model] type t5: the new tokens of every window, predicted "
        "by the decoder; 1 .. [data] decoder_seq_len.");
  s.add("eval", "lambada", ConfigType::kString, "",
        "A LAMBADA JSONL file ({\"text\": ...} per line) whose last-word accuracy is logged at "
        "every evaluation; empty = none. Needs [tokenizer]; runs on the training layout (TP, PP, "
        "DP). [model] type t5: the context on the encoder, the target predicted by the decoder "
        "(tp = 1).");
  s.add("eval", "strict_lambada", ConfigType::kBool, "false",
        "LAMBADA target = the whole last word (--strict-lambada); false = the last token.");
}

absl::StatusOr<EvalConfig> parse_eval_config(const engine::Config& c, int64_t seq_len,
                                             const std::string& tokenizer_type) {
  EvalConfig e;
  e.text = c.get_string("eval", "text");
  e.text_detokenizer = c.get_string("eval", "text_detokenizer");
  e.text_stride = c.get_int("eval", "text_stride");
  e.lambada = c.get_string("eval", "lambada");
  e.strict_lambada = c.get_bool("eval", "strict_lambada");
  if (e.text_detokenizer != "wikitext" && e.text_detokenizer != "none") {
    return c.error("eval", "text_detokenizer",
                   absl::StrFormat("\"%s\": expected wikitext or none", e.text_detokenizer));
  }
  // The stride matters only with a text (its default, Megatron's 32, may exceed a short seq_len).
  if (!e.text.empty() && (e.text_stride < 1 || e.text_stride > seq_len)) {
    return c.error(
        "eval", "text_stride",
        absl::StrFormat("%d: must be in 1 .. [data] seq_len %d", e.text_stride, seq_len));
  }
  const char* key = e.text.empty() ? "lambada" : "text";
  if (e.any() && tokenizer_type.empty()) {
    return c.error("eval", key, "needs a [tokenizer] (type, vocab_file) to tokenize the text");
  }
  return e;
}

}  // namespace anvil::model
