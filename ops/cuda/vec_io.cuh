// Device-side helpers shared by the elementwise/row kernels (device code only, include from .cu):
// f32 conversions of the activation types, packed vector loads/stores (16 bytes when aligned),
// warp sums, and the dtype -> device type dispatch used by launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "engine/dtype.h"
#include "engine/status.h"

namespace anvil::ops::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

// f32 -> T, round to nearest even (what engine::f32_to_bf16 / f32_to_f16 do on the host).
template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}

// N consecutive elements moved as one aligned access (N * sizeof(T) bytes).
template <typename T, int N>
struct alignas(sizeof(T) * N) Packed {
  T v[N];
};

// Elements per 16-byte access.
template <typename T>
inline constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

template <int N, typename T>
__device__ __forceinline__ Packed<T, N> load_packed(const T* p) {
  return *reinterpret_cast<const Packed<T, N>*>(p);
}
template <int N, typename T>
__device__ __forceinline__ void store_packed(T* p, const Packed<T, N>& v) {
  *reinterpret_cast<Packed<T, N>*>(p) = v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Host side: whether every pointer is aligned to `bytes`.
inline bool aligned_to(size_t bytes, std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs) {
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) return false;
  }
  return true;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls f(static_cast<T*>(nullptr)) with T the device type of an activation dtype: bf16 or f32
// (plus f16 when kAllowF16; a template argument so other ops do not compile f16 kernels).
// Anything else is a fatal CHECK naming `op`.
template <bool kAllowF16 = false, typename F>
void dispatch_act(engine::DType t, const char* op, F&& f) {
  switch (t) {
    case engine::DType::kF32:
      f(static_cast<float*>(nullptr));
      return;
    case engine::DType::kBF16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      return;
    case engine::DType::kF16:
      if constexpr (kAllowF16) {
        f(static_cast<__half*>(nullptr));
        return;
      }
      break;
    default:
      break;
  }
  ANVIL_CHECK_MSG(false, std::string(op) + ": unsupported dtype " +
                             std::string(engine::dtype_name(t)) + " on CUDA");
}

}  // namespace anvil::ops::cuda
