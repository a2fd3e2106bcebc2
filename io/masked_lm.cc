// Megatron's create_masked_lm_predictions (see masked_lm.h).
#include "io/masked_lm.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/tokenizers/wordpiece.h"

namespace anvil::io {

absl::StatusOr<MlmVocab> make_mlm_vocab(const std::vector<std::string>& tokens,
                                        const SpecialTokens& special) {
  MlmVocab v;
  v.size = static_cast<int64_t>(tokens.size());
  struct Required {
    const char* name;
    int32_t id;
  };
  for (const Required& r : {Required{"[CLS]", special.cls}, Required{"[SEP]", special.sep},
                            Required{"[MASK]", special.mask}, Required{"[PAD]", special.pad}}) {
    if (r.id < 0 || r.id >= v.size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "masked LM vocabulary: no %s token (id %d, vocabulary of %d)", r.name, r.id, v.size));
    }
  }
  v.continuation.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    v.continuation[i] = absl::StartsWith(tokens[i], "##") ? 1 : 0;
  }
  v.cls = special.cls;
  v.sep = special.sep;
  v.mask = special.mask;
  v.pad = special.pad;
  v.bos = special.bos;
  v.eos = special.eos;
  v.sentinels = special.sentinels;
  return v;
}

absl::StatusOr<MlmVocab> make_mlm_vocab(const Tokenizer& tokenizer) {
  const auto* wp = dynamic_cast<const BertWordPieceTokenizer*>(&tokenizer);
  if (wp == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("masked LM samples need a BERT WordPiece tokenizer (BertWordPieceLowerCase or "
                     "BertWordPieceCase, as Megatron's BERT and T5 datasets), got ",
                     tokenizer.name()));
  }
  std::vector<std::string> tokens(static_cast<size_t>(wp->vocab_size()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = std::string(wp->token(static_cast<int32_t>(i)));
  }
  return make_mlm_vocab(tokens, wp->special());
}

void create_masked_lm_predictions(std::vector<int32_t>* tokens, const MlmVocab& vocab,
                                  const MaskedLmOptions& opt, NumpyRandomState* rng,
                                  MaskedLm* out) {
  out->positions.clear();
  out->labels.clear();
  out->spans.clear();
  const std::vector<int32_t> original = *tokens;
  const int64_t len = static_cast<int64_t>(original.size());

  // Whole words: runs of a start piece and its "##" continuations, [CLS]/[SEP] left out.
  std::vector<std::vector<int32_t>> words;
  for (int64_t i = 0; i < len; ++i) {
    const int32_t t = original[i];
    if (t == vocab.cls || t == vocab.sep) continue;
    ANVIL_CHECK_MSG(
        t >= 0 && t < vocab.size,
        absl::StrFormat("masked LM: token id %d outside the vocabulary [0, %d)", t, vocab.size));
    if (!words.empty() && vocab.continuation[t]) {
      words.back().push_back(static_cast<int32_t>(i));
    } else {
      words.push_back({static_cast<int32_t>(i)});
    }
  }
  if (opt.masked_lm_prob == 0.0) return;

  // Python: min(float, int); the comparisons below stay in doubles, as Python's.
  const double by_length =
      std::max(1.0, std::nearbyint(static_cast<double>(len) * opt.masked_lm_prob));
  const double num_to_predict = std::min(opt.max_predictions, by_length);

  std::vector<double> pvals;
  if (!opt.geometric) {
    for (int n = 1; n <= opt.max_ngrams; ++n) pvals.push_back(1.0 / n);
    const double sum = numpy_pairwise_sum(pvals.data(), static_cast<int64_t>(pvals.size()));
    for (double& p : pvals) p /= sum;
  }

  const int64_t num_words = static_cast<int64_t>(words.size());
  std::vector<int64_t> starts(static_cast<size_t>(num_words));
  std::iota(starts.begin(), starts.end(), 0);
  rng->shuffle(starts.data(), num_words);

  // The positions of the n words from `start` (fewer at the end).
  auto ngram = [&](int64_t start, int n, std::vector<int32_t>* set) {
    set->clear();
    for (int64_t w = start; w < std::min(start + n, num_words); ++w) {
      set->insert(set->end(), words[w].begin(), words[w].end());
    }
  };
  std::vector<uint8_t> covered(static_cast<size_t>(len), 0);
  std::vector<std::pair<int32_t, int32_t>> masked;  // (position, label)
  std::vector<int32_t> set;
  for (const int64_t start : starts) {
    const double taken = static_cast<double>(masked.size());
    if (taken >= num_to_predict) break;
    int n = opt.geometric ? static_cast<int>(std::min<int64_t>(rng->geometric(0.2), opt.max_ngrams))
                          : 1 + static_cast<int>(rng->choice(pvals.data(), opt.max_ngrams));
    // geometric() is 0 only for a uniform draw of exactly 0 (p = 2^-53), where Python would
    // index the list from its end; taken as 1 here.
    n = std::max(n, 1);
    ngram(start, n, &set);
    --n;
    while (taken + static_cast<double>(set.size()) > num_to_predict) {
      if (n == 0) break;
      ngram(start, n, &set);
      --n;
    }
    if (taken + static_cast<double>(set.size()) > num_to_predict) continue;
    if (std::any_of(set.begin(), set.end(), [&](int32_t p) { return covered[p] != 0; })) continue;
    MaskedSpan span;
    span.positions = set;
    for (const int32_t p : set) {
      covered[p] = 1;
      int32_t replacement = vocab.mask;
      if (opt.style == MaskingStyle::kBert && rng->random_sample() >= 0.8) {
        replacement = rng->random_sample() < 0.5
                          ? original[p]
                          : static_cast<int32_t>(rng->randint(0, vocab.size));
      }
      (*tokens)[p] = replacement;
      masked.emplace_back(p, original[p]);
      span.labels.push_back(original[p]);
    }
    out->spans.push_back(std::move(span));
  }
  // Megatron shuffles the starts again (for do_permutation, off here): drawn all the same.
  rng->shuffle(starts.data(), num_words);

  std::sort(masked.begin(), masked.end());
  for (const auto& [p, label] : masked) {
    out->positions.push_back(p);
    out->labels.push_back(label);
  }
  // Spans by their first position (distinct: spans never overlap).
  std::sort(out->spans.begin(), out->spans.end(), [](const MaskedSpan& a, const MaskedSpan& b) {
    return a.positions[0] < b.positions[0];
  });
}

}  // namespace anvil::io
