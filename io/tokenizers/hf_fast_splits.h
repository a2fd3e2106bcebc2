// Hand-written scanners for the Split regexes of today's byte-level BPE files, which Oniguruma
// runs at under 10 MB/s. Each gives exactly the matches Oniguruma gives for its pattern
// (tests/io/hf_components_test.cc checks both on generated text); the Split pre-tokenizer uses
// one when the file's pattern is character-for-character the pattern below.
//
//   kLlama3SplitPattern (Llama 3, max_digits 3) and kQwenSplitPattern (Qwen 2/3, max_digits 1):
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//     \s*[\r\n]+|\s+(?!\S)|\s+
//   Every position starts a match (the last alternative takes any White_Space, the fourth any
//   other non-letter non-number), so the matches tile the text.
//   kTekkenSplitPattern (Mistral NeMo's Tekken tokenizer.json): case-aware letter runs
//     (uppercase-or-other letters then lowercase-or-other letters, marks counting as both), single
//     digits, and Llama 3's punctuation and White_Space alternatives ('/' may end a punctuation
//     run). It tiles the text too.
//   kBloomSplitPattern (BLOOM): ` ?[^(\s|[.,!?…。，、।۔،])]+`, in Oniguruma one negated class
//     (a nested set inside): an optional space, then a run of characters that are neither
//     White_Space nor one of ( | ) . , ! ? … 。 ， 、 । ۔ ،
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "io/tokenizers/hf_pattern.h"

namespace anvil::io::hf_internal {

inline constexpr char kLlama3SplitPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr char kQwenSplitPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline constexpr char kTekkenSplitPattern[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline constexpr char kBloomSplitPattern[] = " ?[^(\\s|[.,!?…。，、।۔،])]+";

// The length in bytes of the match starting at `pos` (< text.size(), valid UTF-8) of the
// Llama 3 pattern with \p{N}{1,max_digits}.
size_t llama3_match_length(absl::string_view text, size_t pos, int max_digits);

// The length in bytes of the match of kTekkenSplitPattern starting at `pos` (< text.size(),
// valid UTF-8).
size_t tekken_match_length(absl::string_view text, size_t pos);

// max_digits of a recognized pattern (3 for Llama 3, 1 for Qwen), or 0.
int fast_split_digits(const std::string& pattern);

// Replaces *out with the tiling of `text` (valid UTF-8) by the matches of kBloomSplitPattern,
// as HfPattern::find_matches gives it.
void bloom_find_matches(absl::string_view text, std::vector<PatternMatch>* out);

}  // namespace anvil::io::hf_internal
