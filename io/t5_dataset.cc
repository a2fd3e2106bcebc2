// Megatron's T5 samples and Hugging Face's span corruption (see t5_dataset.h).
#include "io/t5_dataset.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::io {
namespace {

// random_spans_noise_mask's counts for n tokens: (noise tokens, spans).
std::pair<int64_t, int64_t> random_span_counts(int64_t n, double density, double mean) {
  int64_t noise = static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * density));
  const int64_t nonnoise = n - noise;  // before the clamp, as HF computes the span count
  noise = std::min(std::max<int64_t>(noise, 1), n - 1);
  const int64_t spans =
      static_cast<int64_t>(std::nearbyint(static_cast<double>(std::min(noise, nonnoise)) / mean));
  return {noise, std::max<int64_t>(spans, 1)};
}

// _random_segmentation: num_items split into num_segments non-empty runs, by shuffling the
// 0/1 "a new run starts after item k" array (num_segments - 1 ones over num_items - 1 slots).
std::vector<int64_t> random_segmentation(int64_t num_items, int64_t num_segments,
                                         NumpyRandomState* rng) {
  std::vector<uint8_t> starts(static_cast<size_t>(num_items - 1), 0);
  for (int64_t k = 0; k < num_segments - 1; ++k) starts[k] = 1;
  rng->shuffle(starts.data(), num_items - 1);
  std::vector<int64_t> lengths(1, 1);
  for (const uint8_t s : starts) {
    if (s) {
      lengths.push_back(1);
    } else {
      ++lengths.back();
    }
  }
  return lengths;
}

// Hugging Face's random_spans_noise_mask as spans (non-noise run first, then noise, repeated).
void random_spans(const std::vector<int32_t>& tokens, double density, double mean,
                  NumpyRandomState* rng, std::vector<MaskedSpan>* out) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 2) return;
  const auto [noise, spans] = random_span_counts(n, density, mean);
  const std::vector<int64_t> noise_lengths = random_segmentation(noise, spans, rng);
  const std::vector<int64_t> keep_lengths = random_segmentation(n - noise, spans, rng);
  int64_t at = 0;
  for (int64_t k = 0; k < spans; ++k) {
    at += keep_lengths[k];
    MaskedSpan span;
    for (int64_t j = 0; j < noise_lengths[k]; ++j, ++at) {
      span.positions.push_back(static_cast<int32_t>(at));
      span.labels.push_back(tokens[at]);
    }
    out->push_back(std::move(span));
  }
}

// The most sentinels a sample can need (the most spans).
int64_t max_spans(const T5DatasetOptions& opt) {
  const int64_t target = opt.max_seq_length - 2;
  if (opt.noise == T5Noise::kMegatron) {
    // Every span masks >= 1 token and at most masked_lm_prob * target are masked.
    return static_cast<int64_t>(std::floor(opt.masked_lm_prob * static_cast<double>(target)));
  }
  int64_t most = 0;
  for (int64_t n = 2; n <= target; ++n) {
    most = std::max(most,
                    random_span_counts(n, opt.masked_lm_prob, opt.mean_noise_span_length).second);
  }
  return most;
}

}  // namespace

absl::Status build_t5_sample(const std::vector<std::vector<int32_t>>& sentences, int32_t target,
                             const T5DatasetOptions& opt, const MlmVocab& vocab,
                             NumpyRandomState* rng, T5Sample* out) {
  ANVIL_CHECK(target <= opt.max_seq_length);
  std::vector<int32_t> tokens;
  for (const auto& s : sentences) tokens.insert(tokens.end(), s.begin(), s.end());
  out->truncated = static_cast<int64_t>(tokens.size()) > target ? 1 : 0;
  if (out->truncated) tokens.resize(static_cast<size_t>(target));

  std::vector<MaskedSpan> spans;
  if (opt.noise == T5Noise::kMegatron) {
    MaskedLmOptions mlm;
    mlm.masked_lm_prob = opt.masked_lm_prob;
    mlm.max_predictions = opt.masked_lm_prob * target;
    mlm.max_ngrams = 10;
    mlm.geometric = true;
    mlm.style = MaskingStyle::kT5;
    MaskedLm masked;
    std::vector<int32_t> corrupted = tokens;
    create_masked_lm_predictions(&corrupted, vocab, mlm, rng, &masked);
    spans = std::move(masked.spans);
  } else {
    random_spans(tokens, opt.masked_lm_prob, opt.mean_noise_span_length, rng, &spans);
  }
  if (spans.size() > vocab.sentinels.size()) {
    return absl::OutOfRangeError(absl::StrFormat("T5 sample: %d noise spans, only %d sentinels",
                                                 spans.size(), vocab.sentinels.size()));
  }

  // pad_and_convert_to_numpy: sentinel k stands for span k in the encoder and leads it in the
  // decoder.
  std::vector<int32_t> enc, dec = {vocab.bos}, lab;
  size_t start = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    const MaskedSpan& span = spans[k];
    const int32_t sentinel = vocab.sentinels[k];
    dec.push_back(sentinel);
    dec.insert(dec.end(), span.labels.begin(), span.labels.end());
    lab.push_back(sentinel);
    lab.insert(lab.end(), span.labels.begin(), span.labels.end());
    enc.insert(enc.end(), tokens.begin() + start, tokens.begin() + span.positions.front());
    enc.push_back(sentinel);
    start = static_cast<size_t>(span.positions.back()) + 1;
  }
  lab.push_back(vocab.eos);
  enc.insert(enc.end(), tokens.begin() + start, tokens.end());

  const size_t enc_len = static_cast<size_t>(opt.max_seq_length);
  const size_t dec_len = static_cast<size_t>(opt.max_seq_length_dec);
  ANVIL_CHECK(enc.size() <= enc_len);  // at most the target: spans shrink to one token
  if (dec.size() > dec_len) {
    return absl::OutOfRangeError(absl::StrFormat(
        "T5 sample: the decoder input has %d tokens, over max_seq_length_dec %d (raise the "
        "decoder length or lower the mask probability)",
        dec.size(), dec_len));
  }
  out->enc_tokens.assign(enc_len, vocab.pad);
  std::copy(enc.begin(), enc.end(), out->enc_tokens.begin());
  out->enc_padding_mask.assign(enc_len, 0);
  std::fill(out->enc_padding_mask.begin(), out->enc_padding_mask.begin() + enc.size(), 1);
  out->dec_tokens.assign(dec_len, vocab.pad);
  std::copy(dec.begin(), dec.end(), out->dec_tokens.begin());
  out->dec_padding_mask.assign(dec_len, 0);
  std::fill(out->dec_padding_mask.begin(), out->dec_padding_mask.begin() + dec.size(), 1);
  out->labels.assign(dec_len, -1);
  std::copy(lab.begin(), lab.end(), out->labels.begin());
  out->loss_mask = out->dec_padding_mask;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<T5Dataset>> T5Dataset::create(
    std::shared_ptr<const IndexedDataset> data, const std::string& data_prefix, int64_t doc_begin,
    int64_t doc_end, MlmVocab vocab, const T5DatasetOptions& opt) {
  if (data == nullptr) return absl::InvalidArgumentError("T5Dataset: null dataset");
  if (opt.max_seq_length < 4 || opt.max_seq_length_dec < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("T5Dataset: max_seq_length %d must be >= 4 and max_seq_length_dec %d >= 2",
                        opt.max_seq_length, opt.max_seq_length_dec));
  }
  if (!(opt.masked_lm_prob >= 0.0 && opt.masked_lm_prob < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("T5Dataset: masked_lm_prob ", opt.masked_lm_prob, " is not in [0, 1)"));
  }
  if (opt.noise == T5Noise::kRandomSpans && !(opt.mean_noise_span_length >= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("T5Dataset: mean_noise_span_length ",
                                                   opt.mean_noise_span_length, " is below 1"));
  }
  if (vocab.bos < 0 || vocab.eos < 0) {
    return absl::InvalidArgumentError(
        "T5Dataset: the vocabulary has no [BOS]/[EOS] (the decoder's start and end tokens)");
  }
  const int64_t need = max_spans(opt);
  if (static_cast<int64_t>(vocab.sentinels.size()) < std::max<int64_t>(need, 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "T5Dataset: the vocabulary has %d sentinel tokens (<extra_id_k>), a sample can need %d "
        "(set vocab_extra_ids, Megatron's --vocab-extra-ids 100)",
        vocab.sentinels.size(), std::max<int64_t>(need, 1)));
  }
  SentenceMappingOptions m;
  m.num_samples = opt.num_samples;
  m.max_length = opt.max_seq_length - 2;  // Megatron: "account for added tokens"
  m.short_seq_prob = opt.short_seq_prob;
  m.seed = opt.seed;
  m.min_num_sent = 1;
  std::unique_ptr<T5Dataset> ds(new T5Dataset());
  ANVIL_ASSIGN_OR_RETURN(ds->mapping_,
                         SentenceMapping::create_checked(*data, data_prefix, doc_begin, doc_end, m,
                                                         opt.cache, vocab.size));
  ds->data_ = std::move(data);
  ds->vocab_ = std::move(vocab);
  ds->opt_ = opt;
  return ds;
}

absl::Status T5Dataset::sample(int64_t i, T5Sample* out) const {
  ANVIL_CHECK_MSG(i >= 0 && i < size(),
                  absl::StrFormat("T5Dataset::sample: index %d outside [0, %d)", i, size()));
  std::vector<std::vector<int32_t>> sentences;
  ANVIL_RETURN_IF_ERROR(read_sentences(*data_, mapping_.start(i), mapping_.end(i), &sentences));
  // Megatron: np.random.RandomState(seed=(self.seed + idx)).
  NumpyRandomState rng(static_cast<uint32_t>(static_cast<int64_t>(opt_.seed) + i));
  return build_t5_sample(sentences, mapping_.target(i), opt_, vocab_, &rng, out);
}

}  // namespace anvil::io
