// Text and token helpers shared by the fine-tuning task readers (io/glue_tsv.h, io/race.h),
// as Megatron's tasks/data_utils.py does them:
//   clean_text: "\n" -> " ", every run of whitespace -> one space, then " . " -> ". " three
//   times (Megatron's clean_text; ASCII whitespace).
//   pair_tokens: the GPT-style sequence of a text pair (see below).
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

}  // namespace anvil::io
