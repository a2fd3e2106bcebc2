// CUDA GELU, tanh approximation:
//   y  = 0.5 x (1 + t),  t = tanh(u),  u = sqrt(2/pi) (x + 0.044715 x^3)              (=)
//   dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2))         (=)
// Flat elementwise: each thread handles V consecutive elements (16-byte accesses when the
// pointers are aligned; a scalar tail when numel % V != 0). f32 math with the accurate tanhf.
// dx may alias dy: a thread reads its dy elements before it writes the same dx elements, and no
// pointer is __restrict__.
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/gelu.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float gelu(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * x * (1.0f + t);
}

__device__ __forceinline__ float gelu_grad(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
}

// y, x: [n] T.
template <typename T, int V>
__global__ void gelu_fwd_kernel_vec(T* y, const T* x, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i + V <= n) {
    const Packed<T, V> xv = load_packed<V>(x + i);
    Packed<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = from_f32<T>(gelu(to_f32(xv.v[k])));
    store_packed<V>(y + i, out);
  } else {
    for (int64_t j = i; j < n; ++j) y[j] = from_f32<T>(gelu(to_f32(x[j])));
  }
}

// dx, dy, x: [n] T; dx may alias dy.
template <typename T, int V>
__global__ void gelu_bwd_kernel_vec(T* dx, const T* dy, const T* x, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i + V <= n) {
    const Packed<T, V> xv = load_packed<V>(x + i);
    const Packed<T, V> dv = load_packed<V>(dy + i);
    Packed<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      out.v[k] = from_f32<T>(to_f32(dv.v[k]) * gelu_grad(to_f32(xv.v[k])));
    }
    store_packed<V>(dx + i, out);
  } else {
    for (int64_t j = i; j < n; ++j) dx[j] = from_f32<T>(to_f32(dy[j]) * gelu_grad(to_f32(x[j])));
  }
}

}  // namespace

void gelu_forward(TensorView y, ConstTensorView x, Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_act<true>(x.dtype, "cuda::gelu_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    if (aligned_to(16, {y.data, x.data})) {
      gelu_fwd_kernel_vec<T, kV>
          <<<ceil_div(ceil_div(n, kV), kThreads), kThreads, 0, stream.cuda_stream()>>>(
              y.as<T>(), x.as<T>(), n);
    } else {
      gelu_fwd_kernel_vec<T, 1>
          <<<ceil_div(n, kThreads), kThreads, 0, stream.cuda_stream()>>>(y.as<T>(), x.as<T>(), n);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void gelu_backward(TensorView dx, ConstTensorView dy, ConstTensorView x, Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_act<true>(x.dtype, "cuda::gelu_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    if (aligned_to(16, {dx.data, dy.data, x.data})) {
      gelu_bwd_kernel_vec<T, kV>
          <<<ceil_div(ceil_div(n, kV), kThreads), kThreads, 0, stream.cuda_stream()>>>(
              dx.as<T>(), dy.as<T>(), x.as<T>(), n);
    } else {
      gelu_bwd_kernel_vec<T, 1><<<ceil_div(n, kThreads), kThreads, 0, stream.cuda_stream()>>>(
          dx.as<T>(), dy.as<T>(), x.as<T>(), n);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
