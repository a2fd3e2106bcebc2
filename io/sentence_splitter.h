// Rule-based English sentence splitter for `preprocess --split-sentences`, standing in for the
// NLTK punkt model (tokenizers/punkt/english.pickle) that Megatron's preprocess_data.py uses.
//
// Sentences are views into the text, in order, covering it except for the whitespace between
// sentences, exactly as punkt's span_tokenize + realign_boundaries lay them out:
//   - a boundary is a run of terminators (. ? ! or U+2026 "…"), then optional closing quotes or
//     brackets (" ' ) ] } ” ’ »), then whitespace, then more text; the closers stay with the
//     sentence they end; the text's leading and trailing whitespace stay in the first and last
//     sentence;
//   - the whitespace between two sentences is dropped, or with keep_newlines appended to the
//     sentence before it (Megatron's CustomLanguageVars: `\s*` after the terminator);
//   - newlines alone never end a sentence (punkt does not split on them either).
// A period is NOT a boundary after
//   - a title or Latin abbreviation (Mr. Mrs. Dr. Prof. Gen. e.g. i.e. cf. vs.);
//   - another known or dotted abbreviation (etc. Inc. U.S. a.m. Jan.) or a single-letter
//     initial (J. R. R. Tolkien), unless the next word is capitalized and a frequent sentence
//     starter (The, It, He, But, ...), as punkt's "frequent sentence starter" rule does;
//   - No. Vol. Fig. ... when a number follows (No. 5);
//   - a number or single letter opening a sentence or line (list enumerators "1." "a.");
//   - any word when the next word starts with a lowercase letter.
// Decimals (3.14), URLs and "e.g.," never qualify (no whitespace after the period). "?" and
// "!" end a sentence unless a lowercase word follows; an ellipsis only before a capital.
// Differences from punkt: punkt learns its abbreviation list and
// per-word capitalization statistics from a corpus, so results differ on rare abbreviations
// and on ordinary words followed by lowercase text (punkt splits "home. then", this does not),
// on '"Why?" she asked' (punkt splits after the quote), and on unusual Unicode whitespace
// (only ASCII whitespace and U+00A0 separate sentences here). Works on bytes: invalid UTF-8 is
// passed through untouched.
#pragma once

#include <string_view>
#include <vector>

namespace anvil::io {

class SentenceSplitter {
 public:
  explicit SentenceSplitter(bool keep_newlines = false) : keep_newlines_(keep_newlines) {}

  // Appends the sentences of `text` (views into it) to *out; an empty text has none.
  void split(std::string_view text, std::vector<std::string_view>* out) const;
  std::vector<std::string_view> split(std::string_view text) const {
    std::vector<std::string_view> out;
    split(text, &out);
    return out;
  }

 private:
  bool keep_newlines_;
};

}  // namespace anvil::io
