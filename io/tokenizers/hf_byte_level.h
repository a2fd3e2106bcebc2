// GPT-2's byte-to-unicode alphabet as tokenizers' ByteLevel components use it: every byte gets a
// printable stand-in character (bytes_to_unicode), so byte-level BPE vocabularies are text.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace anvil::io::hf_internal {

// Each byte of `bytes` as its stand-in character (UTF-8).
std::string to_byte_level(absl::string_view bytes);
// Appends to *out the same, without clearing it.
void append_to_byte_level(absl::string_view bytes, std::string* out);

// tokenizers' ByteLevel decoder for one token: its characters mapped back to bytes, or the
// token's own UTF-8 when any character is outside the alphabet; appended to *out.
void append_byte_level(absl::string_view token, std::string* out);

}  // namespace anvil::io::hf_internal
