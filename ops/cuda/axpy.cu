// CUDA AXPY:
//   y[i] += alpha * x[i]   (+=)   math in f32: y = fmaf(alpha, x, y), one rounding (bf16: then
//                                 rounded to nearest even)
// One grid-stride kernel with int64 indices (n up to ~1e9 and beyond 2^31). Its body moves
// 16-byte packs (float4 for f32, 8 x bf16); when y and x sit at the same offset from a 16-byte
// boundary, the few elements before the first boundary are a scalar head, and the elements past
// the last full pack a scalar tail. When their offsets differ (sub-views of different parity),
// everything runs scalar. x may be y itself: each thread reads its elements before writing them,
// and no pointer is __restrict__.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/axpy.h"
#include "ops/cuda/vec_io.cuh"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond ~3 waves of an H200

template <typename T>
__device__ __forceinline__ T axpy_one(float alpha, T y, T x) {
  return from_f32<T>(fmaf(alpha, to_f32(x), to_f32(y)));
}

// y, x: [n] T. Elements [head, head + packs * V) move as V-element packs (y + head and x + head
// aligned to V * sizeof(T)); the rest, head + tail < 2V elements, one per thread of the first
// threads. V == 1: head == 0, packs == n.
template <typename T, int V>
__global__ void axpy_kernel(float alpha, T* y, const T* x, int64_t head, int64_t packs, int64_t n) {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  T* yv = y + head;
  const T* xv = x + head;
  for (int64_t p = tid; p < packs; p += stride) {
    const Packed<T, V> xp = load_packed<V>(xv + p * V);
    Packed<T, V> yp = load_packed<V>(yv + p * V);
#pragma unroll
    for (int k = 0; k < V; ++k) yp.v[k] = axpy_one(alpha, yp.v[k], xp.v[k]);
    store_packed<V>(yv + p * V, yp);
  }
  const int64_t rest = n - packs * V;  // head + tail
  if (tid < rest) {
    const int64_t j = tid < head ? tid : packs * V + tid;  // tail: head + packs * V + (tid - head)
    y[j] = axpy_one(alpha, y[j], x[j]);
  }
}

// Elements before the first 16-byte boundary of p (p is T-aligned).
template <typename T>
int64_t head_to_16(const void* p) {
  const uintptr_t mis = reinterpret_cast<uintptr_t>(p) % 16;
  return mis == 0 ? 0 : static_cast<int64_t>((16 - mis) / sizeof(T));
}

template <typename T>
void launch(float alpha, T* y, const T* x, int64_t n, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const bool same_offset =
      reinterpret_cast<uintptr_t>(y) % 16 == reinterpret_cast<uintptr_t>(x) % 16;
  const int64_t head = same_offset ? std::min<int64_t>(head_to_16<T>(y), n) : 0;
  const int64_t packs = same_offset ? (n - head) / kV : 0;
  const int64_t work = same_offset ? std::max<int64_t>(packs, n - packs * kV) : n;
  const int64_t blocks =
      std::min<int64_t>(std::max<int64_t>(ceil_div(work, kThreads), 1), kMaxBlocks);
  if (same_offset) {
    axpy_kernel<T, kV><<<blocks, kThreads, 0, stream>>>(alpha, y, x, head, packs, n);
  } else {
    axpy_kernel<T, 1><<<blocks, kThreads, 0, stream>>>(alpha, y, x, 0, n, n);
  }
}

}  // namespace

void axpy(float alpha, TensorView y, ConstTensorView x, Stream& stream) {
  const int64_t n = x.numel();  // [n]
  if (n == 0) return;
  dispatch_act<true>(x.dtype, "cuda::axpy", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch<T>(alpha, y.as<T>(), x.as<T>(), n, stream.cuda_stream());
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
