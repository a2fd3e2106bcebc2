// Overflow-checked size arithmetic: products that wrap int64 are detected (not wrapped to a
// small or negative size), limits compare exactly, byte sums saturate at SIZE_MAX.
#include "engine/checked_math.h"

#include "gtest/gtest.h"

namespace anvil::engine {
namespace {

TEST(CheckedMathTest, MulDetectsOverflow) {
  EXPECT_EQ(checked_mul(3, 5), std::optional<int64_t>(15));
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31),
            std::optional<int64_t>(int64_t{1} << 62));
  // 2^62 * 4 = 2^64 wraps to 0 in int64 arithmetic; d_model 2^62 with 1 head did exactly that.
  EXPECT_EQ(checked_mul(int64_t{1} << 62, 4), std::nullopt);
  EXPECT_EQ(checked_mul(INT64_MAX, 2), std::nullopt);
}

TEST(CheckedMathTest, ProductAndLimit) {
  EXPECT_EQ(checked_product({}), std::optional<int64_t>(1));
  EXPECT_EQ(checked_product({2, 3, 7}), std::optional<int64_t>(42));
  // The partial product overflows even though a later factor is 0: refused, not 0.
  EXPECT_EQ(checked_product({INT64_MAX, 2, 0}), std::nullopt);
  EXPECT_TRUE(product_within({int64_t{1} << 22, int64_t{1} << 22}, kMaxElements));
  EXPECT_FALSE(product_within({int64_t{1} << 22, (int64_t{1} << 22) + 1}, kMaxElements));
  EXPECT_FALSE(product_within({INT64_MAX, INT64_MAX}, INT64_MAX));
}

TEST(CheckedMathTest, ByteSumsSaturate) {
  EXPECT_EQ(saturating_add(1, 2), 3u);
  EXPECT_EQ(saturating_add(SIZE_MAX - 1, 2), SIZE_MAX);
  EXPECT_EQ(saturating_mul(size_t{1} << 40, size_t{1} << 20), size_t{1} << 60);
  EXPECT_EQ(saturating_mul(size_t{1} << 40, size_t{1} << 30), SIZE_MAX);
}

}  // namespace
}  // namespace anvil::engine
