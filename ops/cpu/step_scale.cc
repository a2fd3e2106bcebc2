// CPU twin of the device-side step scale (math in ops/step_scale.h): the host formula, stored.
#include "ops/step_scale.h"

namespace anvil::ops::cpu {

void step_scale(const StepScaleArgs& args, TensorView out, ConstTensorView ss, Stream& /*stream*/) {
  const double sum =
      ss.dtype == engine::DType::kF64 ? *ss.as<double>() : static_cast<double>(*ss.as<float>());
  const StepScale r = step_scale_of(args, sum);
  float* o = out.as<float>();
  o[0] = r.grad_scale;
  o[1] = r.skip ? 1.0f : 0.0f;
  o[2] = static_cast<float>(r.norm);
}

}  // namespace anvil::ops::cpu
