// Dispatcher of the device-side step scale (math in ops/step_scale.h): checks, then the twin.
#include "ops/step_scale.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/status.h"

namespace anvil::ops {

StepScale step_scale_of(const StepScaleArgs& args, double ss) {
  StepScale r;
  r.norm = std::sqrt(ss) / args.loss_scale;
  r.skip = !std::isfinite(r.norm);
  const double clip = args.max_norm > 0.0 ? std::min(1.0, args.max_norm / (r.norm + 1e-6)) : 1.0;
  r.grad_scale = r.skip ? 0.0f : static_cast<float>(clip / args.loss_scale);
  return r;
}

void step_scale(const StepScaleArgs& args, TensorView out, ConstTensorView ss, Stream& stream) {
  const engine::Device dev = stream.device();
  ANVIL_CHECK_MSG(args.loss_scale > 0.0,
                  "step_scale: loss_scale must be > 0, got " + std::to_string(args.loss_scale));
  ANVIL_CHECK_MSG(out.dtype == engine::DType::kF32 && out.numel() == 3 && out.is_contiguous() &&
                      out.device == dev,
                  "step_scale: out must be contiguous [3] f32 on the stream's device, got " +
                      engine::describe(out));
  ANVIL_CHECK_MSG(
      (ss.dtype == engine::DType::kF32 || ss.dtype == engine::DType::kF64) && ss.numel() == 1 &&
          ss.device == dev,
      "step_scale: ss must be [1] f32 or f64 on the stream's device, got " + engine::describe(ss));
  if (stream.is_cuda()) {
    cuda::step_scale(args, out, ss, stream);
  } else {
    cpu::step_scale(args, out, ss, stream);
  }
}

}  // namespace anvil::ops
