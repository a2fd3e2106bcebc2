// Text and token helpers shared by the fine-tuning task readers (io/glue_tsv.h, io/race.h),
// as Megatron's tasks/data_utils.py does them:
//   clean_text: "\n" -> " ", every run of whitespace -> one space, then " . " -> ". " three
//   times (Megatron's clean_text; ASCII whitespace).
//   pair_tokens: the GPT-style sequence of a text pair (see below).
//   bert_pair_tokens: Megatron's BERT sequence of a text pair (build_tokens_types_paddings_from_ids
//   without the padding).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace anvil::io {

std::string clean_text(absl::string_view text);

// GPT-style counterpart of Megatron's build_tokens_types_paddings_from_ids for a decoder read
// left to right and classified at its last token:
//   ids = a + [sep] + b (b may be empty: a alone), cut to its first max_len - 1 tokens when it
//   has max_len or more (Megatron's cap), then [sep] appended,
// so the result has at most max_len tokens and always ends with `sep` (the classification
// position; Megatron's BERT layout [CLS] a [SEP] b [SEP] has [CLS] first instead). No padding.
// max_len >= 2.
std::vector<int32_t> pair_tokens(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                 int64_t max_len, int32_t sep);

// Megatron's build_tokens_types_paddings_from_ids without the padding:
//   ids = [cls] a [sep] b (b may be absent: has_b false), types 0 for [cls] a [sep], 1 for b;
//   when that has max_len or more tokens, its first max_len - 1 are kept; then [sep] (type 1
//   with b, 0 without) is appended when there is a b or something was cut.
// max_len >= 2. The classification position is [cls], the first token.
struct TokenTypes {
  std::vector<int32_t> ids, types;
};
TokenTypes bert_pair_tokens(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                            bool has_b, int64_t max_len, int32_t cls, int32_t sep);

}  // namespace anvil::io
