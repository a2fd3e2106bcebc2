// A byte-level tokenizer for the demo until the GPT-2 BPE lands: token = byte value (0..255),
// end-of-document = 256, vocabulary 257. Any byte string round-trips, invalid UTF-8 included.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace anvil::io {

class ByteTokenizer {
 public:
  static constexpr int32_t kEod = 256;
  static constexpr int64_t kVocabSize = 257;

  int64_t vocab_size() const { return kVocabSize; }
  int32_t eod() const { return kEod; }

  // One token per byte of `text`, in order (no EOD appended).
  std::vector<int32_t> encode(std::string_view text) const;
  // Appends encode(text) to *out (avoids a copy per document in preprocessing).
  void encode_append(std::string_view text, std::vector<int32_t>* out) const;

  // Bytes of `tokens`; EOD becomes `eod_text` (default: nothing). InvalidArgument for an id
  // outside [0, 256], naming its position.
  absl::StatusOr<std::string> decode(absl::Span<const int32_t> tokens,
                                     std::string_view eod_text = {}) const;
};

}  // namespace anvil::io
