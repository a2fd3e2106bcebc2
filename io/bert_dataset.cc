// Megatron's BERT samples (see bert_dataset.h).
#include "io/bert_dataset.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::io {
namespace {

// A token run that loses tokens at either end (truncate_segments' del tokens[0] / pop()).
struct Segment {
  std::vector<int32_t> tokens;
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

void append_sentences(const std::vector<std::vector<int32_t>>& sentences, size_t first, size_t last,
                      Segment* seg) {
  for (size_t j = first; j < last; ++j) {
    seg->tokens.insert(seg->tokens.end(), sentences[j].begin(), sentences[j].end());
  }
  seg->end = seg->tokens.size();
}

// dataset_utils.truncate_segments: true when anything was cut.
bool truncate_segments(Segment* a, Segment* b, int32_t max_num_tokens, NumpyRandomState* rng) {
  ANVIL_CHECK_MSG(a->size() > 0, "BERT sample: empty segment A");
  const size_t limit = static_cast<size_t>(max_num_tokens);
  if (a->size() + b->size() <= limit) return false;
  while (a->size() + b->size() > limit) {
    Segment* cut = a->size() > b->size() ? a : b;
    if (rng->random_sample() < 0.5) {
      ++cut->begin;
    } else {
      --cut->end;
    }
  }
  return true;
}

}  // namespace

void build_bert_sample(const std::vector<std::vector<int32_t>>& sentences, int32_t target,
                       int32_t max_seq_length, const MlmVocab& vocab, double masked_lm_prob,
                       bool binary_head, NumpyRandomState* rng, BertSample* out) {
  const size_t n = sentences.size();
  ANVIL_CHECK_MSG(!binary_head || n > 1, "BERT sample: the binary head needs 2+ sentences");
  ANVIL_CHECK(target <= max_seq_length);
  Segment a, b;
  out->is_random = 0;
  if (binary_head) {
    // get_a_and_b_segments: a random split point, then a coin for the order.
    const size_t a_end = n >= 3 ? static_cast<size_t>(rng->randint(1, static_cast<int64_t>(n))) : 1;
    append_sentences(sentences, 0, a_end, &a);
    append_sentences(sentences, a_end, n, &b);
    if (rng->random_sample() < 0.5) {
      out->is_random = 1;
      std::swap(a, b);
    }
  } else {
    append_sentences(sentences, 0, n, &a);
  }
  out->truncated = truncate_segments(&a, &b, target, rng) ? 1 : 0;

  // create_tokens_and_tokentypes: [CLS] A [SEP] (B [SEP]).
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(max_seq_length));
  tokens.push_back(vocab.cls);
  tokens.insert(tokens.end(), a.tokens.begin() + a.begin, a.tokens.begin() + a.end);
  tokens.push_back(vocab.sep);
  const size_t first_b = tokens.size();
  if (b.size() > 0) {
    tokens.insert(tokens.end(), b.tokens.begin() + b.begin, b.tokens.begin() + b.end);
    tokens.push_back(vocab.sep);
  }
  const size_t num_tokens = tokens.size();

  MaskedLmOptions mlm;
  mlm.masked_lm_prob = masked_lm_prob;
  mlm.max_predictions = masked_lm_prob * target;
  MaskedLm masked;
  create_masked_lm_predictions(&tokens, vocab, mlm, rng, &masked);

  // pad_and_convert_to_numpy.
  const size_t len = static_cast<size_t>(max_seq_length);
  ANVIL_CHECK(num_tokens <= len);
  out->tokens.assign(len, vocab.pad);
  std::copy(tokens.begin(), tokens.end(), out->tokens.begin());
  out->types.assign(len, vocab.pad);
  for (size_t i = 0; i < num_tokens; ++i) out->types[i] = i < first_b ? 0 : 1;
  out->padding_mask.assign(len, 0);
  std::fill(out->padding_mask.begin(), out->padding_mask.begin() + num_tokens, 1);
  out->labels.assign(len, -1);
  out->loss_mask.assign(len, 0);
  for (size_t k = 0; k < masked.positions.size(); ++k) {
    out->labels[masked.positions[k]] = masked.labels[k];
    out->loss_mask[masked.positions[k]] = 1;
  }
}

absl::StatusOr<std::unique_ptr<BertDataset>> BertDataset::create(
    std::shared_ptr<const IndexedDataset> data, const std::string& data_prefix, int64_t doc_begin,
    int64_t doc_end, MlmVocab vocab, const BertDatasetOptions& opt) {
  if (data == nullptr) return absl::InvalidArgumentError("BertDataset: null dataset");
  if (opt.max_seq_length < 5) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "BertDataset: max_seq_length %d leaves no room for two segments and [CLS] [SEP] [SEP]",
        opt.max_seq_length));
  }
  if (!(opt.masked_lm_prob >= 0.0 && opt.masked_lm_prob < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BertDataset: masked_lm_prob ", opt.masked_lm_prob, " is not in [0, 1)"));
  }
  SentenceMappingOptions m;
  m.num_samples = opt.num_samples;
  m.max_length = opt.max_seq_length - 3;  // [CLS], [SEP], [SEP]
  m.short_seq_prob = opt.short_seq_prob;
  m.seed = opt.seed;
  m.min_num_sent = opt.binary_head ? 2 : 1;
  std::unique_ptr<BertDataset> ds(new BertDataset());
  ANVIL_ASSIGN_OR_RETURN(ds->mapping_,
                         SentenceMapping::create_checked(*data, data_prefix, doc_begin, doc_end, m,
                                                         opt.cache, vocab.size));
  ds->data_ = std::move(data);
  ds->vocab_ = std::move(vocab);
  ds->opt_ = opt;
  return ds;
}

absl::Status BertDataset::sample(int64_t i, BertSample* out) const {
  ANVIL_CHECK_MSG(i >= 0 && i < size(),
                  absl::StrFormat("BertDataset::sample: index %d outside [0, %d)", i, size()));
  std::vector<std::vector<int32_t>> sentences;
  ANVIL_RETURN_IF_ERROR(read_sentences(*data_, mapping_.start(i), mapping_.end(i), &sentences));
  // Megatron: np.random.RandomState(seed=((self.seed + idx) % 2**32)).
  NumpyRandomState rng(
      static_cast<uint32_t>((static_cast<int64_t>(opt_.seed) + i) % (int64_t{1} << 32)));
  build_bert_sample(sentences, mapping_.target(i), opt_.max_seq_length, vocab_, opt_.masked_lm_prob,
                    opt_.binary_head, &rng, out);
  return absl::OkStatus();
}

}  // namespace anvil::io
