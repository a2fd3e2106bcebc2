// Megatron's sample mapping of sentence-split data, shared by BERT and T5
// (megatron/data/helpers.cpp build_mapping_impl, dataset_utils.get_samples_mapping), exactly.
// Over documents [doc_begin, doc_end) of an IndexedDataset (document d = sentences
// [doc_idx[d], doc_idx[d+1])), with L = max_length (BERT: max_seq_length - 3, T5: - 2):
//   epochs: whole passes over the documents until, at the start of one, num_samples rows exist
//     (so the mapping ends on an epoch boundary and holds >= num_samples rows).
//   documents kept: at least min_num_sent sentences (2 with BERT's binary head, else 1) and, when
//     they have more than one, no sentence over 512 tokens.
//   per kept document: a target length is drawn (below); sentences are taken in order until
//     their tokens reach the target, more than one sentence remains and at least min_num_sent
//     are taken -- or the document ends; that closes a row (first sentence, end sentence,
//     target), and a new target is drawn (also after the document's last row).
//   target: L, or with short_seq_prob p > 0 and ratio = round(1/p) (C round), for a draw r of
//     std::mt19937(seed) with r % ratio == 0: 2 + r % (L - 1). One draw per target.
//   shuffle: rows Fisher-Yates from the last, j = std::mt19937_64(seed + 1)() % (i + 1).
//   rows are uint32 [n, 3] (uint64 when the dataset has more than 2^32 - 1 sentences).
// Sentence indices in the rows are absolute (indices into the whole dataset), as Megatron's.
// Cache: one .npy holding exactly Megatron's array, named with every input of the build:
//   {base}_{name}_indexmap_{N}mns_{L}msl_{p}ssp_{seed}s_{min_num_sent}mins_{doc_begin}-{doc_end}docs.npy
// ({base} as index_cache_base; p as the shortest decimal that reads back to it). Megatron's own
// name ({base}_{name}_indexmap_{N}mns_{L}msl_{p:.2f}ssp_{seed}s.npy) leaves out the documents
// and min_num_sent and rounds p, so a changed split or binary head would reuse a stale mapping;
// its file content is the same, so a Megatron cache can be renamed into place.
// A cache that is unreadable or not a mapping of these documents (shape, dtype, rows outside a
// document, target outside [2, L]) is rebuilt with a warning.
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

struct SentenceMappingOptions {
  int64_t num_samples = 0;      // Megatron's max_num_samples, >= 1
  int32_t max_length = 509;     // L, the target length, >= 2
  double short_seq_prob = 0.1;  // in [0, 1]
  int32_t seed = 1234;          // Megatron's --seed, > 0 (helpers.cpp asserts it)
  int32_t min_num_sent = 2;     // 2 (BERT with binary head) or 1
};

// InvalidArgument for options out of range or documents outside the dataset; FailedPrecondition
// when no document yields a row (Megatron would loop over 2^31 empty epochs).
absl::Status check_sentence_mapping(const IndexedDataset& data, int64_t doc_begin, int64_t doc_end,
                                    const SentenceMappingOptions& opt);

// Builds the mapping in memory (no files). Errors as check_sentence_mapping.
absl::StatusOr<NpyArray> build_sentence_mapping(const IndexedDataset& data, int64_t doc_begin,
                                                int64_t doc_end, const SentenceMappingOptions& opt);

// OK when `mapping` could be this build's mapping (see the file comment); DataLoss naming what
// is wrong.
absl::Status validate_sentence_mapping(const NpyArray& mapping, const IndexedDataset& data,
                                       int64_t doc_begin, int64_t doc_end,
                                       const SentenceMappingOptions& opt);

// How a dataset keeps its mapping on disk.
struct MappingCacheOptions {
  std::string name = "train";  // the split, part of the file name
  std::string cache_dir;       // "" = next to the data, as Megatron; else this directory
  bool use_cache = true;       // false: build in memory, touch no files
  engine::LogContext log;      // build / load / rebuild messages
};

std::string sentence_mapping_path(const std::string& data_prefix, int64_t doc_begin,
                                  int64_t doc_end, const SentenceMappingOptions& opt,
                                  const MappingCacheOptions& cache);

// A mapping loaded from its cache, or built (and cached).
class SentenceMapping {
 public:
  // Errors as check_sentence_mapping; a cache that cannot be written only warns.
  static absl::StatusOr<SentenceMapping> create(const IndexedDataset& data,
                                                const std::string& data_prefix, int64_t doc_begin,
                                                int64_t doc_end, const SentenceMappingOptions& opt,
                                                const MappingCacheOptions& cache);
  // create, after IndexedDataset::check_token_ids(vocab_size) (its result cached beside the
  // mapping when the mapping is cached): InvalidArgument for an id outside the vocabulary.
  static absl::StatusOr<SentenceMapping> create_checked(const IndexedDataset& data,
                                                        const std::string& data_prefix,
                                                        int64_t doc_begin, int64_t doc_end,
                                                        const SentenceMappingOptions& opt,
                                                        const MappingCacheOptions& cache,
                                                        int64_t vocab_size);

  int64_t size() const { return rows_.size() / 3; }
  // Row i: sentences [start, end) of the dataset and the target length.
  int64_t start(int64_t i) const { return rows_[3 * i]; }
  int64_t end(int64_t i) const { return rows_[3 * i + 1]; }
  int32_t target(int64_t i) const { return static_cast<int32_t>(rows_[3 * i + 2]); }
  const NpyArray& rows() const { return rows_; }
  bool loaded_from_cache() const { return loaded_from_cache_; }
  const std::string& path() const { return path_; }  // "" without a cache

 private:
  NpyArray rows_;  // [n, 3] uint32 or uint64
  bool loaded_from_cache_ = false;
  std::string path_;
};

// The tokens of sentences [start, end) of `data`, one vector per sentence (the `sample` list
// Megatron's __getitem__ builds). DataLoss when the .bin shrank (IndexedDataset::read).
absl::Status read_sentences(const IndexedDataset& data, int64_t start, int64_t end,
                            std::vector<std::vector<int32_t>>* out);

}  // namespace anvil::io
