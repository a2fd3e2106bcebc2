// Next-token choice from one row of logits, on the host, in Hugging Face's order:
//   1. repetition penalty r (CTRL / HF): for every distinct id in the context,
//      logit = logit / r if logit > 0, else logit * r   (r = 1: off)
//   2. greedy: the argmax (lowest id among equal maxima); done.
//   3. temperature: logit / T
//   4. top-k: keep the k largest (k = 0: all); ties at the k-th value broken by lower id
//   5. top-p (nucleus): in descending probability, keep a token while the mass of the tokens
//      before it is < p (so at least one, and the one that crosses p); p = 1: all
//   6. draw from the softmax of the kept logits with u = uniform [0, 1) (inverse CDF over the
//      kept tokens in descending order).
// Randomness: std::mt19937_64 seeded with `seed`, u = (next() >> 11) * 2^-53, one draw per
// sampled token, so a (seed, logits) sequence gives the same tokens on every platform and on
// CPU and GPU runs that produce the same logits.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"

namespace anvil::model {

struct SamplingParams {
  bool greedy = false;              // argmax; also when temperature == 0
  float temperature = 1.0f;         // > 0 unless greedy
  int64_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // (0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1: off
  uint64_t seed = 0;

  // InvalidArgument naming the parameter and its range.
  absl::Status validate() const;
  bool is_greedy() const { return greedy || temperature == 0.0f; }
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : p_(params), rng_(params.seed) {}
  // logits: [vocab] (modified in place); context: the ids the repetition penalty applies to
  // (prompt and generated so far). Returns the chosen id.
  int32_t next(std::vector<float>& logits, const std::vector<int32_t>& context);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
};

}  // namespace anvil::model
