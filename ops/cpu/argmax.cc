// CPU twin of the row argmax (reference for the CUDA kernel):
//   out[r] = first index of the largest of x[r, 0 .. cols)   (=)   NaN counts as the largest.
// A plain left-to-right scan that replaces the best only on a strictly larger value (or a
// first NaN), so ties keep the smallest index.
#include "ops/argmax.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {

void row_argmax(const ArgmaxArgs& a, TensorView out, ConstTensorView x, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::row_argmax", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xp = x.as<T>();         // [rows, ld]
    int32_t* o = out.as<int32_t>();  // [rows]
    for (int64_t r = 0; r < a.rows; ++r) {
      int64_t best = 0;
      double best_v = load(xp, r * a.ld);
      for (int64_t c = 1; c < a.cols && !std::isnan(best_v); ++c) {
        const double v = load(xp, r * a.ld + c);
        if (std::isnan(v) || v > best_v) {
          best = c;
          best_v = v;
        }
      }
      o[r] = static_cast<int32_t>(best);
    }
  });
}

}  // namespace anvil::ops::cpu
