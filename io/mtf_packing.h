// Megatron-DeepSpeed's packed multitask-finetuning samples (BLOOMZ's T0/MTF path,
// megatron/data/decoder_packed_mtf_dataset.py), exactly: the same index arrays and the same rows.
// The data: n input/target document pairs (the fork's PREFIX_inputs_document and
// PREFIX_targets_document datasets, document i of one paired with document i of the other).
// Index (_build_index_mappings with _build_shuffle_idx and _build_sample_idx), L = seq_length
// (the fork passes --seq-length + 1), N = requested samples, one np.random.RandomState(seed):
//   epochs e = 0, 1, ...: shuffle_e = arange(n) shuffled by the RandomState; walking shuffle_e
//     (global position g = e n + k), each pair of len = inputs + targets tokens joins the open
//     row while the row's length stays <= L; else the row [start, g) is closed (when non-empty)
//     and a new one starts at g; a pair longer than L is skipped (the row restarts after it).
//     The open row carries over to the next epoch. Epochs are added while rows <= N.
//   shuffle = the shuffles concatenated [E n]; samples [M, 2]: row k = [start, end) into shuffle.
// Row k (pack_samples): the pairs shuffle[start .. end), each its inputs then its targets,
//   then pad_token up to L; segment ids 1, 2, ... per pair (0 on the padding); is_inputs 1 on
//   the inputs.
// As in the fork, the shuffled ids are 0 .. n - 1 of the dataset whatever the split's first
// document (its build_dataset passes the split's documents, of which only the count is used).
// The fork loops forever when no pair fits; this index returns an error.
// Wired up by io/mtf_dataset.h (the pair of datasets, splits) and model/train/mtf_batch.h (the
// trainer's record and batch, [data] mtf).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

struct MtfPackedIndex {
  std::vector<int64_t> shuffle;                 // [E n] document ids, epoch by epoch
  std::vector<std::array<int64_t, 2>> samples;  // [M] row k = [start, end) into shuffle
};

// input_sizes, target_sizes: [n] tokens of each pair (n >= 1, sizes >= 1).
absl::StatusOr<MtfPackedIndex> build_mtf_packed_index(const std::vector<int64_t>& input_sizes,
                                                      const std::vector<int64_t>& target_sizes,
                                                      int64_t num_samples, int64_t seq_length,
                                                      uint32_t seed);

struct MtfRow {
  std::vector<int32_t> tokens;       // [L] the pairs' tokens, then pad_token
  std::vector<int32_t> segment_ids;  // [L] 1, 2, ... per pair; 0 on the padding
  std::vector<uint8_t> is_inputs;    // [L] 1 on each pair's inputs
};

// One packed row of the (inputs, targets) pairs in order; an error when they exceed L.
absl::StatusOr<MtfRow> pack_mtf_row(
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& pairs,
    int64_t seq_length, int32_t pad_token);

}  // namespace anvil::io
