// A byte-level tokenizer (the demo's and the tests' fallback): token = byte value (0..255),
// end-of-document = 256, vocabulary 257. Any byte string round-trips, invalid UTF-8 included.
// make_tokenizer({.type = "Byte"}) returns one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "io/tokenizer.h"

namespace anvil::io {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEod = 256;
  static constexpr int64_t kVocabSize = 257;

  ByteTokenizer();

  int64_t vocab_size() const override { return kVocabSize; }
  int32_t eod() const { return kEod; }
  const SpecialTokens& special() const override { return special_; }
  std::string name() const override { return "Byte"; }

  // One token per byte of `text`, in order (no EOD appended).
  using Tokenizer::encode;
  void encode(absl::string_view text, std::vector<int32_t>* out) const override;
  // Appends encode(text) to *out (avoids a copy per document in preprocessing).
  void encode_append(std::string_view text, std::vector<int32_t>* out) const;

  // Bytes of `tokens`; EOD becomes nothing. InvalidArgument for an id outside [0, 256],
  // naming its position.
  absl::StatusOr<std::string> decode(const std::vector<int32_t>& tokens) const override;
  // Bytes of `tokens`; EOD becomes `eod_text`.
  absl::StatusOr<std::string> decode(absl::Span<const int32_t> tokens,
                                     std::string_view eod_text = {}) const;

 private:
  SpecialTokens special_;
};

}  // namespace anvil::io
