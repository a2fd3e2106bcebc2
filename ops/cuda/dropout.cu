// CUDA inverted dropout with a Philox mask regenerated from (seed, offset):
//   keep_i = philox_uniform_at(seed, offset, i) >= p
//   forward : y_i = keep_i ? x_i * scale : 0,   backward: dx_i = keep_i ? dy_i * scale : 0   (=)
// scale = 1.0f / (1.0f - p), computed on the host (same expression as the CPU twin).
// Thread j handles elements [4j, 4j + 4): one philox4x32_10 call at counter offset + j gives the
// four words philox_uniform_at would give for them (word i % 4 of counter offset + i / 4), so
// the mask equals the CPU twin's bit for bit. out may alias in (each element read, then written).
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/philox.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/dropout.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;

// out, in: [n] T. kPacked: out/in are 4-element aligned, so full groups move as one access.
template <typename T, bool kPacked>
__global__ void dropout_kernel_philox4(T* out, const T* in, int64_t n, float p, float scale,
                                       uint64_t seed, uint64_t offset) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t i = 4 * j;
  if (i >= n) return;
  const engine::Philox4 r = engine::philox_block_at(seed, offset, static_cast<uint64_t>(i));
  if (kPacked && i + 4 <= n) {
    const Packed<T, 4> v = load_packed<4>(in + i);
    Packed<T, 4> o;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const bool keep = engine::philox_uniform(r.v[k]) >= p;
      o.v[k] = from_f32<T>(keep ? to_f32(v.v[k]) * scale : 0.0f);
    }
    store_packed<4>(out + i, o);
  } else {
    for (int k = 0; k < 4 && i + k < n; ++k) {
      const bool keep = engine::philox_uniform(r.v[k]) >= p;
      out[i + k] = from_f32<T>(keep ? to_f32(in[i + k]) * scale : 0.0f);
    }
  }
}

void launch(const char* op, const DropoutArgs& args, TensorView out, ConstTensorView in,
            Stream& stream) {
  const int64_t n = in.numel();
  if (n == 0) return;
  const float scale = 1.0f / (1.0f - args.p);
  const int64_t blocks = ceil_div(ceil_div(n, 4), kThreads);
  dispatch_act<true>(in.dtype, op, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (aligned_to(4 * sizeof(T), {out.data, in.data})) {
      dropout_kernel_philox4<T, true><<<blocks, kThreads, 0, stream.cuda_stream()>>>(
          out.as<T>(), in.as<T>(), n, args.p, scale, args.seed, args.offset);
    } else {
      dropout_kernel_philox4<T, false><<<blocks, kThreads, 0, stream.cuda_stream()>>>(
          out.as<T>(), in.as<T>(), n, args.p, scale, args.seed, args.offset);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace

void dropout_forward(const DropoutArgs& args, TensorView y, ConstTensorView x, Stream& stream) {
  launch("cuda::dropout_forward", args, y, x, stream);
}

void dropout_backward(const DropoutArgs& args, TensorView dx, ConstTensorView dy, Stream& stream) {
  launch("cuda::dropout_backward", args, dx, dy, stream);
}

}  // namespace anvil::ops::cuda
