// Megatron's constant and dynamic grad scalers (see loss_scaler.h).
#include "model/train/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::model {

absl::Status LossScalerConfig::validate() const {
  if (mode == LossScaling::kStatic && !(static_scale > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("loss_scale must be > 0 for static loss scaling, got %g", static_scale));
  }
  if (mode != LossScaling::kDynamic) return absl::OkStatus();
  if (!(min_scale > 0.0) || !(min_scale <= initial_scale)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dynamic loss scaling needs 0 < min_loss_scale <= initial_loss_scale, got %g and %g",
        min_scale, initial_scale));
  }
  if (window < 1 || hysteresis < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dynamic loss scaling needs loss_scale_window >= 1 and hysteresis >= 1, got %d and %d",
        window, hysteresis));
  }
  return absl::OkStatus();
}

LossScaler::LossScaler(const LossScalerConfig& cfg) : cfg_(cfg) {
  switch (cfg.mode) {
    case LossScaling::kNone:
      state_.scale = 1.0;
      break;
    case LossScaling::kStatic:
      state_.scale = cfg.static_scale;
      break;
    case LossScaling::kDynamic:
      state_.scale = cfg.initial_scale;
      state_.hysteresis_tracker = cfg.hysteresis;
      break;
  }
}

void LossScaler::update(bool found_inf) {
  if (!dynamic()) return;  // Megatron's ConstantGradScaler.update does nothing
  if (found_inf) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker -= 1;
    if (state_.hysteresis_tracker <= 0) {
      state_.scale = std::max(state_.scale * cfg_.backoff, cfg_.min_scale);
    }
    return;
  }
  state_.growth_tracker += 1;
  if (state_.growth_tracker == cfg_.window) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = cfg_.hysteresis;
    state_.scale *= cfg_.growth;
  }
}

std::map<std::string, double> loss_scaler_map(const std::optional<LossScalerState>& s) {
  if (!s) return {};
  return {{"scale", s->scale},
          {"growth_tracker", static_cast<double>(s->growth_tracker)},
          {"hysteresis_tracker", static_cast<double>(s->hysteresis_tracker)}};
}

absl::StatusOr<std::optional<LossScalerState>> loss_scaler_from_map(
    const std::map<std::string, double>& m) {
  if (m.empty()) return std::nullopt;
  auto get = [&](const char* key, bool integral) -> absl::StatusOr<double> {
    auto it = m.find(key);
    if (it == m.end() || !std::isfinite(it->second) ||
        (integral && it->second != std::floor(it->second))) {
      return absl::DataLossError(absl::StrCat("checkpoint: grad_scaler.", key, " is ",
                                              it == m.end() ? "missing" : "not a valid number",
                                              " (expected scale, growth_tracker, "
                                              "hysteresis_tracker)"));
    }
    return it->second;
  };
  LossScalerState s;
  ANVIL_ASSIGN_OR_RETURN(s.scale, get("scale", false));
  ANVIL_ASSIGN_OR_RETURN(const double growth, get("growth_tracker", true));
  ANVIL_ASSIGN_OR_RETURN(const double hysteresis, get("hysteresis_tracker", true));
  if (!(s.scale > 0.0)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint: grad_scaler.scale must be > 0, got ", s.scale));
  }
  s.growth_tracker = static_cast<int64_t>(growth);
  s.hysteresis_tracker = static_cast<int64_t>(hysteresis);
  return s;
}

}  // namespace anvil::model
