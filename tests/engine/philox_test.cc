// Known-answer tests for engine/philox.h: Philox4x32-10 against the Random123 KAT vectors
// (kat_vectors, "philox4x32 10"), plus the properties dropout relies on: philox_uniform_at reads
// word index % 4 of counter offset + index / 4, and uniforms lie in [0, 1).
#include "engine/philox.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace anvil::engine {
namespace {

struct Kat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t want[4];
};

TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const Philox4 r = philox4x32_10(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(r.v[i], k.want[i]) << std::hex << "ctr0=0x" << k.ctr[0] << " word " << i;
    }
  }
}

TEST(Philox, UniformAtUsesCounterOffsetPlusIndexOver4) {
  const uint64_t seed = 0x0123456789abcdefull, offset = (uint64_t{1} << 32) + 7;
  for (uint64_t index = 0; index < 64; ++index) {
    const uint64_t ctr = offset + index / 4;
    const Philox4 r =
        philox4x32_10(static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32), 0, 0,
                      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    EXPECT_EQ(philox_uniform_at(seed, offset, index), philox_uniform(r.v[index % 4])) << index;
  }
}

TEST(Philox, UniformRangeAndMean) {
  EXPECT_EQ(philox_uniform(0u), 0.0f);
  EXPECT_LT(philox_uniform(0xffffffffu), 1.0f);
  double sum = 0.0;
  const int n = 1 << 16;
  for (int i = 0; i < n; ++i) {
    const float u = philox_uniform_at(42, 0, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  // Mean of n uniforms: standard deviation sqrt(1/12/n) ~ 0.0011; 5 sigma.
  EXPECT_NEAR(sum / n, 0.5, 0.0057);
}

}  // namespace
}  // namespace anvil::engine
