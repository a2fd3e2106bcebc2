// Byte-level tokenizer: encode maps each byte b to token b; decode is its inverse, with EOD
// (256) rendered as a caller-chosen string.
#include "io/byte_tokenizer.h"

#include "absl/strings/str_format.h"
#include "io/tokenizers/factories.h"

namespace anvil::io {

ByteTokenizer::ByteTokenizer() { special_.eod = kEod; }

void ByteTokenizer::encode(absl::string_view text, std::vector<int32_t>* out) const {
  encode_append(std::string_view(text.data(), text.size()), out);
}

void ByteTokenizer::encode_append(std::string_view text, std::vector<int32_t>* out) const {
  out->reserve(out->size() + text.size());
  for (const char c : text) out->push_back(static_cast<unsigned char>(c));
}

absl::StatusOr<std::string> ByteTokenizer::decode(const std::vector<int32_t>& tokens) const {
  return decode(absl::MakeConstSpan(tokens), std::string_view());
}

absl::StatusOr<std::string> ByteTokenizer::decode(absl::Span<const int32_t> tokens,
                                                  std::string_view eod_text) const {
  std::string out;
  out.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t >= 0 && t < 256) {
      out.push_back(static_cast<char>(static_cast<unsigned char>(t)));
    } else if (t == kEod) {
      out.append(eod_text.data(), eod_text.size());
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "byte tokenizer: token %d at position %d is outside the vocabulary [0, %d)", t, i,
          kVocabSize));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> make_byte_tokenizer(const TokenizerOptions& options) {
  if (!options.vocab_file.empty() || !options.merge_file.empty() || options.vocab_extra_ids != 0) {
    return absl::InvalidArgumentError(
        "the Byte tokenizer takes no vocabulary, merges or extra ids (got vocab '" +
        options.vocab_file + "', merges '" + options.merge_file + "', " +
        std::to_string(options.vocab_extra_ids) + " extra ids)");
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
}

}  // namespace anvil::io
