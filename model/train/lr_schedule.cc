// Megatron's AnnealingLR: the closed form and the scheduler (see lr_schedule.h).
#include "model/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace anvil::model {
namespace {

// get_lr() after the warmup: the decay of `style` at ratio r in [0, 1].
double decayed(const LrSchedule& s, double ratio) {
  const double coeff =
      s.style == DecayStyle::kCosine ? 0.5 * (std::cos(M_PI * ratio) + 1.0) : 1.0 - ratio;
  return s.min_lr + coeff * (s.lr - s.min_lr);
}

// get_lr() without token-based decay at position n, W and D in the same units.
double anneal(const LrSchedule& s, double n, double warmup, double decay) {
  if (warmup > 0 && n <= warmup) return s.lr * n / warmup;
  if (s.style == DecayStyle::kConstant) return s.lr;
  if (n > decay) return s.min_lr;
  return decayed(s, (n - warmup) / (decay - warmup));
}

}  // namespace

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

int64_t LrSchedule::decay_in_samples(int64_t global_batch) const {
  return decay_samples > 0 ? decay_samples : decay_steps * global_batch;
}

double LrSchedule::warmup_in_samples(int64_t global_batch) const {
  if (warmup_fraction > 0.0) {
    return warmup_fraction * static_cast<double>(decay_in_samples(global_batch));
  }
  return static_cast<double>(warmup_samples > 0 ? warmup_samples : warmup_steps * global_batch);
}

absl::Status LrSchedule::validate(int64_t global_batch) const {
  if (!(lr > 0.0)) return absl::InvalidArgumentError(absl::StrFormat("lr %g must be > 0", lr));
  if (!(min_lr >= 0.0) || min_lr > lr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("min_lr %g must be in [0, lr = %g]", min_lr, lr));
  }
  if (warmup_steps < 0 || warmup_samples < 0 || decay_tokens < 0 || !(warmup_fraction >= 0.0) ||
      warmup_fraction > 1.0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "warmup_steps %d, warmup_samples %d, decay_tokens %d must be >= 0 and warmup_fraction %g "
        "in [0, 1]",
        warmup_steps, warmup_samples, decay_tokens, warmup_fraction));
  }
  // Megatron asserts decay_steps > 0 and warmup < decay: the decay would divide by zero.
  const double w = warmup_in_samples(global_batch);
  const int64_t d = decay_in_samples(global_batch);
  if (style != DecayStyle::kConstant && !(w < static_cast<double>(d))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the warmup (%g samples) must end before the decay does (%d samples; warmup_steps %d, "
        "decay_steps %d at global batch %d) for %s decay",
        w, d, warmup_steps, decay_steps, global_batch, decay_style_name(style)));
  }
  return absl::OkStatus();
}

double LrSchedule::at(int64_t step) const {
  return anneal(*this, static_cast<double>(std::max<int64_t>(step, 0)),
                static_cast<double>(warmup_steps), static_cast<double>(decay_steps));
}

double LrSchedule::at_samples(int64_t samples, int64_t global_batch) const {
  return anneal(*this, static_cast<double>(std::max<int64_t>(samples, 0)),
                warmup_in_samples(global_batch),
                static_cast<double>(decay_in_samples(global_batch)));
}

LrScheduler::LrScheduler(const LrSchedule& schedule, int64_t global_batch)
    : schedule_(schedule),
      warmup_(schedule.warmup_in_samples(global_batch)),
      decay_(schedule.decay_in_samples(global_batch)) {
  update_lr();  // Megatron's constructor calls step(0)
}

void LrScheduler::step(int64_t increment, int64_t consumed_tokens) {
  state_.tokens = consumed_tokens;
  state_.samples += increment;
  update_lr();
}

void LrScheduler::restore(const LrSchedulerState& s) {
  state_ = s;
  update_lr();
}

void LrScheduler::update_lr() {
  const LrSchedule& s = schedule_;
  const double n = static_cast<double>(state_.samples);
  if (s.decay_tokens <= 0) {
    lr_ = anneal(s, n, warmup_, static_cast<double>(decay_));
    return;
  }
  if (warmup_ > 0 && n <= warmup_) {
    // Megatron records the tokens seen when the position is exactly W: the decay counts from it.
    if (n == warmup_) state_.warmup_tokens = state_.tokens;
    lr_ = s.lr * n / warmup_;
    return;
  }
  if (s.style == DecayStyle::kConstant) {
    lr_ = s.lr;
    return;
  }
  if (state_.tokens > s.decay_tokens) {
    lr_ = s.min_lr;
    return;
  }
  lr_ = decayed(s, static_cast<double>(state_.tokens - state_.warmup_tokens) /
                       static_cast<double>(s.decay_tokens - state_.warmup_tokens));
}

}  // namespace anvil::model
