// A simple GPT sample stream over an IndexedDataset (the foundation's data path; the full
// Megatron index semantics with epochs, blending and cached index files are io/gpt_dataset):
// the documents in [doc_begin, doc_end) are concatenated in a seeded random order; sample i
// is the seq_len + 1 tokens starting at i * seq_len, so consecutive samples overlap by one
// token (inputs = tokens[0..seq_len), targets = tokens[1..seq_len]). Sample order is shuffled
// with the seed; epoch e reshuffles with seed + e. The tail of fewer than seq_len tokens at the
// end of each epoch's concatenation is not used. sample() is const and safe to call from
// several threads at once (epoch layouts are built lazily under a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "io/indexed_dataset.h"

namespace anvil::io {

// Megatron's split string "969,30,1" -> document ranges [begin, end) for train/valid/test
// (weights normalized, boundaries rounded as Megatron's get_split_index does).
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> split_documents(const std::string& split,
                                                                         int64_t num_documents);

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
  // The layout of one epoch: documents in shuffled order, their token offsets in the
  // concatenation, and the shuffled sample order. Built from (seed + epoch) alone.
  struct Epoch {
    int64_t epoch = 0;
    std::vector<int64_t> doc_order;     // shuffled document ids
    std::vector<int64_t> doc_start;     // [docs + 1] token offset of each shuffled doc
    std::vector<int64_t> sample_order;  // [samples_per_epoch] shuffled sample ids
  };
  // A few recently used epochs behind a mutex, shared by copies of the stream (the layouts are
  // pure functions of the seed, so sharing is safe); defined in the .cc.
  struct EpochCache;

  std::shared_ptr<const Epoch> build_epoch(int64_t epoch) const;
  std::shared_ptr<const Epoch> epoch_layout(int64_t epoch) const;

  const IndexedDataset* data_ = nullptr;
  int64_t doc_begin_ = 0;
  int64_t seq_len_ = 0;
  uint64_t seed_ = 0;
  int64_t samples_per_epoch_ = 0;
  std::vector<int64_t> doc_tokens_;  // token count of document doc_begin_ + i
  std::shared_ptr<EpochCache> cache_;
};

}  // namespace anvil::io
