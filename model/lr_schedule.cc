// Closed-form learning-rate schedule (see lr_schedule.h for the formulas).
#include "model/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace anvil::model {

absl::StatusOr<DecayStyle> parse_decay_style(std::string_view name) {
  if (name == "constant") return DecayStyle::kConstant;
  if (name == "linear") return DecayStyle::kLinear;
  if (name == "cosine") return DecayStyle::kCosine;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown decay style '%s' (expected constant, linear or cosine)", name));
}

std::string_view decay_style_name(DecayStyle style) {
  switch (style) {
    case DecayStyle::kConstant:
      return "constant";
    case DecayStyle::kLinear:
      return "linear";
    case DecayStyle::kCosine:
      return "cosine";
  }
  return "?";
}

absl::Status LrSchedule::validate() const {
  if (!(lr > 0.0)) return absl::InvalidArgumentError(absl::StrFormat("lr %g must be > 0", lr));
  if (!(min_lr >= 0.0) || min_lr > lr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("min_lr %g must be in [0, lr = %g]", min_lr, lr));
  }
  if (warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("warmup_steps %d must be >= 0", warmup_steps));
  }
  // Megatron asserts warmup < decay: the decay phase would otherwise divide by zero.
  if (style != DecayStyle::kConstant && warmup_steps >= decay_steps) {
    return absl::InvalidArgumentError(
        absl::StrFormat("warmup_steps %d must be < decay_steps %d for %s decay", warmup_steps,
                        decay_steps, decay_style_name(style)));
  }
  return absl::OkStatus();
}

double LrSchedule::at(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  if (warmup_steps > 0 && step <= warmup_steps) {
    return lr * static_cast<double>(step) / static_cast<double>(warmup_steps);
  }
  if (style == DecayStyle::kConstant) return lr;
  if (step >= decay_steps) return min_lr;
  const double ratio =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  const double coeff =
      style == DecayStyle::kCosine ? 0.5 * (std::cos(M_PI * ratio) + 1.0) : 1.0 - ratio;
  return min_lr + coeff * (lr - min_lr);
}

}  // namespace anvil::model
