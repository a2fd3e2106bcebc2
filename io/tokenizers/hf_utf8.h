// decode_at with an inline ASCII fast path, for the per-character loops of the tokenizer.json
// pipeline (utf8::decode_at is out of line and was a third of T5-style encoding time).
#pragma once

#include <cstddef>

#include "absl/strings/string_view.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {

inline utf8::Decoded decode_utf8(absl::string_view text, size_t pos) {
  const unsigned char b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) return {static_cast<char32_t>(b), 1, true};
  return utf8::decode_at(text, pos);
}

}  // namespace anvil::io::hf_internal
