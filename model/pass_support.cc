// Reading small results back to the host (see pass_support.h).
#include "model/pass_support.h"

#include <cstdint>
#include <string>

#include "engine/memory.h"
#include "engine/status.h"

namespace anvil::model {

using engine::DType;

std::vector<double> read_back(engine::ConstTensorView v, engine::Stream& s) {
  const int64_t n = v.numel();
  std::vector<double> out(static_cast<size_t>(n));
  if (v.dtype == DType::kF64) {
    engine::copy(engine::make_view(out.data(), DType::kF64, engine::Device::kCpu, {n}), v, s);
    s.synchronize();
    return out;
  }
  ANVIL_CHECK_MSG(v.dtype == DType::kF32, "read_back of " + engine::describe(v));
  std::vector<float> f(static_cast<size_t>(n));
  engine::copy(engine::make_view(f.data(), DType::kF32, engine::Device::kCpu, {n}), v, s);
  s.synchronize();
  for (int64_t i = 0; i < n; ++i) out[i] = f[i];
  return out;
}

}  // namespace anvil::model
