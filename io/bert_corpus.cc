// BERT's train/valid/test datasets of one prefix (see bert_corpus.h).
#include "io/bert_corpus.h"

#include "engine/status.h"
#include "io/data_split.h"

namespace anvil::io {

absl::StatusOr<BertSplits> open_bert_splits(const std::string& prefix, const std::string& split,
                                            const std::array<int64_t, 3>& num_samples,
                                            const MlmVocab& vocab, BertDatasetOptions opt) {
  BertSplits out;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> data, IndexedDataset::open(prefix));
  out.data = std::move(data);
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  ANVIL_ASSIGN_OR_RETURN(Ranges docs, split_documents(split, out.data->num_documents()));
  static constexpr const char* kNames[] = {"train", "valid", "test"};
  for (size_t k = 0; k < 3; ++k) {
    out.documents[k] = docs[k];
    if (docs[k].second <= docs[k].first || num_samples[k] <= 0) continue;
    opt.num_samples = num_samples[k];
    opt.cache.name = kNames[k];
    ANVIL_ASSIGN_OR_RETURN(out.sets[k], BertDataset::create(out.data, prefix, docs[k].first,
                                                            docs[k].second, vocab, opt));
  }
  return out;
}

}  // namespace anvil::io
