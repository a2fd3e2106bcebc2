// Megatron's dataset blending and its train/valid/test assembly
// (megatron/data/blendable_dataset.py, helpers.cpp build_blending_indices,
// dataset_utils.get_datasets_weights_and_num_samples, gpt_dataset.build_train_valid_test_datasets):
//   weights: normalized twice, as Megatron does (w / sum in Python floats, then again in numpy).
//   position i of the blend takes dataset d = argmax_d (w_d * max(i, 1) - count_d) (the first
//   such d on ties), and that dataset's sample count_d; then count_d += 1.
//   Each of D > 1 datasets is asked for ceil(n * w_d * 1.005) samples of a split of n.
// The choice at position i does not depend on the blend's length, so a blend of n positions is
// the first n entries of Megatron's (which has sum_d len(dataset_d) positions).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/log.h"
#include "io/gpt_dataset.h"
#include "io/numpy_random.h"  // numpy_pairwise_sum

namespace anvil::io {

// Python's [w / sum(w)] (sequential sum): get_datasets_weights_and_num_samples.
std::vector<double> megatron_normalize_weights(const std::vector<double>& weights);
// ceil(n * w * 1.005): the samples a blended dataset of weight w (normalized) is asked for.
int64_t megatron_blend_samples(int64_t n, double weight);

// The blending index of `size` positions over D < 255 datasets. Stores dataset_index (1 byte a
// position) and running counts every 4096 positions, so dataset_sample_index costs no memory.
class BlendIndex {
 public:
  // `weights` are normalized here (numpy, as BlendableDataset does); InvalidArgument for no
  // weights, 255 or more, a negative or non-finite weight, or a zero sum.
  static absl::StatusOr<BlendIndex> build(const std::vector<double>& weights, int64_t size);
  int64_t size() const { return static_cast<int64_t>(dataset_index_.size()); }
  int num_datasets() const { return num_datasets_; }
  const std::vector<double>& weights() const { return weights_; }  // normalized
  int dataset(int64_t i) const { return dataset_index_[i]; }       // dataset_index[i]
  int64_t dataset_sample(int64_t i) const;                         // dataset_sample_index[i]
  // How many of positions [0, n) each dataset serves.
  std::vector<int64_t> counts(int64_t n) const;

 private:
  static constexpr int64_t kBlock = 4096;
  int num_datasets_ = 0;
  std::vector<double> weights_;
  std::vector<uint8_t> dataset_index_;
  std::vector<int64_t> block_counts_;  // [blocks, D]: counts before position block * kBlock
};

// FailedPrecondition when dataset d of a blend over `index`'s positions holds fewer than the
// index asks of it (sizes[d] samples, named names[d]).
absl::Status check_blend_sizes(const BlendIndex& index, const std::vector<int64_t>& sizes,
                               const std::vector<std::string>& names);

// The samples of one split: one GPT dataset, or several blended.
class GptSamples {
 public:
  static std::unique_ptr<GptSamples> single(std::unique_ptr<GptDataset> dataset);
  // datasets[d] must hold at least every sample the blend asks of it (checked here).
  static absl::StatusOr<std::unique_ptr<GptSamples>> blend(
      std::vector<std::unique_ptr<GptDataset>> datasets, const std::vector<double>& weights,
      int64_t size);

  // Positions that can be read: M of a single dataset, the blend's length otherwise.
  int64_t size() const;
  int64_t seq_len() const { return datasets_.front()->seq_len(); }
  const std::vector<std::unique_ptr<GptDataset>>& datasets() const { return datasets_; }
  const BlendIndex* blend_index() const { return blend_ ? &*blend_ : nullptr; }
  // Writes the seq_len + 1 tokens at position i (CHECKed < size()). Thread-safe. DataLoss
  // when a .bin shrank since it was opened.
  absl::Status sample(int64_t i, int32_t* out) const;

 private:
  std::vector<std::unique_ptr<GptDataset>> datasets_;
  std::unique_ptr<BlendIndex> blend_;
};

struct GptDataSource {
  double weight = 1.0;
  std::string prefix;  // PREFIX.bin / PREFIX.idx
};

// Megatron's sample counts: train = steps * global_batch;
// valid = (steps // eval_interval + 1) * eval_iters * global_batch (eval_interval 0: one
// evaluation); test = eval_iters * global_batch.
std::array<int64_t, 3> megatron_split_samples(int64_t steps, int64_t global_batch,
                                              int64_t eval_interval, int64_t eval_iters);

// The normalized weights of `sources` (megatron_normalize_weights). InvalidArgument, starting
// with `what`, for no sources, several without `weighted`, a weight not >= 0, or a zero sum.
absl::StatusOr<std::vector<double>> source_weights(const std::vector<GptDataSource>& sources,
                                                   bool weighted, const std::string& what);

// The data of a run: one source, or weighted sources blended (Megatron's --data-path
// "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ..."), each split into train/valid/test sequence ranges
// by the same split string (get_split_index).
class GptCorpus {
 public:
  static constexpr const char* kSplitNames[3] = {"train", "valid", "test"};

  // Opens every source. `weighted`: the sources came with weights, so every split is a blend
  // (even of one source, as Megatron does for "1.0 PREFIX"); otherwise exactly one source.
  static absl::StatusOr<GptCorpus> open(const std::vector<GptDataSource>& sources, bool weighted,
                                        const std::string& split);

  size_t num_sources() const { return sources_.size(); }
  const GptDataSource& source(size_t k) const { return sources_[k]; }
  const IndexedDataset& data(size_t k) const { return *data_[k]; }
  // Sequences [begin, end) of split s (0 train, 1 valid, 2 test) in source k.
  std::pair<int64_t, int64_t> range(size_t k, int split) const { return ranges_[k][split]; }

  // Every source's token ids are in [0, vocab_size): IndexedDataset::check_token_ids, whose
  // error names the file and the document. One pass over each .bin, whose result is cached
  // (token_ids_cache_path: next to the data, or in cache_dir when not empty).
  absl::Status check_token_ids(int64_t vocab_size, const std::string& cache_dir) const;

  // Split s with num_samples samples, as Megatron's build_train_valid_test_datasets (opt.name is
  // set to the split's name; opt.num_samples per source). FailedPrecondition naming the source
  // when the split is empty or too small there.
  absl::StatusOr<std::unique_ptr<GptSamples>> build_split(int split, int64_t num_samples,
                                                          GptDatasetOptions opt) const;
  // Every sequence of every source, under opt.name (a separate validation set).
  absl::StatusOr<std::unique_ptr<GptSamples>> build_whole(int64_t num_samples,
                                                          GptDatasetOptions opt) const;
  // A named dataset group of Megatron-DeepSpeed's --{train,valid,test}-weighted-split-paths
  // (gpt_dataset.py build_dataset_group, under opt.name = the group's name): sequences
  // [round(a_k * n_k), round(b_k * n_k)) of source k with n_k sequences (get_split_by_range_,
  // Python's round: ties to even), `fractions`[k] = (a_k, b_k). InvalidArgument unless
  // 0 <= a_k < b_k <= 1 for every source.
  absl::StatusOr<std::unique_ptr<GptSamples>> build_fraction_ranges(
      const std::vector<std::pair<double, double>>& fractions, int64_t num_samples,
      const GptDatasetOptions& opt) const;

 private:
  absl::StatusOr<std::unique_ptr<GptSamples>> build(
      const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t num_samples,
      const GptDatasetOptions& opt) const;

  std::vector<GptDataSource> sources_;
  bool weighted_ = false;
  std::vector<double> weights_;  // megatron_normalize_weights of the sources' weights
  std::vector<std::shared_ptr<const IndexedDataset>> data_;
  std::vector<std::array<std::pair<int64_t, int64_t>, 3>> ranges_;
};

}  // namespace anvil::io
