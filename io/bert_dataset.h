// Megatron's BERT dataset (megatron/data/bert_dataset.py + dataset_utils.py, BigScience fork),
// exactly: the same samples for the same data, split, seed and options.
//   mapping: io/sentence_mapping.h with L = max_seq_length - 3 and min_num_sent = 2 (1 without
//     the binary head).
//   sample i (row i = sentences [start, end), target T), drawn from
//     np.random.RandomState((seed + i) % 2^32):
//     binary head: A = the first a_end sentences, B = the rest, a_end = randint(1, n) when
//       n >= 3 sentences (else 1); with random_sample() < 0.5, A and B are swapped and
//       is_random = 1 -- sentence ORDER prediction (Megatron's get_a_and_b_segments; the label
//       is called NSP/"is_random" but B is never taken from another document).
//     no binary head: A = all sentences, B empty, is_random = 0.
//     truncate_segments: while |A| + |B| > T, drop a token of the longer one (B on ties) from
//       its front (random_sample() < 0.5) or its back; truncated = 1 when any was dropped.
//     tokens = [CLS] A [SEP] B [SEP] ([CLS] A [SEP] when B is empty); types 0 up to the first
//       [SEP] included, then 1.
//     masking: io/masked_lm.h, BERT style, max_ngrams 3, whole words, max_predictions =
//       masked_lm_prob * T.
//     padding to max_seq_length with [PAD] (tokens and types), padding_mask 1 on real tokens,
//     labels = the original token at masked positions and -1 elsewhere, loss_mask 1 at masked
//     positions.
// Megatron's arrays are int64; these are int32 (token ids fit).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/indexed_dataset.h"
#include "io/masked_lm.h"
#include "io/sentence_mapping.h"

namespace anvil::io {

struct BertSample {
  std::vector<int32_t> tokens;        // [max_seq_length]
  std::vector<int32_t> types;         // [max_seq_length] token types (segment ids)
  std::vector<int32_t> labels;        // [max_seq_length] original token or -1
  std::vector<int32_t> loss_mask;     // [max_seq_length] 1 where labels != -1
  std::vector<int32_t> padding_mask;  // [max_seq_length] 1 on real tokens, 0 on padding
  int32_t is_random = 0;              // 1 when A and B were swapped (the binary head's label)
  int32_t truncated = 0;              // 1 when the pair was cut to the target length
};

struct BertDatasetOptions {
  int64_t num_samples = 0;  // Megatron's max_num_samples for this split
  int32_t max_seq_length = 512;
  double masked_lm_prob = 0.15;  // --mask-prob
  double short_seq_prob = 0.1;   // --short-seq-prob
  int32_t seed = 1234;           // --seed
  bool binary_head = true;       // --bert-no-binary-head sets false
  MappingCacheOptions cache;
};

// One training sample from its sentences (Megatron's build_training_sample), drawn from `rng`;
// `sentences` as read_sentences gives them. CHECKs the sentence count (>= 2 with the binary head)
// and target <= max_seq_length.
void build_bert_sample(const std::vector<std::vector<int32_t>>& sentences, int32_t target,
                       int32_t max_seq_length, const MlmVocab& vocab, double masked_lm_prob,
                       bool binary_head, NumpyRandomState* rng, BertSample* out);

class BertDataset {
 public:
  // The mapping of documents [doc_begin, doc_end) of `data` (files data_prefix.{bin,idx}),
  // cached. InvalidArgument for max_seq_length < 5, masked_lm_prob outside [0, 1), token ids
  // outside the vocabulary; the mapping's errors (sentence_mapping.h).
  static absl::StatusOr<std::unique_ptr<BertDataset>> create(
      std::shared_ptr<const IndexedDataset> data, const std::string& data_prefix, int64_t doc_begin,
      int64_t doc_end, MlmVocab vocab, const BertDatasetOptions& opt);

  int64_t size() const { return mapping_.size(); }  // Megatron's len()
  const SentenceMapping& mapping() const { return mapping_; }
  const MlmVocab& vocab() const { return vocab_; }
  // Sample i, 0 <= i < size() (CHECKed). Thread-safe. DataLoss when the .bin shrank.
  absl::Status sample(int64_t i, BertSample* out) const;

 private:
  BertDataset() = default;
  std::shared_ptr<const IndexedDataset> data_;
  SentenceMapping mapping_;
  MlmVocab vocab_;
  BertDatasetOptions opt_;
};

}  // namespace anvil::io
