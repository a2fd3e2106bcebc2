// Megatron's GPT dataset (megatron/data/gpt_dataset.py + helpers.cpp build_sample_idx), exactly:
// the same index arrays, so a run switching from Megatron sees the same samples in the same order.
// For the sequences [seq_begin, seq_end) of an IndexedDataset (Megatron's "documents" are
// sequence indices), T = their total tokens, S = seq_len, N = requested samples:
//   num_epochs E: the smallest E with (E*T - 1) // S >= N.
//   doc_idx: the sequence ids tiled E times and shuffled with np.random.RandomState(seed); when
//     E > 1 and the last epoch needs fewer than int(cutoff * ((T-1)//S)) samples (that is,
//     N - ((E-1)*T - 1)//S), the first E-1 epochs are shuffled together and the last one
//     separately, then concatenated. cutoff = last_epoch_cutoff: 0.95 in the BigScience fork
//     (_build_index_mappings' cutoff_last_epoch), 0.80 in NVIDIA Megatron-LM.
//   sample_idx [M+1, 2], M = (E*T - 1) // S: row k = (position in doc_idx, token offset) where
//     sample k starts; each sample spans S+1 tokens, consecutive samples share one token.
//   shuffle_idx [M]: arange(M') shuffled, then arange(M', M) shuffled separately and appended,
//     where M' = ((E-1)*T - 1) // S with a separate last epoch, else M' = M.
//   One RandomState draws, in order: the doc_idx shuffle(s), then the shuffle_idx shuffle(s).
//   Sample i = the S+1 tokens from sample_idx[shuffle_idx[i]] to sample_idx[shuffle_idx[i]+1]
//   inclusive (inputs = tokens[0..S), targets = tokens[1..S]). size() = M (Megatron's len()).
// Counts are 64-bit throughout. The stored arrays keep Megatron's dtypes where the values fit
// (doc_idx int32, sample_idx int32, shuffle_idx uint32) and widen to int64 where Megatron's would
// overflow.
// Cache: the arrays are .npy files named as Megatron names them,
//   {prefix}_{name}_indexmap_{N}ns_{S}sl_{seed}s_{doc,sample,shuffle}_idx.npy
// (with "_{cutoff}lec" after "s" when the cutoff is not the fork's 0.95: Megatron's names do
// not hold it, and an index of another cutoff is valid but differently shuffled)
// next to the data (or in cache_dir), so Megatron's and anvil's caches are interchangeable.
// Every process loads them if present and valid, else builds them itself and writes them
// atomically (no shared filesystem or rank 0 needed; concurrent builders write identical bytes).
// A cache that fails validation (bad header, wrong shape, or contents that are not an index of
// this data: wrong document multiset, samples not S+1 tokens, shuffle not a permutation) is
// rebuilt with a warning.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/log.h"
#include "io/indexed_dataset.h"
#include "io/npy.h"

namespace anvil::io {

// Megatron's index arrays of one dataset split.
struct GptIndex {
  int64_t tokens_per_epoch = 0;  // T
  int64_t num_epochs = 0;        // E
  bool separate_last_epoch = false;
  NpyArray doc_idx;      // [E * docs] sequence ids: int32 (int64 past 2^31 sequences)
  NpyArray sample_idx;   // [M + 1, 2] (doc_idx position, offset): int32 (int64 past 2^31)
  NpyArray shuffle_idx;  // [M] uint32 (int64 when M >= 2^32 - 2, as Megatron)
  int64_t num_samples() const { return shuffle_idx.size(); }  // M
};

// The BigScience fork's cutoff_last_epoch.
inline constexpr double kDefaultLastEpochCutoff = 0.95;

// Megatron's _num_epochs: the smallest E >= 1 with (E*T - 1) // S >= N.
int64_t gpt_num_epochs(int64_t tokens_per_epoch, int64_t seq_len, int64_t num_samples);

// Builds the index in memory (no files). `sizes` are the token counts of every sequence of the
// dataset. InvalidArgument for an empty or out-of-range sequence range, S < 1, N < 0, a cutoff
// outside (0, 1];
// FailedPrecondition when the range holds S tokens or fewer (not one sample per epoch; Megatron
// asserts there).
absl::StatusOr<GptIndex> build_gpt_index(const std::vector<int32_t>& sizes, int64_t seq_begin,
                                         int64_t seq_end, int64_t num_samples, int64_t seq_len,
                                         uint32_t seed,
                                         double last_epoch_cutoff = kDefaultLastEpochCutoff);

// OK when `index` is a valid index of sequences [seq_begin, seq_end) for these parameters (the
// checks applied to a loaded cache, see the file comment); DataLoss naming what is wrong.
absl::Status validate_gpt_index(const GptIndex& index, const std::vector<int32_t>& sizes,
                                int64_t seq_begin, int64_t seq_end, int64_t num_samples,
                                int64_t seq_len);

struct GptDatasetOptions {
  std::string name = "train";                          // the split, part of the cache file names
  int64_t num_samples = 0;                             // N, Megatron's num_samples for this dataset
  int64_t seq_len = 1024;                              // S
  uint32_t seed = 1234;                                // Megatron's --seed
  double last_epoch_cutoff = kDefaultLastEpochCutoff;  // see build_gpt_index
  std::string cache_dir;   // "" = next to the data, as Megatron; else this directory
  bool use_cache = true;   // false: build in memory, touch no files
  engine::LogContext log;  // build / load / rebuild messages
};

// "{cache_dir or dir(prefix)}/{basename(prefix)}_{name}_indexmap_{N}ns_{S}sl_{seed}s" (+
// "_{cutoff}lec" for a cutoff other than 0.95); the files are this + "_doc_idx.npy",
// "_sample_idx.npy", "_shuffle_idx.npy".
std::string gpt_index_file_prefix(const std::string& data_prefix, const GptDatasetOptions& opt);

// "{cache_dir or dir(prefix)}/{basename(prefix)}_token_ids.txt": the cached token id range of
// a dataset (IndexedDataset::token_id_range).
std::string token_ids_cache_path(const std::string& data_prefix, const std::string& cache_dir);

class GptDataset {
 public:
  // Loads or builds (and caches) the index of sequences [seq_begin, seq_end) of `data`, whose
  // files are data_prefix.{bin,idx}. Errors as build_gpt_index; a cache that cannot be written
  // only warns (the index is then kept in memory).
  static absl::StatusOr<std::unique_ptr<GptDataset>> create(
      std::shared_ptr<const IndexedDataset> data, const std::string& data_prefix, int64_t seq_begin,
      int64_t seq_end, const GptDatasetOptions& opt);

  int64_t size() const { return index_.num_samples(); }  // M >= the requested N
  int64_t seq_len() const { return seq_len_; }
  const GptIndex& index() const { return index_; }
  const IndexedDataset& data() const { return *data_; }
  bool loaded_from_cache() const { return loaded_from_cache_; }
  const std::string& file_prefix() const { return file_prefix_; }

  // Writes the seq_len + 1 tokens of sample i (0 <= i < size(), CHECKed). Thread-safe.
  // DataLoss when the .bin shrank since it was opened.
  absl::Status sample(int64_t i, int32_t* out) const;

 private:
  GptDataset() = default;
  std::shared_ptr<const IndexedDataset> data_;
  GptIndex index_;
  int64_t seq_len_ = 0;
  bool loaded_from_cache_ = false;
  std::string file_prefix_;
};

}  // namespace anvil::io
