// Added tokens of a Hugging Face tokenizer.json (io/tokenizers/hf_tokenizer.cc): the token
// records and the leftmost-longest split of a text into added tokens and the text between them,
// as tokenizers' AddedVocabulary::find_matches does (single_word, lstrip, rstrip).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace anvil::io::hf_internal {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// One piece of a split: text[begin, end), which is the added token `id` or (id < 0) text that
// still needs the model.
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;
};

// Leftmost-longest matching of a set of added tokens (tokenizers uses Aho-Corasick with
// MatchKind::LeftmostLongest; sets are small, so a first-byte index suffices).
class AddedMatcher {
 public:
  // `token` must outlive the matcher; call finish() after the last add().
  void add(std::string pattern, const AddedToken* token);
  void finish();
  bool empty() const { return patterns_.empty(); }
  // tokenizers' AddedVocabulary::find_matches: appends the segments of text to *out.
  void split(absl::string_view text, std::vector<Segment>* out) const;

 private:
  struct Pattern {
    std::string text;
    const AddedToken* token;
  };
  const Pattern* find(absl::string_view text, size_t from, size_t* at) const;
  std::vector<Pattern> patterns_;
  std::array<std::vector<int>, 256> by_first_;
};

}  // namespace anvil::io::hf_internal
