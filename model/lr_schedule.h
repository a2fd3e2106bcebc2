// Learning-rate schedule, Megatron's AnnealingLR (megatron/learning_rates.py) in closed form:
//   s <= W:            lr(s) = lr * s / W                     (linear warmup from 0; W > 0)
//   constant:          lr(s) = lr                              (after warmup)
//   s >= D:            lr(s) = min_lr                          (after the decay)
//   W < s < D:         r = (s - W) / (D - W),  lr(s) = min_lr + c(r) * (lr - min_lr)
//                      cosine: c = (cos(pi r) + 1) / 2,  linear: c = 1 - r
// `s` counts optimizer iterations from 1: the trainer uses lr(1) for its first step, so a run
// with W warmup steps reaches the peak lr at step W (Megatron's first step uses lr(0) = 0).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace anvil::model {

enum class DecayStyle { kConstant, kLinear, kCosine };

// "constant" | "linear" | "cosine"; InvalidArgument otherwise.
absl::StatusOr<DecayStyle> parse_decay_style(std::string_view name);
std::string_view decay_style_name(DecayStyle style);

struct LrSchedule {
  double lr = 3e-4;          // peak learning rate, reached at the end of warmup
  double min_lr = 0.0;       // floor of the decay
  int64_t warmup_steps = 0;  // W
  int64_t decay_steps = 0;   // D: the decay ends here (counted from step 0, warmup included)
  DecayStyle style = DecayStyle::kCosine;

  // InvalidArgument naming the numbers (lr < min_lr, W >= D for a decaying style, ...).
  absl::Status validate() const;
  double at(int64_t step) const;
};

}  // namespace anvil::model
