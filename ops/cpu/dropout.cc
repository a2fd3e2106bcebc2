// CPU twin of inverted dropout (reference for the CUDA kernel):
//   keep_i = philox_uniform_at(seed, offset, i) >= p
//   forward : y_i = keep_i ? x_i * scale : 0,   backward: dx_i = keep_i ? dy_i * scale : 0   (=)
// scale = 1.0f / (1.0f - p) computed in f32 exactly as the GPU launcher does; the product of an
// f32 (or bf16) value and an f32 scale is exact in double, so storing it rounds once, like the
// GPU's f32 multiply: f32/bf16 outputs match the GPU bit for bit. f64 uses 1 / (1 - p) in double.
// y may alias x.
#include "ops/dropout.h"

#include <type_traits>

#include "engine/philox.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

// out, in: [n] T (may alias).
template <typename T>
void apply_mask(const DropoutArgs& args, T* out, const T* in, int64_t n) {
  const double scale = std::is_same_v<T, double> ? 1.0 / (1.0 - static_cast<double>(args.p))
                                                 : static_cast<double>(1.0f / (1.0f - args.p));
  for (int64_t i = 0; i < n; ++i) {
    const bool keep =
        engine::philox_uniform_at(args.seed, args.offset, static_cast<uint64_t>(i)) >= args.p;
    store(out, i, keep ? load(in, i) * scale : 0.0);
  }
}

}  // namespace

void dropout_forward(const DropoutArgs& args, TensorView y, ConstTensorView x, Stream& /*stream*/) {
  dispatch_float(x.dtype, "cpu::dropout_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    apply_mask<T>(args, y.as<T>(), x.as<T>(), x.numel());
  });
}

void dropout_backward(const DropoutArgs& args, TensorView dx, ConstTensorView dy,
                      Stream& /*stream*/) {
  dispatch_float(dy.dtype, "cpu::dropout_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    apply_mask<T>(args, dx.as<T>(), dy.as<T>(), dy.numel());
  });
}

}  // namespace anvil::ops::cpu
