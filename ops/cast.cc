// Dispatcher for the elementwise dtype conversion y = (dst dtype) x  (=), round to nearest even;
// y = x for equal dtypes. Checks dtypes, numel and devices, then runs the CPU or CUDA twin.
#include "ops/cast.h"

#include <string>

#include "engine/status.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

bool castable(DType t, bool cuda) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || (!cuda && t == DType::kF64);
}

}  // namespace

void cast(TensorView y, ConstTensorView x, Stream& stream) {
  const bool cuda = stream.is_cuda();
  const std::string want = std::string(" must be contiguous f32/bf16/f16") + (cuda ? "" : "/f64") +
                           " on " + std::string(engine::device_name(stream.device())) + ", got ";
  ANVIL_CHECK_MSG(castable(x.dtype, cuda) && (!x.empty() || x.numel() == 0) &&
                      x.device == stream.device() && x.is_contiguous(),
                  "cast: x" + want + describe(x));
  ANVIL_CHECK_MSG(castable(y.dtype, cuda) && (!y.empty() || y.numel() == 0) &&
                      y.device == stream.device() && y.is_contiguous(),
                  "cast: y" + want + describe(y));
  ANVIL_CHECK_MSG(y.numel() == x.numel(), "cast: y must have x's numel " +
                                              std::to_string(x.numel()) + ", got " + describe(y));
  if (x.numel() == 0) return;
  if (!cuda) {
    cpu::cast(y, x, stream);
  } else {
    cuda::cast(y, x, stream);
  }
}

}  // namespace anvil::ops
