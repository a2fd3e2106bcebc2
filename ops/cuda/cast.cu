// CUDA elementwise dtype conversion y = (dst dtype) x  (=), f32/bf16/f16 in any pair:
// source -> f32 (exact), then __float2bfloat16_rn / __float2half_rn (round to nearest even).
// Equal dtypes are a device-to-device copy (nothing when y aliases x). Each thread converts
// 4 consecutive elements, as one access each way when both pointers are 16-byte aligned.
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/cast.h"
#include "ops/cuda/vec_io.cuh"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;

// y: [n] D; x: [n] S.
template <typename D, typename S, bool kPacked>
__global__ void cast_kernel_vec4(D* y, const S* x, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kPerThread;
  if (kPacked && i + kPerThread <= n) {
    const Packed<S, kPerThread> v = load_packed<kPerThread>(x + i);
    Packed<D, kPerThread> o;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) o.v[k] = from_f32<D>(to_f32(v.v[k]));
    store_packed<kPerThread>(y + i, o);
  } else {
    for (int64_t j = i; j < n && j < i + kPerThread; ++j) y[j] = from_f32<D>(to_f32(x[j]));
  }
}

}  // namespace

void cast(TensorView y, ConstTensorView x, Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  if (x.dtype == y.dtype) {
    if (y.data != x.data) {
      ANVIL_CUDA_CHECK(cudaMemcpyAsync(y.data, x.data, x.bytes(), cudaMemcpyDeviceToDevice,
                                       stream.cuda_stream()));
    }
    return;
  }
  const int64_t blocks = ceil_div(ceil_div(n, kPerThread), kThreads);
  const bool packed = aligned_to(16, {y.data, x.data});
  dispatch_act<true>(x.dtype, "cuda::cast", [&](auto xtag) {
    using S = std::remove_pointer_t<decltype(xtag)>;
    dispatch_act<true>(y.dtype, "cuda::cast", [&](auto ytag) {
      using D = std::remove_pointer_t<decltype(ytag)>;
      if constexpr (!std::is_same_v<S, D>) {
        if (packed) {
          cast_kernel_vec4<D, S, true>
              <<<blocks, kThreads, 0, stream.cuda_stream()>>>(y.as<D>(), x.as<S>(), n);
        } else {
          cast_kernel_vec4<D, S, false>
              <<<blocks, kThreads, 0, stream.cuda_stream()>>>(y.as<D>(), x.as<S>(), n);
        }
      }
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
