// The post-processors of a Hugging Face tokenizer.json, for one sequence (what
// Tokenizer.encode(text, add_special_tokens=True) adds): TemplateProcessing ("single" template:
// its SpecialToken items' ids around the Sequence), BertProcessing ([CLS] A [SEP]),
// RobertaProcessing (<s> A </s>), ByteLevel (ids unchanged) and Sequence of these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "io/tokenizers/hf_json.h"

namespace anvil::io::hf_internal {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites the ids of one encoded sequence. Thread-safe.
  virtual void process(std::vector<int32_t>* ids) const = 0;
};

// The post-processor described by `p` (an object, or null for none: *out = nullptr).
absl::Status parse_post_processor(const Ctx& ctx, const json& p, const std::string& where,
                                  std::unique_ptr<PostProcessor>* out);

}  // namespace anvil::io::hf_internal
