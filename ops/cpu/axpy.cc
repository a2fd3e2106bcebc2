// CPU twin of AXPY (reference for the CUDA kernel):
//   y[i] += alpha * x[i]   (+=)
// Math in double, rounded once to the storage type (f32/f64/bf16; bf16 through f32 as the
// device does). x may be y itself: each element is read before it is written.
#include "ops/axpy.h"

#include <cstdint>
#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {

void axpy(float alpha, TensorView y, ConstTensorView x, Stream& /*stream*/) {
  const double a = alpha;
  const int64_t n = x.numel();
  dispatch_float(x.dtype, "cpu::axpy", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xp = x.as<T>();  // [n]
    T* yp = y.as<T>();        // [n]
    for (int64_t i = 0; i < n; ++i) store(yp, i, load(yp, i) + a * load(xp, i));
  });
}

}  // namespace anvil::ops::cpu
