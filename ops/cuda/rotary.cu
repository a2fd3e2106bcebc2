// CUDA rotary position embedding, rotate_half layout, in place on a row-strided view:
//   theta = f32(pos_r) * inv_freq_i (ops/rotary_detail.h), c, s = sincosf(theta)  (f32)
//   forward : (x_i, x_{i+half}) <- (x_i c - x_{i+half} s, x_{i+half} c + x_i s)   (=)
//   backward: the same with s -> -s                                                 (=)
// Each block first fills a shared inv_freq[half] table (the same f32 values the CPU twin uses);
// each thread then rotates V consecutive pairs (i0..i0+V-1 with their partners at +half) of one
// (row, head): 16-byte accesses when half, head_dim and the row stride are multiples of V and
// the base is aligned, else V = 1. f32 math, one rounding per stored element.
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/rotary.h"
#include "ops/rotary_detail.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;

// x: [rows, heads * head_dim] T with row stride ld; positions: [rows] i32. sign: +1 forward,
// -1 backward. Dynamic shared memory: half floats.
template <typename T, int V>
__global__ void rotary_kernel_vec(T* x, const int32_t* positions, int64_t rows, int64_t heads,
                                  int64_t head_dim, int64_t half, int64_t ld, float base,
                                  RotaryScaling scaling, float sign) {
  extern __shared__ float inv_freq[];
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    inv_freq[i] = detail::rotary_inv_freq(base, i, 2 * half, scaling);
  }
  __syncthreads();
  const int64_t per_head = half / V, per_row = heads * per_head;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= rows * per_row) return;
  const int64_t r = t / per_row, h = (t % per_row) / per_head, i0 = (t % per_head) * V;
  T* p = x + r * ld + h * head_dim + i0;
  const float pos = static_cast<float>(positions[r]);
  const Packed<T, V> lo = load_packed<V>(p);
  const Packed<T, V> hi = load_packed<V>(p + half);
  Packed<T, V> out_lo, out_hi;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float s, c;
    sincosf(pos * inv_freq[i0 + k], &s, &c);
    s *= sign;
    const float a = to_f32(lo.v[k]), b = to_f32(hi.v[k]);
    out_lo.v[k] = from_f32<T>(a * c - b * s);
    out_hi.v[k] = from_f32<T>(b * c + a * s);
  }
  store_packed<V>(p, out_lo);
  store_packed<V>(p + half, out_hi);
}

void rotate(const RotaryArgs& a, TensorView x, ConstTensorView positions, float sign,
            Stream& stream) {
  const int64_t half = a.rot_dim / 2, ld = x.strides[0];
  const size_t smem = static_cast<size_t>(half) * sizeof(float);
  dispatch_act<true>(x.dtype, "cuda::rotary", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec =
        half % kV == 0 && a.head_dim % kV == 0 && ld % kV == 0 && aligned_to(16, {x.data});
    if (vec) {
      const int64_t work = a.rows * a.heads * (half / kV);
      rotary_kernel_vec<T, kV><<<ceil_div(work, kThreads), kThreads, smem, stream.cuda_stream()>>>(
          x.as<T>(), positions.as<int32_t>(), a.rows, a.heads, a.head_dim, half, ld, a.base,
          a.scaling, sign);
    } else {
      const int64_t work = a.rows * a.heads * half;
      rotary_kernel_vec<T, 1><<<ceil_div(work, kThreads), kThreads, smem, stream.cuda_stream()>>>(
          x.as<T>(), positions.as<int32_t>(), a.rows, a.heads, a.head_dim, half, ld, a.base,
          a.scaling, sign);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace

void rotary_forward(const RotaryArgs& args, TensorView x, ConstTensorView positions,
                    Stream& stream) {
  rotate(args, x, positions, 1.0f, stream);
}

void rotary_backward(const RotaryArgs& args, TensorView dx, ConstTensorView positions,
                     Stream& stream) {
  rotate(args, dx, positions, -1.0f, stream);
}

}  // namespace anvil::ops::cuda
