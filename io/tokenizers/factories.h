// Constructors of each Tokenizer implementation, called by make_tokenizer (io/tokenizer.cc)
// after it has picked the type. Each lives next to its implementation; all return
// InvalidArgument / NotFound naming the file and the problem.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "io/tokenizer.h"

namespace anvil::io {

// GPT2BPE: vocab_file = encoder.json / vocab.json, merge_file = vocab.bpe / merges.txt
// (io/tokenizers/gpt2_bpe.cc).
absl::StatusOr<std::unique_ptr<Tokenizer>> make_gpt2_tokenizer(const TokenizerOptions& options);
// Byte: no files; ids 0..255 are bytes, 256 is EOD (io/byte_tokenizer.cc).
absl::StatusOr<std::unique_ptr<Tokenizer>> make_byte_tokenizer(const TokenizerOptions& options);
// BertWordPieceLowerCase (lower_case = true) / BertWordPieceCase: vocab_file = vocab.txt.
absl::StatusOr<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(const TokenizerOptions& options,
                                                                    bool lower_case);
// SentencePiece: vocab_file = the .model file.
absl::StatusOr<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(
    const TokenizerOptions& options);
// HF: vocab_file = tokenizer.json or a directory holding one.
absl::StatusOr<std::unique_ptr<Tokenizer>> make_hf_tokenizer(const TokenizerOptions& options);

}  // namespace anvil::io
