// [train] precision and the loss-scale keys (see precision_config.h).
#include "model/train/precision_config.h"

#include <limits>

#include "absl/strings/str_format.h"

namespace anvil::model {

void add_precision_keys(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("train", "precision", ConfigType::kString, "auto",
        "Parameter (compute copy) and activation dtype; gradients, master weights and optimizer "
        "state are f32 in every mode. auto = bf16 on CUDA, fp32 on the CPU. bf16 = Megatron's "
        "--bf16; fp16 = --fp16, with loss scaling (dynamic unless loss_scale is set); fp32 = "
        "neither flag (f32 everywhere, also on CUDA: for GPUs without bf16 and for debugging "
        "numerics). docs/precision.md says which kernels each mode uses.",
        {"auto", "bf16", "fp16", "fp32"});
  s.add("train", "loss_scale", ConfigType::kFloat, "0",
        "Static loss scale (--loss-scale) for fp16 and bf16: the backward runs on loss * N and "
        "the gradients are divided by N before clipping; a step with an inf/nan gradient is "
        "skipped. 0 = dynamic loss scaling with fp16, none with bf16. Ignored with fp32 (as "
        "Megatron's FP32Optimizer).");
  s.add("train", "initial_loss_scale", ConfigType::kFloat, "4294967296",
        "First scale of dynamic loss scaling (--initial-loss-scale, 2^32).");
  s.add("train", "min_loss_scale", ConfigType::kFloat, "1",
        "Floor of dynamic loss scaling (--min-loss-scale). Overflow-skipped steps count towards "
        "max_skipped_steps only once the scale is at this floor.");
  s.add("train", "loss_scale_window", ConfigType::kInt, "1000",
        "Dynamic loss scaling doubles the scale after this many consecutive steps without an "
        "inf/nan gradient (--loss-scale-window).");
  s.add("train", "hysteresis", ConfigType::kInt, "2",
        "Dynamic loss scaling halves the scale from the N-th overflow on (--hysteresis); the "
        "count is restored only when the scale grows, as Megatron's DynamicGradScaler.");
}

absl::StatusOr<PrecisionConfig> parse_precision_config(const engine::Config& c) {
  PrecisionConfig p;
  p.mode = c.get_string("train", "precision");
  p.loss_scale = c.get_float("train", "loss_scale");
  if (!(p.loss_scale >= 0.0) || p.loss_scale == std::numeric_limits<double>::infinity()) {
    return c.error(
        "train", "loss_scale",
        absl::StrFormat("must be a finite number >= 0 (0 = dynamic), got %g", p.loss_scale));
  }
  LossScalerConfig& d = p.dynamic;
  d.initial_scale = c.get_float("train", "initial_loss_scale");
  d.min_scale = c.get_float("train", "min_loss_scale");
  d.window = c.get_int("train", "loss_scale_window");
  d.hysteresis = c.get_int("train", "hysteresis");
  if (!(d.initial_scale > 0.0) || d.initial_scale > 1e300) {
    return c.error("train", "initial_loss_scale",
                   absl::StrFormat("must be a finite number > 0, got %g", d.initial_scale));
  }
  if (!(d.min_scale > 0.0) || d.min_scale > d.initial_scale) {
    return c.error("train", "min_loss_scale",
                   absl::StrFormat("must be > 0 and <= initial_loss_scale %g, got %g",
                                   d.initial_scale, d.min_scale));
  }
  if (d.window < 1) {
    return c.error("train", "loss_scale_window", absl::StrFormat("must be >= 1, got %d", d.window));
  }
  if (d.hysteresis < 1) {
    return c.error("train", "hysteresis", absl::StrFormat("must be >= 1, got %d", d.hysteresis));
  }
  return p;
}

absl::StatusOr<engine::DType> precision_act_dtype(const std::string& precision,
                                                  engine::Device device) {
  using engine::DType;
  if (precision == "auto") return device == engine::Device::kCuda ? DType::kBF16 : DType::kF32;
  if (precision == "bf16") return DType::kBF16;
  if (precision == "fp16") return DType::kF16;
  if (precision == "fp32") return DType::kF32;
  return absl::InvalidArgumentError(
      absl::StrFormat("[train] precision: expected auto, bf16, fp16 or fp32, got '%s'", precision));
}

LossScalerConfig loss_scaler_config(const PrecisionConfig& p, engine::DType act) {
  LossScalerConfig s = p.dynamic;
  const bool half = act == engine::DType::kF16 || act == engine::DType::kBF16;
  if (half && p.loss_scale > 0.0) {
    s.mode = LossScaling::kStatic;
    s.static_scale = p.loss_scale;
  } else if (act == engine::DType::kF16) {
    s.mode = LossScaling::kDynamic;
  } else {
    s.mode = LossScaling::kNone;
  }
  return s;
}

std::string describe_precision(engine::DType act, const LossScalerConfig& s) {
  const std::string name(engine::dtype_name(act));
  if (act == engine::DType::kF32 || act == engine::DType::kF64) return name;
  std::string out = name + " parameters/activations, f32 master weights, gradients and AdamW state";
  if (s.mode == LossScaling::kDynamic) {
    out += absl::StrFormat("; dynamic loss scaling from %.0f", s.initial_scale);
  } else if (s.mode == LossScaling::kStatic) {
    out += absl::StrFormat("; static loss scale %g", s.static_scale);
  }
  return out;
}

}  // namespace anvil::model
