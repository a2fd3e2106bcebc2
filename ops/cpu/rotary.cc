// CPU twin of rotary position embedding, rotate_half layout (reference for the CUDA kernels):
//   for each row r, head h, i < half = rot_dim/2, theta = f32(pos_r) * inv_freq_i (f32):
//   forward : (x_i, x_{i+half}) <- (x_i c - x_{i+half} s, x_{i+half} c + x_i s)   (= in place)
//   backward: (d_i, d_{i+half}) <- (d_i c + d_{i+half} s, d_{i+half} c - d_i s)   (= in place)
// with c = cos theta, s = sin theta taken in double from the f32 angle; dims [rot_dim, head_dim)
// untouched. Rotation in double, one rounding per stored element. f32/f64/bf16 storage.
#include "ops/rotary.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cpu/scalar_io.h"
#include "ops/rotary_detail.h"

namespace anvil::ops::cpu {
namespace {

// sign = +1: forward rotation; -1: its transpose (backward).
void rotate(const RotaryArgs& a, TensorView x, ConstTensorView positions, double sign) {
  const int64_t half = a.rot_dim / 2, ld = x.strides[0];
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = detail::rotary_inv_freq(a.base, i, a.rot_dim, a.scaling);
  const int32_t* pos = positions.as<int32_t>();
  dispatch_float(x.dtype, "cpu::rotary", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* xp = x.as<T>();
    for (int64_t r = 0; r < a.rows; ++r) {
      for (int64_t i = 0; i < half; ++i) {
        const float theta = static_cast<float>(pos[r]) * inv_freq[i];
        const double c = std::cos(static_cast<double>(theta));
        const double s = sign * std::sin(static_cast<double>(theta));
        for (int64_t h = 0; h < a.heads; ++h) {
          const int64_t o = r * ld + h * a.head_dim + i;
          const double lo = load(xp, o), hi = load(xp, o + half);
          store(xp, o, lo * c - hi * s);
          store(xp, o + half, hi * c + lo * s);
        }
      }
    }
  });
}

}  // namespace

void rotary_forward(const RotaryArgs& args, TensorView x, ConstTensorView positions,
                    Stream& /*stream*/) {
  rotate(args, x, positions, 1.0);
}

void rotary_backward(const RotaryArgs& args, TensorView dx, ConstTensorView positions,
                     Stream& /*stream*/) {
  rotate(args, dx, positions, -1.0);
}

}  // namespace anvil::ops::cpu
