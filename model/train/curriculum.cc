// Sequence-length curriculum (see curriculum.h): DeepSpeed's CurriculumScheduler as pure
// functions of the step, and the [curriculum] section.
#include "model/train/curriculum.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/status.h"

namespace anvil::model {
namespace {

// DeepSpeed's __fixed_root_get_difficulty: Python's float ** float is C's pow, math.floor an
// int, and % on a non-negative int the same as C++'s.
int64_t fixed_root(const CurriculumConfig& c, int64_t step, int64_t root_degree) {
  const double x =
      std::pow(static_cast<double>(step) / static_cast<double>(c.total_curriculum_step),
               1.0 / static_cast<double>(root_degree));
  int64_t d =
      static_cast<int64_t>(std::floor(x * static_cast<double>(c.max_difficulty - c.min_difficulty) +
                                      static_cast<double>(c.min_difficulty)));
  d -= d % c.difficulty_step;
  return std::min(d, c.max_difficulty);
}

// DeepSpeed's __fixed_discrete_get_difficulty (max_step need not be sorted there either).
int64_t fixed_discrete(const CurriculumConfig& c, int64_t step) {
  if (step > c.max_step.back()) return c.difficulty.back();
  for (size_t i = 0; i < c.max_step.size(); ++i) {
    if (step <= c.max_step[i]) return c.difficulty[i];
  }
  return c.difficulty.back();  // unreachable: step <= max_step.back()
}

absl::StatusOr<std::vector<int64_t>> parse_list(const engine::Config& c, const char* key) {
  std::vector<int64_t> out;
  for (absl::string_view part :
       absl::StrSplit(c.get_string("curriculum", key), absl::ByAnyChar(", "), absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return c.error("curriculum", key,
                     absl::StrFormat("\"%s\" is not an integer (expected a list like \"8, 64, "
                                     "1024\")",
                                     part));
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace

int64_t curriculum_difficulty(const CurriculumConfig& c, int64_t step) {
  switch (c.schedule) {
    case CurriculumSchedule::kFixedDiscrete:
      return fixed_discrete(c, step);
    case CurriculumSchedule::kFixedLinear:
      return fixed_root(c, step, 1);
    case CurriculumSchedule::kFixedRoot:
      return fixed_root(c, step, c.root_degree);
  }
  return c.max_difficulty;
}

int64_t curriculum_seqlen(const CurriculumConfig& c, int64_t step, int64_t seq_len) {
  // update_difficulty stops updating once the current difficulty reached max_difficulty. The
  // schedule's value changes only at step 1 and right after a max_step entry (fixed_discrete);
  // the root schedules are non-decreasing and capped at max, so their value never comes back
  // below it. The first such breakpoint at or above max, if any, holds from then on.
  int64_t d = curriculum_difficulty(c, step);
  if (c.schedule == CurriculumSchedule::kFixedDiscrete && d < c.max_difficulty) {
    std::vector<int64_t> points = {1};
    for (int64_t m : c.max_step) {
      if (m + 1 <= step && m + 1 > 1) points.push_back(m + 1);
    }
    std::sort(points.begin(), points.end());
    for (int64_t p : points) {
      const int64_t v = curriculum_difficulty(c, p);
      if (v >= c.max_difficulty) {
        d = v;
        break;
      }
    }
  }
  return std::min(d, seq_len);
}

void add_curriculum_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("curriculum", "enabled", ConfigType::kBool, "false",
        "Sequence-length curriculum learning (DeepSpeed's curriculum_learning as "
        "Megatron-DeepSpeed uses it): step s trains on the first curriculum_seqlen(s) tokens of "
        "every sample (inputs, targets, positions); evaluation uses the full [data] seq_len. "
        "GPT-family causal models only.");
  s.add("curriculum", "type", ConfigType::kString, "seqlen",
        "curriculum_type: seqlen (the only one Megatron-DeepSpeed implements).");
  s.add("curriculum", "schedule", ConfigType::kString, "fixed_linear",
        "schedule_type: fixed_linear | fixed_root | fixed_discrete.");
  s.add("curriculum", "min_difficulty", ConfigType::kInt, "8",
        "Sequence length at the start (fixed_linear, fixed_root).");
  s.add("curriculum", "max_difficulty", ConfigType::kInt, "1024",
        "Sequence length at the end of the curriculum (<= [data] seq_len); the scheduler stops "
        "changing once it reached it.");
  s.add("curriculum", "total_curriculum_step", ConfigType::kInt, "0",
        "Steps from min_difficulty to max_difficulty (fixed_linear, fixed_root).");
  s.add("curriculum", "difficulty_step", ConfigType::kInt, "8",
        "Every length is rounded down to a multiple of this (fixed_linear, fixed_root); "
        "DeepSpeed warns unless it is a multiple of 8.");
  s.add("curriculum", "root_degree", ConfigType::kInt, "2",
        "fixed_root: the root's degree (2 = square root).");
  s.add("curriculum", "difficulty", ConfigType::kString, "",
        "fixed_discrete: the lengths, e.g. \"64, 256, 1024\" (one more than max_step).");
  s.add("curriculum", "max_step", ConfigType::kString, "",
        "fixed_discrete: the last step of each length but the last, e.g. \"1000, 5000\".");
}

absl::StatusOr<CurriculumConfig> parse_curriculum_config(const engine::Config& c, int64_t seq_len) {
  CurriculumConfig k;
  k.enabled = c.get_bool("curriculum", "enabled");
  const std::string type = c.get_string("curriculum", "type");
  const std::string schedule = c.get_string("curriculum", "schedule");
  k.min_difficulty = c.get_int("curriculum", "min_difficulty");
  k.max_difficulty = c.get_int("curriculum", "max_difficulty");
  k.total_curriculum_step = c.get_int("curriculum", "total_curriculum_step");
  k.difficulty_step = c.get_int("curriculum", "difficulty_step");
  k.root_degree = c.get_int("curriculum", "root_degree");
  if (type != "seqlen") {
    return c.error("curriculum", "type", absl::StrFormat("\"%s\": expected seqlen", type));
  }
  if (schedule == "fixed_linear") {
    k.schedule = CurriculumSchedule::kFixedLinear;
  } else if (schedule == "fixed_root") {
    k.schedule = CurriculumSchedule::kFixedRoot;
  } else if (schedule == "fixed_discrete") {
    k.schedule = CurriculumSchedule::kFixedDiscrete;
  } else {
    return c.error(
        "curriculum", "schedule",
        absl::StrFormat("\"%s\": expected fixed_linear, fixed_root or fixed_discrete", schedule));
  }
  if (!k.enabled) return k;
  if (k.min_difficulty < 1 || k.min_difficulty > k.max_difficulty) {
    return c.error("curriculum", "min_difficulty",
                   absl::StrFormat("%d: must be in 1 .. [curriculum] max_difficulty %d",
                                   k.min_difficulty, k.max_difficulty));
  }
  if (k.max_difficulty > seq_len) {
    return c.error("curriculum", "max_difficulty",
                   absl::StrFormat("%d: must be <= [data] seq_len %d (the samples' length)",
                                   k.max_difficulty, seq_len));
  }
  if (k.schedule == CurriculumSchedule::kFixedDiscrete) {
    ANVIL_ASSIGN_OR_RETURN(k.difficulty, parse_list(c, "difficulty"));
    ANVIL_ASSIGN_OR_RETURN(k.max_step, parse_list(c, "max_step"));
    if (k.max_step.empty() || k.difficulty.size() != k.max_step.size() + 1) {
      return c.error("curriculum", "difficulty",
                     absl::StrFormat("fixed_discrete needs max_step (non-empty) and one more "
                                     "difficulty than max_step entries, got %d and %d",
                                     k.difficulty.size(), k.max_step.size()));
    }
    for (int64_t d : k.difficulty) {
      if (d < 1 || d > seq_len) {
        return c.error(
            "curriculum", "difficulty",
            absl::StrFormat("%d: every length must be in 1 .. [data] seq_len %d", d, seq_len));
      }
    }
    return k;
  }
  if (k.total_curriculum_step < 1) {
    return c.error(
        "curriculum", "total_curriculum_step",
        absl::StrFormat("must be >= 1 for %s, got %d", schedule, k.total_curriculum_step));
  }
  // A length below difficulty_step would round down to 0 tokens.
  if (k.difficulty_step < 1 || k.difficulty_step > k.min_difficulty) {
    return c.error("curriculum", "difficulty_step",
                   absl::StrFormat("%d: must be in 1 .. [curriculum] min_difficulty %d (lengths "
                                   "are rounded down to a multiple of it)",
                                   k.difficulty_step, k.min_difficulty));
  }
  if (k.schedule == CurriculumSchedule::kFixedRoot && k.root_degree < 1) {
    return c.error("curriculum", "root_degree",
                   absl::StrFormat("must be >= 1, got %d", k.root_degree));
  }
  return k;
}

}  // namespace anvil::model
