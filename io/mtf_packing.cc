// DecoderPackedMTFDataset's index and rows (see mtf_packing.h): the shuffles of
// np.random.RandomState(seed) (io/numpy_random.h) and the fork's greedy row packing.
#include "io/mtf_packing.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "io/numpy_random.h"

namespace anvil::io {

absl::StatusOr<MtfPackedIndex> build_mtf_packed_index(const std::vector<int64_t>& input_sizes,
                                                      const std::vector<int64_t>& target_sizes,
                                                      int64_t num_samples, int64_t seq_length,
                                                      uint32_t seed) {
  const int64_t n = static_cast<int64_t>(input_sizes.size());
  if (n < 1 || target_sizes.size() != input_sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MTF index: need as many target documents as input documents (>= 1), got ",
                     input_sizes.size(), " inputs and ", target_sizes.size(), " targets"));
  }
  if (num_samples < 0 || seq_length < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MTF index: need num_samples >= 0 and seq_length >= 1, got ", num_samples,
                     ", ", seq_length));
  }
  bool any_fits = false;
  for (int64_t i = 0; i < n; ++i) {
    any_fits |= input_sizes[i] + target_sizes[i] <= seq_length;
  }
  if (!any_fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MTF index: no input/target pair fits seq_length ", seq_length,
        " (the fork would loop forever); raise [data] seq_len or shorten the documents"));
  }
  MtfPackedIndex idx;
  NumpyRandomState rng(seed);
  int64_t row_length = 0, start = 0;
  for (int64_t epoch = 0; static_cast<int64_t>(idx.samples.size()) <= num_samples; ++epoch) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    rng.shuffle(ids.data(), n);
    idx.shuffle.insert(idx.shuffle.end(), ids.begin(), ids.end());
    // _build_sample_idx over this epoch (row_length and start carry over).
    for (int64_t k = 0; k < n; ++k) {
      const int64_t end = epoch * n + k, doc = ids[static_cast<size_t>(k)];
      const int64_t len = input_sizes[doc] + target_sizes[doc];
      row_length += len;
      if (row_length <= seq_length) continue;
      if (end > start) idx.samples.push_back({start, end});
      start = end;
      row_length = len;
      if (len > seq_length) {  // the fork skips a pair longer than a row
        start = end + 1;
        row_length = 0;
      }
    }
  }
  return idx;
}

absl::StatusOr<MtfRow> pack_mtf_row(
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& pairs,
    int64_t seq_length, int32_t pad_token) {
  if (pairs.empty()) return absl::InvalidArgumentError("MTF row: no pairs to pack");
  MtfRow row;
  row.tokens.assign(static_cast<size_t>(seq_length), pad_token);
  row.segment_ids.assign(static_cast<size_t>(seq_length), 0);
  row.is_inputs.assign(static_cast<size_t>(seq_length), 0);
  size_t at = 0;
  int32_t segment = 1;  // 0 is the padding's
  for (const auto& [inputs, targets] : pairs) {
    if (at + inputs.size() + targets.size() > static_cast<size_t>(seq_length)) {
      return absl::InvalidArgumentError(
          absl::StrCat("MTF row: pair ", segment, " (", inputs.size(), " + ", targets.size(),
                       " tokens) does not fit after ", at, " of seq_length ", seq_length));
    }
    for (size_t t = 0; t < inputs.size(); ++t, ++at) {
      row.tokens[at] = inputs[t];
      row.segment_ids[at] = segment;
      row.is_inputs[at] = 1;
    }
    for (size_t t = 0; t < targets.size(); ++t, ++at) {
      row.tokens[at] = targets[t];
      row.segment_ids[at] = segment;
    }
    ++segment;
  }
  return row;
}

}  // namespace anvil::io
