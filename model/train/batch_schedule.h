// Megatron's batch-size and iteration arithmetic, as bin/train's run follows it:
//   global batch ramp-up (megatron/microbatches.py RampupBatchsizeNumMicroBatches,
//     --rampup-batch-size START INCREMENT SAMPLES): with n = (G - START) / INCREMENT increments
//     and p = SAMPLES / n (a double), the global batch after `consumed` samples is
//       G                                            when consumed > SAMPLES,
//       START + int(consumed / p) * INCREMENT        otherwise;
//   the run's steps for a sample budget (training.py update_train_iters): constant batch:
//     train_samples // G; ramp-up: the steps while consumed <= SAMPLES (each consuming the
//     batch of its position), then (train_samples - consumed) // G more (floor division; the
//     partial last batch is dropped);
//   a token budget (--train-tokens; the Microsoft fork's loop condition, the BigScience fork
//     parses the flag but ignores it): steps run while consumed samples * seq_len < tokens;
//   skipped iteration ranges (--skip-train-iteration-range "A-B ..."): sorted, overlapping
//     ranges merged (arguments.py); a step in a range consumes its global batch of samples but
//     is not trained on (see docs/config.md for how this differs from the fork);
//   the data sampler (data/data_samplers.py MegatronPretrainingSampler): row b of micro-batch m
//     on DP rank r of a step that starts at `consumed` samples is sample
//       consumed + (m * dp + r) * micro_batch + b,
//     for the training stream and, continued over evaluations, the validation stream.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::model {

// [train] rampup_batch_size = "START INCREMENT SAMPLES"; start == 0: no ramp-up.
struct BatchRampup {
  int64_t start = 0;
  int64_t increment = 0;
  int64_t samples = 0;
  bool enabled() const { return start > 0; }
};

// "" -> disabled; "START INCREMENT SAMPLES" with START, INCREMENT, SAMPLES > 0,
// START < global_batch and (global_batch - START) % INCREMENT == 0 (Megatron's asserts), and
// START, INCREMENT multiples of `micro_batch_times_dp` (every batch of the ramp splits into
// whole micro-batches; Megatron checks the batch it reaches; callers multiply in pp for the
// interleaved schedule). InvalidArgument naming the numbers.
absl::StatusOr<BatchRampup> parse_batch_rampup(const std::string& text, int64_t global_batch,
                                               int64_t micro_batch_times_dp);

// The global batch of the step that starts after `consumed` samples.
int64_t global_batch_at(const BatchRampup& rampup, int64_t global_batch, int64_t consumed);

// Samples consumed by the first `steps` steps (each consuming global_batch_at its position).
int64_t samples_after_steps(const BatchRampup& rampup, int64_t global_batch, int64_t steps);

// Megatron's update_train_iters: the steps of a run of `train_samples` samples (may be <= 0
// when train_samples is smaller than the ramp-up).
int64_t steps_for_samples(const BatchRampup& rampup, int64_t global_batch, int64_t train_samples);

// The steps until consumed samples * seq_len >= train_tokens.
int64_t steps_for_tokens(const BatchRampup& rampup, int64_t global_batch, int64_t seq_len,
                         int64_t train_tokens);

// [train] skip_iterations: "A-B C-D ..." (1-based steps, A <= B, separated by spaces or
// commas), sorted and merged; "" -> none. InvalidArgument naming the bad range.
using StepRanges = std::vector<std::pair<int64_t, int64_t>>;
absl::StatusOr<StepRanges> parse_step_ranges(const std::string& text);
bool in_step_ranges(const StepRanges& ranges, int64_t step);

// Megatron's sampler: the stream index of row 0 of micro-batch m on DP rank `dp_rank` of a
// batch that starts at `consumed`.
int64_t sampler_index(int64_t consumed, int64_t micro_batch, int dp, int dp_rank, int64_t m);

}  // namespace anvil::model
