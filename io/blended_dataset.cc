// Megatron's blending index and train/valid/test assembly (see blended_dataset.h).
#include "io/blended_dataset.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/data_split.h"

namespace anvil::io {

std::vector<double> megatron_normalize_weights(const std::vector<double>& weights) {
  double sum = 0.0;
  for (double w : weights) sum += w;
  std::vector<double> out;
  out.reserve(weights.size());
  for (double w : weights) out.push_back(w / sum);
  return out;
}

// numpy's DOUBLE_pairwise_sum (PW_BLOCKSIZE 128, 8 accumulators), added to the reduction's
// initial value 0.0. Arrays this short (< 255 weights) never reach numpy's 8192-element buffer
// split.
int64_t megatron_blend_samples(int64_t n, double weight) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(n) * weight * 1.005));
}

std::array<int64_t, 3> megatron_split_samples(int64_t steps, int64_t global_batch,
                                              int64_t eval_interval, int64_t eval_iters) {
  const int64_t evals = (eval_interval > 0 ? steps / eval_interval : 0) + 1;
  return {steps * global_batch, evals * eval_iters * global_batch, eval_iters * global_batch};
}

absl::StatusOr<BlendIndex> BlendIndex::build(const std::vector<double>& weights, int64_t size) {
  const int64_t D = static_cast<int64_t>(weights.size());
  if (D == 0 || D >= 255) {
    return absl::InvalidArgumentError(absl::StrFormat("blend: %d datasets, expected 1 to 254", D));
  }
  for (double w : weights) {
    if (!(w >= 0.0) || !std::isfinite(w)) {
      return absl::InvalidArgumentError(absl::StrCat("blend: weight ", w, " is not >= 0"));
    }
  }
  if (size < 0) return absl::InvalidArgumentError(absl::StrCat("blend: negative size ", size));
  const double sum = 0.0 + numpy_pairwise_sum(weights.data(), D);
  if (!(sum > 0.0)) return absl::InvalidArgumentError("blend: the weights sum to 0");
  BlendIndex b;
  b.num_datasets_ = static_cast<int>(D);
  for (double w : weights) b.weights_.push_back(w / sum);
  b.dataset_index_.resize(static_cast<size_t>(size));
  b.block_counts_.reserve(static_cast<size_t>((size / kBlock + 1) * D));
  std::vector<int64_t> count(static_cast<size_t>(D), 0);
  const double* w = b.weights_.data();
  for (int64_t i = 0; i < size; ++i) {
    if (i % kBlock == 0) b.block_counts_.insert(b.block_counts_.end(), count.begin(), count.end());
    // helpers.cpp build_blending_indices. `volatile` keeps each product rounded on its own (a
    // fused multiply-subtract would change ties and so the index).
    const double x = std::max(static_cast<double>(i), 1.0);
    volatile double prod = w[0] * x;
    double max_error = prod - static_cast<double>(count[0]);
    int64_t best = 0;
    for (int64_t d = 1; d < D; ++d) {
      prod = w[d] * x;
      const double error = prod - static_cast<double>(count[d]);
      if (error > max_error) {
        max_error = error;
        best = d;
      }
    }
    b.dataset_index_[i] = static_cast<uint8_t>(best);
    ++count[best];
  }
  return b;
}

int64_t BlendIndex::dataset_sample(int64_t i) const {
  ANVIL_CHECK_MSG(i >= 0 && i < size(),
                  absl::StrFormat("BlendIndex: position %d outside [0, %d)", i, size()));
  const int d = dataset_index_[i];
  const int64_t block = i / kBlock;
  int64_t n = block_counts_[block * num_datasets_ + d];
  for (int64_t p = block * kBlock; p < i; ++p) n += dataset_index_[p] == d;
  return n;
}

std::vector<int64_t> BlendIndex::counts(int64_t n) const {
  ANVIL_CHECK(n >= 0 && n <= size());
  std::vector<int64_t> c(static_cast<size_t>(num_datasets_), 0);
  for (int64_t i = 0; i < n; ++i) ++c[dataset_index_[i]];
  return c;
}

std::unique_ptr<GptSamples> GptSamples::single(std::unique_ptr<GptDataset> dataset) {
  auto s = std::make_unique<GptSamples>();
  s->datasets_.push_back(std::move(dataset));
  return s;
}

absl::StatusOr<std::vector<double>> source_weights(const std::vector<GptDataSource>& sources,
                                                   bool weighted, const std::string& what) {
  if (sources.empty()) return absl::InvalidArgumentError(what + ": no sources");
  if (!weighted && sources.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d sources without weights", what, sources.size()));
  }
  std::vector<double> raw;
  double sum = 0.0;
  for (const GptDataSource& s : sources) {
    if (!(s.weight >= 0.0) || !std::isfinite(s.weight)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": weight ", s.weight, " of ", s.prefix, " is not >= 0"));
    }
    raw.push_back(s.weight);
    sum += s.weight;
  }
  if (!(sum > 0.0)) return absl::InvalidArgumentError(what + ": the weights sum to 0");
  return megatron_normalize_weights(raw);
}

absl::Status check_blend_sizes(const BlendIndex& index, const std::vector<int64_t>& sizes,
                               const std::vector<std::string>& names) {
  const std::vector<int64_t> used = index.counts(index.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (used[d] > sizes[d]) {
      return absl::FailedPreconditionError(
          absl::StrFormat("blend: dataset %d (%s) holds %d samples, the blend of %d needs %d", d,
                          names[d], sizes[d], index.size(), used[d]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GptSamples>> GptSamples::blend(
    std::vector<std::unique_ptr<GptDataset>> datasets, const std::vector<double>& weights,
    int64_t size) {
  if (datasets.size() != weights.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("blend: %d datasets but %d weights", datasets.size(), weights.size()));
  }
  ANVIL_ASSIGN_OR_RETURN(BlendIndex index, BlendIndex::build(weights, size));
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  for (const auto& d : datasets) {
    sizes.push_back(d->size());
    names.push_back(d->file_prefix());
  }
  ANVIL_RETURN_IF_ERROR(check_blend_sizes(index, sizes, names));
  auto s = std::make_unique<GptSamples>();
  s->datasets_ = std::move(datasets);
  s->blend_ = std::make_unique<BlendIndex>(std::move(index));
  return s;
}

int64_t GptSamples::size() const { return blend_ ? blend_->size() : datasets_.front()->size(); }

absl::Status GptSamples::sample(int64_t i, int32_t* out) const {
  if (!blend_) return datasets_.front()->sample(i, out);
  ANVIL_CHECK_MSG(
      i >= 0 && i < blend_->size(),
      absl::StrFormat("GptSamples: position %d outside the blend [0, %d)", i, blend_->size()));
  return datasets_[blend_->dataset(i)]->sample(blend_->dataset_sample(i), out);
}

absl::StatusOr<GptCorpus> GptCorpus::open(const std::vector<GptDataSource>& sources, bool weighted,
                                          const std::string& split) {
  GptCorpus c;
  c.sources_ = sources;
  c.weighted_ = weighted;
  ANVIL_ASSIGN_OR_RETURN(c.weights_, source_weights(sources, weighted, "GPT data"));
  for (const GptDataSource& s : sources) {
    ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> d, IndexedDataset::open(s.prefix));
    // Megatron's GPT "documents" are the sequences (sizes.shape[0]).
    ANVIL_ASSIGN_OR_RETURN(auto r, split_documents(split, d->num_sequences()));
    c.ranges_.push_back({r[0], r[1], r[2]});
    c.data_.push_back(std::move(d));
  }
  return c;
}

absl::Status GptCorpus::check_token_ids(int64_t vocab_size, const std::string& cache_dir) const {
  for (size_t k = 0; k < data_.size(); ++k) {
    ANVIL_RETURN_IF_ERROR(
        data_[k]->check_token_ids(vocab_size, token_ids_cache_path(sources_[k].prefix, cache_dir)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GptSamples>> GptCorpus::build(
    const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t num_samples,
    const GptDatasetOptions& opt) const {
  std::vector<std::unique_ptr<GptDataset>> datasets;
  for (size_t k = 0; k < sources_.size(); ++k) {
    GptDatasetOptions o = opt;
    o.num_samples = weighted_ ? megatron_blend_samples(num_samples, weights_[k]) : num_samples;
    const auto [begin, end] = ranges[k];
    if (begin >= end) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s split of %s is empty (%d sequences in all)", opt.name,
                          sources_[k].prefix, data_[k]->num_sequences()));
    }
    auto ds = GptDataset::create(data_[k], sources_[k].prefix, begin, end, o);
    if (!ds.ok()) {
      return absl::Status(ds.status().code(),
                          absl::StrFormat("%s split of %s (sequences [%d, %d)): %s", opt.name,
                                          sources_[k].prefix, begin, end, ds.status().message()));
    }
    datasets.push_back(std::move(*ds));
  }
  if (!weighted_) return GptSamples::single(std::move(datasets.front()));
  return GptSamples::blend(std::move(datasets), weights_, num_samples);
}

absl::StatusOr<std::unique_ptr<GptSamples>> GptCorpus::build_split(int split, int64_t num_samples,
                                                                   GptDatasetOptions opt) const {
  ANVIL_CHECK(split >= 0 && split < 3);
  opt.name = kSplitNames[split];
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& r : ranges_) ranges.push_back(r[split]);
  return build(ranges, num_samples, opt);
}

absl::StatusOr<std::unique_ptr<GptSamples>> GptCorpus::build_whole(int64_t num_samples,
                                                                   GptDatasetOptions opt) const {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& d : data_) ranges.emplace_back(0, d->num_sequences());
  return build(ranges, num_samples, opt);
}

absl::StatusOr<std::unique_ptr<GptSamples>> GptCorpus::build_fraction_ranges(
    const std::vector<std::pair<double, double>>& fractions, int64_t num_samples,
    const GptDatasetOptions& opt) const {
  if (fractions.size() != data_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %d sequence ranges for %d datasets",
                                                      opt.name, fractions.size(), data_.size()));
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t k = 0; k < data_.size(); ++k) {
    const auto [a, b] = fractions[k];
    if (!(a >= 0.0 && a < b && b <= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: range %g:%g of %s is not START:END with 0 <= START < END <= 1",
                          opt.name, a, b, sources_[k].prefix));
    }
    const double n = static_cast<double>(data_[k]->num_sequences());
    ranges.emplace_back(static_cast<int64_t>(std::nearbyint(a * n)),
                        static_cast<int64_t>(std::nearbyint(b * n)));
  }
  return build(ranges, num_samples, opt);
}

}  // namespace anvil::io
