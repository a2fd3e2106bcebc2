// The decoders of a Hugging Face tokenizer.json: tokens (strings, by id) back to text, as
// tokenizers' Decoder::decode_chain followed by concatenation. With no decoder the tokens are
// joined by ' ', as tokenizers does.
//   ByteLevel (GPT-2's alphabet back to bytes; ill-formed UTF-8 becomes U+FFFD), ByteFallback
//   (runs of <0xXX> tokens become their bytes, or one U+FFFD per byte when ill-formed), Fuse,
//   Strip (content, start, stop), Replace (String or Regex pattern), Metaspace (replacement,
//   prepend_scheme), WordPiece (prefix, cleanup), BPEDecoder (suffix), CTC, Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "io/tokenizers/hf_json.h"

namespace anvil::io::hf_internal {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // tokenizers' decode_chain: rewrites the token list. Thread-safe.
  virtual void decode_chain(std::vector<std::string>* tokens) const = 0;
};

// The decoder described by `d` (an object, or null for none: *out = nullptr).
absl::Status parse_decoder(const Ctx& ctx, const json& d, const std::string& where,
                           std::unique_ptr<Decoder>* out);

// The text of `tokens` under `decoder` (nullptr: joined by ' ').
std::string decode_tokens(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace anvil::io::hf_internal
