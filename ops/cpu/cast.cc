// CPU twin of the elementwise dtype conversion y = (dst dtype) x  (=):
// f32/bf16/f16/f64 in any pair, via engine::f32_to_bf16 / f32_to_f16 (round to nearest even,
// as __float2bfloat16_rn / __float2half_rn). f64 -> bf16/f16 rounds to f32 first (twice).
// Equal dtypes copy the bytes (nothing when y aliases x).
#include "ops/cast.h"

#include <cstring>
#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {

void cast(TensorView y, ConstTensorView x, Stream& /*stream*/) {
  if (x.dtype == y.dtype) {
    if (y.data != x.data) std::memmove(y.data, x.data, x.bytes());
    return;
  }
  const int64_t n = x.numel();
  dispatch_float(x.dtype, "cpu::cast", [&](auto xtag) {
    using S = std::remove_pointer_t<decltype(xtag)>;
    dispatch_float(y.dtype, "cpu::cast", [&](auto ytag) {
      using D = std::remove_pointer_t<decltype(ytag)>;
      const S* xp = x.as<S>();
      D* yp = y.as<D>();
      // load() is exact (every source value is a double); store() rounds once to D (f64 ->
      // bf16/f16 goes through f32).
      for (int64_t i = 0; i < n; ++i) store(yp, i, load(xp, i));
    });
  });
}

}  // namespace anvil::ops::cpu
