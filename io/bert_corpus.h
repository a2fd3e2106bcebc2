// Megatron's build_train_valid_test_datasets for BERT (megatron/data/dataset_utils.py) over
// sentence-split data prefixes (bin/preprocess --split-sentences):
//   one prefix: the documents split by the split string ("969,30,1", io/data_split.h), then one
//     BertDataset (io/bert_dataset.h) per split that has documents and asks for samples
//     (Megatron builds None for the others), each sized for its sample count.
//   weighted prefixes ("W1 PREFIX1 W2 PREFIX2 ...", also "1 PREFIX"): each prefix split so,
//     its datasets sized ceil(n * w * 1.005) for a split of n samples
//     (get_datasets_weights_and_num_samples), and each split a blend of the prefixes' datasets
//     by weight (BlendableDataset; io/blended_dataset.h's BlendIndex), n positions long.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "io/bert_dataset.h"
#include "io/blended_dataset.h"

namespace anvil::io {

struct BertSplits {
  std::shared_ptr<const IndexedDataset> data;
  std::array<std::pair<int64_t, int64_t>, 3> documents;  // train, valid, test [begin, end)
  std::array<std::unique_ptr<BertDataset>, 3> sets;      // null where not built
};

// num_samples: per split (train, valid, test); opt.num_samples and opt.cache.name are set per
// split here. The errors of IndexedDataset::open, split_documents and BertDataset::create.
absl::StatusOr<BertSplits> open_bert_splits(const std::string& prefix, const std::string& split,
                                            const std::array<int64_t, 3>& num_samples,
                                            const MlmVocab& vocab, BertDatasetOptions opt);

// The samples of one split: one prefix's BertDataset, or several blended by weight.
class BertSamples {
 public:
  BertSamples(std::vector<const BertDataset*> datasets, std::unique_ptr<BlendIndex> blend)
      : datasets_(std::move(datasets)), blend_(std::move(blend)) {}
  // The blend's length, or the one dataset's size.
  int64_t size() const;
  const BlendIndex* blend_index() const { return blend_.get(); }
  // Sample i, 0 <= i < size() (CHECKed). Thread-safe. DataLoss when a .bin shrank.
  absl::Status sample(int64_t i, BertSample* out) const;

 private:
  std::vector<const BertDataset*> datasets_;  // owned by BertCorpus::sources
  std::unique_ptr<BlendIndex> blend_;         // null: one dataset
};

struct BertCorpus {
  std::vector<GptDataSource> sources;
  bool weighted = false;                             // every split is a blend
  std::vector<BertSplits> splits;                    // per source
  std::array<std::unique_ptr<BertSamples>, 3> sets;  // train, valid, test; null where not built
};

// The BERT data of `sources` (weighted: blended, see above; else exactly one source), split
// by `split`, num_samples per split (0: not built). FailedPrecondition naming the prefix when
// a split that asks for samples has documents in some sources but not in others, or a blended
// dataset holds too few samples; the errors of open_bert_splits.
absl::StatusOr<BertCorpus> open_bert_corpus(const std::vector<GptDataSource>& sources,
                                            bool weighted, const std::string& split,
                                            const std::array<int64_t, 3>& num_samples,
                                            const MlmVocab& vocab, const BertDatasetOptions& opt);

}  // namespace anvil::io
