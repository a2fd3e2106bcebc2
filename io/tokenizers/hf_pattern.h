// The patterns of tokenizer.json's Split pre-tokenizer and Replace normalizer/decoder: a literal
// string or an Oniguruma regex, run by Oniguruma itself (libonig, the library Hugging Face
// tokenizers links), so that patterns whose meaning differs between regex dialects (BLOOM's
// ` ?[^(\s|[.,!?…。，、।۔،])]+`, a nested character class) match exactly as in tokenizers.
//
// find_matches() is tokenizers' Pattern::find_matches over the onig crate's find_iter: the text
// tiled into (range, is_match) pieces, empty matches included, where an empty match right after
// the previous match is skipped by one character.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tokenizers/hf_json.h"

namespace anvil::io::hf_internal {

struct PatternMatch {
  size_t begin;
  size_t end;
  bool is_match;
};

// `\w` of Rust's regex crate, which tokenizers uses (not Oniguruma) for the Whitespace
// pre-tokenizer and the single_word test of added tokens: Alphabetic, marks, Nd, Pc and
// Join_Control (U+200C, U+200D). Alphabetic = letters, Nl and Other_Alphabetic, whose
// non-mark members are the enclosed Latin letters U+24B6-24E9 and U+1F130-1F189.
bool is_rust_word_char(char32_t cp);

class HfPattern {
 public:
  // InvalidArgument naming `where` and Oniguruma's message for a regex that does not compile.
  static absl::StatusOr<std::unique_ptr<HfPattern>> create(const Ctx& ctx, const PatternSpec& spec,
                                                           const std::string& where);
  ~HfPattern();
  HfPattern(const HfPattern&) = delete;
  HfPattern& operator=(const HfPattern&) = delete;

  // Replaces *out with the tiling of `text` (valid UTF-8). Thread-safe.
  void find_matches(absl::string_view text, std::vector<PatternMatch>* out) const;

 private:
  HfPattern() = default;

  std::string literal_;    // a non-empty String pattern, matched without a regex
  void* regex_ = nullptr;  // regex_t* (Oniguruma) for Regex patterns and the empty String
};

}  // namespace anvil::io::hf_internal
