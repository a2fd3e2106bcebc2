// A simple GPT sample stream over an IndexedDataset (the foundation's data path; the full
// Megatron index semantics with epochs, blending and cached index files are io/gpt_dataset):
// the documents in [doc_begin, doc_end) are concatenated in a seeded random order; sample i
// is the seq_len + 1 tokens starting at i * seq_len, so consecutive samples overlap by one
// token (inputs = tokens[0..seq_len), targets = tokens[1..seq_len]). Sample order is shuffled
// with the seed; epoch e reshuffles with seed + e.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "io/indexed_dataset.h"

namespace anvil::io {

// Megatron's split string "969,30,1" -> document ranges [begin, end) for train/valid/test
// (weights normalized, boundaries rounded as Megatron's get_split_index does).
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> split_documents(
    const std::string& split, int64_t num_documents);

class GptSampleStream {
 public:
  // FailedPrecondition when the range holds fewer than seq_len + 1 tokens.
  static absl::StatusOr<GptSampleStream> create(const IndexedDataset* data, int64_t doc_begin,
                                                int64_t doc_end, int64_t seq_len, uint64_t seed);
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t seq_len() const { return seq_len_; }
  // Writes seq_len + 1 tokens of global sample `index` (epoch = index / samples_per_epoch).
  void sample(int64_t index, int32_t* out) const;

 private:
  const IndexedDataset* data_ = nullptr;
  int64_t seq_len_ = 0;
  uint64_t seed_ = 0;
  int64_t samples_per_epoch_ = 0;
  std::vector<int64_t> doc_order_;     // shuffled document ids
  std::vector<int64_t> doc_start_;     // token offset of each shuffled doc in the concatenation
  std::vector<int64_t> sample_order_;  // shuffled sample ids of epoch 0
};

}  // namespace anvil::io
