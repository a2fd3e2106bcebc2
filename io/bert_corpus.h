// Megatron's build_train_valid_test_datasets for BERT over one sentence-split data prefix
// (bin/preprocess --split-sentences): the documents split by the split string ("969,30,1",
// io/data_split.h), then one BertDataset (io/bert_dataset.h) per split that has documents and
// asks for samples (Megatron builds None for the others), each sized for its sample count.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "io/bert_dataset.h"

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

}  // namespace anvil::io
