// CUDA twin of the deterministic parameter initialization:
//   kNormal    dst[j] = (float)(sigma * N(seed, offset + tp_whole_index(tp, first + j))), or 0
//              past `valid`;   kConstant  dst[j] = value   (=)
// One thread per element (grid-stride): the same Philox counter, TP index arithmetic and double
// expression as the CPU twin (ops/init_normal.h), with CUDA's double log/cos, so an element may
// differ from the CPU by 1 f32 ulp (rarely; see the header). Stored as f32 or rounded to
// bf16/f16 from f32, round to nearest even, like the CPU twin.
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/init_normal.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;

// dst: [n] T.
template <typename T>
__global__ void init_normal_grid_stride(InitNormalArgs args, T* dst, int64_t n) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = args.value;
    if (args.kind == InitKind::kNormal) {
      const int64_t w = tp_whole_index(args.tp, args.first + j);
      v = w < args.valid ? static_cast<float>(
                               args.sigma * init_normal_sample(
                                                args.seed, args.offset + static_cast<uint64_t>(w)))
                         : 0.0f;
    }
    dst[j] = from_f32<T>(v);
  }
}

}  // namespace

void init_normal(const InitNormalArgs& args, TensorView dst, Stream& stream) {
  const int64_t n = dst.numel();
  const int64_t blocks = ceil_div(n, kThreads);
  const int grid = static_cast<int>(blocks < 65536 ? blocks : 65536);  // grid-stride covers more
  dispatch_act<true>(dst.dtype, "cuda::init_normal", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    init_normal_grid_stride<T><<<grid, kThreads, 0, stream.cuda_stream()>>>(args, dst.as<T>(), n);
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
