// Sampler (sampling.h): penalty, greedy, temperature, top-k, top-p and the draw, in that order.
#include "model/infer/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace anvil::model {

absl::Status SamplingParams::validate() const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return bad("temperature must be a finite number >= 0 (0: greedy), got ", temperature);
  }
  if (top_k < 0) return bad("top_k must be >= 0 (0: off), got ", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p must lie in (0, 1], got ", top_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return bad("repetition_penalty must be a finite number > 0 (1: off), got ", repetition_penalty);
  }
  return absl::OkStatus();
}

int32_t Sampler::next(std::vector<float>& logits, const std::vector<int32_t>& context) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (p_.repetition_penalty != 1.0f) {
    std::vector<bool> done(logits.size(), false);
    for (int32_t id : context) {
      if (id < 0 || id >= vocab || done[static_cast<size_t>(id)]) continue;
      done[static_cast<size_t>(id)] = true;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    }
  }
  if (p_.is_greedy()) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Candidates in descending logit order, ties by lower id.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  int64_t keep = vocab;
  if (p_.top_k > 0 && p_.top_k < vocab) {
    keep = p_.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  // Softmax of logit / T over the kept candidates (in double).
  // (l - max) / T: never inf - inf, even for a tiny T.
  const double t = p_.temperature;
  const double top = logits[static_cast<size_t>(order[0])];
  std::vector<double> prob(static_cast<size_t>(keep));
  double sum = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    prob[static_cast<size_t>(i)] =
        std::exp((static_cast<double>(logits[static_cast<size_t>(order[i])]) - top) / t);
    sum += prob[static_cast<size_t>(i)];
  }
  for (double& q : prob) q /= sum;
  if (p_.top_p < 1.0f) {
    double mass = 0.0;
    int64_t n = 0;
    while (n < keep && mass < p_.top_p) mass += prob[static_cast<size_t>(n++)];
    keep = std::max<int64_t>(n, 1);
    sum = 0.0;
    for (int64_t i = 0; i < keep; ++i) sum += prob[static_cast<size_t>(i)];
    for (int64_t i = 0; i < keep; ++i) prob[static_cast<size_t>(i)] /= sum;
  }
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double acc = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += prob[static_cast<size_t>(i)];
    if (u < acc) return order[static_cast<size_t>(i)];
  }
  return order[static_cast<size_t>(keep - 1)];  // u beyond the rounded total
}

}  // namespace anvil::model
