// Megatron's masked-LM corruption (megatron/data/dataset_utils.py create_masked_lm_predictions,
// BigScience fork, as its BERT and T5 datasets call it: do_whole_word_mask=True,
// favor_longer_ngram=False, do_permutation=False), draw for draw with numpy's RandomState:
//   candidates: tokens other than [CLS]/[SEP] grouped into whole words -- a token whose vocab
//     entry starts with "##" joins the previous word, else starts a new one.
//   num_to_predict = min(max_predictions (a float: masked_lm_prob * target length),
//                        max(1, round_half_even(len(tokens) * masked_lm_prob))).
//   One n-gram start per word; the starts are shuffled (rng.shuffle). For each start, until
//   num_to_predict positions are masked: n is drawn -- rng.choice(1..max_ngrams, p ~ 1/n)
//   (BERT) or min(rng.geometric(0.2), max_ngrams) (T5) -- the n words from the start (fewer at
//   the end) are taken, shrinking n while they would exceed num_to_predict; the span is skipped
//   if it still exceeds it or overlaps a masked position. Each position of a taken span is
//   replaced: BERT style 80% [MASK] (random_sample < 0.8), else 50/50 kept or a random vocab id
//   (rng.randint over the vocab id list); T5 style always [MASK].
//   The starts are shuffled once more afterwards (Megatron draws it; kept for the stream).
//   Positions come out sorted, spans sorted by their first position.
// An n-gram of words may straddle a [SEP] (its positions are then not contiguous), as Megatron's.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "io/numpy_random.h"
#include "io/tokenizer.h"

namespace anvil::io {

// What masking needs of a vocabulary (Megatron's tokenizer.inv_vocab and special ids).
struct MlmVocab {
  // Megatron's vocab_id_list = list(inv_vocab.keys()) = [0, size) (for a vocab.txt without
  // duplicate lines): the random replacements.
  int64_t size = 0;
  std::vector<uint8_t> continuation;  // [size]: 1 where the token starts with "##"
  int32_t cls = -1, sep = -1, mask = -1, pad = -1;
  int32_t bos = -1, eos = -1;      // T5 decoder start and end
  std::vector<int32_t> sentinels;  // <extra_id_0>, ... (T5)
};

// From the token strings of ids [0, n) and the special ids. InvalidArgument naming a missing
// [CLS]/[SEP]/[MASK]/[PAD].
absl::StatusOr<MlmVocab> make_mlm_vocab(const std::vector<std::string>& tokens,
                                        const SpecialTokens& special);
// From a BERT WordPiece tokenizer (Megatron's BertWordPiece{Lower,}Case, the tokenizers its BERT
// and T5 datasets use); InvalidArgument for another kind.
absl::StatusOr<MlmVocab> make_mlm_vocab(const Tokenizer& tokenizer);

enum class MaskingStyle { kBert, kT5 };

struct MaskedLmOptions {
  double masked_lm_prob = 0.15;
  double max_predictions = 0;  // masked_lm_prob * target length (Megatron keeps the float)
  int max_ngrams = 3;
  bool geometric = false;  // n ~ Geometric(0.2) clipped to max_ngrams, instead of p ~ 1/n
  MaskingStyle style = MaskingStyle::kBert;
};

// A masked span: its positions (increasing, not always contiguous) and original tokens.
struct MaskedSpan {
  std::vector<int32_t> positions;
  std::vector<int32_t> labels;
};

struct MaskedLm {
  std::vector<int32_t> positions;  // sorted
  std::vector<int32_t> labels;     // original token at each position
  std::vector<MaskedSpan> spans;   // in order of their first position
};

// Corrupts *tokens in place (Megatron's output_tokens) and fills *out. Token ids must be in
// [0, vocab.size) (CHECKed).
void create_masked_lm_predictions(std::vector<int32_t>* tokens, const MlmVocab& vocab,
                                  const MaskedLmOptions& opt, NumpyRandomState* rng, MaskedLm* out);

}  // namespace anvil::io
