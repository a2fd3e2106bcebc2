// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so the value for (seed, counter) is the same on the CPU and the GPU
// and needs no state. Dropout uses counter = offset + element index, which lets backward and
// recomputation regenerate the mask instead of storing it. Usable from host and device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ANVIL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ANVIL_HOST_DEVICE inline
#endif

namespace anvil::engine {

struct Philox4 {
  uint32_t v[4];
};

ANVIL_HOST_DEVICE void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// Four 32-bit random words for a 128-bit counter (c0..c3) and a 64-bit key.
ANVIL_HOST_DEVICE Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, c0, &hi0, &lo0);
    philox_mulhilo(kMul1, c2, &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform float in [0, 1) from 24 random bits (exact in f32 on both sides).
ANVIL_HOST_DEVICE float philox_uniform(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// The four words of elements [4 (index / 4), 4 (index / 4) + 4) of the stream (seed, offset):
// one Philox call at counter offset + index / 4.
ANVIL_HOST_DEVICE Philox4 philox_block_at(uint64_t seed, uint64_t offset, uint64_t index) {
  const uint64_t ctr = offset + index / 4;
  return philox4x32_10(static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32), 0u, 0u,
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The uniform for element `index` of the stream (seed, offset): counter = offset + index/4,
// word index%4. Identical on host and device.
ANVIL_HOST_DEVICE float philox_uniform_at(uint64_t seed, uint64_t offset, uint64_t index) {
  return philox_uniform(philox_block_at(seed, offset, index).v[index % 4]);
}

}  // namespace anvil::engine
