// The rotary frequencies, shared by the CPU twin and the CUDA kernels so both rotate by the same
// f32 angle: inv_freq_i = 1 / base^(2i / rot_dim), computed as HF LlamaRotaryEmbedding and
// Megatron do in f32 (the exponent 2i/rot_dim rounded to f32, base^e rounded to f32, then the
// f32 reciprocal); the power itself is taken in double so host and device round the same value.
// The angle is then theta = f32(pos) * inv_freq_i, one f32 product (HF's f32 matmul of
// inv_freq by position ids).
// rotary_inv_freq applies HF's rope_scaling (ops/rotary.h's RotaryScaling) to that value, each
// operation in f32 in the order transformers' modeling_rope_utils writes it (Python scalars
// rounded to f32 where torch would: factor, the wavelength bounds, 2 pi).
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/philox.h"  // ANVIL_HOST_DEVICE
#include "ops/rotary.h"

namespace anvil::ops::detail {

ANVIL_HOST_DEVICE float rotary_inv_freq(float base, int64_t i, int64_t rot_dim) {
  const float e = static_cast<float>(2 * i) / static_cast<float>(rot_dim);
  const float p = static_cast<float>(pow(static_cast<double>(base), static_cast<double>(e)));
  return 1.0f / p;
}

// f32 product and sum that nvcc never contracts into an fma (the CPU twin rounds each).
ANVIL_HOST_DEVICE float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ANVIL_HOST_DEVICE float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

ANVIL_HOST_DEVICE float rotary_inv_freq(float base, int64_t i, int64_t rot_dim,
                                        const RotaryScaling& sc) {
  const float f = rotary_inv_freq(base, i, rot_dim);
  if (sc.type == RotaryScalingType::kLinear) return f / sc.factor;
  if (sc.type != RotaryScalingType::kLlama3) return f;
  // Python: old / low_freq_factor etc. in double, compared with the f32 wavelength as f32.
  const double old = static_cast<double>(sc.original_max_position);
  const float low_wavelen = static_cast<float>(old / static_cast<double>(sc.low_freq_factor));
  const float high_wavelen = static_cast<float>(old / static_cast<double>(sc.high_freq_factor));
  const float wavelen = static_cast<float>(2.0 * 3.141592653589793) / f;
  const float scaled = wavelen > low_wavelen ? f / sc.factor : f;  // inv_freq_llama
  if (wavelen < high_wavelen || wavelen > low_wavelen) return scaled;
  const float smooth = (static_cast<float>(old) / wavelen - sc.low_freq_factor) /
                       static_cast<float>(static_cast<double>(sc.high_freq_factor) -
                                          static_cast<double>(sc.low_freq_factor));
  return add_rn(mul_rn(1.0f - smooth, scaled) / sc.factor, mul_rn(smooth, scaled));
}

}  // namespace anvil::ops::detail
