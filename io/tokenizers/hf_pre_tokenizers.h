// The pre-tokenizers of a Hugging Face tokenizer.json, splitting (and rewriting) the normalized
// text as tokenizers' pre_tokenizers do; empty pieces are dropped, as PreTokenizedString does.
//   Split (String or Oniguruma Regex pattern, behavior Removed / Isolated / MergedWithPrevious /
//   MergedWithNext / Contiguous, invert), ByteLevel (a space prepended when add_prefix_space,
//   GPT-2's regex when use_regex, then bytes to GPT-2's alphabet), Digits (individual_digits),
//   Metaspace (replacement, prepend_scheme always / first / never or the legacy
//   add_prefix_space, split), Punctuation (behavior), Whitespace (\w+|[^\w\s]+),
//   WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit, Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "io/tokenizers/hf_json.h"

namespace anvil::io::hf_internal {

// One piece of the text. `first`: the piece starts where the original text starts (offset 0),
// which Metaspace's prepend_scheme "first" tests.
struct Piece {
  std::string text;
  bool first = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces *pieces (valid UTF-8) by their pre-tokenization. Thread-safe.
  virtual void pre_tokenize(std::vector<Piece>* pieces) const = 0;
};

// The pre-tokenizer described by `p` (an object, or null for none: *out = nullptr).
absl::Status parse_pre_tokenizer(const Ctx& ctx, const json& p, const std::string& where,
                                 std::unique_ptr<PreTokenizer>* out);

}  // namespace anvil::io::hf_internal
