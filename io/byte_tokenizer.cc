// Byte-level tokenizer: encode maps each byte b to token b; decode is its inverse, with EOD
// (256) rendered as a caller-chosen string.
#include "io/byte_tokenizer.h"

#include "absl/strings/str_format.h"

namespace anvil::io {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  encode_append(text, &out);
  return out;
}

void ByteTokenizer::encode_append(std::string_view text, std::vector<int32_t>* out) const {
  out->reserve(out->size() + text.size());
  for (const char c : text) out->push_back(static_cast<unsigned char>(c));
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

}  // namespace anvil::io
