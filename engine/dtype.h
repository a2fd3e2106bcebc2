// Element types and host-side bf16/f16 conversions. bf16 rounding is round-to-nearest-even, the
// same as __float2bfloat16_rn on the device, so CPU twins can emulate bf16 storage bit-exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace anvil::engine {

// kF64 exists for CPU reference checks (finite differences in double).
enum class DType : uint8_t { kF32, kBF16, kF16, kF64, kI32, kI64, kU16, kU8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kF64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU16:
      return 2;
    case DType::kU8:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t);

// bf16 bits -> f32 (exact).
inline float bf16_to_f32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f32 -> bf16 bits, round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Rounds an f32 to the nearest bf16 value, returned as f32.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// IEEE half <-> f32 on the host (round to nearest even).
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float f);

}  // namespace anvil::engine
