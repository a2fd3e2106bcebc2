// Megatron's ramp-up, iteration counts, skip ranges and sampler (see batch_schedule.h).
#include "model/train/batch_schedule.h"

#include <algorithm>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "parallel/data_parallel.h"

namespace anvil::model {

absl::StatusOr<BatchRampup> parse_batch_rampup(const std::string& text, int64_t global_batch,
                                               int64_t micro_batch_times_dp) {
  BatchRampup r;
  const std::vector<std::string> parts =
      absl::StrSplit(text, absl::ByAnyChar(" \t,"), absl::SkipEmpty());
  if (parts.empty()) return r;
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("rampup_batch_size \"%s\": %s", text, why));
  };
  int64_t v[3] = {0, 0, 0};
  if (parts.size() != 3) return bad("expected three integers START INCREMENT SAMPLES");
  for (size_t i = 0; i < 3; ++i) {
    if (!absl::SimpleAtoi(parts[i], &v[i]))
      return bad(absl::StrCat("'", parts[i], "' is not an integer"));
  }
  r.start = v[0];
  r.increment = v[1];
  r.samples = v[2];
  if (r.start <= 0 || r.increment <= 0 || r.samples <= 0) {
    return bad("START, INCREMENT and SAMPLES must be > 0");
  }
  if (r.start >= global_batch) {
    return bad(absl::StrFormat("START %d must be smaller than [train] global_batch %d", r.start,
                               global_batch));
  }
  if ((global_batch - r.start) % r.increment != 0) {
    return bad(absl::StrFormat("global_batch %d - START %d is not a multiple of INCREMENT %d",
                               global_batch, r.start, r.increment));
  }
  if (r.start % micro_batch_times_dp != 0 || r.increment % micro_batch_times_dp != 0) {
    return bad(absl::StrFormat(
        "START %d and INCREMENT %d must be multiples of %d = micro_batch * dp (* pp with "
        "virtual_stages > 1): every batch of the ramp-up is whole micro-batches on every DP rank",
        r.start, r.increment, micro_batch_times_dp));
  }
  return r;
}

int64_t global_batch_at(const BatchRampup& r, int64_t global_batch, int64_t consumed) {
  if (!r.enabled() || consumed > r.samples) return global_batch;
  // Python: rampup_samples_per_increment = ramup_samples / num_increments (a float), then
  // int(consumed_samples / rampup_samples_per_increment).
  const double per_increment =
      static_cast<double>(r.samples) / static_cast<double>((global_batch - r.start) / r.increment);
  const int64_t steps = static_cast<int64_t>(static_cast<double>(consumed) / per_increment);
  return std::min(global_batch, r.start + steps * r.increment);
}

int64_t samples_after_steps(const BatchRampup& r, int64_t global_batch, int64_t steps) {
  int64_t consumed = 0;
  for (int64_t s = 0; s < steps; ++s) {
    if (!r.enabled() || consumed > r.samples) return consumed + (steps - s) * global_batch;
    consumed += global_batch_at(r, global_batch, consumed);
  }
  return consumed;
}

int64_t steps_for_samples(const BatchRampup& r, int64_t global_batch, int64_t train_samples) {
  if (!r.enabled()) return train_samples / global_batch;
  int64_t steps = 0, consumed = 0;
  while (consumed <= r.samples) {
    consumed += global_batch_at(r, global_batch, consumed);
    ++steps;
  }
  // Python's floor division (negative when train_samples < consumed).
  const int64_t rest = train_samples - consumed;
  const int64_t q = rest / global_batch - (rest % global_batch != 0 && rest < 0 ? 1 : 0);
  return steps + q;
}

int64_t steps_for_tokens(const BatchRampup& r, int64_t global_batch, int64_t seq_len,
                         int64_t train_tokens) {
  int64_t steps = 0, consumed = 0;
  while (consumed * seq_len < train_tokens) {
    if (!r.enabled() || consumed > r.samples) {
      // Constant batch from here on: ceil of the remaining tokens over one step's.
      const int64_t left = train_tokens - consumed * seq_len, per_step = global_batch * seq_len;
      return steps + (left + per_step - 1) / per_step;
    }
    consumed += global_batch_at(r, global_batch, consumed);
    ++steps;
  }
  return steps;
}

absl::StatusOr<StepRanges> parse_step_ranges(const std::string& text) {
  StepRanges ranges;
  for (const std::string& item :
       std::vector<std::string>(absl::StrSplit(text, absl::ByAnyChar(" \t,"), absl::SkipEmpty()))) {
    const std::vector<std::string> ends = absl::StrSplit(item, '-');
    int64_t a = 0, b = 0;
    if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &a) || !absl::SimpleAtoi(ends[1], &b) ||
        a < 1 || b < a) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "skip_iterations: '%s' is not a range START-END of steps with 1 <= START <= END", item));
    }
    ranges.emplace_back(a, b);
  }
  std::sort(ranges.begin(), ranges.end());
  StepRanges merged;  // Megatron merges overlapping ranges (1-5 2-6 -> 1-6)
  for (const auto& r : ranges) {
    if (!merged.empty() && merged.back().second >= r.first) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

bool in_step_ranges(const StepRanges& ranges, int64_t step) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [step](const auto& r) { return r.first <= step && step <= r.second; });
}

int64_t sampler_index(int64_t consumed, int64_t micro_batch, int dp, int dp_rank, int64_t m) {
  return consumed + parallel::dp_sample_index(0, 0, micro_batch, dp, dp_rank, m, 0);
}

}  // namespace anvil::model
