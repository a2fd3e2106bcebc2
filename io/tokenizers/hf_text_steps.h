// Text steps of a Hugging Face tokenizer.json pipeline (io/tokenizers/hf_tokenizer.cc): the
// normalizers it supports, and the per-token parts of the ByteLevel and WordPiece decoders.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "io/tokenizers/bert_normalizer.h"

namespace anvil::io::hf_internal {

enum class NormKind { kBert, kNfc, kNfd, kNfkc, kNfkd, kLowercase };
struct NormStep {
  NormKind kind;
  BertNormalizerOptions bert;
};

// The normalizers applied in order to text.
std::string apply_normalizers(const std::vector<NormStep>& steps, absl::string_view text);

// tokenizers' ByteLevel decoder for one token: its characters mapped back to bytes (GPT-2's
// bytes_to_unicode inverted), or the token's own UTF-8 when any character is outside the
// alphabet; appended to *out.
void append_byte_level(const std::string& token, std::string* out);

// tokenizers' WordPiece decoder cleanup (decoders/wordpiece.rs), applied per token.
std::string wordpiece_cleanup(const std::string& token);

}  // namespace anvil::io::hf_internal
