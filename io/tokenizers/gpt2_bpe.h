// GPT-2 byte-level BPE (encoder.json/vocab.json + vocab.bpe/merges.txt), token-identical to
// tiktoken's r50k_base encode_ordinary and to HF tokenizers' ByteLevelBPETokenizer.
//
// encode(text):
//   1. Ill-formed UTF-8 is replaced as Python's bytes.decode("utf-8", errors="replace") does
//      (utf8::replace_invalid), which is the text both references receive.
//   2. Pre-tokenization splits the text exactly as GPT-2's regex
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      with \s = Unicode White_Space, by a hand-written scanner (Gpt2PreTokenizer; the test
//      checks it against PCRE2 running the pattern itself).
//   3. Each piece's UTF-8 bytes start as one token per byte (GPT-2's byte-to-unicode alphabet);
//      adjacent pairs are merged lowest merge rank first, leftmost on ties, until no pair has a
//      rank. Pieces <= 64 bytes are cached per thread (bounded; see encode()).
// "<|endoftext|>" in the text is ordinary text (no special-token parsing, like tiktoken's
// encode_ordinary); its id 50256 is special().eod. decode() concatenates the tokens' bytes,
// which may be ill-formed UTF-8 when a multi-byte character is split across ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tokenizer.h"

namespace anvil::io {

// GPT-2's pre-tokenization pattern, for reference and for the PCRE2 cross-check in the tests.
inline constexpr char kGpt2SplitPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Splits well-formed UTF-8 into the successive matches of kGpt2SplitPattern (leftmost-first
// alternation, greedy, with the backtracking of `\s+(?!\S)`: a whitespace run followed by a
// non-space leaves its last character to start the next piece). The pieces are non-empty and
// tile the text. Ill-formed input must go through utf8::replace_invalid first (each ill-formed
// byte is otherwise treated as U+FFFD, but the piece keeps the raw bytes).
class Gpt2PreTokenizer {
 public:
  explicit Gpt2PreTokenizer(absl::string_view text) : text_(text) {}
  // Sets *piece to the next piece; false at the end of the text.
  bool next(absl::string_view* piece);

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

// All pieces of `text` (convenience for tests and tools).
std::vector<absl::string_view> gpt2_pretokenize(absl::string_view text);

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // Per-thread cache capacity in words; a thread's cache is emptied when it fills up, so its
  // memory stays below ~ words * (64 key bytes + 24 slot bytes * 2 + ids) ~ 12 MiB worst case.
  static constexpr size_t kDefaultCacheWords = size_t{1} << 15;
  // Pieces longer than this (bytes) are never cached.
  static constexpr size_t kMaxCachedBytes = 64;

  // Reads encoder.json / vocab.json ({"token": id, ...}, tokens in GPT-2's byte-to-unicode
  // alphabet) and vocab.bpe / merges.txt ("a b" per line, rank = order, an optional
  // "#version" first line). NotFound for a missing file; InvalidArgument naming the file and
  // line for malformed JSON, a non-integer or duplicate id, a character outside the byte
  // alphabet, a missing single-byte token, or a merge whose parts or result are not tokens.
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> load(
      const std::string& vocab_file, const std::string& merges_file,
      size_t cache_words = kDefaultCacheWords);
  // The same from file contents; the names are used in error messages.
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> from_contents(
      absl::string_view vocab_json, const std::string& vocab_name, absl::string_view merges,
      const std::string& merges_name, size_t cache_words = kDefaultCacheWords);

  ~Gpt2BpeTokenizer() override;
  Gpt2BpeTokenizer(const Gpt2BpeTokenizer&) = delete;
  Gpt2BpeTokenizer& operator=(const Gpt2BpeTokenizer&) = delete;

  using Tokenizer::encode;
  // Thread-safe: the merged ids of each piece are memoized in a cache owned by the calling
  // thread (keyed by this tokenizer's serial number, at most 4 tokenizers per thread, least
  // recently used dropped), so concurrent encodes share nothing mutable.
  void encode(absl::string_view text, std::vector<int32_t>* out) const override;
  // Bytes of `ids` (50256 -> "<|endoftext|>"); InvalidArgument naming the position of an id
  // outside the vocabulary.
  absl::StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override;
  // Largest id + 1 (50257 for GPT-2).
  int64_t vocab_size() const override { return static_cast<int64_t>(token_offsets_.size()) - 1; }
  // eod = "<|endoftext|>" (50256), or -1 when the vocabulary lacks it; the rest are -1.
  const SpecialTokens& special() const override { return special_; }
  std::string name() const override { return "GPT2BPE"; }

  // How bpe() finds the next merge: a rescan of the (cached) pair ranks, O(n^2) and fastest for
  // words; or a min-heap over a linked list, O(n log n), for long pieces. kAuto picks by
  // length. Both give identical ids; tests compare them.
  enum class MergeStrategy { kAuto, kScan, kHeap };
  // Appends the BPE ids of one piece (its raw bytes), without the cache.
  void bpe(absl::string_view piece, std::vector<int32_t>* out,
           MergeStrategy strategy = MergeStrategy::kAuto) const;

  // The bytes of token `id`; empty for an id outside the vocabulary.
  absl::string_view token_bytes(int32_t id) const;

 private:
  // (left id, right id) -> (rank, merged id), open addressing, key kEmptyKey = free.
  struct PairSlot {
    uint64_t key;
    uint32_t rank;
    int32_t merged;
  };

  Gpt2BpeTokenizer() = default;
  // Rank and merged id of the pair, or false when it never merges.
  bool find_merge(int32_t left, int32_t right, uint32_t* rank, int32_t* merged) const;
  void bpe_scan(absl::string_view piece, std::vector<int32_t>* out) const;
  void bpe_heap(absl::string_view piece, std::vector<int32_t>* out) const;

  int32_t byte_token_[256] = {};         // token of each single byte
  std::vector<PairSlot> pair_slots_;     // power-of-two size
  std::string token_data_;               // bytes of all tokens, concatenated in id order
  std::vector<uint32_t> token_offsets_;  // token i = token_data_[off[i], off[i+1])
  std::vector<bool> token_present_;      // false for ids missing from the vocabulary
  SpecialTokens special_;
  uint64_t serial_ = 0;  // unique per instance: the key of the thread-local caches
  size_t cache_words_ = kDefaultCacheWords;
};

}  // namespace anvil::io
