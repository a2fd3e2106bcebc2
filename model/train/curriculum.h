// Sequence-length curriculum learning ([curriculum], Megatron-DeepSpeed's
// examples/curriculum_learning with DeepSpeed's CurriculumScheduler,
// deepspeed/runtime/data_pipeline/curriculum_scheduler.py). The difficulty of step s (1-based,
// the fork's update_difficulty(args.iteration + 1)) is a sequence length:
//   fixed_linear:   d = floor((s / total)^(1/1) * (max - min) + min)
//   fixed_root:     d = floor((s / total)^(1/root_degree) * (max - min) + min)
//                   both then d -= d % difficulty_step, d = min(d, max)
//   fixed_discrete: difficulty[i] for the first i with s <= max_step[i], the last difficulty
//                   after max_step's last entry.
// The scheduler only updates while its current difficulty is below max_difficulty (starting
// from min_difficulty at construction): once a step reached max (or beyond), later steps keep
// that value. The fork trains each step on the first d tokens of every sample (tokens, labels,
// loss mask, position ids truncated, pretrain_gpt.py get_batch), counts consumed tokens as
// samples * d (what the token-based lr decay sees), and evaluates at the full seq_len.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config.h"

namespace anvil::model {

enum class CurriculumSchedule { kFixedLinear, kFixedRoot, kFixedDiscrete };

struct CurriculumConfig {
  bool enabled = false;
  CurriculumSchedule schedule = CurriculumSchedule::kFixedLinear;
  int64_t min_difficulty = 8;
  int64_t max_difficulty = 1024;
  int64_t total_curriculum_step = 0;  // fixed_linear, fixed_root
  int64_t difficulty_step = 8;        // fixed_linear, fixed_root
  int64_t root_degree = 2;            // fixed_root
  std::vector<int64_t> difficulty;    // fixed_discrete: one more entry than max_step
  std::vector<int64_t> max_step;      // fixed_discrete
};

// DeepSpeed's get_difficulty(step): the schedule's value at `step`, without the scheduler's
// "stop at max_difficulty" state.
int64_t curriculum_difficulty(const CurriculumConfig& c, int64_t step);

// The sequence length of step `step` (1-based) of a run whose scheduler updated at every step
// from 1: DeepSpeed's update_difficulty, including its stop once max_difficulty is reached.
// Capped at seq_len (the samples' length).
int64_t curriculum_seqlen(const CurriculumConfig& c, int64_t step, int64_t seq_len);

// Adds the [curriculum] keys to bin/train's schema.
void add_curriculum_schema(engine::ConfigSchema& schema);

// Reads and validates [curriculum]: the schedule's keys (DeepSpeed's asserts as errors),
// 1 <= min_difficulty <= max_difficulty <= seq_len, positive steps.
absl::StatusOr<CurriculumConfig> parse_curriculum_config(const engine::Config& c, int64_t seq_len);

}  // namespace anvil::model
