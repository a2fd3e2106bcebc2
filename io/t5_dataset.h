// Megatron's T5 dataset (megatron/data/t5_dataset.py, BigScience fork -- the legacy dataset that
// Megatron-LM's megatron/core/datasets/t5_dataset.py later replaced), exactly, plus Hugging
// Face's span corruption as an option.
//   mapping: io/sentence_mapping.h with L = max_seq_length - 2 and min_num_sent = 1.
//   sample i (row i = sentences [start, end), target T), drawn from
//   np.random.RandomState(seed + i) (numpy refuses seeds >= 2^32; taken mod 2^32 here):
//     tokens = the sentences concatenated, cut to their first T (truncated = 1 when cut).
//     noise spans, one of:
//       kMegatron (default, for parity): create_masked_lm_predictions (io/masked_lm.h) with
//         max_ngrams 10, n ~ min(Geometric(0.2), 10) whole words, masking style "t5",
//         max_predictions = masked_lm_prob * T.
//       kRandomSpans: Hugging Face's random_spans_noise_mask (run_t5_mlm_flax.py; the T5
//         paper's objective): n = |tokens|, noise = clamp(round(n * masked_lm_prob), 1, n - 1),
//         spans = max(1, round(min(noise, n - round(n * density)) / mean_noise_span_length)),
//         the noise and non-noise tokens each cut into `spans` random non-empty runs
//         (_random_segmentation: a shuffled 0/1 array, rng.shuffle), interleaved non-noise
//         first. HF draws from the unseeded global numpy generator; here from the sample's
//         RandomState, so samples are reproducible. Spans ignore word boundaries. A sample of
//         fewer than 2 tokens gets no noise.
//     span k (in order) gets sentinel k (<extra_id_k>, the tokenizer's sentinels[k]):
//       encoder input = the tokens with each span replaced by its sentinel,
//       decoder input = [BOS] sentinel_0 span_0 sentinel_1 span_1 ...,
//       labels        =       sentinel_0 span_0 sentinel_1 span_1 ... [EOS],
//     padded with [PAD] to max_seq_length (encoder) and max_seq_length_dec (decoder; labels
//     with -1); loss_mask 1 on the decoder's real positions.
//   Masks: Megatron builds its 2-D masks from token >= 1 (pad id 0): enc_mask =
//   outer(e, e), enc_dec_mask = outer(d, e), dec_mask = outer(d, d) * causal. The padding masks
//   here are by position (1 on real tokens), equal to e and d when the pad id is 0 and no real
//   token is 0.
// Megatron's arrays are int64; these are int32.
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

enum class T5Noise { kMegatron, kRandomSpans };

struct T5Sample {
  std::vector<int32_t> enc_tokens;        // [max_seq_length]
  std::vector<int32_t> dec_tokens;        // [max_seq_length_dec] decoder input
  std::vector<int32_t> labels;            // [max_seq_length_dec] next decoder token or -1
  std::vector<int32_t> loss_mask;         // [max_seq_length_dec]
  std::vector<int32_t> enc_padding_mask;  // [max_seq_length] 1 on real tokens
  std::vector<int32_t> dec_padding_mask;  // [max_seq_length_dec] 1 on real tokens
  int32_t truncated = 0;
};

struct T5DatasetOptions {
  int64_t num_samples = 0;           // Megatron's max_num_samples for this split
  int32_t max_seq_length = 512;      // --encoder-seq-length
  int32_t max_seq_length_dec = 128;  // --decoder-seq-length
  double masked_lm_prob = 0.15;      // --mask-prob (kRandomSpans: the noise density)
  double short_seq_prob = 0.1;       // --short-seq-prob
  int32_t seed = 1234;               // --seed
  T5Noise noise = T5Noise::kMegatron;
  double mean_noise_span_length = 3.0;  // kRandomSpans only
  MappingCacheOptions cache;
};

// One training sample from its sentences, drawn from `rng`. OutOfRange when the decoder input
// exceeds max_seq_length_dec (Megatron asserts there) or there are more spans than sentinels.
absl::Status build_t5_sample(const std::vector<std::vector<int32_t>>& sentences, int32_t target,
                             const T5DatasetOptions& opt, const MlmVocab& vocab,
                             NumpyRandomState* rng, T5Sample* out);

class T5Dataset {
 public:
  // The mapping of documents [doc_begin, doc_end) of `data` (files data_prefix.{bin,idx}),
  // cached. InvalidArgument for max_seq_length < 4, max_seq_length_dec < 2, masked_lm_prob
  // outside [0, 1), mean_noise_span_length < 1, a vocabulary without [BOS]/[EOS] or with too few
  // sentinels for the longest sample (Megatron: --vocab-extra-ids 100), token ids outside the
  // vocabulary; the mapping's errors (sentence_mapping.h).
  static absl::StatusOr<std::unique_ptr<T5Dataset>> create(
      std::shared_ptr<const IndexedDataset> data, const std::string& data_prefix, int64_t doc_begin,
      int64_t doc_end, MlmVocab vocab, const T5DatasetOptions& opt);

  int64_t size() const { return mapping_.size(); }
  const SentenceMapping& mapping() const { return mapping_; }
  const MlmVocab& vocab() const { return vocab_; }
  // Sample i, 0 <= i < size() (CHECKed). Thread-safe. Errors as build_t5_sample.
  absl::Status sample(int64_t i, T5Sample* out) const;

 private:
  T5Dataset() = default;
  std::shared_ptr<const IndexedDataset> data_;
  SentenceMapping mapping_;
  MlmVocab vocab_;
  T5DatasetOptions opt_;
};

}  // namespace anvil::io
