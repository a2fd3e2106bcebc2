// CUDA row argmax:
//   out[r] = first index of the largest of x[r, 0 .. cols)   (=)   NaN counts as the largest.
// One 256-thread block per row: each thread scans columns tid, tid + 256, ... keeping its best
// (value, index); warps then blocks reduce the pairs with the same order as the CPU twin
// (NaN above numbers, larger value first, then the smaller index), so the result is the
// twin's exactly, whatever the order in which pairs meet.
#include <cstdint>
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/argmax.h"
#include "ops/cuda/vec_io.cuh"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;

// Whether (v, i) comes before (w, j) in the argmax order.
__device__ __forceinline__ bool before(float v, int64_t i, float w, int64_t j) {
  const bool vn = isnan(v), wn = isnan(w);
  if (vn != wn) return vn;
  if (!vn && v != w) return v > w;
  return i < j;
}

// x: [rows, ld] T; out: [rows] i32. Grid: one block per row (rows <= 2^31 - 1, gridDim.x's
// limit, checked by the dispatcher).
template <typename T>
__global__ void row_argmax_kernel(int32_t* out, const T* x, int64_t cols, int64_t ld) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * ld;
  // has: the thread saw a column (not so for threads >= cols when cols < 256).
  float best = 0.0f;
  int64_t best_i = 0;
  bool has = false;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float v = to_f32(xr[c]);
    if (!has || before(v, c, best, best_i)) {
      best = v;
      best_i = c;
      has = true;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, best, o);
    const int64_t j = __shfl_xor_sync(0xffffffffu, best_i, o);
    const bool other_has = __shfl_xor_sync(0xffffffffu, has, o);
    if (other_has && (!has || before(w, j, best, best_i))) {
      best = w;
      best_i = j;
      has = true;
    }
  }
  __shared__ float vals[kThreads / 32];
  __shared__ int64_t idx[kThreads / 32];
  __shared__ bool haves[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    vals[warp] = best;
    idx[warp] = best_i;
    haves[warp] = has;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (haves[w] && (!has || before(vals[w], idx[w], best, best_i))) {
        best = vals[w];
        best_i = idx[w];
        has = true;
      }
    }
    out[row] = static_cast<int32_t>(best_i);
  }
}

}  // namespace

void row_argmax(const ArgmaxArgs& a, TensorView out, ConstTensorView x, Stream& stream) {
  dispatch_act(x.dtype, "cuda::row_argmax", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    row_argmax_kernel<T><<<static_cast<unsigned>(a.rows), kThreads, 0, stream.cuda_stream()>>>(
        out.as<int32_t>(), x.as<T>(), a.cols, a.ld);
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
