// Packed multitask-finetuning samples of one data prefix (Megatron-DeepSpeed's
// decoder_packed_mtf_dataset.py over mtf_dataset.py, BLOOMZ's T0/MTF path): the pair
// PREFIX_inputs_document / PREFIX_targets_document (bin/preprocess --json-keys inputs targets),
// sequence i of one paired with sequence i of the other, split by Megatron's split string over
// the targets' sequences (_build_train_valid_test_datasets: get_train_valid_test_split_), each
// split's rows packed by io/mtf_packing.h (the same index, the same rows, seq_length = the
// fork's --seq-length + 1).
// Checks on open (the fork asserts them): the two datasets hold as many sequences, every one
// non-empty.
// One difference: the fork's index draws ids 0 .. n - 1 for a split of n documents and reads
// those documents whatever the split's first one (a validation split of documents [a, b) reads
// documents [0, b - a), i.e. training documents); here id k of a split starting at a reads
// document a + k. The training split (a = 0) is the same.
// The index is built in memory on every rank (one pass over the sizes per epoch), not cached.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/indexed_dataset.h"
#include "io/mtf_packing.h"

namespace anvil::io {

// The input/target pair of one prefix.
struct MtfPairs {
  std::string prefix;
  std::unique_ptr<IndexedDataset> inputs, targets;
  int64_t size() const { return inputs->num_sequences(); }
};

// PREFIX_inputs_document and PREFIX_targets_document; errors name the files and the mismatch.
absl::StatusOr<std::shared_ptr<const MtfPairs>> open_mtf_pairs(const std::string& prefix);

// The packed rows of documents [first, first + count) of `pairs`.
class MtfSamples {
 public:
  // num_samples: rows wanted (the index holds at least num_samples + 1, as the fork's);
  // seq_length: tokens per row (T + 1); seed: [data] seed.
  static absl::StatusOr<std::unique_ptr<MtfSamples>> build(std::shared_ptr<const MtfPairs> pairs,
                                                           int64_t first, int64_t count,
                                                           int64_t num_samples, int64_t seq_length,
                                                           uint32_t seed, int32_t pad_token);
  int64_t size() const { return static_cast<int64_t>(index_.samples.size()); }
  int64_t documents() const { return count_; }
  const MtfPackedIndex& index() const { return index_; }
  // Row i (< size()): DecoderPackedMTFDataset.__getitem__(i).
  absl::Status sample(int64_t i, MtfRow* row) const;

 private:
  MtfSamples() = default;
  std::shared_ptr<const MtfPairs> pairs_;
  int64_t first_ = 0, count_ = 0, seq_length_ = 0;
  int32_t pad_ = 0;
  MtfPackedIndex index_;
};

}  // namespace anvil::io
