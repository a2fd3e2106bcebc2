// BERT's text rules, shared by the WordPiece tokenizer (Megatron's BertWordPiece*) and Hugging
// Face tokenizer.json files with a BertNormalizer / BertPreTokenizer:
//
//   normalize:    decode UTF-8 (Python errors="replace": one U+FFFD per maximal ill-formed
//                 subpart); clean text (drop U+0000, U+FFFD and control characters, map
//                 whitespace to ' '); put spaces around CJK ideographs; lowercase and/or strip
//                 accents (NFD, then drop nonspacing marks Mn).
//   pre-tokenize: split on White_Space (dropped) and on punctuation (each punctuation character
//                 is a word of its own): ASCII 33-47, 58-64, 91-96, 123-126, or any Unicode P*.
//
// Two rule sets that differ only where their references differ:
//   kPython (Google's tokenization.py, which Megatron's FullBertTokenizer copies): control =
//       Cc or Cf; whitespace = \t \n \r or Zs; lowercase, then strip accents.
//   kHf (tokenizers' BertNormalizer, Rust): control = Cc, Cf, Cn (unassigned), Co (private use);
//       whitespace = \t \n \r or the White_Space property; strip accents, then lowercase.
// Both lowercase one code point at a time with the full mapping (U+0130 'İ' -> "i̇", as
// Python's str.lower and Rust's char::to_lowercase), without Python's final-sigma rule
// (str.lower maps a word-final 'Σ' to 'ς'; tokenizers and anvil give 'σ').
// Character properties come from utf8proc (Unicode 15 on Debian 12).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace anvil::io {

struct BertNormalizerOptions {
  enum class Rules { kPython, kHf };
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;
  bool lowercase = true;
  Rules rules = Rules::kPython;
};

// True for the CJK Unified Ideograph blocks BERT pads with spaces (4E00-9FFF, 3400-4DBF,
// 20000-2A6DF, 2A700-2B73F, 2B740-2B81F, 2B820-2CEAF, F900-FAFF, 2F800-2FA1F). Hiragana,
// Katakana and Hangul are not in it.
bool is_cjk_ideograph(char32_t cp);

// BERT's punctuation: ASCII 33-47, 58-64, 91-96, 123-126 (so '$', '+', '^', '`' count) or a
// Unicode P* category.
bool is_bert_punctuation(char32_t cp);

// Appends the full lowercase mapping of `cp` (one or, for U+0130, two code points) as UTF-8.
void append_lowercase(char32_t cp, std::string* out);

// Writes the normalized text (always valid UTF-8) to *out, replacing its contents. `text` may
// hold ill-formed UTF-8. Thread-safe.
void bert_normalize(absl::string_view text, const BertNormalizerOptions& options, std::string* out);

// Appends the words of `normalized` (valid UTF-8) to *words as [begin, end) byte ranges:
// maximal runs of non-White_Space, non-punctuation characters, and each punctuation character
// alone. Thread-safe.
void bert_pre_tokenize(absl::string_view normalized, std::vector<std::pair<size_t, size_t>>* words);

}  // namespace anvil::io
