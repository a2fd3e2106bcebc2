// The models of a Hugging Face tokenizer.json: the step from one pre-tokenized piece to ids.
//   BPE      (hf_bpe.cc): tokenizers' BPE with byte_fallback, fuse_unk, ignore_merges,
//            continuing_subword_prefix, end_of_word_suffix; dropout must be null or 0.
//   Unigram  (hf_unigram.cc): SentencePiece's Viterbi over the piece scores, unknown characters
//            fused into one unk, byte_fallback.
//   WordPiece (wordpiece.h's greedy longest-match-first) and WordLevel (whole-piece lookup).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "io/tokenizers/hf_json.h"

namespace anvil::io::hf_internal {

// token -> id, looked up by string_view without a copy.
using VocabMap = absl::flat_hash_map<std::string, int32_t>;

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one non-empty piece (valid UTF-8). Thread-safe.
  virtual void tokenize(absl::string_view piece, std::vector<int32_t>* out) const = 0;

  // The vocabulary by id ("" for an id the file lacks) and its inverse.
  const std::vector<std::string>& tokens() const { return tokens_; }
  int32_t token_to_id(absl::string_view token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }
  // The model's unk_token, when it has one.
  const std::optional<std::string>& unk_token() const { return unk_token_; }

 protected:
  std::vector<std::string> tokens_;
  VocabMap ids_;
  std::optional<std::string> unk_token_;
};

// The model described by `m` (required). InvalidArgument for a malformed one, Unimplemented
// naming an unknown type or option.
absl::Status parse_model(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out);

// Reads model.vocab as {"token": id, ...} into tokens/ids (BPE, WordPiece, WordLevel).
absl::Status read_vocab_object(const Ctx& ctx, const json& m, std::vector<std::string>* tokens,
                               VocabMap* ids);

absl::Status parse_bpe(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out);
absl::Status parse_unigram(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out);

}  // namespace anvil::io::hf_internal
