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

// Saved dropout keep bits (AttentionMasks::dropout_keep): one 32-bit word for each (sample b,
// head h of the call, 16-query strip, 64-key group, lane), holding the 32 elements of that
// strip x group that lane (g, t) of an mma.sync m-tile holds in its accumulators, so the CUDA
// forward and dq kernels move one word a thread. Element (i, j) is bit
//   4 ((j % 64) / 8) + 2 ((i % 16) / 8) + j % 2   of word   (((b H + h) S + i / 16) G + j / 64) 32
//   + 4 (i % 8) + (j % 8) / 2,   S = ceil(Tq / 16) strips, G = ceil(Tk / 64) groups.
ANVIL_HOST_DEVICE int64_t keep_strips(int64_t q_len) { return (q_len + 15) / 16; }
ANVIL_HOST_DEVICE int64_t keep_groups(int64_t kv_len) { return (kv_len + 63) / 64; }
ANVIL_HOST_DEVICE int64_t keep_word(int64_t b, int64_t h, int64_t heads, int64_t i, int64_t j,
                                    int64_t q_len, int64_t kv_len) {
  return (((b * heads + h) * keep_strips(q_len) + i / 16) * keep_groups(kv_len) + j / 64) * 32 +
         4 * (i % 8) + (j % 8) / 2;
}
ANVIL_HOST_DEVICE int keep_bit(int64_t i, int64_t j) {
  return static_cast<int>(4 * ((j % 64) / 8) + 2 * ((i % 16) / 8) + j % 2);
}

}  // namespace anvil::ops::detail
