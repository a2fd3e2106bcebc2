// The normalizers of a Hugging Face tokenizer.json, each rewriting the text as tokenizers'
// normalizers do (alignments are not tracked: anvil needs ids, not offsets):
//   BertNormalizer (bert_normalizer.h, tokenizers' rules), NFC, NFD, NFKC, NFKD, Lowercase
//   (per code point, Rust's char::to_lowercase), Strip (left/right White_Space), StripAccents
//   (drops marks, General_Category M), Replace (String or Oniguruma Regex pattern; every match,
//   empty ones included, becomes `content`), Prepend (only before a non-empty text), Nmt,
//   Precompiled (precompiled_charsmap.h), ByteLevel (bytes to GPT-2's alphabet), Sequence.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "io/tokenizers/hf_json.h"

namespace anvil::io::hf_internal {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites *text (valid UTF-8, and valid again afterwards). Thread-safe.
  virtual void normalize(std::string* text) const = 0;
};

// The normalizer described by `n` (an object, or null for none: *out = nullptr).
// InvalidArgument for a malformed one, Unimplemented naming an unknown type.
absl::Status parse_normalizer(const Ctx& ctx, const json& n, const std::string& where,
                              std::unique_ptr<Normalizer>* out);

}  // namespace anvil::io::hf_internal
