// AdamW with f32 master weights and decoupled weight decay (Loshchilov & Hutter), over a flat
// range of parameters:
//   g = grad * grad_scale                      (grad_scale folds in clipping / loss unscaling)
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2                                 (updated)
//   master -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * master ) (updated)
//   param = cast(master)                     (=, the bf16 compute copy; skipped when empty)
// Callers pass weight_decay = 0 for biases and norm parameters. With device_scale (step_scale's
// output, ops/step_scale.h) grad_scale comes from the device and a set skip flag leaves every
// tensor unchanged, so clipping and the overflow check need no host read.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct AdamWArgs {
  float lr;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step;  // 1-based, for bias correction
  float grad_scale = 1.0f;
  // Empty, or [3] f32 on the stream's device {grad_scale, skip, norm}: replaces grad_scale;
  // skip != 0 skips the update.
  ConstTensorView device_scale;
};

// master, m, v, grad: [n] f32; param: [n] act or empty.
void adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                  TensorView param, ConstTensorView grad, Stream& stream);

// Same-name twins behind the dispatcher. CPU: master/m/v/grad f32 or f64 (all one dtype), param
// f32, f64 or bf16, arithmetic in that dtype. CUDA: f32 state, param f32 or bf16 (rounded to
// nearest even).
namespace cpu {
void adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                  TensorView param, ConstTensorView grad, Stream& stream);
}  // namespace cpu
namespace cuda {
void adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                  TensorView param, ConstTensorView grad, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
