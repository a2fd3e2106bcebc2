// Prefix-LM inputs of one GPT sample (see prefix_lm.h): the fork's prefix draws, each token's
// prefix end (=) and the inputs left out of the loss (targets = -1).
#include "model/train/prefix_lm.h"

#include "engine/python_random.h"

namespace anvil::model {
namespace {

// [start, end) of each document: after each eod (which ends its own document), and a last one
// up to T when the sample does not end with an eod (the fork's "partial document").
struct Doc {
  int64_t start, eod;  // eod: the eod's position, or T for a last partial document
};

std::vector<Doc> documents(const int32_t* tokens, int64_t T, int32_t eod) {
  std::vector<Doc> docs;
  int64_t start = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] != eod) continue;
    docs.push_back({start, t});
    start = t + 1;
  }
  if (T > 0 && tokens[T - 1] != eod) docs.push_back({start, T});
  return docs;
}

}  // namespace

std::vector<int32_t> prefix_indices(const PrefixLmOptions& o, int64_t sample_index,
                                    const int32_t* tokens, int64_t T) {
  engine::PythonRandom rng(static_cast<uint64_t>(sample_index), o.seed);
  if (!o.per_document) return {static_cast<int32_t>(rng.randint(1, T))};
  std::vector<int32_t> out;
  for (const Doc& d : documents(tokens, T, o.eod_token)) {
    // A document of its eod alone has no prefix (the fork's randint(s + 1, s) raises).
    out.push_back(
        static_cast<int32_t>(d.start + 1 <= d.eod ? rng.randint(d.start + 1, d.eod) : d.eod));
  }
  return out;
}

void apply_prefix_lm(const PrefixLmOptions& o, int64_t sample_index, const int32_t* tokens,
                     int64_t T, int32_t* prefix_end, int32_t* targets) {
  const std::vector<int32_t> p = prefix_indices(o, sample_index, tokens, T);
  std::vector<Doc> docs;
  if (o.per_document) {
    docs = documents(tokens, T, o.eod_token);
  } else {
    docs.push_back({0, T});
  }
  for (size_t d = 0; d < docs.size(); ++d) {
    // The document's tokens: through its eod (or to T).
    const int64_t end = docs[d].eod < T ? docs[d].eod + 1 : T;
    for (int64_t t = docs[d].start; t < end; ++t) prefix_end[t] = p[d];
    if (o.loss_on_targets_only) {  // the fork's loss_mask[s : p - 1] = 0
      for (int64_t t = docs[d].start; t < p[d] - 1; ++t) targets[t] = -1;
    }
  }
}

float position_frequency_weight(int64_t t, int64_t T) {
  return static_cast<float>(T - t) / static_cast<float>(T + 1) * 2.0f;
}

}  // namespace anvil::model
