// Overflow-checked integer arithmetic for sizes derived from a configuration (shapes, element
// and sample counts, byte counts), and the bounds anvil puts on them. A product of config values
// is computed with checked_mul / checked_product and compared with a limit before anything is
// allocated or iterated, so a huge value is an InvalidArgument naming the keys, never a
// wrapped size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace anvil::engine {

// One dimension of a tensor (vocabulary, positions, hidden sizes, batch and sequence lengths):
// token ids, positions and per-dimension kernel arguments are int32.
inline constexpr int64_t kMaxDimension = (int64_t{1} << 31) - 1;
// Elements of one tensor, parameters of a model, tokens of one step: 2^44 (17.6 T), far beyond
// any machine's memory yet small enough that a handful of such counts times 8 bytes fits int64.
inline constexpr int64_t kMaxElements = int64_t{1} << 44;
// Samples of a run (the data index holds a few int64 entries per sample): 2^40 (1.1 T).
inline constexpr int64_t kMaxSamples = int64_t{1} << 40;

// a * b, or nullopt when it overflows int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of `factors`, or nullopt when any partial product overflows int64.
inline std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  }
  return out;
}

// True when the product of the non-negative `factors` is at most `limit` (no overflow).
inline bool product_within(std::initializer_list<int64_t> factors, int64_t limit) {
  const std::optional<int64_t> p = checked_product(factors);
  return p.has_value() && *p <= limit;
}

// a + b and a * b for byte counts, saturating at SIZE_MAX instead of wrapping: a plan that
// saturates is larger than any memory and is refused as such.
inline size_t saturating_add(size_t a, size_t b) {
  size_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? SIZE_MAX : out;
}
inline size_t saturating_mul(size_t a, size_t b) {
  size_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? SIZE_MAX : out;
}

}  // namespace anvil::engine
