// bf16/f16 host conversions against independently derived bit patterns and closed forms.
#include "engine/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace anvil::engine {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1 + 2^-7: ties go to the even mantissa.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above the halfway point rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(INFINITY)), INFINITY);
}

TEST(DTypeTest, Bf16RoundTripIsExactForRepresentableValues) {
  for (uint32_t hi = 0; hi < 0x7f80; hi += 7) {
    uint32_t u = hi << 16;
    float f;
    std::memcpy(&f, &u, 4);
    EXPECT_EQ(bits_of(bf16_to_f32(f32_to_bf16(f))), u);
  }
}

TEST(DTypeTest, F16MatchesClosedForms) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.5f), 0xc100);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                      // rounds to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  // Every finite half round-trips exactly.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    EXPECT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << h;
    EXPECT_EQ(f32_to_f16(-f16_to_f32(static_cast<uint16_t>(h))), h | 0x8000) << h;
  }
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF64), 8u);
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
}

}  // namespace
}  // namespace anvil::engine
