// [train] precision and loss-scaling keys (Megatron's --bf16 / --fp16 / neither and its loss-scale
// flags): their schema entries, their parsing, and what they resolve to on a device.
//   precision   auto: CUDA -> bf16, CPU -> fp32 (the default)
//               bf16: bf16 parameters (compute copy) and activations
//               fp16: f16 parameters and activations, with loss scaling (dynamic by default)
//               fp32: f32 everywhere
//   Gradients, master weights and optimizer state are f32 in every mode.
// Loss scaling (model/train/loss_scaler.h), as Megatron's get_megatron_optimizer: fp16 -> dynamic
// (or static when loss_scale > 0); bf16 -> static when loss_scale > 0, else none; fp32 -> none
// (Megatron's FP32Optimizer has no scaler: loss_scale is ignored there).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/config.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "model/train/loss_scaler.h"

namespace anvil::model {

struct PrecisionConfig {
  std::string mode = "auto";  // auto | bf16 | fp16 | fp32
  double loss_scale = 0.0;    // > 0: static scale (--loss-scale); 0: dynamic with fp16
  LossScalerConfig dynamic;   // initial/min scale, window, hysteresis (mode unused)
};

// Declares [train] precision, loss_scale, initial_loss_scale, min_loss_scale,
// loss_scale_window and hysteresis in `s` (train_config_schema()).
void add_precision_keys(engine::ConfigSchema& s);

// The keys' values, checked (Config::error naming the key).
absl::StatusOr<PrecisionConfig> parse_precision_config(const engine::Config& c);

// The activation (and compute-parameter) dtype of `precision` on `device`; InvalidArgument for
// an unknown name.
absl::StatusOr<engine::DType> precision_act_dtype(const std::string& precision,
                                                  engine::Device device);

// The loss scaler of a run whose activations are `act` (the table in the header comment).
LossScalerConfig loss_scaler_config(const PrecisionConfig& p, engine::DType act);

// For the start-up log, e.g. "f16 parameters/activations, f32 master weights, gradients and
// AdamW state; dynamic loss scaling from 4294967296" (or "f32" alone when act is f32).
std::string describe_precision(engine::DType act, const LossScalerConfig& s);

}  // namespace anvil::model
