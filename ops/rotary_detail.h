// The rotary frequencies, shared by the CPU twin and the CUDA kernels so both rotate by the same
// f32 angle: inv_freq_i = 1 / base^(2i / rot_dim), computed as HF LlamaRotaryEmbedding and
// Megatron do in f32 (the exponent 2i/rot_dim rounded to f32, base^e rounded to f32, then the
// f32 reciprocal); the power itself is taken in double so host and device round the same value.
// The angle is then theta = f32(pos) * inv_freq_i, one f32 product (HF's f32 matmul of
// inv_freq by position ids).
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/philox.h"  // ANVIL_HOST_DEVICE

namespace anvil::ops::detail {

ANVIL_HOST_DEVICE float rotary_inv_freq(float base, int64_t i, int64_t rot_dim) {
  const float e = static_cast<float>(2 * i) / static_cast<float>(rot_dim);
  const float p = static_cast<float>(pow(static_cast<double>(base), static_cast<double>(e)));
  return 1.0f / p;
}

}  // namespace anvil::ops::detail
