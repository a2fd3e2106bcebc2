// CUDA elementwise activations (exact erf GELU, relu, tanh; formulas in ops/activation_math.h):
//   forward : y = act(x) (=);  backward: dx = dy * act'(x) (=)
// Flat elementwise as ops/cuda/gelu.cu: each thread handles V consecutive elements (16-byte
// accesses when the pointers are aligned; a scalar tail when numel % V != 0), f32 math. dx may
// alias dy: a thread reads its dy elements before it writes the same dx elements, and no pointer
// is __restrict__.
// With dropout (T5's DenseReluDense): thread j handles elements [4j, 4j + 4), whose keep words
// are one philox4x32_10 call at counter offset + j (as ops/cuda/dropout.cu), rounding where the
// two unfused ops store: y = round(keep ? round(act(x)) * scale : 0), and
// dx = round(round(keep ? dy * scale : 0) * act'(x)), scale = 1.0f / (1.0f - p).
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/philox.h"
#include "ops/activation.h"
#include "ops/activation_math.h"
#include "ops/cuda/vec_io.cuh"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;

template <Activation A>
__device__ __forceinline__ float act_value(float x) {
  if constexpr (A == Activation::kGeluErf) return detail::gelu_erf(x);
  if constexpr (A == Activation::kTanh) return tanhf(x);
  return detail::relu(x);
}

template <Activation A>
__device__ __forceinline__ float act_grad(float x) {
  if constexpr (A == Activation::kGeluErf) return detail::gelu_erf_grad(x);
  if constexpr (A == Activation::kTanh) return detail::tanh_grad(x);
  return detail::relu_grad(x);
}

// y, x: [n] T.
template <Activation A, typename T, int V>
__global__ void activation_fwd_kernel_vec(T* y, const T* x, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i + V <= n) {
    const Packed<T, V> xv = load_packed<V>(x + i);
    Packed<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = from_f32<T>(act_value<A>(to_f32(xv.v[k])));
    store_packed<V>(y + i, out);
  } else {
    for (int64_t j = i; j < n; ++j) y[j] = from_f32<T>(act_value<A>(to_f32(x[j])));
  }
}

// dx, dy, x: [n] T; dx may alias dy.
template <Activation A, typename T, int V>
__global__ void activation_bwd_kernel_vec(T* dx, const T* dy, const T* x, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i + V <= n) {
    const Packed<T, V> xv = load_packed<V>(x + i);
    const Packed<T, V> dv = load_packed<V>(dy + i);
    Packed<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      out.v[k] = from_f32<T>(to_f32(dv.v[k]) * act_grad<A>(to_f32(xv.v[k])));
    }
    store_packed<V>(dx + i, out);
  } else {
    for (int64_t j = i; j < n; ++j) {
      dx[j] = from_f32<T>(to_f32(dy[j]) * act_grad<A>(to_f32(x[j])));
    }
  }
}

// y, x: [n] T; kPacked: both 4-element aligned. y may alias x.
template <Activation A, typename T, bool kPacked>
__global__ void activation_dropout_fwd_kernel(T* y, const T* x, int64_t n, float p, float scale,
                                              uint64_t seed, uint64_t offset) {
  const int64_t i = 4 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const engine::Philox4 r = engine::philox_block_at(seed, offset, static_cast<uint64_t>(i));
  auto one = [&](float xv, int k) {
    const float a = to_f32(from_f32<T>(act_value<A>(xv)));
    return from_f32<T>(engine::philox_uniform(r.v[k]) >= p ? a * scale : 0.0f);
  };
  if (kPacked && i + 4 <= n) {
    const Packed<T, 4> xv = load_packed<4>(x + i);
    Packed<T, 4> out;
#pragma unroll
    for (int k = 0; k < 4; ++k) out.v[k] = one(to_f32(xv.v[k]), k);
    store_packed<4>(y + i, out);
  } else {
    for (int k = 0; k < 4 && i + k < n; ++k) y[i + k] = one(to_f32(x[i + k]), k);
  }
}

// dx, dy, x: [n] T; kPacked: all 4-element aligned. dx may alias dy.
template <Activation A, typename T, bool kPacked>
__global__ void activation_dropout_bwd_kernel(T* dx, const T* dy, const T* x, int64_t n, float p,
                                              float scale, uint64_t seed, uint64_t offset) {
  const int64_t i = 4 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const engine::Philox4 r = engine::philox_block_at(seed, offset, static_cast<uint64_t>(i));
  auto one = [&](float d, float xv, int k) {
    const float kept = to_f32(from_f32<T>(engine::philox_uniform(r.v[k]) >= p ? d * scale : 0.0f));
    return from_f32<T>(kept * act_grad<A>(xv));
  };
  if (kPacked && i + 4 <= n) {
    const Packed<T, 4> dv = load_packed<4>(dy + i);
    const Packed<T, 4> xv = load_packed<4>(x + i);
    Packed<T, 4> out;
#pragma unroll
    for (int k = 0; k < 4; ++k) out.v[k] = one(to_f32(dv.v[k]), to_f32(xv.v[k]), k);
    store_packed<4>(dx + i, out);
  } else {
    for (int k = 0; k < 4 && i + k < n; ++k)
      dx[i + k] = one(to_f32(dy[i + k]), to_f32(x[i + k]), k);
  }
}

// Calls f(std::integral_constant<Activation, A>{}) for the runtime activation.
template <typename F>
void dispatch_activation(Activation act, F&& f) {
  if (act == Activation::kGeluErf) {
    f(std::integral_constant<Activation, Activation::kGeluErf>{});
  } else if (act == Activation::kTanh) {
    f(std::integral_constant<Activation, Activation::kTanh>{});
  } else {
    f(std::integral_constant<Activation, Activation::kRelu>{});
  }
}

}  // namespace

void activation_forward(Activation act, TensorView y, ConstTensorView x, Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_act<true>(x.dtype, "cuda::activation_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec = aligned_to(16, {y.data, x.data});
    dispatch_activation(act, [&](auto a) {
      constexpr Activation A = decltype(a)::value;
      if (vec) {
        activation_fwd_kernel_vec<A, T, kV>
            <<<ceil_div(ceil_div(n, kV), kThreads), kThreads, 0, stream.cuda_stream()>>>(
                y.as<T>(), x.as<T>(), n);
      } else {
        activation_fwd_kernel_vec<A, T, 1>
            <<<ceil_div(n, kThreads), kThreads, 0, stream.cuda_stream()>>>(y.as<T>(), x.as<T>(), n);
      }
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void activation_backward(Activation act, TensorView dx, ConstTensorView dy, ConstTensorView x,
                         Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_act<true>(x.dtype, "cuda::activation_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec = aligned_to(16, {dx.data, dy.data, x.data});
    dispatch_activation(act, [&](auto a) {
      constexpr Activation A = decltype(a)::value;
      if (vec) {
        activation_bwd_kernel_vec<A, T, kV>
            <<<ceil_div(ceil_div(n, kV), kThreads), kThreads, 0, stream.cuda_stream()>>>(
                dx.as<T>(), dy.as<T>(), x.as<T>(), n);
      } else {
        activation_bwd_kernel_vec<A, T, 1>
            <<<ceil_div(n, kThreads), kThreads, 0, stream.cuda_stream()>>>(dx.as<T>(), dy.as<T>(),
                                                                           x.as<T>(), n);
      }
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void activation_dropout_forward(Activation act, const DropoutArgs& drop, TensorView y,
                                ConstTensorView x, Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const float scale = 1.0f / (1.0f - drop.p);
  const int64_t blocks = ceil_div(ceil_div(n, 4), kThreads);
  dispatch_act<true>(x.dtype, "cuda::activation_dropout_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const bool packed = aligned_to(4 * sizeof(T), {y.data, x.data});
    dispatch_activation(act, [&](auto a) {
      constexpr Activation A = decltype(a)::value;
      if (packed) {
        activation_dropout_fwd_kernel<A, T, true><<<blocks, kThreads, 0, stream.cuda_stream()>>>(
            y.as<T>(), x.as<T>(), n, drop.p, scale, drop.seed, drop.offset);
      } else {
        activation_dropout_fwd_kernel<A, T, false><<<blocks, kThreads, 0, stream.cuda_stream()>>>(
            y.as<T>(), x.as<T>(), n, drop.p, scale, drop.seed, drop.offset);
      }
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void activation_dropout_backward(Activation act, const DropoutArgs& drop, TensorView dx,
                                 ConstTensorView dy, ConstTensorView x, Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const float scale = 1.0f / (1.0f - drop.p);
  const int64_t blocks = ceil_div(ceil_div(n, 4), kThreads);
  dispatch_act<true>(x.dtype, "cuda::activation_dropout_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const bool packed = aligned_to(4 * sizeof(T), {dx.data, dy.data, x.data});
    dispatch_activation(act, [&](auto a) {
      constexpr Activation A = decltype(a)::value;
      if (packed) {
        activation_dropout_bwd_kernel<A, T, true><<<blocks, kThreads, 0, stream.cuda_stream()>>>(
            dx.as<T>(), dy.as<T>(), x.as<T>(), n, drop.p, scale, drop.seed, drop.offset);
      } else {
        activation_dropout_bwd_kernel<A, T, false><<<blocks, kThreads, 0, stream.cuda_stream()>>>(
            dx.as<T>(), dy.as<T>(), x.as<T>(), n, drop.p, scale, drop.seed, drop.offset);
      }
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
