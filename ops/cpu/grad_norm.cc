// CPU twin of the squared L2 norm:  out[0] += sum_i x_i^2  (+=), summed in double for f32 or
// f64 x (out has x's dtype). The workspace is unused; NaN/inf in x propagate to out.
#include "ops/grad_norm.h"

#include <cstdint>
#include <string>

#include "engine/status.h"

namespace anvil::ops::cpu {
namespace {

template <typename T>
void sum_squares_loop(T* out, const T* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  out[0] = static_cast<T>(static_cast<double>(out[0]) + acc);
}

}  // namespace

void sum_squares(TensorView out, ConstTensorView x, Workspace /*ws*/, Stream& /*stream*/) {
  switch (x.dtype) {
    case engine::DType::kF32:
      sum_squares_loop(out.as<float>(), x.as<float>(), x.numel());
      break;
    case engine::DType::kF64:
      sum_squares_loop(out.as<double>(), x.as<double>(), x.numel());
      break;
    default:
      ANVIL_CHECK_MSG(false, "sum_squares (cpu): unsupported dtype " +
                                 std::string(engine::dtype_name(x.dtype)));
  }
}

}  // namespace anvil::ops::cpu
