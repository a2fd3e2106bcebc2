// Loss scaling for fp16 training, Megatron's grad scalers (megatron/optimizer/grad_scaler.py,
// BigScience fork). The backward runs on loss * S (the cross-entropy's d(loss)/d(token loss) is
// multiplied by S), so small fp16 activation gradients do not flush to zero; the optimizer
// divides the f32 gradients by S before clipping and the update.
//   static  (--loss-scale N):  S = N forever; an overflow only skips the step.
//   dynamic (--fp16 without --loss-scale), update(found_inf) after every step:
//     found_inf:  growth_tracker = 0; hysteresis_tracker -= 1;
//                 if hysteresis_tracker <= 0: S = max(S * backoff, min_scale)
//     else:       growth_tracker += 1; if growth_tracker == window:
//                   growth_tracker = 0; hysteresis_tracker = hysteresis; S = S * growth
//   with S0 = initial_scale, growth 2, backoff 0.5. The hysteresis tracker is reset only on a
//   growth (not by a clean step), exactly as Megatron: once it is used up every further
//   overflow halves S until the next growth.
// The state (S and both trackers: Megatron's grad_scaler state_dict) is saved in checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anvil::model {

enum class LossScaling { kNone, kStatic, kDynamic };

struct LossScalerConfig {
  LossScaling mode = LossScaling::kNone;
  double static_scale = 0.0;            // --loss-scale (kStatic)
  double initial_scale = 4294967296.0;  // --initial-loss-scale, 2^32
  double min_scale = 1.0;               // --min-loss-scale
  int64_t window = 1000;                // --loss-scale-window: clean steps before a growth
  int64_t hysteresis = 2;               // --hysteresis: overflows before the first backoff
  double growth = 2.0;                  // Megatron's growth_factor
  double backoff = 0.5;                 // Megatron's backoff_factor

  // InvalidArgument naming the value (Megatron's asserts: 0 < min_scale <= initial_scale,
  // window > 0, hysteresis > 0, static_scale > 0 when static).
  absl::Status validate() const;
};

// Megatron's grad_scaler state_dict: {scale, growth_tracker, hysteresis_tracker}.
struct LossScalerState {
  double scale = 1.0;
  int64_t growth_tracker = 0;
  int64_t hysteresis_tracker = 0;
};

class LossScaler {
 public:
  LossScaler() = default;  // kNone: scale 1, never changes
  explicit LossScaler(const LossScalerConfig& cfg);

  bool enabled() const { return cfg_.mode != LossScaling::kNone; }
  bool dynamic() const { return cfg_.mode == LossScaling::kDynamic; }
  double scale() const { return state_.scale; }
  // Whether the scale is as low as it can go (dynamic: min_scale; static and none: always),
  // i.e. an overflow now is not one the scaler can cure.
  bool at_floor() const { return !dynamic() || state_.scale <= cfg_.min_scale; }
  // After every trained step, with whether any gradient (on any rank) was inf or nan.
  void update(bool found_inf);

  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& s) { state_ = s; }

 private:
  LossScalerConfig cfg_;
  LossScalerState state_;
};

// A checkpoint manifest's "grad_scaler" object (Megatron's state_dict keys: scale, growth_tracker,
// hysteresis_tracker); empty for none. The scale is a power-of-two multiple of the configured
// one, stored exactly (JSON doubles round-trip).
std::map<std::string, double> loss_scaler_map(const std::optional<LossScalerState>& s);
// Back from a manifest: nullopt for an empty map; DataLoss naming a missing or bad field.
absl::StatusOr<std::optional<LossScalerState>> loss_scaler_from_map(
    const std::map<std::string, double>& m);

}  // namespace anvil::model
