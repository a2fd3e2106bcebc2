// CUDA twin of the step scale (math in ops/step_scale.h): one thread, double arithmetic (IEEE
// sqrt and division, as the host's), so the scale equals the host formula's bit for bit.
#include "engine/cuda_check.h"
#include "ops/step_scale.h"

namespace anvil::ops::cuda {
namespace {

// out: [3] f32 (=); ss: [1] S.
template <typename S>
__global__ void step_scale_kernel(float* out, const S* ss, double loss_scale, double max_norm) {
  const double norm = sqrt(static_cast<double>(ss[0])) / loss_scale;
  const bool skip = !isfinite(norm);
  const double clip = max_norm > 0.0 ? fmin(1.0, max_norm / (norm + 1e-6)) : 1.0;
  out[0] = skip ? 0.0f : static_cast<float>(clip / loss_scale);
  out[1] = skip ? 1.0f : 0.0f;
  out[2] = static_cast<float>(norm);
}

}  // namespace

void step_scale(const StepScaleArgs& args, TensorView out, ConstTensorView ss, Stream& stream) {
  if (ss.dtype == engine::DType::kF64) {
    step_scale_kernel<<<1, 1, 0, stream.cuda_stream()>>>(out.as<float>(), ss.as<double>(),
                                                         args.loss_scale, args.max_norm);
  } else {
    step_scale_kernel<<<1, 1, 0, stream.cuda_stream()>>>(out.as<float>(), ss.as<float>(),
                                                         args.loss_scale, args.max_norm);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
