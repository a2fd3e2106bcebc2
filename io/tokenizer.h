// Tokenizer: one interface over GPT-2 byte-level BPE, BERT WordPiece, SentencePiece and Hugging
// Face tokenizer.json, so bin/preprocess and the datasets never care which one is in use.
// Token ids are identical to the reference implementations on any input, invalid UTF-8 included
// (each implementation documents how it treats invalid bytes, matching its reference).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anvil::io {

// Special token ids; -1 when the vocabulary has none.
struct SpecialTokens {
  int32_t eod = -1;  // end of document (GPT-2 <|endoftext|>)
  int32_t pad = -1;
  int32_t cls = -1;
  int32_t sep = -1;
  int32_t mask = -1;
  int32_t unk = -1;
  int32_t bos = -1;
  int32_t eos = -1;
  std::vector<int32_t> sentinels;  // <extra_id_0>, <extra_id_1>, ... (T5)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Appends the ids of `text` to `out` (no special tokens added). Thread-safe (const).
  virtual void encode(absl::string_view text, std::vector<int32_t>* out) const = 0;
  // The text of `ids`; InvalidArgument for an id outside the vocabulary.
  virtual absl::StatusOr<std::string> decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual const SpecialTokens& special() const = 0;
  // "GPT2BPE", "BertWordPiece", ...
  virtual std::string name() const = 0;

  std::vector<int32_t> encode(absl::string_view text) const {
    std::vector<int32_t> ids;
    encode(text, &ids);
    return ids;
  }
};

struct TokenizerOptions {
  std::string type;         // GPT2BPE | BertWordPieceLowerCase | BertWordPieceCase |
                            // SentencePiece | HF | Byte
  std::string vocab_file;   // vocab.json / encoder.json, vocab.txt, .model, tokenizer.json
                            // (or a directory holding tokenizer.json for HF)
  std::string merge_file;   // merges.txt / vocab.bpe (GPT2BPE)
  int vocab_extra_ids = 0;  // sentinels appended for T5 (<extra_id_0> ...)
};

// NotFound / InvalidArgument naming the file and the problem.
absl::StatusOr<std::unique_ptr<Tokenizer>> make_tokenizer(const TokenizerOptions& options);

}  // namespace anvil::io
