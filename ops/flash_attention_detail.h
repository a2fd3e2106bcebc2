// Host/device helpers shared by the CPU twin and the CUDA kernels of ops/flash_attention.h, so
// both decide visibility and ALiBi slopes with the same code.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/philox.h"  // ANVIL_HOST_DEVICE

namespace anvil::ops::detail {

// Key j visible to query i of sample b (ops/flash_attention.h); null pointers: not used.
// prefix_end [B*Tq] widens the causal mask: keys j < prefix_end[b*Tq + i] are visible too.
ANVIL_HOST_DEVICE bool visible(bool causal, int64_t i, int64_t j, int64_t b, int64_t q_len,
                               int64_t kv_len, const int32_t* seg_q, const int32_t* seg_k,
                               const int32_t* kv_lengths, const int32_t* prefix_end = nullptr) {
  if (causal && j > i && (prefix_end == nullptr || j >= prefix_end[b * q_len + i])) return false;
  if (kv_lengths != nullptr && j >= kv_lengths[b]) return false;
  if (seg_q != nullptr && seg_q[b * q_len + i] != seg_k[b * kv_len + j]) return false;
  return true;
}

// Megatron-DeepSpeed's ALiBi slope of head k of n, in double then rounded to f32 (exp2 of a
// dyadic exponent is exact or within an ulp of double on both sides).
ANVIL_HOST_DEVICE float alibi_slope_of(int64_t k, int64_t n) {
  int64_t m = 1;
  while (m * 2 <= n) m *= 2;
  const double e = k < m ? -8.0 * static_cast<double>(k + 1) / static_cast<double>(m)
                         : -4.0 * static_cast<double>(2 * (k - m) + 1) / static_cast<double>(m);
  return static_cast<float>(::exp2(e));
}

}  // namespace anvil::ops::detail
