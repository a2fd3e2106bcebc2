// Megatron's get_train_valid_test_split_ (see io/data_split.h).
#include "io/data_split.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/status.h"

namespace anvil::io {

// Megatron's get_train_valid_test_split_: weights split on ',' or '/', padded with zeros to
// three, normalized; boundary k+1 = boundary k + round(w_k * N) with Python's round (ties to
// even, as nearbyint in the default rounding mode); then every boundary is shifted so the last
// one is N. Unlike Megatron, boundaries are clamped to [0, N] and kept monotonic, so a
// rounding shift can never yield a negative start.
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> split_documents(const std::string& split,
                                                                         int64_t num_documents) {
  if (num_documents < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("split: negative document count ", num_documents));
  }
  const char sep = split.find(',') != std::string::npos ? ',' : '/';
  std::vector<std::string> parts = absl::StrSplit(split, sep);
  if (parts.size() > 3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "split \"%s\": %d weights, expected at most 3 (train, valid, test)", split, parts.size()));
  }
  std::vector<double> weights;
  for (std::string& p : parts) {
    absl::StripAsciiWhitespace(&p);
    double w = 0;
    if (!absl::SimpleAtod(p, &w) || !std::isfinite(w) || w < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("split \"%s\": \"%s\" is not a non-negative number", split, p));
    }
    weights.push_back(w);
  }
  while (weights.size() < 3) weights.push_back(0.0);
  const double sum = weights[0] + weights[1] + weights[2];
  if (!(sum > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat("split \"%s\": the weights sum to 0", split));
  }
  int64_t index[4] = {0, 0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    const double share = weights[k] / sum;
    index[k + 1] =
        index[k] + static_cast<int64_t>(std::nearbyint(share * static_cast<double>(num_documents)));
  }
  const int64_t diff = index[3] - num_documents;
  for (int k = 1; k < 4; ++k) {
    index[k] = std::clamp<int64_t>(index[k] - diff, index[k - 1], num_documents);
  }
  index[3] = num_documents;
  return std::vector<std::pair<int64_t, int64_t>>{
      {index[0], index[1]}, {index[1], index[2]}, {index[2], index[3]}};
}

}  // namespace anvil::io
