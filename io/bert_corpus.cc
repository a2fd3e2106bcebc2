// BERT's train/valid/test datasets of one prefix, and blends of several (see bert_corpus.h).
#include "io/bert_corpus.h"

#include "absl/strings/str_format.h"
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

int64_t BertSamples::size() const { return blend_ ? blend_->size() : datasets_.front()->size(); }

absl::Status BertSamples::sample(int64_t i, BertSample* out) const {
  if (!blend_) return datasets_.front()->sample(i, out);
  ANVIL_CHECK_MSG(
      i >= 0 && i < blend_->size(),
      absl::StrFormat("BertSamples: position %d outside the blend [0, %d)", i, blend_->size()));
  return datasets_[blend_->dataset(i)]->sample(blend_->dataset_sample(i), out);
}

namespace {

// Split k of the corpus: the one source's dataset, or the blend of every source's (all present
// or none: a blend missing a source would shift Megatron's weights onto the wrong datasets).
absl::StatusOr<std::unique_ptr<BertSamples>> split_samples(const BertCorpus& c, bool weighted,
                                                           const std::vector<double>& weights,
                                                           size_t k, int64_t n) {
  std::vector<const BertDataset*> datasets;
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  for (size_t s = 0; s < c.splits.size(); ++s) {
    const BertDataset* d = c.splits[s].sets[k].get();
    if (d == nullptr) continue;
    datasets.push_back(d);
    sizes.push_back(d->size());
    names.push_back(c.sources[s].prefix);
  }
  if (datasets.empty()) return nullptr;
  static constexpr const char* kNames[] = {"train", "valid", "test"};
  if (datasets.size() != c.splits.size()) {
    for (size_t s = 0; s < c.splits.size(); ++s) {
      if (c.splits[s].sets[k] != nullptr) continue;
      return absl::FailedPreconditionError(absl::StrFormat(
          "BERT data: the %s split of %s has no documents, but other blended prefixes have",
          kNames[k], c.sources[s].prefix));
    }
  }
  if (!weighted) return std::make_unique<BertSamples>(std::move(datasets), nullptr);
  ANVIL_ASSIGN_OR_RETURN(BlendIndex index, BlendIndex::build(weights, n));
  ANVIL_RETURN_IF_ERROR(check_blend_sizes(index, sizes, names));
  return std::make_unique<BertSamples>(std::move(datasets),
                                       std::make_unique<BlendIndex>(std::move(index)));
}

}  // namespace

absl::StatusOr<BertCorpus> open_bert_corpus(const std::vector<GptDataSource>& sources,
                                            bool weighted, const std::string& split,
                                            const std::array<int64_t, 3>& num_samples,
                                            const MlmVocab& vocab, const BertDatasetOptions& opt) {
  ANVIL_ASSIGN_OR_RETURN(const std::vector<double> weights,
                         source_weights(sources, weighted, "BERT data"));
  BertCorpus c;
  c.sources = sources;
  c.weighted = weighted;
  for (size_t s = 0; s < sources.size(); ++s) {
    std::array<int64_t, 3> n = num_samples;
    for (size_t k = 0; k < 3 && weighted; ++k) {
      if (n[k] > 0) n[k] = megatron_blend_samples(n[k], weights[s]);
    }
    ANVIL_ASSIGN_OR_RETURN(BertSplits one,
                           open_bert_splits(sources[s].prefix, split, n, vocab, opt));
    c.splits.push_back(std::move(one));
  }
  for (size_t k = 0; k < 3; ++k) {
    if (num_samples[k] <= 0) continue;
    ANVIL_ASSIGN_OR_RETURN(c.sets[k], split_samples(c, weighted, weights, k, num_samples[k]));
  }
  return c;
}

}  // namespace anvil::io
