// Host scalar access for the CPU twins: element i of a float tensor (f32, f64, bf16, f16
// storage) read as double and written back from double with the storage type's rounding
// (bf16/f16: round to nearest even from f32, as the device does; f32: one rounding).
// The twins compute in double, so they are at least as accurate as the CUDA kernels they check.
#pragma once

#include <cstdint>
#include <string>

#include "engine/dtype.h"
#include "engine/status.h"

namespace anvil::ops::cpu {

// Tag types for 16-bit float storage on the host (the bits, not a value).
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

inline double load(const float* p, int64_t i) { return p[i]; }
inline double load(const double* p, int64_t i) { return p[i]; }
inline double load(const Bf16* p, int64_t i) { return engine::bf16_to_f32(p[i].bits); }
inline double load(const F16* p, int64_t i) { return engine::f16_to_f32(p[i].bits); }

inline void store(float* p, int64_t i, double v) { p[i] = static_cast<float>(v); }
inline void store(double* p, int64_t i, double v) { p[i] = v; }
// Rounds through f32 first, as the device computes in f32 then rounds to bf16/f16.
inline void store(Bf16* p, int64_t i, double v) {
  p[i].bits = engine::f32_to_bf16(static_cast<float>(v));
}
inline void store(F16* p, int64_t i, double v) {
  p[i].bits = engine::f32_to_f16(static_cast<float>(v));
}

// The value a tensor of storage type T holds after storing v (used to emulate rounding).
template <typename T>
double round_as(double v) {
  T t;
  store(&t, 0, v);
  return load(&t, 0);
}

// Calls f(static_cast<T*>(nullptr)) with T the host storage type of `t` (float, double, Bf16,
// F16); any other dtype is a fatal CHECK naming `op`. Callers recover T with
// std::remove_pointer_t<decltype(tag)>.
template <typename F>
void dispatch_float(engine::DType t, const char* op, F&& f) {
  switch (t) {
    case engine::DType::kF32:
      f(static_cast<float*>(nullptr));
      return;
    case engine::DType::kF64:
      f(static_cast<double*>(nullptr));
      return;
    case engine::DType::kBF16:
      f(static_cast<Bf16*>(nullptr));
      return;
    case engine::DType::kF16:
      f(static_cast<F16*>(nullptr));
      return;
    default:
      break;
  }
  ANVIL_CHECK_MSG(false, std::string(op) + ": unsupported dtype " +
                             std::string(engine::dtype_name(t)) + " on the CPU");
}

// Calls f(static_cast<S*>(nullptr)) with S = double for f64 views, else float (statistics and
// parameter gradients: f32, or f64 next to f64 activations).
template <typename F>
void dispatch_f32_f64(engine::DType t, F&& f) {
  if (t == engine::DType::kF64) {
    f(static_cast<double*>(nullptr));
  } else {
    f(static_cast<float*>(nullptr));
  }
}

}  // namespace anvil::ops::cpu
