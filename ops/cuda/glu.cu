// CUDA gated linear units, h = [g | u] per row (g: columns [0, f), u: [f, 2f)):
//   forward : y = round_T(act(g)) * u                     (=)
//   backward: dg = dy * u * act'(g),  du = dy * act(g)    (= into dh = [dg | du])
// act: silu, exact erf GELU, tanh GELU, relu, identity (ops/glu.h). Flat over the rows * f outputs:
// each thread handles V consecutive columns of one row (16-byte accesses when f % V == 0 and the
// pointers are aligned, else V = 1). f32 math (ops/activation_math.h).
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/activation_math.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/glu.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;
template <GluKind K>
__device__ __forceinline__ float act(float x) {
  if constexpr (K == GluKind::kSwiglu) return detail::silu(x);
  if constexpr (K == GluKind::kGeglu) return detail::gelu_erf(x);
  if constexpr (K == GluKind::kGegluTanh) return detail::gelu_tanh(x);
  if constexpr (K == GluKind::kReglu) return detail::relu(x);
  return x;
}

template <GluKind K>
__device__ __forceinline__ float act_grad(float x) {
  if constexpr (K == GluKind::kSwiglu) return detail::silu_grad(x);
  if constexpr (K == GluKind::kGeglu) return detail::gelu_erf_grad(x);
  if constexpr (K == GluKind::kGegluTanh) return detail::gelu_tanh_grad(x);
  if constexpr (K == GluKind::kReglu) return detail::relu_grad(x);
  return 1.0f;
}

// y: [rows, f] T; h: [rows, 2f] T. Thread t covers outputs [t V, t V + V) of the flat [rows, f].
template <GluKind K, typename T, int V>
__global__ void glu_fwd_kernel_vec(T* y, const T* h, int64_t rows, int64_t f) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= rows * f) return;
  const int64_t r = i / f, c = i % f;  // f % V == 0: the V outputs stay in row r
  const Packed<T, V> g = load_packed<V>(h + r * 2 * f + c);
  const Packed<T, V> u = load_packed<V>(h + r * 2 * f + f + c);
  Packed<T, V> out;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float a = to_f32(from_f32<T>(act<K>(to_f32(g.v[k]))));
    out.v[k] = from_f32<T>(a * to_f32(u.v[k]));
  }
  store_packed<V>(y + i, out);
}

// dh: [rows, 2f] T; dy: [rows, f] T; h: [rows, 2f] T.
template <GluKind K, typename T, int V>
__global__ void glu_bwd_kernel_vec(T* dh, const T* dy, const T* h, int64_t rows, int64_t f) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= rows * f) return;
  const int64_t r = i / f, c = i % f;
  const Packed<T, V> g = load_packed<V>(h + r * 2 * f + c);
  const Packed<T, V> u = load_packed<V>(h + r * 2 * f + f + c);
  const Packed<T, V> d = load_packed<V>(dy + i);
  Packed<T, V> dg, du;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float gv = to_f32(g.v[k]), dv = to_f32(d.v[k]);
    dg.v[k] = from_f32<T>(dv * to_f32(u.v[k]) * act_grad<K>(gv));
    du.v[k] = from_f32<T>(dv * act<K>(gv));
  }
  store_packed<V>(dh + r * 2 * f + c, dg);
  store_packed<V>(dh + r * 2 * f + f + c, du);
}

// Calls f(std::integral_constant<GluKind, K>{}) for the runtime kind.
template <typename F>
void dispatch_kind(GluKind kind, F&& f) {
  switch (kind) {
    case GluKind::kSwiglu:
      return f(std::integral_constant<GluKind, GluKind::kSwiglu>{});
    case GluKind::kGeglu:
      return f(std::integral_constant<GluKind, GluKind::kGeglu>{});
    case GluKind::kGegluTanh:
      return f(std::integral_constant<GluKind, GluKind::kGegluTanh>{});
    case GluKind::kReglu:
      return f(std::integral_constant<GluKind, GluKind::kReglu>{});
    case GluKind::kLiglu:
      return f(std::integral_constant<GluKind, GluKind::kLiglu>{});
  }
}

}  // namespace

void glu_forward(GluKind kind, TensorView y, ConstTensorView h, Stream& stream) {
  const int64_t rows = h.shape[0], f = h.shape[1] / 2;
  if (rows == 0) return;
  dispatch_act<true>(h.dtype, "cuda::glu_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec = f % kV == 0 && aligned_to(16, {y.data, h.data});
    dispatch_kind(kind, [&](auto k) {
      constexpr GluKind K = decltype(k)::value;
      if (vec) {
        glu_fwd_kernel_vec<K, T, kV>
            <<<ceil_div(ceil_div(rows * f, kV), kThreads), kThreads, 0, stream.cuda_stream()>>>(
                y.as<T>(), h.as<T>(), rows, f);
      } else {
        glu_fwd_kernel_vec<K, T, 1>
            <<<ceil_div(rows * f, kThreads), kThreads, 0, stream.cuda_stream()>>>(
                y.as<T>(), h.as<T>(), rows, f);
      }
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void glu_backward(GluKind kind, TensorView dh, ConstTensorView dy, ConstTensorView h,
                  Stream& stream) {
  const int64_t rows = h.shape[0], f = h.shape[1] / 2;
  if (rows == 0) return;
  dispatch_act<true>(h.dtype, "cuda::glu_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec = f % kV == 0 && aligned_to(16, {dh.data, dy.data, h.data});
    dispatch_kind(kind, [&](auto k) {
      constexpr GluKind K = decltype(k)::value;
      if (vec) {
        glu_bwd_kernel_vec<K, T, kV>
            <<<ceil_div(ceil_div(rows * f, kV), kThreads), kThreads, 0, stream.cuda_stream()>>>(
                dh.as<T>(), dy.as<T>(), h.as<T>(), rows, f);
      } else {
        glu_bwd_kernel_vec<K, T, 1>
            <<<ceil_div(rows * f, kThreads), kThreads, 0, stream.cuda_stream()>>>(
                dh.as<T>(), dy.as<T>(), h.as<T>(), rows, f);
      }
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
