// tokenizers' Precompiled normalizer: SentencePiece's compiled normalization rules (a Darts
// double-array trie of source strings plus a blob of NUL-terminated replacements), as T5,
// ALBERT, XLNet and mT5 tokenizer.json files carry them in "precompiled_charsmap" (base64).
//
// normalize() follows tokenizers (normalizers/precompiled.rs over spm_precompiled): the text is
// cut into extended grapheme clusters (utf8proc's rules); a cluster shorter than 6 bytes whose
// bytes start with a trie key is replaced by that key's replacement; otherwise each of its code
// points is replaced the same way when one of its prefixes is a key, else kept. As in
// tokenizers, the replacement is that of the SHORTEST key prefixing the chunk, and the rest of
// the chunk after the key is dropped (spm_precompiled's transform()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anvil::io::hf_internal {

class PrecompiledCharsmap {
 public:
  // `blob`: the decoded charsmap. InvalidArgument (what is wrong) for a truncated or
  // inconsistent one.
  static absl::StatusOr<std::unique_ptr<PrecompiledCharsmap>> create(std::string blob);

  // *text (valid UTF-8) normalized in place.
  void normalize(std::string* text) const;

 private:
  PrecompiledCharsmap() = default;
  // The replacement of the shortest key prefixing `chunk`; false when none does.
  bool transform(absl::string_view chunk, absl::string_view* replacement) const;

  std::vector<uint32_t> units_;  // the double array
  std::string normalized_;       // the replacements, NUL-terminated
};

}  // namespace anvil::io::hf_internal
