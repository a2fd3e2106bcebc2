// Added tokens of a Hugging Face tokenizer.json (io/tokenizers/hf_tokenizer.cc): the token
// records and the leftmost-longest split of a text into added tokens and the text between them,
// as tokenizers' AddedVocabulary::find_matches does (single_word, lstrip, rstrip).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
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
// MatchKind::LeftmostLongest): a byte trie walked from each position, so files with thousands
// of added tokens sharing a first byte (Gemma 3: 6322 start with '<') stay fast.
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
  // Trie: edge (node << 8 | byte) -> child node; terminal_[node] = pattern index or -1.
  absl::flat_hash_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_;
  std::array<bool, 256> starts_{};  // bytes that begin some pattern
};

}  // namespace anvil::io::hf_internal
