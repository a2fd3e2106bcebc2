// The optimizer step's gradient scale from the global sum of squares, on the stream's device, so
// that clipping and the overflow check need no host read (ops/adamw.h reads the result):
//   norm  = sqrt(ss[0]) / loss_scale                  (the unscaled global gradient norm)
//   skip  = norm is not finite (NaN or inf: the update is skipped)
//   clip  = min(1, max_norm / (norm + 1e-6))          (Megatron's clip_grad_norm; 1 when
//                                                       max_norm <= 0)
//   out   = {skip ? 0 : clip / loss_scale, skip ? 1 : 0, norm}                        (=)
// Arithmetic in double, as the host computation it replaces; the scale is rounded to f32 last.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct StepScaleArgs {
  double loss_scale = 1.0;  // the scale the loss was multiplied by (1 without loss scaling)
  double max_norm = 0.0;    // [optim] clip_grad; <= 0: no clipping
};

// out: [3] f32 (=) {grad_scale, skip, norm}; ss: [1] f32 or f64, the sum of squares of the
// loss-scaled gradient over every rank.
void step_scale(const StepScaleArgs& args, TensorView out, ConstTensorView ss, Stream& stream);

// The host formula both twins follow (also the trainer's when it reads ss itself).
struct StepScale {
  float grad_scale;
  bool skip;
  double norm;
};
StepScale step_scale_of(const StepScaleArgs& args, double ss);

// Same-name twins behind the dispatcher (one element; the CUDA twin is one thread).
namespace cpu {
void step_scale(const StepScaleArgs& args, TensorView out, ConstTensorView ss, Stream& stream);
}  // namespace cpu
namespace cuda {
void step_scale(const StepScaleArgs& args, TensorView out, ConstTensorView ss, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
