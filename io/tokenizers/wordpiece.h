// BERT WordPiece: the greedy longest-match-first model (shared with tokenizer.json WordPiece
// models) and Megatron's BertWordPieceLowerCase / BertWordPieceCase tokenizers over a vocab.txt.
//
// Encoding = bert_normalize (bert_normalizer.h, Python rules: Google's tokenization.py, which
// Megatron copies) + bert_pre_tokenize + WordPiece per word: repeatedly take the longest vocab
// entry that prefixes the rest of the word (continuations carry the "##" prefix); a word with
// no complete segmentation, or longer than max_input_chars_per_word code points, becomes [UNK].
// Lower case = lowercase + strip accents; cased = neither (Megatron's do_lower_case).
//
// Vocabulary (Megatron's _BertWordPieceTokenizer): ids are vocab.txt line numbers (each line
// stripped of surrounding whitespace, as load_vocab does); [PAD] [UNK] [CLS] [SEP] [MASK] must
// be present. Megatron then appends, for BOTH cases, "[BOS]" and "[EOS]" and the T5 sentinels
// "<extra_id_0>".."<extra_id_{n-1}>" (vocab_extra_ids), each only if not already in the vocab,
// in that order at ids len(vocab), len(vocab)+1, ...; vocab_size() counts them. These added
// tokens are never produced by encode (the basic tokenizer splits '[', ']', '<', '>' off), only
// used by callers through special(). EOD is -1: Megatron's BERT tokenizers have none.
//
// Decode is Megatron's convert_tokens_to_string: " ".join(tokens).replace(" ##", "").strip().
//
// Word length limit: 100 code points by default, as in tokenizers' BertWordPieceTokenizer (the
// reference of the fixtures and of the issue). Google's/Megatron's WordpieceTokenizer uses 200;
// pass 200 for bit-identity with Megatron on words of 101..200 characters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tokenizer.h"
#include "io/tokenizers/bert_normalizer.h"

namespace anvil::io {

// An immutable string -> id table with open addressing (flat, cache-friendly: WordPiece does
// several lookups per word, and a node-based map made them the bulk of encoding time).
class TokenTable {
 public:
  // Adds `key` -> id; a later add of the same key overrides (Python dict semantics). Keys are
  // copied into the table.
  void add(std::string_view key, int32_t id);
  // Id of `key`, or -1.
  int32_t find(std::string_view key) const;
  // Longest key in bytes (0 when empty).
  size_t max_key_bytes() const { return max_key_bytes_; }

 private:
  struct Slot {
    uint64_t hash;
    uint32_t offset;  // into keys_
    uint32_t length;
    int32_t id;  // -1: empty slot
  };
  void grow();
  std::vector<Slot> slots_;  // power-of-two size, at most half full
  std::string keys_;
  size_t size_ = 0;
  size_t max_key_bytes_ = 0;
};

// Greedy longest-match-first WordPiece over a fixed vocabulary.
class WordPieceModel {
 public:
  // `tokens[i]` is the token of id i (duplicates: the last id wins on lookup, as with a Python
  // dict). `unk` must be a valid id.
  WordPieceModel(std::vector<std::string> tokens, int32_t unk, std::string continuing_prefix,
                 int max_input_chars_per_word);
  WordPieceModel(const WordPieceModel&) = delete;
  WordPieceModel& operator=(const WordPieceModel&) = delete;

  // Appends the ids of `word` (valid UTF-8) to *out. Thread-safe, allocation-free.
  void encode_word(absl::string_view word, std::vector<int32_t>* out) const;

  // Id of `token`, or -1.
  int32_t find(std::string_view token) const;
  const std::vector<std::string>& tokens() const { return tokens_; }
  int32_t unk() const { return unk_; }
  const std::string& continuing_prefix() const { return prefix_; }

 private:
  std::vector<std::string> tokens_;
  TokenTable ids_;           // every token
  TokenTable continuation_;  // tokens that start with prefix_, keyed without it
  int32_t unk_;
  std::string prefix_;
  int max_chars_;
};

struct WordPieceOptions {
  std::string vocab_file;  // vocab.txt, one token per line
  bool lower_case = true;
  int vocab_extra_ids = 0;
  int max_input_chars_per_word = 100;
};

class BertWordPieceTokenizer final : public Tokenizer {
 public:
  // NotFound / InvalidArgument naming the file: unreadable, empty, or missing a required token.
  static absl::StatusOr<std::unique_ptr<BertWordPieceTokenizer>> load(
      const WordPieceOptions& options);

  using Tokenizer::encode;
  void encode(absl::string_view text, std::vector<int32_t>* out) const override;
  absl::StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(all_tokens_.size()); }
  const SpecialTokens& special() const override { return special_; }
  // "BertWordPieceLowerCase" or "BertWordPieceCase" (Megatron's --tokenizer-type).
  std::string name() const override;

  // The token of `id` (vocab.txt line or an added token); empty for an id out of range.
  std::string_view token(int32_t id) const;

 private:
  BertWordPieceTokenizer(std::unique_ptr<WordPieceModel> model, std::vector<std::string> added,
                         const WordPieceOptions& options);

  std::unique_ptr<WordPieceModel> model_;
  std::vector<std::string> all_tokens_;  // vocab.txt lines, then the added tokens
  BertNormalizerOptions normalizer_;
  bool lower_case_;
  SpecialTokens special_;
};

// Reads a vocab.txt: one token per line ('\n'; a trailing '\r' and surrounding whitespace are
// stripped as Python's str.strip() would for ASCII). NotFound / InvalidArgument naming the file.
absl::StatusOr<std::vector<std::string>> read_wordpiece_vocab(const std::string& path);

}  // namespace anvil::io
